"""`llmctl tiny-model DIR`: the tiny Llama tests and the demo serve."""

from __future__ import annotations

from pathlib import Path

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import out
from llmctl.errors import OutputExists, UsageError

@app.command("tiny-model")
def tiny_model_cmd(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="Directory to write the model into (e.g. ./demo/tiny-llama).")],
    force: Annotated[bool, typer.Option("--force", help="Write into a non-empty directory.")] = False,
) -> None:
    """Build the tiny random-weight Llama used by tests and the demo (offline, deterministic, ~0.7 MB)."""
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{directory} exists and is not a directory")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise OutputExists(f"{directory} is not empty; pass --force to write into it")
    from llmctl import tinymodel

    try:
        path = tinymodel.build_tiny_model(directory)
    except ImportError as e:
        raise UsageError(f"building the tiny model needs torch, transformers and tokenizers ({e}); run `make setup`")
    size = sum(p.stat().st_size for p in path.iterdir() if p.is_file())
    out.print(f"wrote a tiny Llama to {path} ({size / 1e6:.2f} MB, sha256 {tinymodel.digest(path)[:12]})", markup=False)
    out.print(f"next: llmctl gen-config --model {path} --gpu cpu --yes --output-dir DIR", markup=False)
