"""`llmctl top`: each replica's vLLM engine, live (like `top` for the cluster).

Reads Ray's Prometheus endpoint every --interval seconds (vLLM's metrics,
exported by Ray Serve LLM) and Serve's replica counts; a live table in a
terminal, one block per refresh otherwise. Ctrl-C (or --iterations) ends it.
"""

from __future__ import annotations

import time
from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import out, print_json
from llmctl.cli.options import AddressOpt, RayTokenEnvOpt, JsonOpt
from llmctl.cli.views import engines_table
from llmctl.errors import UsageError


@app.command("top")
def top_cmd(
    address: AddressOpt = None,
    ray_token_env: RayTokenEnvOpt = None,
    metrics_url: Annotated[Optional[str], typer.Option("--metrics-url", metavar="URL", help="Ray's metrics endpoint of the node running the replicas (default: the local head's).")] = None,
    interval: Annotated[float, typer.Option("--interval", metavar="SECONDS", help="Seconds between refreshes.")] = 2.0,
    iterations: Annotated[Optional[int], typer.Option("--iterations", metavar="N", help="Stop after N refreshes (default: until Ctrl-C).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Live vLLM engine metrics per replica: running/waiting requests, KV-cache usage, generation tokens/s, TTFT."""
    from llmctl.launch.metrics import engine_metrics, metrics_url as resolve
    from llmctl.perf.metrics import MetricsReader

    if interval <= 0:
        raise UsageError(f"--interval: must be a positive number of seconds (got {interval:g})")
    if iterations is not None and iterations < 1:
        raise UsageError(f"--iterations: must be a positive integer (got {iterations})")
    url = resolve(address, metrics_url, ray_token_env=ray_token_env)
    reader = MetricsReader(url)
    engine_metrics(address, url, reader=reader)  # the first scrape: rates from the next one on
    n = 0
    live = None
    try:
        while iterations is None or n < iterations:
            time.sleep(interval)
            _, engines = engine_metrics(address, url, reader=reader)
            n += 1
            if json_out:
                print_json({"t": time.time(), "metrics_url": url, "engines": [e.to_json() for e in engines]})
            elif out.is_terminal:
                from rich.live import Live

                if live is None:
                    live = Live(engines_table(engines, url), console=out, refresh_per_second=2)
                    live.start()
                else:
                    live.update(engines_table(engines, url))
            else:
                out.print(engines_table(engines, url))
    except KeyboardInterrupt:
        pass
    finally:
        if live is not None:
            live.stop()
