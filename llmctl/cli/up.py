"""`llmctl up FILE`: validate, deploy, wait until RUNNING."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.cli import app
from llmctl.cli.console import out, print_json
from llmctl.cli.options import AddressOpt, JsonOpt
from llmctl.errors import UsageError

from llmctl.cli.views import ProgressView, follow_logs, next_steps, print_ready

TimeoutOpt = Annotated[float, typer.Option("--timeout", metavar="SECONDS", help="Seconds to wait for RUNNING before giving up (the app keeps deploying).")]

@app.command("up")
def up_cmd(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A serve config (serve_*.yaml from `llmctl gen-config`).", show_default=False)],
    address: AddressOpt = None,
    timeout: TimeoutOpt = 900.0,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Return right after the config is accepted.")] = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="After RUNNING, tail the app's logs until Ctrl-C (the app keeps running).")] = False,
    num_cpus: Annotated[Optional[int], typer.Option("--num-cpus", metavar="N", help="Logical CPUs of a local head llmctl starts (default: max(8, cores)).")] = None,
    no_preflight: Annotated[bool, typer.Option("--no-preflight", help="Skip checking the cluster's resources before deploying.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Validate FILE, deploy it (starting a local Ray head if no cluster is given), wait until RUNNING."""
    from llmctl import launch

    if timeout <= 0:
        raise UsageError(f"--timeout must be positive (got {timeout:g})")
    view = ProgressView()
    result = None
    try:
        for ev in launch.up(file, address=address, timeout=timeout, wait=not no_wait, num_cpus=num_cpus, preflight=not no_preflight):
            if isinstance(ev, launch.Step):
                view.step(ev.message)
            elif isinstance(ev, launch.Progress):
                view.update(ev)
            else:
                result = ev
    finally:
        view.close()
    assert result is not None
    if json_out:
        print_json(result.to_json())
    elif not result.running:
        names = ", ".join(f"{a.name} ({a.status})" for a in result.apps) or str(file)
        out.print(f"deployed {names}; not waiting for RUNNING", markup=False)
        out.print(next_steps(result.apps[0].name if result.apps else "APP", result.local), markup=False)
    else:
        print_ready(result)
    if follow and result.running:
        from llmctl.launch.address import resolve_target

        follow_logs(resolve_target(address), result.apps[0].name if len(result.apps) == 1 else None, 20)

