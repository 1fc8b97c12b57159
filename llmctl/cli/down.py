"""`llmctl down [APP]`: delete apps; --cluster also stops the local head."""

from __future__ import annotations

from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import err, out, print_json
from llmctl.cli.flags import cli_text
from llmctl.cli.options import AddressOpt, RayTokenEnvOpt, JsonOpt

@app.command("down")
def down_cmd(
    app_name: Annotated[Optional[str], typer.Argument(metavar="APP", help="Application to delete (default: all).")] = None,
    address: AddressOpt = None,
    ray_token_env: RayTokenEnvOpt = None,
    cluster: Annotated[bool, typer.Option("--cluster", help="Also stop the local Ray head llmctl started (by its PIDs).")] = False,
    timeout: Annotated[float, typer.Option("--timeout", metavar="SECONDS", help="Seconds to wait for the apps to be gone.")] = 120.0,
    json_out: JsonOpt = False,
) -> None:
    """Delete one app or all apps and wait until they are gone; --cluster also stops the local head."""
    from llmctl import launch

    res = None
    for ev in launch.iter_down(app_name, address=address, stop_cluster=cluster, timeout=timeout, ray_token_env=ray_token_env):
        if isinstance(ev, launch.Step):
            err.print(cli_text(ev.text), markup=False)
        else:
            res = ev
    assert res is not None
    if json_out:
        print_json(
            {
                "removed": res.removed,
                "remaining": res.remaining,
                "cluster_stopped": res.cluster_stopped,
                "stopped_pids": res.stop.pids if res.stop else [],
            }
        )
        return
    if res.cluster_stopped:
        n = len(res.stop.pids) if res.stop else 0
        apps = f" and its apps ({', '.join(res.removed)})" if res.removed else ""
        out.print(f"stopped the local Ray head{apps}: {n} processes, none left" if n else "no local Ray head was running", markup=False)
        out.print("next: llmctl up serve_*.yaml starts a new one", markup=False)
        return
    if res.removed:
        out.print(f"deleted {', '.join(res.removed)}", markup=False)
    else:
        out.print("no applications to delete", markup=False)
    if res.remaining:
        out.print(f"still running: {', '.join(res.remaining)}; next: llmctl status", markup=False)
    else:
        out.print("next: llmctl up serve_*.yaml · llmctl down --cluster stops the local Ray head", markup=False)

