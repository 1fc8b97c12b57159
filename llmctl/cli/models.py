"""`llmctl models`: list the catalog (no ray/vllm import)."""

from __future__ import annotations

from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import out, print_json
from llmctl.cli.options import JsonOpt


def _fmt_params(n: Optional[int]) -> str:
    if not n:
        return "?"
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


def _recipe(p) -> str:
    """The model's recipes in short: its parsers, else the settings-only ones (the full text: --json)."""
    tool, think = p.recipe_for("tool_calling").get("tool_call_parser"), p.recipe_for("reasoning").get("reasoning_parser")
    parts = ([f"tools:{tool}"] if tool else []) + ([f"reasoning:{think}"] if think else [])
    if not parts:
        parts = [short for f, short in (("pooling", "pooling"), ("serving", "serving"), ("text_only", "text-only"),
                                        ("image_only", "image-only")) if f in p.recipes]
    return " ".join(parts) or "-"


@app.command("models")
def models_cmd(
    json_: JsonOpt = False,
    family: Annotated[Optional[str], typer.Option("--family", metavar="FAMILY", help="Only this family (e.g. qwen3).")] = None,
    task: Annotated[Optional[str], typer.Option("--task", metavar="TASK", help="Only this task: chat, reasoning, vision, code, embed, rerank (a model's main task, or any it names).")] = None,
    gpu: Annotated[str, typer.Option("--gpu", metavar="GPU", help="The GPU type whose default layout the table shows (single node TP, DP+EP or TP x PP over nodes; --json has every type's).")] = "H100",
) -> None:
    """List the model catalog."""
    from llmctl.catalog import load_catalog
    from llmctl.hardware import get_gpu

    g = get_gpu(gpu)
    if g.is_cpu:
        from llmctl.errors import UsageError

        raise UsageError("--gpu: the catalog's layouts are per GPU type; give one (e.g. H100)")

    entries = [
        p for p in load_catalog().values()
        if (family is None or p.family == family) and (task is None or p.task == task or task in p.tasks)
    ]
    if json_:
        print_json([p.model_dump(mode="json", exclude={"origin"}) for p in entries])
        return
    from rich.table import Table

    table = Table(title=f"llmctl model catalog ({len(entries)} models)")
    for col in ("id", "hf repo", "family", "task", "params", "ctx", "gated", "recipe", f"layout on {g.name}"):
        table.add_column(col, overflow="fold")
    for p in entries:
        a = p.architecture
        total = p.parameters.total if p.parameters else None
        active = p.parameters.active if p.parameters else None
        params = _fmt_params(total) + (f" ({_fmt_params(active)} active)" if active and total and active != total else "")
        ctx = f"{a.max_position_embeddings // 1024}k" if a and a.max_position_embeddings else "?"
        lay = p.layouts.get(g.name)
        table.add_row(p.id, p.hf_repo, p.family, p.task, params, ctx, "yes" if p.gated else "no", _recipe(p),
                      lay.describe() if lay else "-")
    out.print(table)
    out.print("Use an id with: llmctl gen-config --model ID   (or llmctl plan --model ID)")
