"""`llmctl validate FILE...`: Ray's schemas plus llmctl's deeper checks."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer
from typing_extensions import Annotated

from llmctl.cli import app
from llmctl.cli.console import err, out, print_json
from llmctl.cli.options import JsonOpt
from llmctl.errors import EXIT_USAGE


@app.command("validate")
def validate_cmd(
    files: Annotated[List[Path], typer.Argument(metavar="FILE", help="Serve configs (serve_*.yaml) and/or model configs (model_config/*.yaml).")],
    json_: JsonOpt = False,
) -> int:
    """Check config files before launch; one line per problem: file:line: field: message."""
    from llmctl.validate import errors_only, validate_paths

    from llmctl.compat import warning as version_warning

    diags = validate_paths(files)
    version = version_warning()
    errors = errors_only(diags)
    if json_:
        print_json({"valid": not errors, "diagnostics": [d.to_json() for d in diags],
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
