"""`llmctl plan`: does a model fit, at which TP, with how much KV cache.

Thin layer over :mod:`llmctl.sizing`: flags go through the parsers gen-config
uses (:mod:`llmctl.spec`), and the advised TP and context length come from
``sizing.choose`` — the rule gen-config's defaults and the catalog follow.
No ray / vllm import; huggingface_hub only when the model is not in the catalog.
"""

from __future__ import annotations

from typing import Any, Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import out, print_json
from llmctl.cli.options import GpuOpt, JsonOpt, ModelOpt
from llmctl.errors import UsageError

@app.command("plan")
def plan_cmd(
    model: ModelOpt = None,
    gpu: GpuOpt = None,
    gpu_memory: Annotated[Optional[float], typer.Option("--gpu-memory", metavar="GIB", help="Memory of one GPU in GiB, as the driver reports it (instead of --gpu).")] = None,
    tp: Annotated[Optional[str], typer.Option("--tp", metavar="N", help="Tensor-parallel size; default: every valid size on one node, the advised one marked.")] = None,
    pp: Annotated[str, typer.Option("--pp", metavar="N", help="Pipeline-parallel size.")] = "1",
    max_model_len: Annotated[Optional[str], typer.Option("--max-model-len", metavar="TOKENS", help="Context length (8192 or 8k); default: llmctl's choice (the model's context, capped at 32k, or the most that fits).")] = None,
    gpu_memory_utilization: Annotated[Optional[float], typer.Option("--gpu-memory-utilization", metavar="FRACTION", help="vLLM's gpu_memory_utilization (default: that vLLM's, 0.92 from 0.20, 0.9 before).")] = None,
    dtype: Annotated[str, typer.Option("--dtype", metavar="DTYPE", help="Weight dtype: auto (checkpoint), bfloat16, float16, float32, fp8, int8, int4/awq/gptq.")] = "auto",
    kv_cache_dtype: Annotated[str, typer.Option("--kv-cache-dtype", metavar="DTYPE", help="KV cache dtype: auto or fp8.")] = "auto",
    min_concurrency: Annotated[Optional[float], typer.Option("--min-concurrency", metavar="N", help="Advise only TP sizes holding at least this many concurrent full-length requests.")] = None,
    vllm_version: Annotated[Optional[str], typer.Option("--vllm-version", metavar="X.Y.Z", help="The vLLM whose start-up memory profile to model (default: the one the installed Ray pins).")] = None,
    quantization: Annotated[Optional[str], typer.Option("--quantization", metavar="METHOD", help="vLLM's --quantization: online fp8 or experts_int8 on an unquantized checkpoint (a quantized checkpoint's own quantization_config is read from it).")] = None,
    enforce_eager: Annotated[bool, typer.Option("--enforce-eager", help="vLLM's --enforce-eager: no CUDA graphs, so their memory is not taken from the KV cache.")] = False,
    enable_expert_parallel: Annotated[bool, typer.Option("--enable-expert-parallel", help="vLLM's --enable-expert-parallel: whole experts dealt out over the TP ranks.")] = False,
    max_num_seqs: Annotated[Optional[str], typer.Option("--max-num-seqs", metavar="N", help="vLLM's --max-num-seqs (default: that vLLM's, by GPU size).")] = None,
    max_num_batched_tokens: Annotated[Optional[str], typer.Option("--max-num-batched-tokens", metavar="TOKENS", help="vLLM's --max-num-batched-tokens (8192, 8K; default: that vLLM's, by GPU size).")] = None,
    json_: JsonOpt = False,
) -> None:
    """Estimate weights, KV cache and concurrency per GPU; advise a TP size."""
    from llmctl.planner import plan

    if not model:
        raise UsageError("no model given; pass --model (a catalog id from `llmctl models`, an HF repo id or a directory)")
    table = plan(model, gpu=gpu, gpu_memory=gpu_memory, tp=tp, pp=pp, max_model_len=max_model_len,
                 gpu_memory_utilization=gpu_memory_utilization, dtype=dtype, kv_cache_dtype=kv_cache_dtype,
                 min_concurrency=min_concurrency, vllm_version=vllm_version, quantization=quantization,
                 enforce_eager=enforce_eager, enable_expert_parallel=enable_expert_parallel, max_num_seqs=max_num_seqs,
                 max_num_batched_tokens=max_num_batched_tokens)
    if json_:
        print_json(table.to_json())
        return
    explicit_len = None if max_model_len is None else table.rows[0]["max_model_len"]
    _render(table.profile, table.profile.architecture, table.rows, table.parameters, explicit_len)


def _render(profile, arch, rows: list[dict[str, Any]], params: dict[str, int], explicit_len: Optional[int]) -> None:
    from rich.table import Table

    ptxt = f"{params['total'] / 1e9:.1f}B params" if params else "params unknown"
    if params and params["active"] != params["total"]:
        ptxt += f" ({params['active'] / 1e9:.1f}B active)"
    table = Table(title=f"{profile.id}: {ptxt}, context {arch.context_limit:,}" if arch.context_limit else f"{profile.id}: {ptxt}")
    cols = (("GPU", "left"), ("TP", "right"), ("PP", "right"), ("max_model_len", "right"), ("weights/GPU", "right"),
            ("KV/GPU", "right"), ("KV tokens", "right"), ("max conc.", "right"), ("fits up to", "right"),
            ("verdict", "left"), ("advice", "left"))
    for col, just in cols:
        table.add_column(col, justify=just)
    style = {"fits": "green", "tight": "yellow", "does_not_fit": "red"}
    for r in rows:
        table.add_row(
            r["gpu"], str(r["tp"]), str(r["pp"]), f"{r['max_model_len']:,}", f"{r['weights_gib_per_gpu']:.1f} GiB",
            f"{max(r['kv_cache_gib'], 0):.1f} GiB", f"{r['kv_cache_tokens']:,}", f"{r['max_concurrency']:.1f}",
            f"{r['max_model_len_fits']:,}", f"[{style[r['verdict']]}]{r['verdict'].replace('_', ' ')}[/]",
            "← advised" if r["advised"] else "",
        )
    out.print(table)
    advised = [r for r in rows if r["advised"]]
    for r in advised:
        out.print(f"advised: {r['gpu']} TP {r['tp']} at max_model_len {r['max_model_len']:,}: {r['reason']}", markup=False)
        for why in r["reasons"]:
            out.print(f"  {why}", markup=False)
    if not advised and len(rows) > 1:
        out.print("no TP size on one node starts this model here; lower --max-model-len, quantize (--dtype fp8) "
                  "or pick a larger GPU", markup=False)
    if len(rows) == 1 and rows[0]["verdict"] == "does_not_fit":
        out.print(f"why: {rows[0]['reason']}", markup=False)
    seen: set[str] = set()
    for r in rows:
        for w in r["warnings"]:
            if w not in seen:
                seen.add(w)
                out.print(f"note: {w}", markup=False)
    if rows:
        out.print(f"Estimates follow vLLM {rows[0]['vllm_version']}'s start-up memory profile (docs/sizing.md); "
                  f"tight allows for a {min(r['margin'] for r in rows):.0%} error"
                  + (f" ({max(r['margin'] for r in rows):.0%} where approximate)"
                     if any(r['approximate'] for r in rows) else "") + ".", markup=False)
    if advised:
        r = advised[0]
        gpu_flag = f" --gpu {r['gpu']}" if " GiB" not in r["gpu"] else ""
        length = f" --max-model-len {explicit_len}" if explicit_len else ""
        out.print(f"Next: llmctl gen-config --model {profile.id}{gpu_flag} --tp {r['tp']}{length}", markup=False)
