"""`llmctl kuberay SERVE_FILE`: a KubeRay RayService manifest from a serve config."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import err, out, print_json
from llmctl.cli.options import (ApiKeySecretOpt, ForceOpt, JsonOpt, GpusPerNodeOpt, HfSecretOpt, ImageOpt, NodeSelectorOpt,
                                UpgradeStrategyOpt)


@app.command("kuberay")
def kuberay_cmd(
    serve_file: Annotated[Path, typer.Argument(metavar="SERVE_FILE", help="A serve config (serve_*.yaml) to convert.")],
    output: Annotated[Optional[Path], typer.Option("--output", metavar="FILE", help="Where to write the manifest ('-' for stdout; default rayservice_<timestamp>.yaml next to the serve file).")] = None,
    name: Annotated[Optional[str], typer.Option("--name", metavar="NAME", help="RayService name (default: from the app name; at most 47 characters).")] = None,
    gpus_per_node: GpusPerNodeOpt = None,
    node_selector: NodeSelectorOpt = "none",
    hf_secret: HfSecretOpt = None,
    api_key_secret: ApiKeySecretOpt = None,
    image: ImageOpt = None,
    upgrade_strategy: UpgradeStrategyOpt = "NewCluster",
    initializing_timeout: Annotated[str, typer.Option("--initializing-timeout", metavar="DURATION", help="ray.io/initializing-timeout: fail a RayService whose pods never start (default 30m).")] = "30m",
    working_dir: Annotated[Optional[Path], typer.Option("--working-dir", metavar="DIR", file_okay=False, help="Where relative llm_configs paths are opened (default: the current directory).")] = None,
    force: ForceOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Write a KubeRay RayService (ray.io/v1) for a serve config, validated offline; apply it with kubectl."""
    from llmctl.kuberay.manifest import KubeOptions, default_output, from_serve_file
    from llmctl.render import Rendered, write_all

    opts = KubeOptions(name=name, gpus_per_node=gpus_per_node or [], node_selector=node_selector, hf_secret=hf_secret,
                       api_key_secret=api_key_secret, image=image, upgrade_strategy=upgrade_strategy, initializing_timeout=initializing_timeout)
    m = from_serve_file(serve_file, opts, working_dir=working_dir)
    for note in m.notes:
        err.print(f"note: {note}", markup=False, highlight=False)
    to_stdout = output is not None and str(output) == "-"
    if to_stdout and json_out:
        print_json({"manifest": m.data, "notes": m.notes})
        return
    if to_stdout:
        typer.echo(m.text, nl=False)
        return
    target = (output or default_output(serve_file)).expanduser().resolve()
    write_all([Rendered(target, m.text, m.data)], force=force)
    if json_out:
        print_json({"written": [str(target)], "notes": m.notes,
                    "next": [f"llmctl validate {target}", f"kubectl apply -f {target}"]})
        return
    out.print(f"Wrote: {target}", markup=False, highlight=False)
    out.print("Next:", markup=False)
    out.print(f"  llmctl validate {target}", markup=False, highlight=False)
    out.print(f"  kubectl apply -f {target}", markup=False, highlight=False)
