"""`llmctl plan` as a core: a model, GPU types and options in; rows out.

Values go through the parsers gen-config uses (:mod:`llmctl.spec`; a bad one
raises UsageError naming the parameter, with gen-config's message), and the
advised row is ``sizing.choose``'s — the rule gen-config's defaults and the
catalog's recommendations follow. No ray / vllm import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from llmctl import sizing, spec
from llmctl.catalog import ModelProfile, resolve_model
from llmctl.errors import UsageError, param, template_of
from llmctl.hardware import GPUS, GPUType


def parse_flag(name: str, parse, value):
    """``value`` through ``parse``; a bad one is a UsageError naming parameter ``name``."""
    try:
        return spec.parse_flag(value, flag=param(name), parse=parse)
    except UsageError as e:
        e.param = name
        raise


@dataclass
class PlanTable:
    profile: ModelProfile
    rows: list[dict[str, Any]]
    choices: list[tuple[GPUType, sizing.Choice]] = field(default_factory=list)
    parameters: dict[str, int] = field(default_factory=dict)

    @property
    def advised(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["advised"]]

    def to_json(self) -> dict[str, Any]:
        return {"model": self.profile.id, "hf_repo": self.profile.hf_repo, "parameters": self.parameters, "rows": self.rows}


def gpu_types(gpu: Optional[str], gpu_memory: Optional[float]) -> list[GPUType]:
    """The GPU types to plan for: one named, one of a given size, or every type."""
    if gpu and gpu_memory is not None:
        raise UsageError(f"{param('gpu_memory')}: pass either {param('gpu')} or {param('gpu_memory')}, not both", param="gpu_memory")
    if gpu_memory is not None:
        if gpu_memory <= 0:
            raise UsageError(f"{param('gpu_memory')}: must be a positive number of GiB (got {gpu_memory:g})", param="gpu_memory")
        return [GPUType(f"{gpu_memory:g} GiB", "GPU", gpu_memory, f"{gpu_memory:g} GiB", 8, "given GPU memory")]
    if gpu is None or gpu.strip().lower() == "all":
        return [g for g in GPUS.values() if not g.is_cpu]
    g = parse_flag("gpu", spec.parse_gpu, gpu)
    if g.is_cpu:
        raise UsageError(f"{param('gpu')}: llmctl plan sizes GPU memory; choose a GPU type or pass {param('gpu_memory', 'GiB')} "
                         "(cpu is not sized)", param="gpu")
    return [g]


def parameters(arch) -> dict[str, int]:
    try:
        pc = sizing.count_parameters(arch)
    except sizing.SizingError:  # vocab unknown: parameters are optional in the output
        return {}
    return {"total": pc.total, "active": pc.active, "mtp": pc.mtp}


def _positive(name: str, value: Union[None, int, str]) -> Optional[int]:
    if value is None:
        return None
    return parse_flag(name, lambda v: spec.parse_tokens(v, what=name) if isinstance(v, str) else int(v), value)


def plan(
    model: Union[str, ModelProfile],
    *,
    gpu: Optional[str] = None,
    gpu_memory: Optional[float] = None,
    tp: Union[None, int, str] = None,
    pp: Union[int, str] = 1,
    max_model_len: Union[None, int, str] = None,
    gpu_memory_utilization: Optional[float] = None,
    dtype: str = "auto",
    kv_cache_dtype: str = "auto",
    min_concurrency: Optional[float] = None,
    vllm_version: Optional[str] = None,
    quantization: Optional[str] = None,
    enforce_eager: bool = False,
    enable_expert_parallel: bool = False,
    max_num_seqs: Union[None, int, str] = None,
    max_num_batched_tokens: Union[None, int, str] = None,
) -> PlanTable:
    """Weights, KV cache, concurrency and a verdict per GPU type and TP size.

    Without ``tp``, one row per valid TP size on one node, the advised one
    marked (``row["advised"]``, with ``row["reasons"]``); without
    ``max_model_len``, the context llmctl would choose. ``vllm_version`` is the
    vLLM whose memory profile is modelled (default: the one the installed Ray
    pins). ``quantization``, ``enforce_eager``, ``enable_expert_parallel``,
    ``max_num_seqs`` and ``max_num_batched_tokens`` are vLLM's engine arguments
    of those names, sized as :func:`llmctl.sizing.sizing_options` sizes them
    from a config. Raises UsageError with gen-config's message for a bad value."""
    if min_concurrency is not None and min_concurrency <= 0:
        raise UsageError(f"{param('min_concurrency')}: must be a positive number (got {min_concurrency:g})",
                         param="min_concurrency")
    gmu = parse_flag("gpu_memory_utilization", spec.parse_gpu_memory_utilization, gpu_memory_utilization)
    if str(dtype).lower() not in sizing.DTYPE_CHOICES:
        raise UsageError(f"{param('dtype')}: unknown dtype '{dtype}'; choose one of: {', '.join(sizing.DTYPE_CHOICES)}",
                         param="dtype")
    if str(kv_cache_dtype).lower() not in sizing.KV_CACHE_DTYPE_CHOICES:
        raise UsageError(f"{param('kv_cache_dtype')}: unknown '{kv_cache_dtype}'; choose one of: "
                         f"{', '.join(sizing.KV_CACHE_DTYPE_CHOICES)}", param="kv_cache_dtype")
    if vllm_version is not None:
        try:
            vllm_version = sizing.parse_vllm_version(vllm_version).text
        except sizing.SizingError as e:
            raise UsageError(f"{param('vllm_version')}: {template_of(e)}", param="vllm_version") from None
    gpus = gpu_types(gpu, gpu_memory)
    profile = model if isinstance(model, ModelProfile) else parse_flag("model", resolve_model, model)
    arch = profile.architecture
    if arch is None:
        raise UsageError(f"{param('model')}: {profile.hf_repo}: no architecture known (weights in a bucket); "
                         "pass an HF repo id or a directory with config.json", param="model")
    pp_n = parse_flag("pp", lambda v: spec.parse_pp(v, arch=arch), pp)
    tp_n = parse_flag("tp", lambda v: spec.parse_tp(v, arch=arch, gpu=gpus[0], pp=pp_n, expert_parallel=enable_expert_parallel), tp)
    mml = parse_flag("max_model_len", lambda v: spec.parse_max_model_len(v, arch=arch), max_model_len)

    engine = {"quantization": quantization, "enforce_eager": enforce_eager, "enable_expert_parallel": enable_expert_parallel,
              "max_num_seqs": _positive("max_num_seqs", max_num_seqs),
              "max_num_batched_tokens": _positive("max_num_batched_tokens", max_num_batched_tokens)}
    kw: dict[str, Any] = dict(gpu_memory_utilization=gmu, dtype=str(dtype).lower(), kv_cache_dtype=str(kv_cache_dtype).lower(),
                              vllm_version=vllm_version, **{k: v for k, v in sizing.sizing_options(engine).items()
                                                            if k not in ("dtype", "kv_cache_dtype")})
    table = PlanTable(profile, [], parameters=parameters(arch))
    for g in gpus:
        choice = sizing.choose(arch, g, tp=tp_n, pp=pp_n, max_model_len=mml, min_concurrency=min_concurrency, **kw)
        table.choices.append((g, choice))
        sizes = [tp_n] if tp_n is not None else sizing.tp_sizes_on_node(arch, g, pp_n, enable_expert_parallel)
        for t in sizes:
            p = sizing.plan_for_gpu(arch, g, tp=t, pp=pp_n, max_model_len=choice.max_model_len, **kw)
            advised = tp_n is None and t == choice.tp and choice.fits
            table.rows.append({"gpu": g.name, **p.to_dict(), "advised": advised,
                               "reasons": list(choice.reasons) if advised else []})
    return table
