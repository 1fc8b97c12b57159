"""``bench --report DIR``: PNG plots (matplotlib), a self-contained
``index.html`` (the PNGs inlined as base64, no script, no network) and the
run as JSON in the llm-d benchmark report schema v0.2, validated against its
published JSON Schema (llmctl/perf/schemas/br_v0_2_json_schema.json, from
llm-d/llm-d-benchmark, Apache-2.0).

The input is a sweep as :func:`llmctl.loadsweep.sweep` returns it (a single
run is a one-step sweep).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from llmctl import serve_facts as sf
SCHEMA_FILE = Path(__file__).with_name("schemas") / "br_v0_2_json_schema.json"
PLOTS = (
    ("throughput_latency", "Throughput vs latency per step"),
    ("ttft_distribution", "Time to first token, distribution per step"),
    ("itl_distribution", "Inter-token latency (per-request TPOT), distribution per step"),
    ("replicas_ongoing", "Replicas and ongoing requests over time"),
)


def schema() -> dict:
    return json.loads(SCHEMA_FILE.read_text())


def validate(doc: dict) -> list[str]:
    """The schema errors of ``doc`` (empty: valid)."""
    import jsonschema

    v = jsonschema.Draft202012Validator(schema())
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in v.iter_errors(doc)]


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _stats(values: list[float], units: str) -> Optional[dict]:
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None

    def pct(p: float) -> float:
        k = (len(vals) - 1) * p / 100
        lo, hi = int(k), min(int(k) + 1, len(vals) - 1)
        return vals[lo] + (vals[hi] - vals[lo]) * (k - lo)

    mean = sum(vals) / len(vals)
    sd = (sum((v - mean) ** 2 for v in vals) / len(vals)) ** 0.5
    out = {"units": units, "mean": mean, "stddev": sd, "min": vals[0], "max": vals[-1]}
    for name, p in (("p0p1", 0.1), ("p1", 1), ("p5", 5), ("p10", 10), ("p25", 25), ("p50", 50), ("p75", 75), ("p90", 90),
                    ("p95", 95), ("p99", 99), ("p99p9", 99.9)):
        out[name] = pct(p)
    return out


def _one(value: float, units: str) -> dict:
    return {"units": units, "mean": value}


def llmd_report(sweep: dict, *, step: Optional[int] = None) -> dict:
    """The run (all steps, or one) as an llm-d benchmark report v0.2."""
    s = sweep["settings"]
    steps = sweep["steps"] if step is None else [sweep["steps"][step]]
    reqs = [r for st in steps for r in st.get("requests", [])]
    ok = [r for r in reqs if r.get("ok")]
    secs = sum(st["summary"]["seconds"] for st in steps) or 1e-9
    prov = sweep.get("provenance") or {}
    ver = prov.get("versions") or {}
    cfg = prov.get("serve_config") or {}
    llm = {}
    try:
        llm = cfg["args"]["llm_configs"][0]
    except (KeyError, IndexError, TypeError):
        pass
    ek = llm.get("engine_kwargs") or {} if isinstance(llm, dict) else {}
    dep = (llm.get("deployment_config") or {}) if isinstance(llm, dict) else {}
    auto = dep.get("autoscaling_config") or {}
    uid = hashlib.sha256(json.dumps([s, sweep.get("started")], sort_keys=True, default=str).encode()).hexdigest()[:32]
    cfg_id = hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:32]
    replicas = [p["running"] for dep_name, pts in (sweep.get("replicas") or {}).items()
                if sf.is_llm_server(dep_name) for p in pts]
    engine = {
        "metadata": {"schema_version": "0.0.1", "label": "ray-serve-llm-0", "cfg_id": cfg_id,
                     "description": "Ray Serve LLM deployment (vLLM engine) loaded by llmctl bench"},
        "standardized": {"kind": "inference_engine", "tool": "ray-serve-llm+vllm",
                         "tool_version": f"ray {ver.get('ray')}, vllm {ver.get('vllm')}", "role": "replica",
                         "replicas": max(replicas) if replicas else int(auto.get("min_replicas") or 1),
                         "model": {"name": s["model"]},
                         "accelerator": {"model": str(llm.get("accelerator_type") or "cpu") if isinstance(llm, dict) else "unknown",
                                         "count": int(ek.get("tensor_parallel_size") or 1),
                                         "parallelism": {"tp": int(ek.get("tensor_parallel_size") or 1),
                                                         "pp": int(ek.get("pipeline_parallel_size") or 1)}}},
        "native": {"args": ek or None, "envars": None,
                   "config": {"serve_config": cfg or None, "replica_timeline": sweep.get("replicas"),
                              "versions": ver}},
    }
    load_std: dict[str, Any] = {
        "tool": "llmctl bench", "tool_version": ver.get("llmctl") or "unknown", "source": "random",
        "input_seq_len": {"distribution": "fixed", "value": s["prompt_tokens"]},
        "output_seq_len": {"distribution": "fixed", "value": s["max_tokens"]},
    }
    if len(steps) == 1:
        st = steps[0]
        if st.get("rate"):
            load_std["rate_qps"] = st["rate"]
        if st.get("concurrency"):
            load_std["concurrency"] = st["concurrency"]
        load_std["stage"] = st["index"]
    aggregate = {
        "requests": {"total": len(reqs), "failures": len(reqs) - len(ok),
                     "input_length": _stats([r["prompt_tokens"] for r in ok], "count"),
                     "output_length": _stats([r["output_tokens"] for r in ok], "count")},
        "latency": {"time_to_first_token": _stats([r["ttft"] for r in ok], "s"),
                    "time_per_output_token": _stats([r["tpot"] for r in ok], "s/token"),
                    "request_latency": _stats([r["latency"] for r in ok], "s")},
        "throughput": {"output_token_rate": _one(sum(r["output_tokens"] for r in ok) / secs, "tokens/s"),
                       "input_token_rate": _one(sum(r["prompt_tokens"] for r in ok) / secs, "tokens/s"),
                       "total_token_rate": _one(sum(r["output_tokens"] + r["prompt_tokens"] for r in ok) / secs, "tokens/s"),
                       "request_rate": _one(len(ok) / secs, "queries/s")},
    }
    doc = {
        "version": "0.2",
        "run": {"uid": uid, "eid": hashlib.sha256(str(sweep.get("started")).encode()).hexdigest()[:32],
                "time": {"start": _iso(sweep.get("started") or time.time()), "end": _iso(sweep.get("ended") or time.time()),
                         "duration": f"PT{(sweep.get('ended', 0) - sweep.get('started', 0)):.3f}S"},
                "description": f"llmctl bench against {s['url']} ({s['mode']} {', '.join(f'{v:g}' for v in s['values'])})",
                "keywords": ["llmctl", "ray-serve-llm", s["mode"]]},
        "scenario": {"stack": [engine],
                     "load": {"metadata": {"schema_version": "0.0.1", "cfg_id": uid,
                                           "description": "closed-loop concurrency" if s["mode"] == "concurrency" else "Poisson arrivals"},
                              "standardized": load_std,
                              "native": {"config": {"settings": s, "slo": sweep.get("slo")}}}},
        "results": {"request_performance": {"aggregate": aggregate}},
    }
    return _drop_none(doc)


def _drop_none(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _drop_none(v) for k, v in x.items() if v is not None}
    if isinstance(x, list):
        return [_drop_none(v) for v in x]
    return x


def plots(sweep: dict, out_dir: Path) -> dict[str, Path]:
    """The four PNGs of the report."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401

    out_dir.mkdir(parents=True, exist_ok=True)
    steps = sweep["steps"]
    label = [f"{st['value']:g}" + (" req/s" if st["mode"] == "rate" else " conc.") for st in steps]
    files: dict[str, Path] = {}

    def save(fig, name: str) -> None:
        path = out_dir / f"{name}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)
        files[name] = path

    fig, ax = plt.subplots(figsize=(7, 4.2))
    x = [st["summary"]["output_tokens_per_s"] for st in steps]
    for key, name in (("ttft_s", "TTFT p95"), ("tpot_s", "ITL p95"), ("latency_s", "latency p95")):
        y = [(st["summary"][key].get("p95") or 0) * 1000 for st in steps]
        ax.plot(x, y, marker="o", label=name)
    y95 = [(st["summary"]["latency_s"].get("p95") or 0) * 1000 for st in steps]
    for xi, yi, lab in zip(x, y95, label):
        ax.annotate(lab, (xi, yi), fontsize=7, textcoords="offset points", xytext=(0, 6), ha="center")
    ax.set_xlabel("output tokens / s")
    ax.set_ylabel("ms (log)")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("Throughput vs latency per step")
    save(fig, "throughput_latency")

    for name, key, title in (("ttft_distribution", "ttft", "TTFT (ms)"), ("itl_distribution", "tpot", "ITL = per-request TPOT (ms)")):
        fig, ax = plt.subplots(figsize=(7, 4.2))
        data = [[r[key] * 1000 for r in st.get("requests", []) if r.get("ok") and r.get(key) is not None] or [0.0] for st in steps]
        ax.boxplot(data, showfliers=True)
        ax.set_xticks(range(1, len(label) + 1), label, rotation=30, fontsize=8)
        ax.set_ylabel(title)
        slo = sweep.get("slo") or {}
        bound = next((v for k, v in slo.items() if k.startswith("ttft" if key == "ttft" else "itl")), None)
        if bound:
            ax.axhline(bound * 1000, color="red", linestyle="--", label=f"target {bound * 1000:g} ms")
            ax.legend()
        ax.set_title(title.split(" (")[0] + " per step")
        save(fig, name)

    fig, ax = plt.subplots(figsize=(7, 4.2))
    infl = sweep.get("inflight") or []
    if infl:
        ax.step([p[0] for p in infl], [p[1] for p in infl], where="post", label="ongoing requests (client)", color="tab:blue")
    ax.set_xlabel("seconds")
    ax.set_ylabel("ongoing requests")
    ax2 = ax.twinx()
    for dep, pts in (sweep.get("replicas") or {}).items():
        if pts:
            ax2.step([p["t"] for p in pts], [p["running"] for p in pts], where="post", label=f"{dep} running", linestyle="--")
    ax2.set_ylabel("replicas")
    top = max([p["running"] for pts in (sweep.get("replicas") or {}).values() for p in pts] or [1])
    ax2.set_ylim(0, top + 1)
    ax2.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    for st in steps:
        ax.axvline(st["t0"], color="grey", alpha=0.3)
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7, loc="upper left")
    ax.set_title("Replicas and ongoing requests over time")
    save(fig, "replicas_ongoing")
    return files


def write_report(sweep: dict, out_dir: Path | str) -> dict[str, Path]:
    """Write PNGs, benchmark_report.json (validated; a ValueError lists the
    schema errors) and index.html into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = plots(sweep, out)
    doc = llmd_report(sweep)
    errors = validate(doc)
    if errors:
        raise ValueError("the llm-d benchmark report does not validate: " + "; ".join(errors[:5]))
    from llmctl.paths import write_all_atomic

    write_all_atomic([(out / "benchmark_report.json", json.dumps(doc, indent=1) + "\n"),
                      (out / "sweep.json", json.dumps(sweep, indent=1, default=str) + "\n"),
                      (out / "index.html", _html(sweep, files))])
    return {"index": out / "index.html", "json": out / "benchmark_report.json", **files}


def _html(sweep: dict, files: dict[str, Path]) -> str:
    s = sweep["settings"]
    e = html.escape

    def ms(v):
        return "-" if v is None else f"{v * 1000:.1f}"

    rows = []
    for st in sweep["steps"]:
        m = st["summary"]
        rows.append("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in (
            f"{st['value']:g}" + (" req/s" if st["mode"] == "rate" else ""), f"{m['req_per_s']:.2f}", f"{m['output_tokens_per_s']:.1f}",
            ms(m["ttft_s"].get("p50")), ms(m["ttft_s"].get("p95")), ms(m["tpot_s"].get("p50")), ms(m["tpot_s"].get("p95")),
            ms(m["latency_s"].get("p95")), m["failed"],
            f"{st['goodput']['req_per_s']:.2f}" if "goodput" in st else "-",
            ("yes" if st.get("slo_met") else "no") if "slo_met" in st else "-")) + "</tr>")
    figs = []
    for name, title in PLOTS:
        data = base64.b64encode(files[name].read_bytes()).decode()
        figs.append(f'<figure id="{name}"><img alt="{e(title)}" src="data:image/png;base64,{data}"><figcaption>{e(title)}</figcaption></figure>')
    prov = sweep.get("provenance") or {}
    serving = []
    for st in sweep["steps"]:  # a single run's router and vLLM's prefix-cache hit rate (bench --prefixes)
        m = st["summary"]
        for dep, r in (m.get("routing") or {}).items():
            if sf.is_llm_server(dep):
                serving.append(f"<p>{e(dep)}: request router {e(r.get('router') or 'Serve default (power of two choices)')}"
                               + (f"; autoscaling policy {e(r['autoscaling_policy'])}" if r.get("autoscaling_policy") else "") + "</p>")
        pc = m.get("prefix_cache") or {}
        if pc.get("hit_rate") is not None:
            serving.append(f"<p>Prefix cache (vLLM): <b>{pc['hit_rate']:.1%}</b> of {pc['queries']:.0f} prompt tokens hit"
                           + (f"; {m['prefix_pool']['count']} shared prefixes of {m['prefix_pool']['tokens']} tokens"
                              if m.get("prefix_pool") else "") + "</p>")
    mr = sweep.get("max_rate_within_slo")
    best = "".join(serving)
    if mr:
        best += (f"<p>Highest rate within {e(json.dumps(mr['slo']))}: <b>{mr['req_per_s']:.2f} req/s</b></p>"
                if mr.get("req_per_s") is not None else "<p>No step met every target.</p>")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>llmctl bench report: {e(s['model'])}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}
figure{{display:inline-block;margin:8px}}img{{max-width:520px}}pre{{background:#f6f6f6;padding:8px;overflow:auto;max-height:300px}}</style></head>
<body><h1>llmctl bench: {e(s['model'])}</h1>
<p>{e(s['url'])} · {e(s['mode'])} steps of {s.get('duration_s', 0):g} s · {s['prompt_tokens']} prompt / {s['max_tokens']} output tokens ·
started {e(_iso(sweep.get('started') or 0))}</p>
{best}
<table><tr><th>step</th><th>req/s</th><th>tok/s</th><th>TTFT p50 ms</th><th>TTFT p95 ms</th><th>ITL p50 ms</th><th>ITL p95 ms</th><th>latency p95 ms</th><th>failed</th><th>goodput req/s</th><th>SLO met</th></tr>
{''.join(rows)}</table>
<p>ITL is each request's mean time per output token after the first (TPOT); Ray Serve LLM batches stream chunks.</p>
{''.join(figs)}
<h2>Provenance</h2><pre>{e(json.dumps(prov, indent=1, default=str))}</pre>
<p>Machine-readable: <a href="benchmark_report.json">benchmark_report.json</a> (llm-d benchmark report v0.2), <a href="sweep.json">sweep.json</a> (llmctl plan --profile).</p>
</body></html>
"""
