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
    files: Annotated[List[Path], typer.Argument(metavar="FILE", help="Serve configs (serve_*.yaml) and/or model configs (model_config/*.yaml).")],
    local: Annotated[bool, typer.Option("--local", help="The apps will run on this machine (llmctl up on the local head): a local model path or a class that is missing here is an error, not a warning.")] = False,
    working_dir: Annotated[Optional[Path], typer.Option("--working-dir", metavar="DIR", help="Directory Ray builds the app from, where relative llm_configs paths are opened (default: the current directory, as with serve run).", file_okay=False)] = None,
    vllm_version: Annotated[Optional[str], typer.Option("--vllm-version", metavar="X.Y.Z", help="The vLLM the replicas run: engine_kwargs is checked against its arguments (default: the one the installed Ray pins).")] = None,
    json_: JsonOpt = False,
) -> int:
    """Check config files before launch; one line per problem: file:line: field: message."""
    from llmctl.validate import errors_only, validate_paths

    from llmctl.compat import warning as version_warning
    from llmctl.vllm_version import reference_vllm

    if working_dir is not None and not working_dir.is_dir():
        raise UsageError(f"--working-dir: '{working_dir}' is not a directory")
    try:
        target = reference_vllm(vllm_version, "--vllm-version")
    except UsageError as e:
        raise UsageError(f"--vllm-version: {e.message}") from None
    diags = validate_paths(files, local_node=local, working_dir=working_dir, vllm_version=target)
    # the named vLLM with the installed Ray, else the installed vLLM (what `llmctl up` here would run)
    version = version_warning(target.text if vllm_version else None)
    errors = errors_only(diags)
    if json_:
        print_json({"valid": not errors, "vllm_version": target.label, "diagnostics": [d.to_json() for d in diags],
                    "warnings": [version] if version else []})
    else:
        for d in diags:
            err.print(str(d), markup=False, highlight=False)
        if version:
            err.print(f"warning: {version}", markup=False, highlight=False)
        if errors:
            err.print(f"{len(errors)} problem{'s' if len(errors) != 1 else ''} found", markup=False)
        else:
            out.print(f"OK: {len(files)} file{'s' if len(files) != 1 else ''} valid", markup=False)
    if errors:
        raise typer.Exit(EXIT_USAGE)
    return 0
