"""`llmctl logs [APP]`: replica and controller logs."""

from __future__ import annotations

from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import err, print_json
from llmctl.cli.options import AddressOpt, JsonOpt, RayTokenEnvOpt
from llmctl.errors import UsageError
from llmctl import serve_facts as sf

from llmctl.cli.views import follow_logs, print_logs

@app.command("logs")
def logs_cmd(
    app_name: Annotated[Optional[str], typer.Argument(metavar="APP", help="Application name (default: all).")] = None,
    address: AddressOpt = None,
    ray_token_env: RayTokenEnvOpt = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new lines until Ctrl-C.")] = False,
    lines: Annotated[int, typer.Option("--lines", "-n", metavar="N", help="Lines per log file to show first.")] = 50,
    json_out: JsonOpt = False,
) -> None:
    """Replica and controller logs of an app (local cluster: its session dir; remote: Ray's log API)."""
    from llmctl.launch import logs
    from llmctl.launch.address import resolve_target

    if lines < 0:
        raise UsageError(f"--lines must be >= 0 (got {lines})")
    target = resolve_target(address, ray_token_env)
    if follow:
        follow_logs(target, app_name, lines, json_out=json_out)
        return
    got = logs.tail(target, app_name, lines)
    if not got:
        err.print("no log lines yet", markup=False)
    if not json_out:
        print_logs(got)
    causes = []
    from llmctl.launch.serve_api import ServeClient

    with ServeClient(target.dashboard_url, token=target.ray_token) as client:
        st = client.status()
    for name, app_status in (st.get("applications") or {}).items():
        if (app_name is None or name == app_name) and sf.is_failed(app_status.get("status")):
            for model_id, d in logs.failed_app_diagnoses(target, name, st):
                causes.append({"app": name, "model_id": model_id, "cause": d.cause, "fix": d.fix})
                err.print(f"{name}/{model_id}: cause: {d.cause}", markup=False, highlight=False)
                err.print(f"{name}/{model_id}: fix: {d.fix}" + (" (`llmctl up FILE --fix` applies it)" if d.changes else ""),
                          markup=False, highlight=False)
    if json_out:
        print_json({"lines": [{"source": ln.source, "text": ln.text} for ln in got], "diagnoses": causes})
