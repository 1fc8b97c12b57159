"""``llmctl bench --sweep``: steps of concurrencies or request rates, each
held for a duration (and ``repeat`` times), one row per step
(llmctl.loadgen runs each hold). A core with no UI."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Optional

from llmctl.errors import UsageError, param
from llmctl.launch.endpoint import dashboard_headers, endpoint_headers, resolve_endpoint
from llmctl.loadgen import BenchResult, BenchSettings, cpu_probe, replica_sampler, routing_of, run_hold


def sweep(
    app: Optional[str] = None,
    *,
    steps: "Any",
    duration: float,
    slo: "Any" = None,
    model: Optional[str] = None,
    url: Optional[str] = None,
    address: Optional[str] = None,
    prompt_tokens: int = 128,
    max_tokens: int = 128,
    max_concurrency: int = 256,
    stop: Optional[threading.Event] = None,
    on_step: Optional[Callable[[int, BenchResult], None]] = None,
    on_progress: Optional[Callable[[BenchResult], None]] = None,
    interval: float = 2.0,
    api_key_env: Optional[str] = None,
    repeat: int = 1,
    warmup: float = 0.0,
    ray_token_env: Optional[str] = None,
    metrics_url: Optional[str] = None,
) -> dict[str, Any]:
    """``bench --sweep``: each step of ``steps`` (llmctl.perf.slo.Sweep:
    concurrencies or request rates) held for ``duration`` seconds, one after
    another; per step the summary, each request, goodput under ``slo`` and the
    busy CPU cores; the replica and in-flight timelines of the whole run; the
    Serve config and versions as provenance. The dict is what ``plan
    --profile`` reads and what the report is made of (llmctl.perf.report).

    ``repeat`` > 1 runs the whole sweep that many times and pools each step's
    holds (``bench --repeat``): a step's figures then come from requests
    spread over the run, so a slow drift of the host (other work, a busy
    neighbour) weighs on every step alike instead of on the steps it hit.

    ``warmup`` > 0 leaves out of each hold the requests started in its first
    ``warmup`` seconds (``bench --warmup``): a hold's clients all send at
    once, and its first seconds run faster than what follows (measured on
    the CPU engine: 19-53 % at 8 to 16 concurrent, docs/capacity.md). The
    step's rate is then the requests started in the rest of the hold over
    its length, its percentiles theirs.

    Each step also has ``engine_ttft_s``: TTFT as the engines measured it
    (vLLM's histogram between scrapes before and after each hold, from the
    request's arrival at the engine: what ``--autoscale-on`` scales on and
    ``plan --slo-at engine`` fits), when the engines' metrics endpoint is
    known (a head llmctl started, or ``metrics_url``); and
    ``engine_ttft_by_deployment_s``, the same per deployment (Serve's status
    after each hold names their replicas). An app with more than one
    deployment of the model (prefill/decode pools, each counting every
    request) has only the per-deployment figures."""
    from llmctl.perf.sweep import goodput, max_rate_within, provenance

    if duration is None or duration <= 0:
        raise UsageError(f"{param('duration')}: must be a positive number of seconds (got {duration})", param="duration")
    for name, v in (("prompt_tokens", prompt_tokens), ("max_tokens", max_tokens), ("repeat", repeat)):
        if v is None or v < 1:
            raise UsageError(f"{param(name)}: must be a positive integer (got {v})", param=name)
    if warmup is None or not 0 <= warmup < duration:
        raise UsageError(f"{param('warmup')}: must be at least 0 and less than {param('duration')} ({duration:g} s); got {warmup}",
                         param="warmup")
    headers = endpoint_headers(app, url, address, api_key_env, ray_token_env)
    base, chosen, dashboard, app_name = resolve_endpoint(app, model, url, address, headers, ray_token_env)
    sample = replica_sampler(dashboard, app_name, ray_token_env) if dashboard and app_name else None
    cpu = cpu_probe(dashboard)
    from llmctl.launch.metrics import engine_probe, settled_scrape
    from llmctl.perf.metrics import add_ttft_counts, ttft_counts, ttft_counts_by_deployment, ttft_summary

    probe = engine_probe(address, metrics_url, ray_token_env=ray_token_env) if (dashboard or metrics_url) else None
    model_id = chosen.split(":")[0]
    engine_ttft: dict[int, dict] = {}
    engine_ttft_dep: dict[int, dict[str, dict]] = {}
    stop = stop or threading.Event()
    out_steps: list[dict[str, Any]] = []
    timeline: dict[str, list[dict[str, Any]]] = {}
    inflight: list[list[float]] = []
    offset = 0.0
    started = time.time()
    held: dict[int, list[BenchResult]] = {}
    t0: dict[int, float] = {}
    for pas in range(repeat):
        for i, v in enumerate(steps.values):
            if stop.is_set():
                break
            conc = int(v) if steps.mode == "concurrency" else max_concurrency
            st = BenchSettings(base, chosen, conc, None, duration, prompt_tokens, max_tokens, True,
                               float(v) if steps.mode == "rate" else None, i + pas * len(steps.values))
            before = probe() if probe else None
            res = asyncio.run(run_hold(st, stop, sample, on_progress, interval, cpu, headers))
            after = None
            if before is not None:
                # each deployment's engines on their own (a prefill/decode app's pools both count every request)
                routing = routing_of(dashboard, app_name, ray_token_env) if dashboard and app_name else {}
                groups = {d: r.get("replicas", []) for d, r in routing.items()}
                after = settled_scrape(probe, before, res.done, model_id, groups=groups)[0]
            if after is not None:
                c = ttft_counts(before, after, model_id)
                engine_ttft[i] = add_ttft_counts(engine_ttft[i], c) if i in engine_ttft else c
                pooled = engine_ttft_dep.setdefault(i, {})
                for dep, dc in ttft_counts_by_deployment(before, after, model_id, groups).items():
                    pooled[dep] = add_ttft_counts(pooled[dep], dc) if dep in pooled else dc
            held.setdefault(i, []).append(res.steady(warmup, min(duration, res.seconds)) if warmup else res)
            t0.setdefault(i, offset)
            for dep, pts in res.replica_timeline().items():
                timeline.setdefault(dep, []).extend({**p, "t": round(p["t"] + offset, 2)} for p in pts)
            inflight.extend([round(x.t + offset, 2), x.inflight] for x in res.inflight)
            offset += res.seconds
            if on_step is not None:
                on_step(i, res)
    for i, parts in sorted(held.items()):
        v, res = steps.values[i], BenchResult.pooled(parts)
        summ, requests = res.summary(), res.requests_json()
        by_dep = engine_ttft_dep.get(i) or {}
        # several deployments with engines of the model (prefill/decode pools): one histogram each, no pooled figure
        summ["engine_ttft_s"] = ttft_summary(engine_ttft[i]) if i in engine_ttft and len(by_dep) <= 1 else None
        summ["engine_ttft_by_deployment_s"] = {d: ttft_summary(c) for d, c in by_dep.items()} or None
        step = {"index": i, "mode": steps.mode, "value": v, "concurrency": res.settings.concurrency if steps.mode == "concurrency" else None,
                "rate": float(v) if steps.mode == "rate" else None, "t0": round(t0[i], 2), "passes": len(parts),
                "summary": summ, "requests": requests}
        if slo is not None:
            step["goodput"] = goodput(requests, slo, res.seconds)
            step["slo_met"] = slo.met(summ)
        out_steps.append(step)
    result: dict[str, Any] = {
        "kind": "llmctl-bench-sweep", "version": 1,
        "settings": {"url": base, "model": chosen, "app": app_name, "mode": steps.mode, "values": list(steps.values),
                     "duration_s": duration, "repeat": repeat, "warmup_s": warmup, "prompt_tokens": prompt_tokens, "max_tokens": max_tokens,
                     "max_concurrency": max_concurrency},
        "started": started, "ended": time.time(), "interrupted": stop.is_set(),
        "slo": slo.to_json() if slo is not None else None,
        "steps": out_steps, "replicas": timeline, "inflight": inflight,
        "provenance": provenance(dashboard, app_name, dashboard_headers(dashboard, ray_token_env)),
    }
    if slo is not None:
        result["max_rate_within_slo"] = max_rate_within(out_steps, slo)
    return result
