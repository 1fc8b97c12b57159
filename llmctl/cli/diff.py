"""`llmctl diff OLD NEW`: how KubeRay applies a RayService change (issue 23)."""

from __future__ import annotations

from pathlib import Path

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import out, print_json
from llmctl.cli.options import JsonOpt


@app.command("diff")
def diff_cmd(
    old: Annotated[Path, typer.Argument(metavar="OLD", help="The RayService manifest applied now (or a serve file: its serveConfigV2).", show_default=False)],
    new: Annotated[Path, typer.Argument(metavar="NEW", help="The RayService manifest (or serve file) to apply.", show_default=False)],
    json_out: JsonOpt = False,
) -> None:
    """Classify a RayService change as KubeRay applies it (serveConfigV2 only, cluster in place, new cluster, incremental upgrade, not applied) with the GPU surge, offline."""
    from llmctl.kuberay.diff import diff, load_side

    d = diff(load_side(str(old)), load_side(str(new)))
    if json_out:
        print_json(d.to_json())
        return
    for line in d.lines():
        out.print(line, markup=False, highlight=False)
