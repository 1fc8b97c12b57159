"""`llmctl check SERVE_FILE`: can the cluster hold it? (preflight, nothing deployed;
the core is llmctl.launch.check). `llmctl security [APP]`: what a running app
exposes (issue 22); `check --security` is its old spelling, kept as a hidden alias."""

from __future__ import annotations

from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import err, out, print_json
from llmctl.cli.options import AddressOpt, RayTokenEnvOpt, JsonOpt
from llmctl.errors import EXIT_USAGE, UsageError

ApiKeyEnvOpt = Annotated[Optional[str], typer.Option("--api-key-env", metavar="NAME", help="The variable holding the API key (default: the one the app's ingress names).")]


@app.command("check")
def check_cmd(
    file: Annotated[Optional[str], typer.Argument(metavar="FILE", help="A serve config (serve_*.yaml).", show_default=False)] = None,
    address: AddressOpt = None,
    ray_token_env: RayTokenEnvOpt = None,
    json_out: JsonOpt = False,
    no_versions: Annotated[bool, typer.Option("--no-versions", help="Skip asking the cluster's head node which Ray and vLLM it runs (a Ray job of a few seconds).")] = False,
    security: Annotated[bool, typer.Option("--security", hidden=True, help="The old spelling of `llmctl security [APP]`.")] = False,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", metavar="NAME", hidden=True, help="With --security: as `llmctl security --api-key-env`.")] = None,
) -> None:
    """Check a serve config against the cluster's nodes and free resources before deploying. Exit 0 if it can start, 2 if not.

    A model with a LoRA path: its store is read with the settings the replicas
    will get (endpoint, region, credentials) and every adapter in it is checked
    against the model (rank, base model, target modules)."""
    if security:
        err.print("note: `llmctl check --security` is now `llmctl security`", markup=False, highlight=False)
        security_cmd(file, address, ray_token_env, api_key_env, json_out)
        return
    if file is None:
        raise UsageError("FILE: give a serve config to check (`llmctl security [APP]` checks a running app)")
    if api_key_env:
        raise UsageError("--api-key-env: only applies to `llmctl security`")
    from llmctl.launch.check import check

    rep = check(file, address=address, ray_token_env=ray_token_env, versions=not no_versions)
    if json_out:
        print_json(rep.to_json())
    else:
        _render(rep)
    if not rep.ok:
        raise typer.Exit(EXIT_USAGE)


def _render(rep) -> None:
    res = rep.preflight
    for d in res.demands:
        bundles = " + ".join("{" + ", ".join(f"{k}: {v:g}" for k, v in b.items()) + "}" for b in d.bundles)
        out.print(f"{d.app}/{d.deployment}: {d.min_replicas}-{d.max_replicas} replicas of {bundles} ({d.strategy})", markup=False)
    for n in res.nodes:
        have = ", ".join(f"{k} {n.free.get(k, 0):g}/{v:g}" for k, v in sorted(n.total.items()))
        out.print(f"node {n.ip}: free/total {have}", markup=False)
    if rep.versions is not None and rep.versions.info:
        out.print(rep.versions.info, markup=False)
    for w in rep.warnings:
        err.print(f"warning: {w}", markup=False, highlight=False)
    for e in res.errors:
        err.print(f"error: {e}", markup=False, highlight=False)
    for r in rep.lora_stores:
        if r.store is None:
            good = [a for a in r.adapters if a not in r.bad]
            out.print(f"LoRA {r.model_id}: {len(r.adapters)} adapter(s) in {r.uri} ({r.settings}); servable: "
                      f"{', '.join(good) or 'none'}", markup=False)
    for d in rep.lora_diagnostics:
        err.print(str(d), markup=False, highlight=False)
    if rep.ok:
        out.print(f"OK: the cluster can start it (checked in {res.seconds:.2f}s); next: llmctl up {rep.file}", markup=False)
    elif res.ok:
        err.print(f"{len(rep.lora_errors)} LoRA error(s): the app would deploy, then fail those requests", markup=False)


@app.command("security")
def security_cmd(
    app_name: Annotated[Optional[str], typer.Argument(metavar="APP", help="The running app to check (default: every app).", show_default=False)] = None,
    address: AddressOpt = None,
    ray_token_env: RayTokenEnvOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Check what a running app exposes. Exit 0 with no finding, 2 on any.

    Every route it mounts without / with a wrong / with the right API key, the
    dashboard and job API without the Ray token, and Ray's APIs and logs for
    the HF token and the API key (never printed)."""
    from rich.table import Table

    from llmctl.launch.security import security_check

    rep = security_check(app_name, address=address, api_key_env=api_key_env, ray_token_env=ray_token_env)
    if json_out:
        print_json(rep.to_json())
    else:
        t = Table(title=f"security of {', '.join(rep.apps) or 'no app'} on {rep.dashboard_url}", title_justify="left")
        for col in ("area", "target", "check", "result", "verdict"):
            t.add_column(col, overflow="fold")
        for r in rep.rows:
            t.add_row(r.area, r.target, r.check, r.result, "[red]FINDING[/red]" if r.finding else "ok")
        out.print(t)
        n = len(rep.findings)
        (err if n else out).print(f"{n} finding(s)" if n else f"no findings ({len(rep.rows)} checks, {rep.seconds:.1f}s)",
                                  markup=False)
    if rep.findings:
        raise typer.Exit(EXIT_USAGE)
