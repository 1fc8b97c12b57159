"""Options shared by several commands, defined once (STYLE.md 8)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from typing_extensions import Annotated

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of a table.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Accept defaults and skip the confirmation.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite existing files / accept a configuration that does not fit.")]
AddressOpt = Annotated[
    Optional[str],
    typer.Option(
        "--address",
        envvar="RAY_ADDRESS",
        help="Ray dashboard URL (http://host:8265) or Ray address; default: the local cluster llmctl started.",
        show_envvar=True,
    ),
]
OutputDirOpt = Annotated[Path, typer.Option("--output-dir", "-o", help="Directory to write model_config/ and serve_*.yaml into.")]
