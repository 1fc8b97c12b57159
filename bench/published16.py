"""The capacity model against published 16-bit dense serving runs it was never fitted on.

    .venv/bin/python bench/published16.py            # the tables; writes docs/capacity.md's summary
    .venv/bin/python bench/published16.py --check    # exit 1 when that summary is stale
    .venv/bin/python bench/published16.py --json     # every run, predicted and measured

Input: bench/collected/bf16_serving_2026-11.yaml (45 published vLLM online-serving
runs of 16-bit dense models on A100, H100 PCIe / NVL, RTX 4090 and a Jetson Thor;
each with its source, the lines read and what is odd about it). The calibration
data of llmctl.perf (tests/data/gpu_serving_measurements.yaml) has no 16-bit dense
model, so its 16-bit GEMM efficiency is a rule (fp8's share of the peak); this is
the check of that rule on data from other sources.

Every run is counted. Each is compared on what its source measured and the model
predicts for that load:

- a closed loop (``--max-concurrency C``): output tokens/s and, when given, the
  median TTFT (the model's central TTFT);
- a burst (every prompt at once): output tokens/s over the run and the mean TTFT;
  with ``data-parallel-size`` D, a burst of N/D on each of D replicas;
- an open loop (``--request-rate R --num-prompts N``, Poisson): the mean TPOT
  and TTFT, against the model's steady state at R (``plan --rate``); when the
  model says R saturates the replica (a queue growing without bound: no steady
  state) against the run as it happened instead, a transient of N requests
  sent 1 / R apart (llmctl.perf.burst with ``interval``), reported apart
  ("transient"). Its tokens/s is not compared: the run ends with its longest
  output, which the source does not give.

A run the model cannot predict (a GPU without a roofline: the Jetson Thor) is
listed as not evaluated, with why. Catalog twins: a run's model is predicted
through the catalog entry with its decoder's shapes (TWINS: same hidden size,
layers, heads, KV heads, intermediate size and vocabulary in config.json).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmctl.perf.published import predict_point, setup_of  # noqa: E402

DATA = ROOT / "bench" / "collected" / "bf16_serving_2026-11.yaml"
BAND = 0.30

# HF repo -> (catalog id with the same decoder shapes, what differs)
TWINS: dict[str, tuple[str, str]] = {
    "Qwen/Qwen2.5-7B-Instruct": ("qwen2.5-7b-instruct", ""),
    "Qwen/Qwen2-7B-Instruct": ("qwen2.5-7b-instruct", "Qwen2-7B has Qwen2.5-7B's decoder dims"),
    "Qwen/Qwen2.5-VL-7B-Instruct": ("qwen2.5-7b-instruct", "the LM decoder only; the vision tower is idle on text prompts"),
    "nvidia/AceMath-7B-Instruct": ("qwen2.5-7b-instruct", "a Qwen2.5-Math-7B fine-tune"),
    "Qwen/Qwen2.5-VL-72B-Instruct": ("qwen2.5-72b-instruct", "the LM decoder only; the vision tower's memory is not taken from the KV cache"),
    "Qwen/Qwen3-32B": ("qwen3-32b", ""),
    "Qwen/Qwen3-8B": ("qwen3-8b", ""),
    "Qwen/QwQ-32B-Preview": ("qwen2.5-32b-instruct", "a Qwen2.5-32B fine-tune"),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": ("deepseek-r1-distill-llama-8b", ""),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": ("llama-3.3-70b-instruct", "a Llama-3.3-70B distillation"),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": ("qwen2.5-1.5b-instruct", "a Qwen2.5-Math-1.5B distillation; whether its lm_head is tied is not checked"),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": ("deepseek-r1-distill-qwen-7b", ""),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": ("qwen2.5-14b-instruct", "a Qwen2.5-14B distillation"),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": ("qwen2.5-32b-instruct", "a Qwen2.5-32B distillation"),
    "meta-llama/Meta-Llama-3-8B-Instruct": ("llama-3.1-8b-instruct", "Llama-3.1-8B's dims (8k context)"),
    "meta-llama/Meta-Llama-3-70B-Instruct": ("llama-3.3-70b-instruct", "Llama-3.3-70B's dims (8k context)"),
    "google/gemma-2-9b-it": ("gemma-2-9b-it", ""),
    "microsoft/phi-4": ("phi-4", ""),
}


def _num(v: Any) -> float | None:
    try:
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def _flag(flags: dict, *names: str) -> Any:
    for n in names:
        if n in flags:
            return flags[n]
    return None


def mode_of(run: dict) -> str:
    load = run["load"]
    rate = load.get("request_rate")
    if rate not in (None, "inf", float("inf")) and _num(rate) is not None and math.isfinite(float(rate)):
        return "rate"
    return "concurrency" if load.get("max_concurrency") else "burst"


def point_of(run: dict) -> dict:
    """The run as a llmctl.perf.published point (per replica)."""
    from llmctl.hardware import find_device

    model, why = TWINS[run["model"]]
    load, res, flags = run["load"], run["results"], run.get("server_flags") or {}
    gpu = find_device(run["gpu"])
    if not gpu.known or not gpu.hbm_gb_s:
        raise LookupError(f"no roofline for {run['gpu']!r} (llmctl.hardware has no bandwidth / TFLOP/s for it)")
    n = int(load.get("num_prompts") or 0)
    dp = int(_flag(flags, "data-parallel-size") or 1)
    osl = int(load["osl"])
    gen = _num(res.get("total_generated_tokens"))
    mean_osl = gen / n if gen and n else float(osl)  # without ignore_eos an output can end early
    p = {"id": run["id"], "model": model, "gpu": gpu.name, "tp": int(run.get("tp") or 1), "isl": int(load["isl"]),
         "osl": max(1, round(mean_osl)), "split": "holdout", "output_tok_s": float(res.get("output_tok_s") or 0) / dp}
    if load.get("dataset") == "random" and round(mean_osl) < osl:
        p["osl_max"] = osl
    util = _num(_flag(flags, "gpu-memory-utilization", "gpu_memory_utilization"))
    if util:
        p["gpu_memory_utilization"] = util
    mns = _num(_flag(flags, "max-num-seqs", "max_num_seqs"))
    if mns:
        p["max_num_seqs"] = int(mns)
    if _flag(flags, "enforce-eager", "enforce_eager"):
        p["enforce_eager"] = True
    if _flag(flags, "no-enable-prefix-caching"):
        p["enable_prefix_caching"] = False
    mode = mode_of(run)
    p["mode"] = "concurrency" if mode == "concurrency" else "burst"
    if mode == "concurrency":
        p["concurrency"] = int(load["max_concurrency"])
    else:
        p["requests"] = max(1, round(n / dp))
    p["twin_note"] = why
    return p


def evaluate(run: dict) -> dict:
    from llmctl.perf.burst import simulate
    from llmctl.perf.steady import predict_rate

    out: dict[str, Any] = {"id": run["id"], "gpu": run["gpu"], "model": run["model"], "mode": mode_of(run),
                           "vllm": run.get("vllm_version"), "checks": []}
    try:
        p = point_of(run)
    except (LookupError, KeyError) as e:
        out["not_evaluated"] = str(e)
        return out
    out.update(gpu=p["gpu"], twin=p["model"], tp=p["tp"], isl=p["isl"], osl=p["osl"])
    res = run["results"]
    if out["mode"] == "rate":
        shape, dev, eng, eff, _ = setup_of(p)
        rate = float(run["load"]["request_rate"])
        n = int(run["load"]["num_prompts"])
        steady = predict_rate(shape, dev, eff, eng, rate=rate, isl=p["isl"], osl=p["osl"])
        out["saturated"] = steady.saturated
        if steady.saturated:  # no steady state: the run as measured, n requests 1 / rate apart
            run_ = simulate(shape, dev, eff, eng, requests=n, isl=p["isl"], osl=p["osl"], interval=1 / rate,
                            prefix_caching=p.get("enable_prefix_caching", True))
            tpot_s, ttft_s, how = run_.mean_tpot_s, run_.mean_ttft_s, " (transient)"
        else:
            tpot_s, ttft_s, how = steady.itl_s, steady.ttft_s, ""
        tpot = _num(res.get("mean_tpot_ms"))
        if tpot:
            out["checks"].append({"figure": "mean TPOT (ms)" + how, "measured": tpot, "predicted": tpot_s * 1e3})
        ttft = _num(res.get("mean_ttft_ms"))
        if ttft:
            out["checks"].append({"figure": "mean TTFT (ms)" + how, "measured": ttft, "predicted": ttft_s * 1e3})
        return out
    r = predict_point(p)
    out["checks"].append({"figure": "output tok/s", "measured": r.measured, "predicted": r.predicted})
    key = "median_ttft_ms" if out["mode"] == "concurrency" else "mean_ttft_ms"
    ttft = _num(res.get(key))
    if ttft and math.isfinite(r.ttft_s):
        out["checks"].append({"figure": ("median" if out["mode"] == "concurrency" else "mean") + " TTFT (ms)",
                              "measured": ttft, "predicted": r.ttft_s * 1e3})
    out["bound"] = r.bound
    return out


DOC = ROOT / "docs" / "capacity.md"
MARKS = ("<!-- bf16-check:begin -->", "<!-- bf16-check:end -->")


def summary_table(rows: list[dict]) -> str:
    """Per figure and GPU: checks, within the band, median error; then the runs not evaluated."""
    lines = ["| figure | GPU | checks | within ±30 % | median error |", "| --- | --- | ---: | ---: | ---: |"]
    groups: dict[tuple[str, str], list[float]] = {}
    for o in rows:
        for c in o.get("checks", []):
            err = c["predicted"] / c["measured"] - 1
            for key in ((c["figure"], o["gpu"]), (c["figure"], "all")):
                groups.setdefault(key, []).append(err)
    for (fig, gpu), errs in sorted(groups.items()):
        n_in = sum(abs(e) <= BAND for e in errs)
        lines.append(f"| {fig} | {gpu} | {len(errs)} | {n_in} of {len(errs)} ({n_in / len(errs):.0%}) | "
                     f"{statistics.median(errs):+.0%} |")
    skipped = [o for o in rows if "not_evaluated" in o]
    lines += ["", f"Not evaluated: {len(skipped)} of {len(rows)}" + (":" if skipped else ".")]
    lines += [f"- {o['id']}: {o['not_evaluated']}" for o in skipped]
    return "\n".join(lines)


def run_table(rows: list[dict]) -> str:
    lines = ["| run | GPU | mode | figure | measured | predicted | error |", "| --- | --- | --- | --- | ---: | ---: | ---: |"]
    for o in rows:
        if "not_evaluated" in o:
            lines.append(f"| {o['id']} | {o['gpu']} | {o['mode']} | not evaluated: {o['not_evaluated']} | | | |")
        for c in o["checks"]:
            err = c["predicted"] / c["measured"] - 1
            lines.append(f"| {o['id']} | {o['gpu']} | {o['mode']} | {c['figure']} | {c['measured']:,.1f} | "
                         f"{c['predicted']:,.1f} | {err:+.0%} |")
    return "\n".join(lines)


def _doc_with(table: str) -> str:
    text = DOC.read_text()
    a, b = text.index(MARKS[0]) + len(MARKS[0]), text.index(MARKS[1])
    return text[:a] + "\n" + table + "\n" + text[b:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="every run, predicted and measured")
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/capacity.md's table is not current")
    args = ap.parse_args()
    runs = yaml.safe_load(DATA.read_text())
    rows = [evaluate(r) for r in runs]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    table = summary_table(rows)
    if args.check:
        if _doc_with(table) != DOC.read_text():
            print("docs/capacity.md's 16-bit check table is stale: run bench/published16.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(_doc_with(table))
    print(f"{len(runs)} collected runs ({DATA.relative_to(ROOT)}); ±{BAND:.0%} band\n")
    print(run_table(rows))
    print()
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
