"""`llmctl validate FILE...`: Ray's schemas plus llmctl's deeper checks."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import err, out, print_json
from llmctl.cli.options import JsonOpt
from llmctl.errors import EXIT_USAGE, UsageError


@app.command("validate")
def validate_cmd(
    ctx: typer.Context,
    files: Annotated[Optional[List[Path]], typer.Argument(metavar="FILE", help="Serve configs (serve_*.yaml), model configs (model_config/*.yaml) and/or RayService manifests.")] = None,
    local: Annotated[bool, typer.Option("--local", help="The apps will run on this machine (llmctl up on the local head): a local model path or a class that is missing here is an error, not a warning.")] = False,
    working_dir: Annotated[Optional[Path], typer.Option("--working-dir", metavar="DIR", help="Directory Ray builds the app from, where relative llm_configs paths are opened (default: the current directory, as with serve run).", file_okay=False)] = None,
    vllm_version: Annotated[Optional[str], typer.Option("--vllm-version", metavar="X.Y.Z", help="The vLLM the replicas run: engine_kwargs is checked against its arguments (default: the one the installed Ray pins).")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too (exit 2): for CI that wants every misbehaviour fixed.")] = False,
    remote: Annotated[bool, typer.Option("--remote", help="Also read each LoRA store (s3://) with the settings the replicas get, and check every adapter in it (rank, base model, target modules).")] = False,
    explain: Annotated[Optional[str], typer.Option("--explain", metavar="CODE", help="Print what a diagnostic code means, its severity and what to do (docs/diagnostics.md lists them all).")] = None,
    json_: JsonOpt = False,
) -> int:
    """Check config files before launch; one line per problem: file:line: field: message.

    Errors are what Ray or vLLM refuses (exit 2); warnings what deploys but
    will not behave as written (exit 0, or 2 with --strict); notes what was
    not checked. A check that crashes (check-failed) makes the result
    incomplete: exit 2, never valid."""
    from llmctl.cli.root import debug_enabled
    from llmctl.validate import validate_paths
    from llmctl.validate.codes import CODES, explain as explain_code

    if explain is not None:
        if explain not in CODES:
            raise UsageError(f"--explain: unknown diagnostic code '{explain}'; codes: {', '.join(sorted(CODES))}")
        out.print(explain_code(explain), markup=False, highlight=False)
        return 0
    if not files:
        raise UsageError("no FILE given; pass serve configs, model configs or RayService manifests (or --explain CODE)")

    from llmctl.compat import warning as version_warning
    from llmctl.vllm_version import reference_vllm

    if working_dir is not None and not working_dir.is_dir():
        raise UsageError(f"--working-dir: '{working_dir}' is not a directory")
    try:
        target = reference_vllm(vllm_version, "--vllm-version")
    except UsageError as e:
        raise UsageError(f"--vllm-version: {e.message}") from None
    diags = validate_paths(files, local_node=local, working_dir=working_dir, vllm_version=target, strict=strict,
                           debug=debug_enabled(ctx))
    diags += _lora_diags(files, diags, remote, local, working_dir)
    # the named vLLM with the installed Ray, else the installed vLLM (what `llmctl up` here would run)
    version = version_warning(target.text if vllm_version else None)
    errors, warnings, failing = diags.errors, diags.warnings, diags.failing
    unchecked = [d for d in diags if d.code == "app-not-checked"]
    if json_:
        print_json({"valid": diags.valid, "incomplete": diags.incomplete, "strict": strict, "vllm_version": target.label,
                    "diagnostics": [d.to_json() for d in diags], "warnings": [version] if version else [],
                    "applications_not_checked": len(unchecked)})
    else:
        for d in diags:
            err.print(str(d), markup=False, highlight=False)
        if version:
            err.print(f"warning: {version}", markup=False, highlight=False)
        if diags.incomplete:
            n = len(diags.failed_checks)
            err.print(f"incomplete: {n} check{'s' if n != 1 else ''} crashed (check-failed above), so the result says "
                      "nothing about what they check and is not valid; --debug shows the traceback", markup=False)
        if failing:
            what = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
            if strict and warnings:
                what += f" and {len(warnings)} warning{'s' if len(warnings) != 1 else ''} (--strict)"
            err.print(f"{what} found", markup=False)
        else:
            out.print(summary(len(files), warnings, unchecked), markup=False)
    if failing:
        raise typer.Exit(EXIT_USAGE)
    return 0


def _lora_diags(files: List[Path], diags: list, remote: bool, local: bool, working_dir: Optional[Path]) -> list:
    """--remote: each valid serve config's LoRA stores read and checked; without it, a note for each store."""
    import yaml

    from llmctl.validate import load_deployable
    from llmctl.validate.lora_store import not_checked_note

    out: list = []
    for f in files:
        if any(d.is_error and d.file == str(f) for d in diags):
            continue
        try:
            data = yaml.safe_load(f.read_text(encoding="utf-8"))
        except (OSError, ValueError, yaml.YAMLError):
            continue
        if not isinstance(data, dict) or "applications" not in data:
            continue
        if not remote:
            from llmctl.validate.files import inline_llm_configs

            out += not_checked_note(inline_llm_configs(data, working_dir), str(f))
            continue
        from llmctl.errors import ClusterUnreachable
        from llmctl.launch.address import resolve_target
        from llmctl.launch.lora import store_check

        try:
            target = resolve_target(None) if local else None
        except ClusterUnreachable:
            target = None
        out += store_check(load_deployable(f, local_node=local, working_dir=working_dir), str(f), target)[0]
    return out




def summary(n_files: int, warnings: list, unchecked: list) -> str:
    """The success line: what passed, and what it says nothing about."""
    text = f"OK: {n_files} file{'s' if n_files != 1 else ''} valid"
    if warnings:
        text += f", {len(warnings)} warning{'s' if len(warnings) != 1 else ''} (--strict makes them errors)"
    if unchecked:
        text += (f"; {len(unchecked)} application{'s' if len(unchecked) != 1 else ''} not checked "
                 "(not a Ray Serve LLM builder: see the notes)")
    return text
