"""`llmctl up FILE`: validate, deploy, wait until RUNNING."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import err, out, print_json
from llmctl.cli.flags import cli_text
from llmctl.cli.options import AddressOpt, RayTokenEnvOpt, JsonOpt
from llmctl.errors import UsageError

from llmctl.cli.views import ProgressView, follow_logs, next_steps, print_ready

def _approve_fix(yes: bool):
    """``approve`` of the core's fix loop (llmctl.launch.fix.iter_up_fixing): --yes, else ask on a terminal."""
    import sys

    from llmctl.cli.ask import confirm

    def approve(plan) -> bool:
        if yes:
            return True
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise UsageError(f"--fix: {plan.file} would change as shown; pass --yes to apply it without a terminal")
        return confirm(f"Apply this change to {plan.file}?", True)

    return approve


def _confirm_on_terminal(plan) -> bool:
    """Ask before an update that changes a running app, on a terminal only.
    Without one (CI), ``up`` applies as it always has: the plan is printed first."""
    import sys

    from llmctl.cli.ask import confirm
    from llmctl.rollout import IN_PLACE, REMOVED_APP, ROLLING

    if not any(k in (IN_PLACE, ROLLING, REMOVED_APP) for k in plan.kinds().values()):
        return True  # new applications only: nothing running changes
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return True
    return confirm("Apply this plan?", False)


def show(events, *, dry_run: bool, json_out: bool):
    """:func:`drive` in a progress view; a dry run ends with its note and returns None, else the result."""
    view = ProgressView()
    try:
        result = drive(events, view, dry_run=dry_run, json_out=json_out)
    finally:
        view.close()
    assert result is not None
    if dry_run:
        if not json_out:
            out.print("dry run: nothing was changed", markup=False)
        return None
    return result


TimeoutOpt = Annotated[float, typer.Option("--timeout", metavar="SECONDS", help="Seconds to wait for RUNNING before giving up (the app keeps deploying).")]

def drive(events, view, *, dry_run: bool, json_out: bool):
    """Show an up / rollback event stream (the plan, steps, progress) and
    return its result: a dry run prints the plan (as JSON with --json)."""
    from llmctl import launch
    from llmctl.launch import fix as fixmod

    result = None
    for ev in events:
        if isinstance(ev, fixmod.FixNeeded):
            view.close()
            err.print(f"error: {cli_text(ev.error)}", markup=False, highlight=False)
        elif isinstance(ev, fixmod.FixProposed):
            err.print(f"fix for {ev.plan.model_id}: {ev.plan.fix}", markup=False, highlight=False)
            err.print(ev.plan.diff(), markup=False, highlight=False)
        elif isinstance(ev, fixmod.FixApplied):
            err.print(f"changed {ev.plan.file} (the old one is {ev.backup}); deploying again …", markup=False)
        elif isinstance(ev, launch.PlanReady):
            if dry_run and json_out:
                print_json(ev.plan.to_json())
            elif dry_run:
                out.print(str(ev), markup=False, highlight=False)
            else:
                view.step(str(ev))
        elif isinstance(ev, launch.Step):
            view.step(ev.text)
        elif isinstance(ev, launch.Progress):
            view.update(ev)
        else:
            result = ev
    return result


@app.command("up")
def up_cmd(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A serve config (serve_*.yaml from `llmctl gen-config`).", show_default=False)],
    address: AddressOpt = None,
    ray_token_env: RayTokenEnvOpt = None,
    timeout: TimeoutOpt = 900.0,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Return right after the config is accepted.")] = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="After RUNNING, tail the app's logs until Ctrl-C (the app keeps running).")] = False,
    num_cpus: Annotated[Optional[int], typer.Option("--num-cpus", metavar="N", help="Logical CPUs of a local head llmctl starts (default: max(8, cores)).")] = None,
    num_gpus: Annotated[Optional[int], typer.Option("--num-gpus", metavar="N", help="GPUs of a local head llmctl starts (default: Ray detects them; it honours CUDA_VISIBLE_DEVICES).", min=0)] = None,
    no_preflight: Annotated[bool, typer.Option("--no-preflight", help="Skip checking the cluster's resources before deploying.")] = False,
    fix: Annotated[bool, typer.Option("--fix", help="When a start-up failure has a mechanical fix, show it as a diff, apply it (after confirmation; the old file kept as .bak) and deploy again.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Apply the update plan (and, with --fix, fixes) without asking.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (what changes, in place or by rolling restart, the waves and extra resources) and change nothing.")] = False,
    http_host: Annotated[Optional[str], typer.Option("--http-host", metavar="HOST", help="Where Serve listens on a cluster given with --address (e.g. 0.0.0.0), instead of the file's http_options.host.")] = None,
    send_token: Annotated[bool, typer.Option("--send-token", help="Send the values of ${VAR} token references instead of the references (every dashboard client can read them).")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Validate FILE, deploy it (starting a local Ray head if no cluster is given), wait until RUNNING."""
    from llmctl import launch

    options = launch.UpOptions(address=address, ray_token_env=ray_token_env, timeout=timeout, wait=not no_wait,
                               num_cpus=num_cpus, num_gpus=num_gpus, preflight=not no_preflight, send_token=send_token,
                               http_host=http_host, dry_run=dry_run, confirm=None if yes or dry_run else _confirm_on_terminal)
    if fix:
        from llmctl.launch.fix import iter_up_fixing

        events = iter_up_fixing(file, options, approve=_approve_fix(yes))
    else:
        events = launch.iter_up(file, options)
    result = show(events, dry_run=dry_run, json_out=json_out)
    if result is None:
        return
    if json_out:
        print_json(result.to_json())
    elif not result.running:
        names = ", ".join(f"{a.name} ({a.status})" for a in result.apps) or str(file)
        out.print(f"deployed {names}; not waiting for RUNNING", markup=False)
        out.print(next_steps(result.apps[0].name if result.apps else "APP", result.local), markup=False)
    else:
        from llmctl.launch.lora import served_adapters

        print_ready(result, lora=served_adapters(result, file))
    if follow and result.running:
        from llmctl.launch.address import resolve_target

        follow_logs(resolve_target(address, ray_token_env), result.apps[0].name if len(result.apps) == 1 else None, 20)

