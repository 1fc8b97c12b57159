"""`llmctl bench [APP]`: load an app's OpenAI endpoint, watch the replicas.

Live view on stderr (a table in a terminal, a line every few seconds
otherwise), the summary on stdout, `--json` for scripts. Exit 0 when at least
one request succeeded (Ctrl-C ends the run early and still prints the
summary), 1 when every request failed, 2 for bad flags, 3 with no cluster,
130 when Ctrl-C came before any request finished.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import err, out, print_json
from llmctl.cli.options import AddressOpt, JsonOpt
from llmctl.errors import EXIT_FAILED, EXIT_INTERRUPTED


def _ms(v: Optional[float]) -> str:
    return "-" if v is None else (f"{v * 1000:.1f} ms" if v < 0.01 else f"{v * 1000:.0f} ms")


def _line(res) -> str:
    s = res.summary()
    reps = "; ".join(f"{dep} {pts[-1]['running']}/{pts[-1]['target']}" for dep, pts in res.replica_timeline().items()
                     if dep.startswith("LLMServer"))
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
    model: Annotated[Optional[str], typer.Option("--model", metavar="ID", help="Model id to request (default: the app's first); BASE:ADAPTER requests a LoRA adapter of BASE (its first request loads it).")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", metavar="N", help="Requests in flight at once.")] = 8,
    requests: Annotated[Optional[int], typer.Option("--requests", "-n", metavar="N", help="Stop after N requests (default: 5 × concurrency).")] = None,
    duration: Annotated[Optional[float], typer.Option("--duration", "-d", metavar="SECONDS", help="Stop after this many seconds instead.")] = None,
    prompt_tokens: Annotated[int, typer.Option("--prompt-tokens", metavar="N", help="About this many prompt tokens per request.")] = 128,
    max_tokens: Annotated[int, typer.Option("--max-tokens", metavar="N", help="Output tokens per request (ignore_eos: exactly this many).")] = 128,
    no_stream: Annotated[bool, typer.Option("--no-stream", help="Non-streaming requests (no TTFT / inter-token latency).")] = False,
    url: Annotated[Optional[str], typer.Option("--url", metavar="URL", help="An OpenAI endpoint to load directly (http://host:port/v1), no cluster lookup.")] = None,
    address: AddressOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Load an app's OpenAI endpoint: req/s, tokens/s, TTFT and inter-token latency, and the replicas over time."""
    from llmctl.loadgen import bench

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
                    stop=stop, on_progress=None if json_out else progress)
    finally:
        signal.signal(signal.SIGINT, previous)
        if live is not None:
            live.stop()
    if json_out:
        print_json(res.to_json())
    else:
        s = res.settings
        head = (f"{s.model} at {s.url}: {s.concurrency} concurrent, {s.prompt_tokens} prompt / {s.max_tokens} output tokens"
                + (", interrupted" if res.interrupted else ""))
        out.print(_table(res, head))
        for line in _timeline_text(res):
            out.print(line, markup=False)
        for e, n in res.errors().items():
            err.print(f"warning: {n} request(s) failed: {e}", markup=False)
        for d in res.diagnoses():
            err.print(f"error: {d.cause}\n  fix: {d.fix}", markup=False, highlight=False)
    if res.done == 0:
        # Ctrl-C before any request finished measured nothing but broke nothing either.
        raise typer.Exit(EXIT_INTERRUPTED if res.interrupted and res.failed == 0 else EXIT_FAILED)
