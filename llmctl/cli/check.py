"""`llmctl check SERVE_FILE`: can the cluster hold it? (preflight, nothing deployed).
`llmctl check --security [APP]`: what a running app exposes (issue 22)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import err, out, print_json
from llmctl.cli.options import AddressOpt, RayTokenEnvOpt, JsonOpt
from llmctl.errors import EXIT_USAGE


@app.command("check")
def check_cmd(
    file: Annotated[Optional[str], typer.Argument(metavar="FILE|APP", help="A serve config (serve_*.yaml); with --security, the running app to check (default: every app).", show_default=False)] = None,
    address: AddressOpt = None,
    ray_token_env: RayTokenEnvOpt = None,
    json_out: JsonOpt = False,
    no_versions: Annotated[bool, typer.Option("--no-versions", help="Skip asking the cluster's head node which Ray and vLLM it runs (a Ray job of a few seconds).")] = False,
    security: Annotated[bool, typer.Option("--security", help="Check a running app instead: every route it mounts without / with a wrong / with the right API key, the dashboard and job API without the Ray token, and Ray's APIs and logs for the HF token and the API key. Exit 2 on any finding.")] = False,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", metavar="NAME", help="With --security: the variable holding the API key (default: the one the app's ingress names).")] = None,
) -> None:
    """Check a serve config against the cluster's nodes and free resources before deploying. Exit 0 if it can start, 2 if not.

    A model with a LoRA path: its store is read with the settings the replicas
    will get (endpoint, region, credentials) and every adapter in it is checked
    against the model (rank, base model, target modules)."""
    if security:
        _security(file, address, api_key_env, json_out, ray_token_env)
        return
    if file is None:
        from llmctl.errors import UsageError

        raise UsageError("FILE: give a serve config to check (or --security [APP] to check a running app)")
    if api_key_env:
        from llmctl.errors import UsageError

        raise UsageError("--api-key-env: only applies with --security")
    file = Path(file)
    from llmctl.launch import preflight
    from llmctl.launch.address import resolve_target
    from llmctl.launch.serve_api import ServeClient
    from llmctl.launch.versions import report
    from llmctl.validate import load_deployable

    target = resolve_target(address, ray_token_env)
    config = load_deployable(file, local_node=target.is_local)
    with ServeClient(target.dashboard_url, token=target.ray_token) as client:
        res = preflight.check(config, client)
        versions = None if no_versions else report(client, config)
    from llmctl.launch.lora import store_check

    lora_diags, lora_reports = store_check(config, str(file), target)
    lora_errors = [d for d in lora_diags if d.is_error]
    if json_out:
        print_json({**res.to_json(), **({"versions": versions.data} if versions is not None else {}),
                    "lora": {"ok": not lora_errors, "diagnostics": [d.to_json() for d in lora_diags],
                             "stores": [{"model_id": r.model_id, "path": r.uri, "settings": r.settings, "adapters": r.adapters,
                                         "refused": r.bad, "store_error": r.store} for r in lora_reports]}})
    else:
        for d in res.demands:
            bundles = " + ".join("{" + ", ".join(f"{k}: {v:g}" for k, v in b.items()) + "}" for b in d.bundles)
            out.print(f"{d.app}/{d.deployment}: {d.min_replicas}-{d.max_replicas} replicas of {bundles} ({d.strategy})", markup=False)
        for n in res.nodes:
            have = ", ".join(f"{k} {n.free.get(k, 0):g}/{v:g}" for k, v in sorted(n.total.items()))
            out.print(f"node {n.ip}: free/total {have}", markup=False)
        if versions is not None and versions.info:
            out.print(versions.info, markup=False)
        for w in res.warnings + (versions.warnings if versions is not None else []):
            err.print(f"warning: {w}", markup=False, highlight=False)
        for e in res.errors:
            err.print(f"error: {e}", markup=False, highlight=False)
        for r in lora_reports:
            if r.store is None:
                good = [a for a in r.adapters if a not in r.bad]
                out.print(f"LoRA {r.model_id}: {len(r.adapters)} adapter(s) in {r.uri} ({r.settings}); servable: "
                          f"{', '.join(good) or 'none'}", markup=False)
        for d in lora_diags:
            err.print(str(d), markup=False, highlight=False)
        if res.ok and not lora_errors:
            out.print(f"OK: the cluster can start it (checked in {res.seconds:.2f}s); next: llmctl up {file}", markup=False)
        elif res.ok:
            err.print(f"{len(lora_errors)} LoRA error(s): the app would deploy, then fail those requests", markup=False)
    if not res.ok or lora_errors:
        raise typer.Exit(EXIT_USAGE)



def _security(app_name, address, api_key_env, json_out, ray_token_env) -> None:
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
