"""`llmctl plan`: does a model fit, at which TP, with how much KV cache.

Thin layer over :mod:`llmctl.sizing` (no ray / vllm import; huggingface_hub
only when the model is not in the catalog)."""

from __future__ import annotations

from typing import Any, Optional

import typer
from typing_extensions import Annotated

from llmctl.cli import app
from llmctl.cli.console import out, print_json
from llmctl.cli.options import JsonOpt
from llmctl.errors import UsageError

GIB = 1024**3


def _positive(flag: str, value: Optional[float], *, integer: bool = False) -> None:
    if value is not None and value <= 0:
        kind = "a positive integer" if integer else "a positive number"
        raise UsageError(f"{flag} must be {kind} (got {value:g})")


def _gpus(gpu: Optional[str], gpu_memory: Optional[float]) -> list[tuple[str, int, int]]:
    """(label, memory bytes, GPUs per node) for each GPU to plan for."""
    from llmctl.hardware import GPUS, get_gpu

    if gpu and gpu_memory is not None:
        raise UsageError("pass either --gpu or --gpu-memory, not both")
    if gpu_memory is not None:
        _positive("--gpu-memory", gpu_memory)
        return [(f"{gpu_memory:g} GiB", int(gpu_memory * GIB), 8)]
    if gpu is None or gpu.strip().lower() == "all":  # no GPU given: a table over every type
        return [(g.name, g.memory_bytes, g.gpus_per_node) for g in GPUS.values() if not g.is_cpu]
    g = get_gpu(gpu)
    if g.is_cpu:
        raise UsageError("--gpu cpu: llmctl plan sizes GPU memory; choose a GPU type or pass --gpu-memory GiB")
    return [(g.name, g.memory_bytes, g.gpus_per_node)]


@app.command("plan")
def plan_cmd(
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Catalog id, HF repo id (org/name) or local directory with config.json.")] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="GPU type (L4, A10G, L40S, A100-40G, A100-80G, H100, H200, B200); default: every type.")] = None,
    gpu_memory: Annotated[Optional[float], typer.Option("--gpu-memory", help="Memory of one GPU in GiB, as the driver reports it (instead of --gpu).")] = None,
    tp: Annotated[Optional[int], typer.Option("--tp", help="Tensor parallel size; default: every valid size on one node.")] = None,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline parallel size.")] = 1,
    max_model_len: Annotated[Optional[int], typer.Option("--max-model-len", help="Context length; default: the model's max_position_embeddings (vLLM's default).")] = None,
    gpu_memory_utilization: Annotated[float, typer.Option("--gpu-memory-utilization", help="vLLM's gpu_memory_utilization.")] = 0.9,
    dtype: Annotated[str, typer.Option("--dtype", help="Weight dtype: auto (checkpoint), bfloat16, float16, float32, fp8, int8, int4/awq/gptq.")] = "auto",
    kv_cache_dtype: Annotated[str, typer.Option("--kv-cache-dtype", help="KV cache dtype: auto or fp8.")] = "auto",
    min_concurrency: Annotated[float, typer.Option("--min-concurrency", help="Advise the smallest TP with at least this many concurrent max-length requests.")] = 1.0,
    json_: JsonOpt = False,
) -> None:
    """Estimate weights, KV cache and concurrency per GPU; advise a TP size."""
    from llmctl import sizing
    from llmctl.catalog import resolve_model

    if not model:
        raise UsageError("no model given; pass --model (a catalog id from `llmctl models`, an HF repo id or a directory)")
    _positive("--tp", tp, integer=True)
    _positive("--pp", pp, integer=True)
    _positive("--max-model-len", max_model_len, integer=True)
    _positive("--min-concurrency", min_concurrency)
    if not 0 < gpu_memory_utilization <= 1:
        raise UsageError(f"--gpu-memory-utilization must be in (0, 1] (got {gpu_memory_utilization:g})")
    if dtype.lower() not in sizing.DTYPE_CHOICES:
        raise UsageError(f"--dtype: unknown dtype '{dtype}'; choose one of: {', '.join(sizing.DTYPE_CHOICES)}")
    if kv_cache_dtype.lower() not in sizing.KV_CACHE_DTYPE_CHOICES:
        raise UsageError(f"--kv-cache-dtype: unknown '{kv_cache_dtype}'; choose one of: {', '.join(sizing.KV_CACHE_DTYPE_CHOICES)}")
    gpus = _gpus(gpu, gpu_memory)

    profile = resolve_model(model)
    arch = profile.architecture
    if arch is None:
        raise UsageError(f"--model {model}: no architecture known (weights in a bucket); pass an HF repo id or a directory with config.json")
    if pp > arch.num_hidden_layers:
        raise UsageError(f"--pp {pp} exceeds the model's {arch.num_hidden_layers} layers")
    if tp is not None:
        problem = sizing.tp_problem(arch, tp)
        if problem:
            valid = ", ".join(str(t) for t in sizing.valid_tp_sizes(arch, 64)[:8])
            raise UsageError(f"--tp {tp}: {problem}; valid sizes: {valid}")

    kw: dict[str, Any] = dict(
        max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
        dtype=dtype.lower(), kv_cache_dtype=kv_cache_dtype.lower(),
    )
    rows: list[dict[str, Any]] = []
    try:
        for label, mem, per_node in gpus:
            sizes = [tp] if tp is not None else sizing.valid_tp_sizes(arch, per_node)
            advice = sizing.advise_tp(arch, mem, gpus_per_node=per_node, min_concurrency=min_concurrency, pp=pp, **kw)
            advised_tp = advice[0] if advice else None
            for t in sizes:
                p = sizing.plan(arch, gpu_memory_bytes=mem, tp=t, pp=pp, **kw)
                row = {"gpu": label, **p.to_dict(), "advised": t == advised_tp}
                if t * pp > per_node:
                    row["warnings"].append(f"TP × PP = {t * pp} GPUs exceeds one {label} node ({per_node}): needs a multi-node cluster")
                rows.append(row)
    except sizing.SizingError as e:
        raise UsageError(f"--{e.param.replace('_', '-')}: {e.message}") from None

    if json_:
        print_json({
            "model": profile.id, "hf_repo": profile.hf_repo,
            "max_model_len": rows[0]["max_model_len"] if rows else max_model_len,
            "parameters": _params(arch),
            "rows": rows,
        })
        return
    _render(profile, arch, rows, min_concurrency)


def _params(arch) -> dict[str, Any]:
    from llmctl.sizing import count_parameters

    try:
        pc = count_parameters(arch)
    except Exception:  # vocab unknown: parameters are optional in the output
        return {}
    return {"total": pc.total, "active": pc.active, "mtp": pc.mtp}


def _render(profile, arch, rows: list[dict[str, Any]], min_concurrency: float) -> None:
    from rich.table import Table

    params = _params(arch)
    ptxt = f"{params['total'] / 1e9:.1f}B params" if params else "params unknown"
    if params and params["active"] != params["total"]:
        ptxt += f" ({params['active'] / 1e9:.1f}B active)"
    length = rows[0]["max_model_len"] if rows else "?"
    title = f"{profile.id}: {ptxt}, max_model_len {length:,}" if isinstance(length, int) else profile.id
    table = Table(title=title)
    for col, just in (("GPU", "left"), ("TP", "right"), ("PP", "right"), ("weights/GPU", "right"), ("KV/GPU", "right"),
                      ("KV tokens", "right"), ("max conc.", "right"), ("fits up to", "right"), ("verdict", "left"), ("", "left")):
        table.add_column(col, justify=just)
    style = {"fits": "green", "tight": "yellow", "does_not_fit": "red"}
    for r in rows:
        table.add_row(
            r["gpu"], str(r["tp"]), str(r["pp"]), f"{r['weights_gib_per_gpu']:.1f} GiB",
            f"{max(r['kv_cache_gib'], 0):.1f} GiB", f"{r['kv_cache_tokens']:,}", f"{r['max_concurrency']:.1f}",
            f"{r['max_model_len_fits']:,}", f"[{style[r['verdict']]}]{r['verdict'].replace('_', ' ')}[/]",
            "← advised" if r["advised"] else "",
        )
    out.print(table)
    advised = [r for r in rows if r["advised"]]
    for r in advised:
        out.print(f"advised: {r['gpu']} TP {r['tp']}: {r['reason']}", markup=False)
    if not advised:
        out.print(f"no TP size on one node fits with {min_concurrency:g} concurrent max-length request(s); "
                  "lower --max-model-len, quantize (--dtype fp8) or pick a larger GPU", markup=False)
    for r in rows:
        if r["verdict"] == "does_not_fit" and len(rows) == 1:
            out.print(f"why: {r['reason']}", markup=False)
    seen: set[str] = set()
    for r in rows:
        for w in r["warnings"]:
            if w not in seen:
                seen.add(w)
                out.print(f"note: {w}", markup=False)
    out.print("Estimates follow vLLM's start-up memory profile (docs/sizing.md); KV tokens within ±15 % of vLLM's figures in our checks.", markup=False)
    if advised:
        r = next((a for a in advised if a["verdict"] == "fits"), advised[0])
        gpu_flag = f"--gpu {r['gpu']}" if " GiB" not in r["gpu"] else ""
        out.print(f"Next: llmctl gen-config --model {profile.id} {gpu_flag} --tp {r['tp']}".replace("  ", " "), markup=False)
