"""The model against published vLLM measurements (tests/data/perf_published.yaml).

A point names a catalog model, a GPU row, TP, input / output lengths and how
the load was offered; :func:`predict_point` gives the output tokens per
second the roofline predicts for it with the default efficiencies:

- ``concurrency``: the closed-loop steady state at that concurrency;
- ``burst``: ``requests`` sent at once, stepped through vLLM's scheduler
  (llmctl.perf.burst: the prompts queue for the token budget, at most the
  engine's cap — max_num_seqs, KV capacity — run at a time); the run lasts
  until the last request's last token, plus, when output lengths vary, the
  longest output's tail (``osl_max`` − ``osl`` more tokens, decoded alone).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from llmctl.perf.burst import simulate
from llmctl.perf.roofline import Device, Efficiency, Engine, ModelShape, device_of, shape_of, step_time
from llmctl.perf.steady import predict

EAGER_STEP_S = 0.008  # --enforce-eager: no CUDA graphs, one kernel launch per op per layer (docs/capacity.md)


@dataclass
class PointResult:
    id: str
    gpu: str
    split: str
    measured: float
    predicted: float
    bound: str
    ttft_s: float = float("nan")  # predicted mean TTFT (closed loop: the steady state; burst: over the burst's requests)
    itl_s: float = float("nan")  # predicted mean time per output token (closed loop)

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1

    def within(self, band: float = 0.30) -> bool:
        return abs(self.error) <= band


def load_points(path: Path | str) -> list[dict[str, Any]]:
    import yaml

    return yaml.safe_load(Path(path).read_text())["points"]


def setup_of(p: dict[str, Any], eff: Optional[Efficiency] = None) -> tuple[ModelShape, Device, Engine, Efficiency, str]:
    """A point's replica as the model sees it: (shape, device, engine, efficiencies, the GPU row's name) —
    llmctl.sizing's plan of the point's model, GPU, TP and engine settings (gpu_memory_utilization,
    max_num_seqs, enforce_eager), at a context that holds its longest request."""
    from llmctl import sizing
    from llmctl.catalog import resolve_model
    from llmctl.hardware import find_device

    eff = eff or Efficiency()
    arch = resolve_model(p["model"]).architecture
    gpu = find_device(p["gpu"])
    tp = int(p.get("tp", 1))
    mml = min(arch.context_limit or 32768, max(4096, int(p["isl"]) + int(p.get("osl_max", p["osl"])) + 16))
    plan = sizing.plan(arch, gpu_memory_bytes=gpu.assumed_memory_bytes, tp=tp,
                       max_model_len=mml, dtype=p.get("dtype", "auto"), gpu_name=gpu.name,
                       max_num_seqs=p.get("max_num_seqs"), enforce_eager=bool(p.get("enforce_eager")),
                       gpu_memory_utilization=p.get("gpu_memory_utilization"))
    shape = shape_of(arch, plan, name=p["model"], tp=tp)
    if p.get("enforce_eager"):
        eff = replace(eff, step_s=eff.step_s + EAGER_STEP_S)
    return (shape, device_of(gpu, fp8=shape.fp8), Engine(plan.max_num_seqs, plan.max_num_batched_tokens, plan.kv_cache_tokens),
            eff, gpu.name)


def predict_point(p: dict[str, Any], eff: Optional[Efficiency] = None) -> PointResult:
    shape, dev, engine, eff, gpu_name = setup_of(p, eff)
    isl, osl = int(p["isl"]), int(p["osl"])
    if p["mode"] == "concurrency":
        pr = predict(shape, dev, eff, engine, concurrency=float(p["concurrency"]), isl=isl, osl=osl)
        tok_s, ttft, itl = pr.output_tokens_per_s, pr.ttft_s, pr.itl_s
    else:
        n = int(p["requests"])
        cap = min(engine.max_num_seqs, engine.kv_tokens / max(1, isl + osl) if engine.kv_tokens else n)
        pr = predict(shape, dev, eff, engine, concurrency=float(min(n, cap)), isl=isl, osl=osl)
        run = simulate(shape, dev, eff, engine, requests=n, isl=isl, osl=osl,
                       prefix_caching=bool(p.get("enable_prefix_caching", True)))
        alone = step_time(shape, dev, eff, decode=1, prompt_tokens=0, context=isl + osl).seconds
        seconds = run.makespan_s + max(0, int(p.get("osl_max", osl)) - osl) * alone
        tok_s, ttft, itl = n * osl / seconds, run.mean_ttft_s, float("nan")
    bound = pr.decode_bound if pr.decode_bound == "frontend" or pr.itl_s * osl >= pr.ttft_s else f"{pr.prefill_bound} (prefill)"
    return PointResult(p["id"], gpu_name, p.get("split", "holdout"), float(p["output_tok_s"]), tok_s, bound, ttft, itl)


def summary(results: list[PointResult], band: float = 0.30) -> dict[str, dict[str, Any]]:
    """Per GPU type and overall: points, within the band, median |error|."""
    out: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[PointResult]] = {}
    for r in results:
        groups.setdefault(r.gpu, []).append(r)
    groups["all"] = list(results)
    for name, rs in groups.items():
        errs = sorted(abs(r.error) for r in rs)
        out[name] = {"points": len(rs), "within": sum(r.within(band) for r in rs),
                     "median_abs_error": errs[len(errs) // 2] if errs else None,
                     "holdout": sum(r.split == "holdout" for r in rs),
                     "holdout_within": sum(r.split == "holdout" and r.within(band) for r in rs)}
    return out
