"""`llmctl lora ls APP` and `llmctl lora push DIR APP/NAME`: the adapters of a running app."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.console import err, out, print_json
from llmctl.cli.options import AddressOpt, RayTokenEnvOpt, JsonOpt
from llmctl.cli.root import app
from llmctl.errors import UsageError

lora_app = typer.Typer(help="LoRA adapters of a running app: list them, add one without a redeploy.", no_args_is_help=True,
                       rich_markup_mode=None)
app.add_typer(lora_app, name="lora")


@lora_app.command("ls")
def ls_cmd(
    app_name: Annotated[str, typer.Argument(metavar="APP", help="The application (llmctl status lists them).")],
    address: AddressOpt = None,
    ray_token_env: RayTokenEnvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Adapters in the app's store (with what `llmctl check` finds wrong in each) and loaded per replica."""
    from llmctl.launch.address import resolve_target
    from llmctl.launch.lora import ls

    listings = ls(resolve_target(address, ray_token_env), app_name)
    if json_out:
        print_json({"models": [lst.to_json() for lst in listings]})
    for lst in [] if json_out else listings:
        out.print(f"{lst.app} · {lst.model_id} · adapters from {lst.uri} ({lst.settings})", markup=False)
        if lst.store_error:
            err.print(f"error: the store cannot be read: {lst.store_error}; every adapter request answers 404 "
                      f"(`llmctl check` names the fix)", markup=False, highlight=False)
        loaded_anywhere = {a for names in lst.loaded.values() for a in names}
        for name in lst.available:
            where = [rid for rid, names in lst.loaded.items() if name in names]
            state = f"loaded on {', '.join(where)}" if where else "not loaded yet"
            if name in lst.problems:
                state = "refused by vLLM when requested" if not where else state
            out.print(f"  {lst.model_id}:{name:<24} {state}", markup=False)
            for p in lst.problems.get(name, []):
                err.print(f"    error: {p}", markup=False, highlight=False)
        for name in sorted(loaded_anywhere - set(lst.available)):
            out.print(f"  {lst.model_id}:{name:<24} loaded, no longer in the store", markup=False)
        if not lst.available and not lst.store_error:
            out.print("  (no adapters in the store yet)", markup=False)
        reps = ", ".join(f"{rid} ({len(n)} loaded)" for rid, n in lst.loaded.items()) or "none running"
        out.print(f"  replicas: {reps}", markup=False)
        for d in lst.failures:
            err.print(f"  load failure seen in the logs: {d.cause}\n    fix: {d.fix}", markup=False, highlight=False)
        if lst.available:
            out.print(f"next: llmctl bench {lst.app} --model-id {lst.model_id}:{lst.available[0]} --requests 1 · "
                      f"llmctl lora push DIR {lst.app}/NAME", markup=False)


@lora_app.command("push")
def push_cmd(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="A peft adapter directory (adapter_config.json, adapter_model.safetensors).")],
    where: Annotated[str, typer.Argument(metavar="APP/NAME", help="The application and the adapter's name in its store (requested as MODEL:NAME); or s3://BUCKET/PATH/NAME to fill a store before deploying (this shell's AWS settings).")],
    model: Annotated[Optional[str], typer.Option("--model-id", metavar="ID", help="The base model, when the app serves several with LoRA.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Push an adapter llmctl expects vLLM to refuse (rank, base model, target modules).")] = False,
    address: AddressOpt = None,
    ray_token_env: RayTokenEnvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Upload an adapter to the app's LoRA store: the next request for MODEL:NAME loads it, no redeploy."""
    from llmctl.launch.address import resolve_target
    from llmctl.launch.lora import push, push_to_store

    if where.startswith("s3://"):
        res = push_to_store(directory, where)
        out.print(f"pushed {directory} to {res.uri}/{res.name}/ ({len(res.keys)} objects)"
                  + (" (replaced)" if res.replaced else ""), markup=False)
        return
    app_name, sep, name = where.partition("/")
    if not sep or not app_name or not name:
        raise UsageError(f"APP/NAME: expected an application and an adapter name, e.g. llm_app/{directory.name}")
    try:
        res = push(resolve_target(address, ray_token_env), directory, app_name, name, model=model, force=force)
    except UsageError as e:
        if "force pushes it anyway" in e.message:
            raise UsageError(e.message.replace("force pushes it anyway", "--force pushes it anyway")) from None
        raise
    if json_out:
        print_json({"app": res.app, "model": res.request_model, "path": f"{res.uri}/{res.name}", "objects": res.keys,
                    "replaced": res.replaced, "warnings": res.warnings})
        return
    for w in res.warnings:
        err.print(f"warning: {w}", markup=False, highlight=False)
    out.print(f"pushed {directory} to {res.uri}/{res.name}/ ({len(res.keys)} objects); request it as model "
              f"\"{res.request_model}\" (no redeploy)", markup=False)
    out.print(f"next: llmctl bench {res.app} --model-id {res.request_model} --requests 1 · llmctl lora ls {res.app}", markup=False)

