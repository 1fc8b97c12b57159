"""`llmctl tiny-model DIR`: the tiny Llama tests and the demo serve."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import out
from llmctl.errors import OutputExists, UsageError

@app.command("tiny-model")
def tiny_model_cmd(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="Directory to write the model into (e.g. ./demo/tiny-llama).")],
    force: Annotated[bool, typer.Option("--force", help="Write into a non-empty directory.")] = False,
    moe: Annotated[bool, typer.Option("--moe", help="A tiny mixture of experts (Mixtral: 4 experts, 2 per token) instead, for --dp / expert parallelism.")] = False,
) -> None:
    """Build the tiny random-weight Llama used by tests and the demo (offline, deterministic, ~0.7 MB)."""
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{directory} exists and is not a directory")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise OutputExists(f"{directory} is not empty; pass --force to write into it")
    from llmctl import tinymodel

    try:
        path = tinymodel.build_tiny_model(directory, moe=moe)
    except ImportError as e:
        raise UsageError(f"building the tiny model needs torch, transformers and tokenizers ({e}); run `make setup`")
    size = sum(p.stat().st_size for p in path.iterdir() if p.is_file())
    out.print(f"wrote a tiny {'mixture of experts' if moe else 'Llama'} to {path} ({size / 1e6:.2f} MB, sha256 {tinymodel.digest(path)[:12]})", markup=False)
    out.print(f"next: llmctl gen-config --model {path} --gpu cpu --yes --output-dir DIR", markup=False)


@app.command("tiny-lora")
def tiny_lora_cmd(
    model_dir: Annotated[Path, typer.Argument(metavar="MODEL_DIR", help="The base model directory (llmctl tiny-model DIR).")],
    directory: Annotated[Path, typer.Argument(metavar="OUT_DIR", help="Directory to write the adapter into (its name is the adapter's name in a store).")],
    rank: Annotated[int, typer.Option("--rank", "-r", metavar="R", min=1, help="LoRA rank r.")] = 8,
    target_modules: Annotated[str, typer.Option("--target-modules", metavar="A,B", help="Comma-separated module names the adapter targets.")] = "q_proj,v_proj",
    base_model: Annotated[Optional[str], typer.Option("--base-model", metavar="NAME", help="base_model_name_or_path to record (default: MODEL_DIR).")] = None,
    wrong_base: Annotated[bool, typer.Option("--wrong-base", help="Build it for another tiny Llama (hidden size 128): it does not fit MODEL_DIR.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Write into a non-empty directory.")] = False,
) -> None:
    """Build a tiny LoRA adapter for the tiny model with peft (offline, deterministic, a few KB)."""
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise OutputExists(f"{directory} is not empty; pass --force to write into it")
    if not wrong_base and not (model_dir / "config.json").is_file():
        raise UsageError(f"{model_dir}: no config.json (build the base with `llmctl tiny-model {model_dir}`)")
    from llmctl import tinylora

    modules = [m.strip() for m in target_modules.split(",") if m.strip()]
    try:
        path = tinylora.build_tiny_lora(model_dir, directory, rank=rank, target_modules=modules, base_model=base_model,
                                        wrong_base=wrong_base)
    except ImportError as e:
        raise UsageError(f"building an adapter needs torch, transformers and peft ({e}); run `make setup`")
    except ValueError as e:
        raise UsageError(f"peft refused the adapter: {e}")
    s = tinylora.adapter_summary(path)
    size = sum(p.stat().st_size for p in path.iterdir() if p.is_file())
    out.print(f"wrote a LoRA adapter to {path} (rank {s['r']}, targets {', '.join(sorted(s['target_modules']))}, "
              f"base {s['base_model']}, {size / 1e3:.1f} KB)", markup=False)
    out.print(f"next: llmctl lora push {path} APP/{path.name}", markup=False)
