"""`llmctl bench [APP]`: load an app's OpenAI endpoint, watch the replicas.

Live view on stderr (a table in a terminal, a line every few seconds
otherwise), the summary on stdout, `--json` for scripts. Exit 0 when at least
one request succeeded (Ctrl-C ends the run early and still prints the
summary), 1 when every request failed, 2 for bad flags, 3 with no cluster,
130 when Ctrl-C came before any request finished.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any, Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import err, out, print_json
from llmctl.cli.options import AddressOpt, RayTokenEnvOpt, JsonOpt
from llmctl.errors import EXIT_FAILED, EXIT_INTERRUPTED, UsageError
from llmctl import serve_facts as sf


def _ms(v: Optional[float]) -> str:
    return "-" if v is None else (f"{v * 1000:.1f} ms" if v < 0.01 else f"{v * 1000:.0f} ms")


def _line(res) -> str:
    s = res.summary()
    reps = "; ".join(f"{dep} {pts[-1]['running']}/{pts[-1]['target']}" for dep, pts in res.replica_timeline().items()
                     if sf.is_llm_server(dep))
    return (f"[{s['seconds']:6.1f}s] done {s['done']} failed {s['failed']} · {s['req_per_s']:.2f} req/s · "
            f"{s['output_tokens_per_s']:.1f} tok/s · TTFT p50 {_ms(s['ttft_s']['p50'])} · ITL p50 {_ms(s['itl_s']['p50'])}"
            + (f" · replicas (running/target) {reps}" if reps else ""))


def _table(res, title: str):
    from rich.table import Table

    s = res.summary()
    t = Table(title=title, title_justify="left")
    for col in ("metric", "value", "p50", "p90", "p99"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    t.add_row("requests done / failed", f"{s['done']} / {s['failed']}", "", "", "")
    t.add_row("requests per second", f"{s['req_per_s']:.2f}", "", "", "")
    t.add_row("output tokens per second", f"{s['output_tokens_per_s']:.1f}", "", "", "")
    for label, key in (("time to first token", "ttft_s"), ("inter-token latency", "itl_s"), ("latency", "latency_s")):
        p = s[key]
        t.add_row(label, "", _ms(p["p50"]), _ms(p["p90"]), _ms(p["p99"]))
    return t


def _timeline_text(res) -> list[str]:
    lines = []
    for dep, pts in res.replica_timeline().items():
        changes, last = [], None
        for p in pts:
            key = (p["running"], p["target"])
            if key != last:
                changes.append(f"{p['t']:.0f}s {p['running']}/{p['target']}" + (f" ({p['message']})" if p.get("message") else ""))
                last = key
        lines.append(f"{dep} replicas running/target: " + " → ".join(changes))
    return lines


@app.command("bench")
def bench_cmd(
    app_name: Annotated[Optional[str], typer.Argument(metavar="APP", help="Application to load (default: the only one).")] = None,
    model: Annotated[Optional[str], typer.Option("--model-id", metavar="ID", help="Model id to request (default: the app's first); BASE:ADAPTER requests a LoRA adapter of BASE (its first request loads it).")] = None,
    concurrency: Annotated[Optional[int], typer.Option("--concurrency", "-c", metavar="N", help="Requests in flight at once (default 8; with --trace: 256, a cap on those the trace has in flight).")] = None,
    requests: Annotated[Optional[int], typer.Option("--requests", metavar="N", help="Stop after N requests (default: 5 × concurrency).")] = None,
    duration: Annotated[Optional[float], typer.Option("--duration", "-d", metavar="SECONDS", help="Stop after this many seconds instead.")] = None,
    prompt_tokens: Annotated[int, typer.Option("--prompt-tokens", metavar="N", help="About this many prompt tokens per request.")] = 128,
    max_tokens: Annotated[int, typer.Option("--max-tokens", metavar="N", help="Output tokens per request (ignore_eos: exactly this many).")] = 128,
    no_stream: Annotated[bool, typer.Option("--no-stream", help="Non-streaming requests (no TTFT / inter-token latency).")] = False,
    url: Annotated[Optional[str], typer.Option("--url", metavar="URL", help="An OpenAI endpoint to load directly (http://host:port/v1), no cluster lookup.")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", metavar="NAME", help="Environment variable holding the endpoint's API key (default: the variable the app's API-key ingress names).")] = None,
    address: AddressOpt = None,
    ray_token_env: RayTokenEnvOpt = None,
    json_out: JsonOpt = False,
    rate: Annotated[Optional[float], typer.Option("--rate", metavar="REQ_PER_S", help="Open loop: Poisson arrivals at this rate (--concurrency caps the requests in flight).")] = None,
    sweep: Annotated[Optional[str], typer.Option("--sweep", metavar="STEPS", help="Steps held one after another for --duration each: concurrencies (1,2,4,8) or rates (rate=0.5,1,2). Records per step throughput, TTFT/ITL/latency percentiles, goodput under --slo.")] = None,
    slo: Annotated[Optional[str], typer.Option("--slo", metavar="TARGETS", help="Latency targets, e.g. ttft_p95=500ms,itl_p95=40ms (itl: each request's mean time per output token). With --sweep: goodput per step and the highest rate within them.")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", metavar="FILE", help="Write the run as JSON (a sweep: what `llmctl plan --profile` reads).")] = None,
    warmup: Annotated[float, typer.Option("--warmup", metavar="SECONDS", help="With --sweep: leave out of each step the requests started in its first SECONDS (its clients all start at once, and those seconds run faster than the steady state).")] = 0.0,
    repeat: Annotated[int, typer.Option("--repeat", metavar="N", help="With --sweep: run the whole sweep N times and pool each step's requests (a slow drift of the host weighs on every step alike).")] = 1,
    report: Annotated[Optional[Path], typer.Option("--report", metavar="DIR", help="Write DIR/index.html (self-contained), PNG plots and DIR/benchmark_report.json (llm-d benchmark report v0.2).")] = None,
    prefixes: Annotated[int, typer.Option("--prefixes", metavar="N", help="A prefix pool: each prompt starts with one of N shared prefixes (drawn at random; new every run), then --prompt-tokens of its own. With --prefix-tokens.")] = 0,
    prefix_tokens: Annotated[int, typer.Option("--prefix-tokens", metavar="L", help="Tokens of each shared prefix (about; the server's usage counts).")] = 0,
    trace: Annotated[Optional[Path], typer.Option("--trace", metavar="FILE", help="Replay a request trace (CSV or JSON Lines): Azure LLM inference (TIMESTAMP, ContextTokens, GeneratedTokens), BurstGPT (Timestamp, Request tokens, Response tokens, ...) or timestamp, input_tokens, output_tokens[, prefix_id]; each request at its time, with its tokens (--concurrency caps those in flight).")] = None,
    speedup: Annotated[Optional[float], typer.Option("--speedup", metavar="FACTOR", help="With --trace: replay FACTOR times faster (0.5: half as fast).")] = None,
    metrics_url: Annotated[Optional[str], typer.Option("--metrics-url", metavar="URL", help="The engines' metrics (http://NODE:METRICS_EXPORT_PORT/metrics) for their own figures (prefix-cache hit rate, engine-side TTFT of each --sweep step), on a cluster llmctl did not start.")] = None,
) -> None:
    """Load an app's OpenAI endpoint: req/s, tokens/s, TTFT and inter-token latency, and the replicas over time."""
    from llmctl.loadgen import bench

    slo_obj = None
    if slo:
        from llmctl.perf.slo import parse_slo

        slo_obj = parse_slo(slo)
    if repeat != 1 and not sweep:
        raise UsageError("--repeat: repeats a sweep; add --sweep STEPS (e.g. --sweep 1,2,4,8 --duration 30 --repeat 2)")
    if warmup and not sweep:
        raise UsageError("--warmup: applies to the steps of a sweep; add --sweep STEPS (e.g. --sweep 1,2,4,8 --duration 30 --warmup 5)")
    if sweep and (prefixes or prefix_tokens or trace is not None):
        raise UsageError("--sweep: not with --prefixes/--prefix-tokens or --trace (a sweep sends its own steps)")
    if concurrency is None:
        concurrency = 256 if trace is not None else 8  # a trace sets the arrivals: a cap, not a load
    if sweep:
        _sweep_cmd(app_name, model, sweep, duration, slo_obj, prompt_tokens, max_tokens, concurrency, url, address,
                   json_out, output, report, api_key_env, repeat, warmup, ray_token_env, metrics_url)
        return
    if rate is not None and rate <= 0:
        raise UsageError(f"--rate: must be a positive number of requests per second (got {rate:g})")

    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    live = None
    last_line = [0.0]

    def progress(res) -> None:
        nonlocal live
        if err.is_terminal:
            from rich.console import Group
            from rich.live import Live
            from rich.text import Text

            view = Group(_table(res, f"llmctl bench · {res.seconds:.0f}s · Ctrl-C stops"), *[Text(t) for t in _timeline_text(res)])
            if live is None:
                live = Live(view, console=err, refresh_per_second=2)
                live.start()
            else:
                live.update(view)
        elif time.monotonic() - last_line[0] >= 5:
            err.print(_line(res), markup=False, highlight=False)
            last_line[0] = time.monotonic()

    try:
        res = bench(app_name, model=model, url=url, address=address, concurrency=concurrency, requests=requests,
                    duration=duration, prompt_tokens=prompt_tokens, max_tokens=max_tokens, stream=not no_stream,
                    stop=stop, on_progress=None if json_out else progress, rate=rate, api_key_env=api_key_env,
                    ray_token_env=ray_token_env, prefixes=prefixes, prefix_tokens=prefix_tokens,
                    trace=str(trace) if trace is not None else None, speedup=speedup, metrics_url=metrics_url)
    finally:
        signal.signal(signal.SIGINT, previous)
        if live is not None:
            live.stop()
    data = res.to_json()
    if slo_obj is not None:
        from llmctl.perf.sweep import goodput

        data["slo"] = slo_obj.to_json()
        data["slo_met"] = slo_obj.met(data["summary"])
        data["goodput"] = goodput(res.requests_json(), slo_obj, res.seconds)
    if output is not None:
        _write_json(output, {**data, "requests": res.requests_json()})
    if report is not None:
        from llmctl.perf.report import write_report
        from llmctl.perf.sweep import provenance

        single = _as_sweep(data, res)
        from llmctl.launch.endpoint import dashboard_headers

        dashboard, app = _dashboard_app(app_name, url, address, ray_token_env)
        single["provenance"] = provenance(dashboard, app, dashboard_headers(dashboard, ray_token_env))
        written = write_report(single, report)
        err.print(f"report: {written['index']}", markup=False, highlight=False)
    if json_out:
        print_json(data)
    else:
        s = res.settings
        load = (f"trace {s.trace}" + (f" x{s.speedup:g}" if s.speedup != 1 else "") if s.trace else
                f"{s.concurrency} concurrent, {s.prompt_tokens} prompt / {s.max_tokens} output tokens")
        pool = f", {s.prefixes} shared prefixes of {s.prefix_tokens} tokens" if s.prefixes else ""
        head = f"{s.model} at {s.url}: {load}{pool}" + (", interrupted" if res.interrupted else "")
        out.print(_table(res, head))
        for line in _timeline_text(res) + _serving_text(res):
            out.print(line, markup=False)
        for e, n in res.errors().items():
            err.print(f"warning: {n} request(s) failed: {e}", markup=False)
        for d in res.diagnoses():
            err.print(f"error: {d.cause}\n  fix: {d.fix}", markup=False, highlight=False)
    if res.done == 0:
        # Ctrl-C before any request finished measured nothing but broke nothing either.
        raise typer.Exit(EXIT_INTERRUPTED if res.interrupted and res.failed == 0 else EXIT_FAILED)


def _serving_text(res) -> list[str]:
    """The request router and autoscaling policy of each LLM deployment, and vLLM's prefix-cache hit rate."""
    lines = []
    for dep, r in res.routing.items():
        if sf.is_llm_server(dep):
            lines.append(f"{dep} request router: {r.get('router') or 'Serve default (power of two choices)'}"
                         + (f"; autoscaling policy: {r['autoscaling_policy']}" if r.get("autoscaling_policy") else ""))
    for dep, e in res.engines.items():
        lines.append(f"{dep} engines ({e['replicas']} replica(s)), vLLM's own counts: {e['requests']:.0f} request(s), "
                     f"{e['prompt_tokens']:,.0f} prompt tokens, {e['generation_tokens']:,.0f} generated; "
                     f"TTFT mean {_ms(e['ttft_mean_s'])}, inter-token mean {_ms(e['itl_mean_s'])}")
    pc = res.prefix_cache
    if pc and pc.get("hit_rate") is not None:
        per = ", ".join(f"{rid} {v['hit_rate']:.0%} of {v['queries']:.0f}" for rid, v in pc["replicas"].items())
        lines.append(f"prefix cache (vLLM): {pc['hit_rate']:.1%} of {pc['queries']:.0f} prompt tokens hit" + (f" ({per})" if per else "")
                     + ("; partial: the engines had not exported every request yet" if pc.get("complete") is False else ""))
    return lines


def _write_json(path: Path, data: Any) -> None:
    from llmctl.paths import write_atomic

    write_atomic(path, json.dumps(data, indent=1, default=str) + "\n")
    err.print(f"wrote {path}", markup=False, highlight=False)


def _dashboard_app(app_name, url, address, ray_token_env):
    if url:
        return None, None
    try:
        from llmctl.launch.endpoint import resolve_endpoint

        _, _, dashboard, app = resolve_endpoint(app_name, None, None, address, ray_token_env=ray_token_env)
        return dashboard, app
    except Exception:  # noqa: BLE001 - provenance is optional
        return None, None


def _as_sweep(data: dict, res) -> dict:
    """A single run in the shape of a one-step sweep (for the report)."""
    s = data["settings"]
    step = {"index": 0, "mode": "rate" if s.get("rate") else "concurrency", "value": s.get("rate") or s["concurrency"],
            "concurrency": s["concurrency"], "rate": s.get("rate"), "t0": 0.0, "summary": data["summary"],
            "requests": res.requests_json(), **({"goodput": data["goodput"], "slo_met": data["slo_met"]} if "goodput" in data else {})}
    return {"kind": "llmctl-bench-sweep", "version": 1,
            "settings": {"url": s["url"], "model": s["model"], "mode": step["mode"], "values": [step["value"]],
                         "duration_s": res.seconds, "prompt_tokens": s["prompt_tokens"], "max_tokens": s["max_tokens"]},
            "started": time.time() - res.seconds, "ended": time.time(), "interrupted": res.interrupted,
            "slo": data.get("slo"), "steps": [step], "replicas": data["replicas"], "inflight": data["inflight"]}


def _step_line(i: int, res) -> str:
    s = res.summary()
    t = s["tpot_s"]
    return (f"step {i + 1}: {res.settings.rate or res.settings.concurrency:g} {'req/s' if res.settings.rate else 'concurrent'}: "
            f"{s['req_per_s']:.2f} req/s · {s['output_tokens_per_s']:.1f} tok/s · TTFT p95 {_ms(s['ttft_s']['p95'])} · "
            f"ITL p95 {_ms(t['p95'])}" + (f" · busy cores {s['busy_cores']:.2f}" if s.get("busy_cores") is not None else ""))


def _sweep_cmd(app_name, model, sweep_text, duration, slo_obj, prompt_tokens, max_tokens, concurrency, url, address,
               json_out, output, report, api_key_env=None, repeat=1, warmup=0.0, ray_token_env=None,
               metrics_url=None) -> None:
    from rich.table import Table

    from llmctl.loadsweep import sweep
    from llmctl.perf.slo import parse_sweep

    steps = parse_sweep(sweep_text)
    if duration is None:
        raise UsageError("--duration: a sweep holds each step for --duration seconds; pass it (e.g. --duration 30)")
    holds: dict[int, int] = {}

    def on_step(i: int, res) -> None:
        holds[i] = holds.get(i, 0) + 1
        line = _step_line(i, res) + (f" (pass {holds[i]} of {repeat})" if repeat > 1 else "")
        err.print(line, markup=False, highlight=False)

    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        data = sweep(app_name, steps=steps, duration=duration, slo=slo_obj, model=model, url=url, address=address,
                     prompt_tokens=prompt_tokens, max_tokens=max_tokens, max_concurrency=max(concurrency, 1),
                     stop=stop, on_step=None if json_out else on_step,
                     api_key_env=api_key_env, repeat=repeat, warmup=warmup, ray_token_env=ray_token_env,
                     metrics_url=metrics_url)
    finally:
        signal.signal(signal.SIGINT, previous)
    if output is not None:
        _write_json(output, data)
    if report is not None:
        from llmctl.perf.report import write_report

        written = write_report(data, report)
        err.print(f"report: {written['index']}", markup=False, highlight=False)
    if json_out:
        print_json(data)
        return
    s = data["settings"]
    held = (f"{s['duration_s']:g} s each" + (f" (the first {s['warmup_s']:g} s left out)" if s.get("warmup_s") else "")
            + (f", {s['repeat']} times (pooled)" if s.get("repeat", 1) > 1 else ""))
    t = Table(title=f"{s['model']} at {s['url']}: sweep of {s['mode']}, {held}, "
                    f"{s['prompt_tokens']} prompt / {s['max_tokens']} output tokens", title_justify="left")
    cols = ["step", "req/s", "tok/s", "TTFT p50", "TTFT p95", "ITL p50", "ITL p95", "latency p95", "failed"]
    if slo_obj is not None:
        cols += ["goodput req/s", "SLO"]
    for c in cols:
        t.add_column(c, justify="right")
    for st in data["steps"]:
        m = st["summary"]
        row = [f"{st['value']:g}" + (" req/s" if st["mode"] == "rate" else ""), f"{m['req_per_s']:.2f}", f"{m['output_tokens_per_s']:.1f}",
               _ms(m["ttft_s"]["p50"]), _ms(m["ttft_s"]["p95"]), _ms(m["tpot_s"]["p50"]), _ms(m["tpot_s"]["p95"]),
               _ms(m["latency_s"]["p95"]), str(m["failed"])]
        if slo_obj is not None:
            row += [f"{st['goodput']['req_per_s']:.2f}", "✓" if st["slo_met"] else "✗"]
        t.add_row(*row)
    out.print(t)
    if slo_obj is not None:
        mr = data["max_rate_within_slo"]
        out.print(f"highest rate within {slo_obj.text()}: " + (f"{mr['req_per_s']:.2f} req/s" + (" (interpolated between steps)" if mr["interpolated"] else "")
                  if mr["req_per_s"] is not None else "none (the first step already missed a target)"), markup=False)
    if output is not None:
        out.print(f"Next: llmctl plan --model MODEL --gpu GPU --profile {output} --slo {slo_obj.text() if slo_obj else 'ttft_p95=500ms,itl_p95=40ms'}", markup=False)
