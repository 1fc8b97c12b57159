"""The one place llmctl decides TP size and max_model_len.

Every caller — ``llmctl plan``'s advice, gen-config's default TP, its TP
choice list and its default max_model_len, the catalog's per-GPU
recommendations — goes through :func:`choose` (or :func:`advise_tp` for a
fixed context length), so they cannot disagree.

The rules (issue 7, "defaults that fit"):

- TP given, max_model_len given: nothing to choose; the plan says whether it fits.
- max_model_len given, TP not: the smallest valid TP on one node at which the
  model *fits* (sizing's verdict: at least 2 concurrent full-length requests
  with the estimate's error margin); else the smallest at which it is *tight*
  (at least one request); else it does not fit (the user's length did it).
- TP given, max_model_len not: the largest max_model_len that starts at this
  TP, at most the default context (below), rounded down to a multiple of 1,024.
- Neither: the smallest TP that fits the default context (fits before tight,
  as above); if none does on one node, a shorter max_model_len (the most that
  fits) at the largest valid TP.

The default context is the model's context length (rope-aware, what vLLM
takes when max_model_len is not set), capped at :data:`DEFAULT_CONTEXT_CAP`
for very long-context models: a 128k-token default would need several times
the KV cache most deployments use, and the cap is said in the reason text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from llmctl.arch import ModelArch
from llmctl.hardware import CPU_DEFAULT_MAX_MODEL_LEN, GPUType
from llmctl.placement import MAX_WORKERS, workers_problem
from llmctl.scalars import is_int
from llmctl.sizing.replica import Plan, plan
from llmctl.sizing.params import tp_problem as model_tp_problem
from llmctl.sizing.params import valid_tp_sizes as model_tp_sizes

DEFAULT_CONTEXT_CAP = 32768
LEN_ALIGN = 1024
# The shortest max_model_len llmctl chooses on its own: below it no default is
# worth serving (a chat turn with a system prompt runs past 2k tokens); the
# user can still ask for less with --max-model-len.
MIN_CHOSEN_CONTEXT = 2048


def nodes_of(gpu: GPUType, tp: int, pp: int = 1) -> int:
    """Nodes of ``gpu.gpus_per_node`` GPUs one replica of TP x PP spans."""
    return 1 if gpu.is_cpu else max(1, -(-tp * pp // max(gpu.gpus_per_node, 1)))


def layout_problem(gpu: GPUType, tp: int, pp: int = 1) -> Optional[str]:
    """Why TP x PP cannot be laid out on nodes of this GPU type, or None.
    vLLM's Ray executor gives a TP group consecutive ranks and Ray Serve LLM's
    placement group (PACK) fills a node before the next
    (``vllm/v1/executor/ray_executor.py``: workers sorted by node): TP stays
    within a node, and the pipeline stages of a replica larger than a node go
    to other nodes, whole TP groups each, so the node's GPU count must be a
    multiple of TP."""
    per_node = gpu.gpus_per_node
    if gpu.is_cpu:
        return f"TP {tp} x PP {pp} = {tp * pp} workers, but a CPU-only replica runs one engine worker" if tp * pp > per_node else None
    if tp > per_node:
        return (f"TP {tp} is more than one {gpu.name} node's {per_node} GPUs: tensor parallelism stays within a node; "
                f"use TP <= {per_node} and pipeline_parallel_size for the other nodes")
    if tp * pp > per_node and per_node % tp:
        return (f"TP {tp} x PP {pp} spans {nodes_of(gpu, tp, pp)} {gpu.name} nodes of {per_node} GPUs, and {per_node} is not "
                f"a multiple of TP {tp}: a TP group would straddle two nodes")
    return None


def tp_problem_on_node(arch: Optional[ModelArch], gpu: GPUType, tp: int, pp: int = 1,
                       expert_parallel: bool = False) -> Optional[str]:
    """Why a TP (× PP) size cannot work for this model on nodes of this GPU
    type, or None: the layout on nodes (:func:`layout_problem`: a replica may
    span nodes by its pipeline stages), then vLLM's model rules (routed
    experts are not split with ``expert_parallel``)."""
    if tp < 1 or pp < 1:
        return "tensor- and pipeline-parallel sizes must be at least 1"
    too_many = workers_problem(tp, pp)
    if too_many:
        return too_many
    layout = layout_problem(gpu, tp, pp)
    if layout:
        return layout
    if arch is None:
        return None
    problem = model_tp_problem(arch, tp, expert_parallel)
    if problem:
        valid = ", ".join(map(str, tp_sizes_on_node(arch, gpu, pp, expert_parallel))) or "none"
        hint = ""
        if not expert_parallel and arch.moe is not None and model_tp_problem(arch, tp, True) is None:
            hint = "; with enable_expert_parallel the experts are not split"
        return f"{problem} (valid: {valid}{hint})"
    if arch.num_hidden_layers < pp:
        return f"PP {pp} exceeds the model's {arch.num_hidden_layers} layers"
    return None


def tp_sizes_on_node(arch: Optional[ModelArch], gpu: GPUType, pp: int = 1, expert_parallel: bool = False) -> list[int]:
    """Valid TP sizes for the model at this PP (powers of two when the
    architecture is unknown): within one node, and with PP > 1 those whose
    stages lay out on several nodes (:func:`layout_problem`)."""
    pp = max(pp, 1)
    if gpu.is_cpu:
        limit = gpu.gpus_per_node // pp
    else:
        limit = min(gpu.gpus_per_node, MAX_WORKERS // pp)
    cands = [t for t in range(1, limit + 1) if t & (t - 1) == 0] if arch is None else model_tp_sizes(arch, limit, expert_parallel)
    return [t for t in cands if layout_problem(gpu, t, pp) is None]


def plan_for_gpu(
    arch: Optional[ModelArch],
    gpu: GPUType,
    *,
    tp: int,
    pp: int = 1,
    max_model_len: Optional[int] = None,
    gpu_memory_utilization: Optional[float] = None,
    dtype: str = "auto",
    kv_cache_dtype: str = "auto",
    max_num_seqs: Optional[int] = None,
    max_num_batched_tokens: Optional[int] = None,
    enforce_eager: bool = False,
    enable_expert_parallel: bool = False,
    vllm_version: Optional[str] = None,
    data_parallel_size: int = 1,
    **engine: Any,
) -> Optional[Plan]:
    """:func:`~llmctl.sizing.replica.plan` for a GPU type, or None when there is
    nothing to size: no architecture (weights in a bucket) or a CPU-only
    deployment. ``vllm_version`` defaults to the vLLM the installed Ray pins,
    ``gpu_memory_utilization`` to that vLLM's default; ``engine``: the other
    engine settings :func:`~llmctl.sizing.replica.plan` takes (quantization,
    enable_prefix_caching, language_model_only, num_speculative_tokens). Bad
    values raise :class:`~llmctl.sizing.formats.SizingError`."""
    if arch is None or gpu.is_cpu:
        return None
    return plan(
        arch, gpu_memory_bytes=gpu.memory_bytes, tp=tp, pp=pp, max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization or None,
        dtype=dtype, kv_cache_dtype=kv_cache_dtype, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens, enforce_eager=enforce_eager,
        enable_expert_parallel=enable_expert_parallel, vllm_version=vllm_version, gpu_name=gpu.name,
        data_parallel_size=data_parallel_size,
        ep_internode=enable_expert_parallel and data_parallel_size * tp * pp > gpu.gpus_per_node, **engine,
    )


def advise_tp(
    arch: ModelArch,
    gpu: GPUType,
    *,
    max_model_len: int,
    pp: int = 1,
    min_concurrency: Optional[float] = None,
    **kw: Any,
) -> Optional[tuple[int, Plan]]:
    """The smallest valid TP on one node whose plan *fits* (and holds at least
    ``min_concurrency`` full-length requests when given); else the smallest
    that is *tight*; None when no TP starts."""
    sizes = tp_sizes_on_node(arch, gpu, pp, bool(kw.get("enable_expert_parallel")))
    plans = [(t, plan_for_gpu(arch, gpu, tp=t, pp=pp, max_model_len=max_model_len, **kw)) for t in sizes]
    for want in ("fits", "tight"):
        for t, p in plans:
            if p is not None and p.verdict == want and not p.may_not_start \
                    and (min_concurrency is None or p.max_concurrency >= min_concurrency):
                return t, p
    return None


def default_context(arch: Optional[ModelArch]) -> tuple[Optional[int], str]:
    """The context length llmctl sizes for when the user gives none, and why."""
    if arch is None or arch.context_limit is None:
        return None, "vLLM's default (the model's context)"
    ctx = arch.context_limit
    if ctx > DEFAULT_CONTEXT_CAP:
        return DEFAULT_CONTEXT_CAP, (
            f"llmctl's default context {DEFAULT_CONTEXT_CAP:,} (the model supports {ctx:,}; pass --max-model-len for more)"
        )
    return ctx, f"the model's context ({ctx:,})"


def align_len(tokens: int) -> int:
    """Round a context length down to a multiple of 1,024 (kept as is below 1,024)."""
    return tokens - tokens % LEN_ALIGN if tokens >= LEN_ALIGN else tokens


@dataclass(frozen=True)
class Choice:
    """TP and max_model_len for one model on one GPU type, with the plan and
    the reasons (for summaries: what was chosen and why)."""

    tp: int
    pp: int
    max_model_len: Optional[int]
    plan: Optional[Plan]
    tp_given: bool
    len_given: bool
    reasons: tuple[str, ...] = field(default_factory=tuple)

    @property
    def fits(self) -> bool:
        return self.plan is None or self.plan.verdict != "does_not_fit"

    @property
    def verdict(self) -> Optional[str]:
        return None if self.plan is None else self.plan.verdict


def choose(
    arch: Optional[ModelArch],
    gpu: GPUType,
    *,
    tp: Optional[int] = None,
    pp: int = 1,
    max_model_len: Optional[int] = None,
    min_concurrency: Optional[float] = None,
    **kw: Any,
) -> Choice:
    """TP and max_model_len by the rules in this module's docstring.

    ``kw`` goes to the plan (gpu_memory_utilization, dtype, kv_cache_dtype,
    max_num_seqs). Never raises for "does not fit": the Choice's plan says so
    (callers decide whether that is an error: only when the user set what
    made it so)."""
    tp_given, len_given = tp is not None, max_model_len is not None
    if gpu.is_cpu or arch is None:
        length = max_model_len if len_given else (CPU_DEFAULT_MAX_MODEL_LEN if gpu.is_cpu else None)
        why = []
        if not len_given and gpu.is_cpu:
            why.append(f"max_model_len {length}: llmctl's default for vLLM's CPU build")
        return Choice(tp or 1, pp, length, None, tp_given, len_given, tuple(why))

    if tp_given and len_given:
        p = plan_for_gpu(arch, gpu, tp=tp, pp=pp, max_model_len=max_model_len, **kw)
        return Choice(tp, pp, max_model_len, p, True, True)

    if len_given:
        hit = advise_tp(arch, gpu, max_model_len=max_model_len, pp=pp, min_concurrency=min_concurrency, **kw)
        if hit is not None:
            t, p = hit
            return Choice(t, pp, max_model_len, p, False, True, (_tp_reason(t, p, gpu),))
        sizes = tp_sizes_on_node(arch, gpu, pp, bool(kw.get("enable_expert_parallel"))) or [1]
        t = sizes[-1]
        p = plan_for_gpu(arch, gpu, tp=t, pp=pp, max_model_len=max_model_len, **kw)
        return Choice(t, pp, max_model_len, p, False, True, (f"TP {t}: the largest on one {gpu.name} node, and it does not fit",))

    length, len_why = default_context(arch)
    if tp_given:
        return _longest_at(arch, gpu, tp, pp, length, len_why, tp_given=True, **kw)

    hit = advise_tp(arch, gpu, max_model_len=length, pp=pp, min_concurrency=min_concurrency, **kw)
    if hit is not None:
        t, p = hit
        return Choice(t, pp, length, p, False, False, (_tp_reason(t, p, gpu), f"max_model_len {length:,}: {len_why}"))
    sizes = tp_sizes_on_node(arch, gpu, pp, bool(kw.get("enable_expert_parallel"))) or [1]
    return _longest_at(arch, gpu, sizes[-1], pp, length, len_why, tp_given=False, **kw)


def _longest_at(arch, gpu, tp, pp, length, len_why, *, tp_given: bool, **kw) -> Choice:
    """The longest max_model_len (≤ ``length``) that starts at this TP."""
    probe = plan_for_gpu(arch, gpu, tp=tp, pp=pp, max_model_len=length, **kw)
    why_tp = () if tp_given else (f"TP {tp}: the largest on one {gpu.name} node (none fits the default context)",)
    if probe.verdict != "does_not_fit" or length is None:
        return Choice(tp, pp, length, probe, tp_given, False, why_tp + (f"max_model_len {length:,}: {len_why}",))
    # A length llmctl picks must still start if the estimate is as far off as its
    # error band (the plan's margin), and be long enough to be worth serving.
    fits = align_len(int(probe.max_model_len_fits * (1 - probe.margin)))
    if fits < MIN_CHOSEN_CONTEXT:
        why = (f"max_model_len: at most {probe.max_model_len_fits:,} tokens start on {gpu.name} at TP {tp}, and "
               f"{fits:,} with the estimate's {probe.margin:.0%} error band; llmctl does not pick below "
               f"{MIN_CHOSEN_CONTEXT:,} (pass --max-model-len to force a shorter one)")
        return Choice(tp, pp, length, probe, tp_given, False, why_tp + (why,))
    p = plan_for_gpu(arch, gpu, tp=tp, pp=pp, max_model_len=fits, **kw)
    return Choice(tp, pp, fits, p, tp_given, False,
                  why_tp + (f"max_model_len {fits:,}: the most that fits on {gpu.name} at TP {tp}" + (f" x PP {pp}" if pp > 1 else "")
                            + f", within the estimate's {probe.margin:.0%} error band",))


def _tp_reason(tp: int, p: Plan, gpu: GPUType) -> str:
    if p.verdict == "fits":
        return f"TP {tp}: the smallest at which it fits on {gpu.name} ({p.max_concurrency:.1f} concurrent full-length requests)"
    return f"TP {tp}: the smallest at which it starts on {gpu.name} (tight: {p.max_concurrency:.1f} concurrent full-length requests)"


def sizing_options(engine_kwargs: dict[str, Any]) -> dict[str, Any]:
    """What the memory arithmetic needs from a model's vLLM engine arguments:
    dtype, quantization (a checkpoint's own, or online fp8 / experts_int8),
    KV-cache dtype, max_num_seqs, max_num_batched_tokens,
    gpu_memory_utilization, enforce_eager, enable_expert_parallel,
    data_parallel_size and all2all_backend (data-parallel attention), enable_prefix_caching, language_model_only (images and every
    modality given limited to 0), video_profiled (False when video alone is limited to 0), MTP speculative decoding's num_speculative_tokens and
    decode_context_parallel_size. gen-config,
    plan and validate size a config through this one mapping."""
    from llmctl.sizing.formats import DTYPE_CHOICES, KV_CACHE_DTYPE_CHOICES

    out: dict[str, Any] = {}
    dtype = str(engine_kwargs.get("dtype") or "auto").lower()
    out["dtype"] = dtype if dtype in DTYPE_CHOICES else "auto"
    quant = engine_kwargs.get("quantization")
    if isinstance(quant, str) and quant.strip():
        out["quantization"] = quant.strip().lower()
    kv = str(engine_kwargs.get("kv_cache_dtype") or "auto").lower()
    out["kv_cache_dtype"] = kv if kv in KV_CACHE_DTYPE_CHOICES else ("fp8" if "fp8" in kv else "auto")
    for key in ("max_num_seqs", "max_num_batched_tokens"):
        v = engine_kwargs.get(key)
        if is_int(v) and v > 0:
            out[key] = v
    for flag in ("enforce_eager", "enable_expert_parallel", "language_model_only"):
        if engine_kwargs.get(flag) is True:
            out[flag] = True
    dp = engine_kwargs.get("data_parallel_size")
    if is_int(dp) and dp > 1:
        out["data_parallel_size"] = dp
    dcp = engine_kwargs.get("decode_context_parallel_size")
    if is_int(dcp) and dcp > 1:
        out["decode_context_parallel_size"] = dcp
    backend = engine_kwargs.get("all2all_backend")
    if isinstance(backend, str) and backend.strip():
        out["all2all_backend"] = backend.strip()
    if isinstance(engine_kwargs.get("enable_prefix_caching"), bool):
        out["enable_prefix_caching"] = engine_kwargs["enable_prefix_caching"]
    limits = engine_kwargs.get("limit_mm_per_prompt")
    if isinstance(limits, dict) and limits:
        # every model with a tower takes images: the tower goes only when images are off and nothing given is on
        if limits.get("image") == 0 and all(v == 0 for v in limits.values()):
            out["language_model_only"] = True
        elif limits.get("video") == 0:
            out["video_profiled"] = False
    spec = engine_kwargs.get("speculative_config")
    if isinstance(spec, dict) and "mtp" in str(spec.get("method") or "") and isinstance(spec.get("num_speculative_tokens"), int):
        out["num_speculative_tokens"] = spec["num_speculative_tokens"]
    gmu = engine_kwargs.get("gpu_memory_utilization")
    if isinstance(gmu, (int, float)) and not isinstance(gmu, bool) and 0 < gmu <= 1:
        out["gpu_memory_utilization"] = gmu
    return out
