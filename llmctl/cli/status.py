"""`llmctl status`: applications, deployments, replicas, endpoint."""

from __future__ import annotations

from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import out, print_json
from llmctl.cli.options import AddressOpt, RayTokenEnvOpt, JsonOpt
from llmctl.errors import EXIT_FAILED, EXIT_OK
from llmctl import serve_facts as sf

from llmctl.cli.views import engines_table, replicas_text

def _status_table(rep):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = Text(f"cluster: {rep.dashboard_url}" + (" (local, started by llmctl)" if rep.local else ""))
    if rep.ray_token_file:
        from llmctl.launch.raytoken import access_hint

        head.append("\n" + access_hint(rep.dashboard_url, rep.ray_token_file))
    if len(rep.nodes) > 1:
        head.append("\nnodes: " + "; ".join(
            f"{n['ip']}{' (head)' if n['head'] else ''} {n['state']}" + (f", proxy {n['proxy']} {n['proxy_url']}" if n["proxy"] else "")
            for n in rep.nodes))
    if not rep.apps:
        return Group(head, Text("no applications; deploy one with `llmctl up serve_*.yaml`"))
    t = Table(expand=False)
    for col in ("app", "status", "route", "models", "deployment", "replicas", "endpoint"):
        t.add_column(col, overflow="fold")
    for a in rep.apps:
        deps = a.deployments or []
        first = True
        for d in deps or [None]:
            t.add_row(
                a.name if first else "",
                a.status if first else "",
                (a.route_prefix or "") if first else "",
                ", ".join(a.model_ids) if first else "",
                f"{d.name} ({d.status})" + (f": {d.part}" if d.part else "") if d else "",
                replicas_text(d.replicas, d.target_replicas) if d else "",
                ((a.endpoint or "") + (f" (API key ${a.api_key_env})" if a.endpoint and a.api_key_env else "")) if first else "",
            )
            first = False
    msgs = []
    for a in rep.apps:
        for d in a.deployments:
            if d.autoscaling:  # Serve's own words: "Upscaling from 1 to 2 replicas."
                msgs.append(Text(f"{a.name}/{d.name}: {d.autoscaling}", style="cyan"))
            if d.rollout:  # mid-rollout: old and new replicas, the wave
                msgs.append(Text(f"{a.name}/{d.name}: {d.rollout}", style="cyan"))
        if a.status != sf.APP_RUNNING:
            if a.message:
                msgs.append(Text(f"{a.name}: {a.message.splitlines()[0]}", style="yellow"))
            for d in a.deployments:
                if d.message and not d.autoscaling:
                    from llmctl.launch import reason_from_message

                    first = d.message.splitlines()[0]
                    reason = reason_from_message(d.message, max_lines=2)
                    text = first if reason == first else f"{first} {reason}"
                    msgs.append(Text(f"{a.name}/{d.name}: {text}", style="yellow"))
    for app_name, found in rep.diagnoses.items():
        for model_id, d in found:
            msgs.append(Text(f"{app_name}/{model_id}: cause: {d.cause}", style="yellow"))
            msgs.append(Text(f"{app_name}/{model_id}: fix: {d.fix}" + (" (`llmctl up FILE --fix` applies it)" if d.changes else ""),
                             style="yellow"))
    return Group(head, t, *msgs)


@app.command("status")
def status_cmd(
    address: AddressOpt = None,
    ray_token_env: RayTokenEnvOpt = None,
    json_out: JsonOpt = False,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh every 2 s until Ctrl-C.")] = False,
    metrics: Annotated[bool, typer.Option("--metrics", help="Also each replica's vLLM engine: running and waiting requests, KV-cache usage, generation tokens/s, TTFT (from Ray's Prometheus endpoint; two scrapes 2 s apart).")] = False,
    metrics_url: Annotated[Optional[str], typer.Option("--metrics-url", metavar="URL", help="Ray's metrics endpoint of the node running the replicas (default: the local head's).")] = None,
) -> None:
    """Applications on the cluster: status, route, models, replicas, endpoint. Exit 0 if all RUNNING, 1 if not, 3 if no cluster."""
    from llmctl import launch

    rep = launch.status(address, ray_token_env=ray_token_env)
    if metrics or metrics_url:
        from llmctl.launch.metrics import engine_metrics

        url, engines = engine_metrics(address, metrics_url, interval=2.0, ray_token_env=ray_token_env)
        if json_out:
            print_json({**rep.to_json(), "metrics_url": url, "engines": [e.to_json() for e in engines]})
        else:
            out.print(_status_table(rep))
            out.print(engines_table(engines, url))
        raise typer.Exit(EXIT_OK if rep.all_running else EXIT_FAILED)
    if watch:
        rep = _watch(address, rep, json_out, ray_token_env)
    elif json_out:
        print_json(rep.to_json())
    else:
        out.print(_status_table(rep))
    raise typer.Exit(EXIT_OK if rep.all_running else EXIT_FAILED)


def _watch(address, rep, json_out: bool, ray_token_env=None):
    from llmctl import launch
    from llmctl.cli.views import ctrl_c

    with ctrl_c() as pressed:
        try:
            if out.is_terminal and not json_out:
                from rich.live import Live

                with Live(_status_table(rep), console=out, refresh_per_second=2) as live:
                    while not pressed.wait(2):
                        rep = launch.status(address, ray_token_env=ray_token_env)
                        live.update(_status_table(rep))
            else:
                last = None
                while not pressed.is_set():
                    text = rep.to_json()
                    if text != last:
                        if json_out:
                            print_json(text)
                        else:
                            out.print(_status_table(rep))
                        last = text
                    if pressed.wait(2):
                        break
                    rep = launch.status(address, ray_token_env=ray_token_env)
        except KeyboardInterrupt:
            pass
    return rep

