"""`llmctl history [APP]` and `llmctl rollback APP [--to N]` (issue 23)."""

from __future__ import annotations

from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import err, out, print_json
from llmctl.cli.flags import cli_text
from llmctl.cli.options import AddressOpt, JsonOpt, RayTokenEnvOpt


@app.command("history")
def history_cmd(
    app_name: Annotated[Optional[str], typer.Argument(metavar="APP", help="Application (default: every one with a history on the cluster).")] = None,
    address: AddressOpt = None,
    ray_token_env: RayTokenEnvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List the configs llmctl deployed of each app on the cluster: number, time, what changed."""
    import time

    from llmctl.launch.rollback import history

    rows = history(app_name, address=address, ray_token_env=ray_token_env)
    if json_out:
        print_json({name: [r.to_json() for r in rs] for name, rs in rows.items()})
        return
    if not rows:
        out.print("no history on this cluster: llmctl records each config `llmctl up` deploys", markup=False)
        return
    from rich.table import Table

    for name, rs in rows.items():
        t = Table(title=name, title_justify="left")
        for col in ("#", "deployed", "", "change"):
            t.add_column(col, overflow="fold")
        for r in rs:
            t.add_row(str(r.n), time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.time)), "now" if r.current else "", r.diff)
        out.print(t)
    out.print("next: llmctl rollback APP [--to N] (shows the plan first)", markup=False)


@app.command("rollback")
def rollback_cmd(
    app_name: Annotated[str, typer.Argument(metavar="APP", help="Application to roll back.", show_default=False)],
    to: Annotated[Optional[int], typer.Option("--to", metavar="N", help="History entry to redeploy (default: the newest one that differs from what runs; see `llmctl history APP`).")] = None,
    address: AddressOpt = None,
    ray_token_env: RayTokenEnvOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", metavar="SECONDS", help="Seconds to wait for RUNNING.")] = 900.0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan and change nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Apply the plan without asking.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Redeploy an earlier config of APP from its history; the plan is shown first.

    Without a terminal to confirm on, it applies only with --yes (a CI job
    never redeploys an old config by accident); --dry-run shows the plan."""
    import sys

    from llmctl.cli.up import _confirm_on_terminal, show
    from llmctl.cli.views import print_ready
    from llmctl.errors import UsageError
    from llmctl.launch.rollback import iter_rollback

    if not (yes or dry_run or (sys.stdin.isatty() and sys.stdout.isatty())):
        raise UsageError("--yes: no terminal to confirm the rollback on; pass --yes to apply it "
                         "(or --dry-run to see its plan first)", param="yes")
    result = show(iter_rollback(app_name, to=to, address=address, timeout=timeout, dry_run=dry_run,
                                confirm=None if yes or dry_run else _confirm_on_terminal, ray_token_env=ray_token_env),
                  dry_run=dry_run, json_out=json_out)
    if result is None:
        return
    if json_out:
        print_json(result.to_json())
    else:
        err.print(cli_text(f"rolled back {app_name}"), markup=False)
        print_ready(result)
