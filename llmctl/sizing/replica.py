"""The memory plan of one replica: weights, overheads, KV cache, concurrency
and a fits / tight / does-not-fit verdict."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Optional

from llmctl.arch import ModelArch
from llmctl.sizing.formats import GIB, SizingError, _check_positive, kv_dtype_bytes, weight_format
from llmctl.sizing.kv import kv_bytes_per_token, kv_bytes_per_token_replica, kv_capacity, max_len, one_request_bytes
from llmctl.sizing.params import tp_problem
from llmctl.sizing.weights import weight_bytes
from llmctl.sizing.profile import overheads
from llmctl.sizing.versions import (
    VllmVersion,
    checkpoint_kv_cache_dtype,
    default_gpu_memory_utilization,
    hybrid_allocator,
    mxfp4_triton_layout,
    parse_vllm_version,
    sparse_mla_kv_cache_dtype,
    version_problem,
)
from llmctl.hardware import find_device as gpu_traits

# Verdict thresholds.  "tight": it starts, but fewer than this many
# max_model_len requests fit at once, or the estimate's error band could flip
# it (see estimate_margin).
TIGHT_CONCURRENCY = 2.0
# The error band of a plan the model covers: tests/test_sizing.py holds every
# published figure in tests/data within ±10 % on KV capacity (outliers
# excepted, each with its reason); docs/sizing.md has the per-category table.
ESTIMATE_MARGIN = 0.10
# The band of an approximate plan, by what is approximate (the kind of each
# reason); a plan takes the widest of its kinds.  bench/sizing.py prints the
# held-out KV error of approximate plans per kind (docs/sizing.md, "Uncertainty"):
MARGINS = {
    # multi-GPU communication memory not measured (PCIe, A100 NVLink, TP 8,
    # vLLM < 0.11 start-up buffers): held-out non-outlier cases of this kind stay
    # within 6.5 %; 15 % leaves room for the topologies not seen.
    "comm": 0.15,
    # GPU total not verified against a vLLM log: the L4's CUDA total is 0.44
    # GiB below its nvidia-smi total; on the A10G case's 4.8 GiB budget that is
    # +10.4 % (an outlier for this reason).
    "gpu_total": 0.15,
    # a vLLM version outside 0.8.5-0.33, or a GPU llmctl does not know: no
    # evidence either way (the one V0 case is within 4 %).
    "version": 0.25,
    "gpu_unknown": 0.25,
    # a vision tower whose weights are counted but whose encoder profile run
    # (activation peak) is estimated (docs/vllm-memory-2026.md §5.3).
    "vision": 0.20,
    # what the architecture facts do not describe (vision tower and its encoder
    # run, linear-attention state, unknown quantization): Llama-4-Scout's vision
    # tower put its KV estimate 35 % high.
    "architecture": 0.35,
}
APPROXIMATE_MARGIN = max(MARGINS.values())  # the widest band any plan gets


def estimate_margin(kinds=()) -> float:
    """The relative error band the verdict allows for: ESTIMATE_MARGIN for a
    setup the model covers, else the widest MARGINS entry among the kinds of
    its approximate reasons (unknown kinds count as the widest)."""
    kinds = list(kinds)
    if not kinds:
        return ESTIMATE_MARGIN
    return max(MARGINS.get(k, APPROXIMATE_MARGIN) for k in kinds)


@dataclass(frozen=True)
class Plan:
    tp: int
    pp: int
    gpu_memory_gib: float
    gpu_memory_utilization: float
    max_model_len: int
    weight_format: str
    kv_cache_dtype_bytes: int
    weights_gib_per_gpu: float
    weights_gib_total: float
    activation_gib: float
    non_torch_gib: float
    cuda_graph_gib: float
    budget_gib: float  # gpu memory × utilization
    kv_cache_gib: float  # per GPU (worst stage); negative when the rest does not fit
    kv_bytes_per_token: int  # per GPU (worst stage), growing layers only
    kv_bytes_per_token_replica: int  # all GPUs of one replica
    kv_cache_tokens: int  # per replica, as vLLM logs "GPU KV cache size: N tokens"
    max_concurrency: float  # max_model_len requests at once
    headroom_gib: float  # KV memory per GPU beyond what one max_model_len request needs
    max_model_len_fits: int  # the largest max_model_len that starts (0 if none)
    verdict: str  # fits | tight | does_not_fit
    reason: str
    warnings: tuple[str, ...] = ()
    approximate: bool = False
    max_num_batched_tokens: int = 8192
    vllm_version: str = ""  # the vLLM whose memory profile the plan models
    max_num_seqs: int = 256
    margin: float = ESTIMATE_MARGIN  # the error band the verdict allowed for
    approximate_reasons: tuple[str, ...] = ()
    approximate_kinds: tuple[str, ...] = ()  # MARGINS keys of the reasons
    executor: str = "ray"  # whose scheduling the KV report assumes: "ray" (Ray Serve LLM) or "mp" (vllm serve)
    kv_block_size: int = 16  # tokens per attention block (raised for hybrid linear-attention models)
    kv_groups: int = 1  # KV cache groups vLLM builds
    may_not_start: bool = False  # tight only through the band of an approximate estimate: the central figure does not start
    dp: int = 1  # data-parallel attention ranks: every figure above is one rank's (TP x PP GPUs, its own KV cache)
    ep_size: int = 1  # ranks the routed experts are dealt over (DP x TP with expert parallelism, else 1)
    kv_cache_dtype: str = "auto"  # the KV cache dtype the engine runs with ("auto" made what the checkpoint declares)

    @property
    def fits(self) -> bool:
        return self.verdict != "does_not_fit"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["warnings"] = list(self.warnings)
        d["approximate_reasons"] = list(self.approximate_reasons)
        d["approximate_kinds"] = list(self.approximate_kinds)
        return d


def plan(
    arch: ModelArch,
    *,
    gpu_memory_bytes: int,
    tp: int = 1,
    pp: int = 1,
    max_model_len: Optional[int] = None,
    gpu_memory_utilization: Optional[float] = None,
    dtype: str = "auto",
    kv_cache_dtype: str = "auto",
    weights_total_bytes: Optional[int] = None,
    max_num_batched_tokens: Optional[int] = None,
    max_num_seqs: Optional[int] = None,
    enforce_eager: bool = False,
    count_cuda_graphs: Optional[bool] = None,
    vllm_version: "str | VllmVersion | None" = None,
    gpu_name: Optional[str] = None,
    enable_expert_parallel: bool = False,
    quantization: Optional[str] = None,
    enable_prefix_caching: Optional[bool] = None,
    executor: str = "ray",
    language_model_only: bool = False,
    num_speculative_tokens: int = 0,
    data_parallel_size: int = 1,
    all2all_backend: Optional[str] = None,
    ep_internode: bool = False,
    decode_context_parallel_size: int = 1,
    video_profiled: bool = True,
) -> Plan:
    """Memory plan of one replica (TP × PP GPUs of ``gpu_memory_bytes`` each).

    ``vllm_version`` is the vLLM whose start-up profile is modelled (default:
    the one the installed Ray pins, :func:`~llmctl.sizing.versions.default_vllm_version`);
    it decides the default gpu_memory_utilization (0.9 up to 0.19, 0.92 from
    0.20), the batch defaults, whether CUDA-graph memory comes out of the KV
    budget (0.20+, not with ``enforce_eager``; ``count_cuda_graphs`` overrides)
    and how the KV cache is reported (:mod:`llmctl.sizing.kv`).
    ``gpu_name`` (a GPU type such as "H100" or "L40S") picks the GPU's traits —
    interconnect, compute capability; without it a listed GPU type of exactly
    ``gpu_memory_bytes`` is assumed.  ``max_model_len`` defaults to the model's
    context length (vLLM's default).  ``quantization`` is the engine's
    (online fp8, experts_int8); ``enable_prefix_caching`` (default: on for
    hybrid models from 0.29) sets how many state blocks a linear-attention
    request holds; ``executor`` is whose scheduler reserves in-flight tokens:
    "ray" (Ray Serve LLM, what llmctl deploys) or "mp" (``vllm serve``).
    ``language_model_only`` (or every modality limited to 0): the vision
    tower is neither loaded nor profiled.  ``num_speculative_tokens`` of
    MTP speculative decoding: the model's MTP layers are loaded and cached,
    and linear-attention state grows by one block per speculative token.
    ``data_parallel_size``: data-parallel attention (vLLM's DP with Ray
    Serve LLM's build_dp_openai_app): the plan is one DP rank's — its TP x PP
    GPUs, its own KV cache — with the routed experts dealt over DP x TP ranks
    when ``enable_expert_parallel``, and the MoE layers' all-to-all as
    ``all2all_backend`` does it (``ep_internode``: the EP group spans nodes).
    ``decode_context_parallel_size``: decode context parallelism (within the
    TP group) shards each request's KV over that many ranks: the same pool
    holds that many times the tokens. ``video_profiled`` False (video
    limited to 0): the start-up profile's dummy item is not a video
    (:func:`llmctl.sizing.profile.mm_profile_hold_bytes`).
    The verdict is "does_not_fit" when the TP
    size is invalid for the model, the weights and overheads exceed the budget,
    or one max_model_len request does not fit in the KV cache (vLLM refuses to
    start); "tight" when fewer than two such requests fit, or would if the
    estimate were as high as its error band (:func:`estimate_margin`: ±10 %,
    wider when the plan is approximate, by what is approximate); "fits" otherwise.
    """
    if language_model_only and arch.vision:
        arch = arch.model_copy(update={"vision": False, "vision_tower": None})
    spec = int(num_speculative_tokens or 0) if arch.num_nextn_predict_layers else 0
    version, gpu_memory_utilization, max_model_len = _checked_inputs(
        arch, tp, pp, gpu_memory_bytes, vllm_version, gpu_memory_utilization, max_model_len,
        max_num_batched_tokens, max_num_seqs)
    dp = max(int(data_parallel_size or 1), 1)
    ep_size = tp * dp if (enable_expert_parallel and arch.moe is not None) else 1
    ep = ep_size > 1
    problem = tp_problem(arch, tp, ep)
    dcp = max(int(decode_context_parallel_size or 1), 1)
    if problem is None and tp % dcp:  # vllm/config/parallel.py: DCP reuses the TP ranks
        problem = f"TP {tp} is not a multiple of decode_context_parallel_size {dcp} (vLLM: tp_size must be divisible by dcp_size)"
    fmt = weight_format(arch, dtype, quantization)
    warnings, approx = _notes(arch, fmt, tp, problem, max_model_len, gpu_name, gpu_memory_bytes, version)
    declared = arch.quant_info.kv_cache_dtype if arch.quant_info is not None else None
    resolved = checkpoint_kv_cache_dtype(version, kv_cache_dtype, declared)
    if resolved != kv_cache_dtype:
        warnings.append(f"KV cache {resolved}: the checkpoint's quantization_config declares it, and vLLM "
                        f"{version.label} runs an 'auto' kv_cache_dtype so")
        kv_cache_dtype = resolved
    cc = gpu_traits(gpu_name, gpu_memory_bytes).compute_capability if gpu_name else (0, 0)
    if arch.mla is not None and arch.indexer is not None:
        kv_cache_dtype = sparse_mla_kv_cache_dtype(version, kv_cache_dtype, cc, max(1, arch.num_attention_heads // tp))
    layout = arch if hybrid_allocator(version) or not arch.sliding_window_layers else arch.model_copy(
        update={"sliding_window_layers": 0, "kv_shared_sliding_layers": 0})  # vLLM < 0.9.2 allocates sliding layers as full attention

    oh = overheads(
        arch, fmt, gpu_memory_bytes=gpu_memory_bytes, gpu_name=gpu_name, tp=tp, pp=pp, vllm_version=version,
        max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs, enforce_eager=enforce_eager,
        expert_parallel=ep, count_cuda_graphs=count_cuda_graphs, dp=dp, all2all_backend=all2all_backend,
        internode=ep_internode, max_model_len=max_model_len, video_profiled=video_profiled,
    )
    mnbt = oh.max_num_batched_tokens
    wb = weight_bytes(arch, tp=tp, pp=pp, dtype=dtype, weights_total_bytes=weights_total_bytes, expert_parallel=ep,
                      quantization=quantization, max_num_batched_tokens=mnbt, mtp=bool(spec), ep_size=ep_size,
                      mxfp4_triton=mxfp4_triton_layout(version, cc))
    approx.extend(oh.approximate)
    budget = gpu_memory_bytes * gpu_memory_utilization
    stage_kv = [budget - w - o.total for w, o in zip(wb.per_stage, oh.stages)]
    worst = min(range(pp), key=lambda i: stage_kv[i])
    kv_avail = stage_kv[worst]
    kv_args = dict(tp=tp, pp=pp, kv_cache_dtype=kv_cache_dtype, dtype=dtype)
    run = dict(v=version, executor=executor, prefix_caching=enable_prefix_caching, spec=spec, dcp=dcp)
    cap = kv_capacity(layout, kv_avail, max_model_len=max_model_len, max_num_batched_tokens=mnbt, stage_kv_bytes=stage_kv,
                      vllm_version=version, executor=executor, prefix_caching=enable_prefix_caching,
                      speculative_tokens=spec, dcp=dcp, **kv_args)
    one_request = one_request_bytes(layout, max_model_len, tp, pp, kv_cache_dtype, dtype, mnbt, **run)
    fits_len = max_len(layout, stage_kv, tp, pp, kv_cache_dtype, dtype, mnbt, **run)
    approx = list(dict.fromkeys(approx))
    kinds = tuple(dict.fromkeys(k for k, _ in approx))
    reasons = tuple(r for _, r in approx)
    margin = estimate_margin(kinds)
    warnings.extend(f"approximate: {r}" for r in reasons)
    stage = oh.stages[worst]
    verdict, reason = _verdict(problem, kv_avail, cap, one_request, fits_len, max_model_len, margin,
                               wb.per_stage[worst], stage.activation + stage.non_torch + stage.cuda_graphs,
                               budget, gpu_memory_utilization, gpu_memory_bytes,
                               unmodelled=MARGINS["architecture"] if _could_be_smaller(arch, fmt) else 0.0)
    g = lambda b: round(b / GIB, 2)  # noqa: E731
    return Plan(
        tp=tp, pp=pp, gpu_memory_gib=g(gpu_memory_bytes), gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len, weight_format=fmt.label, kv_cache_dtype_bytes=kv_dtype_bytes(arch, kv_cache_dtype, dtype),
        weights_gib_per_gpu=g(wb.per_gpu), weights_gib_total=g(wb.total), activation_gib=g(stage.activation),
        non_torch_gib=g(stage.non_torch), cuda_graph_gib=g(stage.cuda_graphs), budget_gib=g(budget), kv_cache_gib=g(kv_avail),
        kv_bytes_per_token=kv_bytes_per_token(layout, tp, pp, kv_cache_dtype, dtype),
        kv_bytes_per_token_replica=kv_bytes_per_token_replica(layout, tp, pp, kv_cache_dtype, dtype),
        kv_cache_tokens=max(0, cap.tokens) if not problem else 0,
        max_concurrency=_floor_tenth(cap.max_concurrency) if not problem else 0.0,
        headroom_gib=g(kv_avail - one_request), max_model_len_fits=fits_len if not problem else 0,
        verdict=verdict, reason=reason, warnings=tuple(warnings), approximate=bool(approx), max_num_batched_tokens=mnbt,
        vllm_version=version.label, max_num_seqs=oh.max_num_seqs, margin=margin, approximate_reasons=reasons,
        approximate_kinds=kinds, executor=executor, kv_block_size=cap.block_size, kv_groups=cap.groups,
        may_not_start=verdict == "tight" and "may not start" in reason, dp=dp, ep_size=ep_size,
        kv_cache_dtype=kv_cache_dtype or "auto",
    )


def _checked_inputs(arch, tp, pp, gpu_memory_bytes, vllm_version, gmu, max_model_len, mnbt, max_num_seqs):
    """(version, gpu_memory_utilization, max_model_len) after the checks and defaults."""
    _check_positive("tp", tp)
    _check_positive("pp", pp)
    if gpu_memory_bytes is None or gpu_memory_bytes <= 0:
        raise SizingError("gpu_memory", "GPU memory must be positive")
    version = parse_vllm_version(vllm_version)
    if gmu is None:
        gmu = default_gpu_memory_utilization(version)
    if not (0 < gmu <= 1):
        raise SizingError("gpu_memory_utilization", f"gpu_memory_utilization must be in (0, 1] (got {gmu})")
    if max_model_len is None:
        max_model_len = arch.context_limit
        if max_model_len is None:
            raise SizingError("max_model_len", "the model's context length (max_position_embeddings) is unknown; give max_model_len")
    _check_positive("max_model_len", max_model_len)
    for name, value in (("max_num_batched_tokens", mnbt), ("max_num_seqs", max_num_seqs)):
        if value is not None:
            _check_positive(name, value)
    return version, gmu, max_model_len


def _notes(arch, fmt, tp, problem, max_model_len, gpu_name, gpu_memory_bytes, version):
    """(warnings, approximate reasons as (kind, reason)) of a plan: what it
    does not model, by kind (MARGINS)."""
    warnings: list[str] = []
    approx: list[tuple[str, str]] = []
    if fmt.note:
        warnings.append(fmt.note)
    if fmt.approximate:
        approx.append(("architecture", f"weight size of quantization '{arch.quantization or fmt.label}' not known"))
    if arch.mla is None and tp > arch.num_key_value_heads and problem is None:
        warnings.append(
            f"TP {tp} > {arch.num_key_value_heads} KV heads: every KV head is replicated on "
            f"{tp // arch.num_key_value_heads} GPUs, so KV cache per GPU does not shrink beyond TP {arch.num_key_value_heads}"
        )
    if arch.context_limit and max_model_len > arch.context_limit:
        warnings.append(
            f"max_model_len {max_model_len} exceeds the model's context of {arch.context_limit} tokens; "
            "vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
        )
    tower = arch.vision_tower
    if arch.vision and (tower is None or not tower.parameters):
        warnings.append("vision tower not counted: weights are higher than shown")
        approx.append(("architecture", "vision tower (weights and its encoder profile run) not counted"))
    elif arch.vision:
        approx.append(("vision", "the vision encoder's profile run (its activation peak) is estimated, not measured"))
    if arch.approximate:
        approx.append(("architecture", arch.approximate))
    if arch.linear_attention_layers and arch.linear_attention is None:
        approx.append(("architecture", f"{arch.linear_attention_layers} linear-attention layers: their state size is not known"))
    traits = gpu_traits(gpu_name, gpu_memory_bytes)
    if not traits.known:
        approx.append(("gpu_unknown", f"GPU '{traits.name}' not known to llmctl: interconnect and kernels guessed from its size"))
    elif "UNVERIFIED" in traits.source and abs(traits.memory_bytes - gpu_memory_bytes) < GIB // 100:
        approx.append(("gpu_total", f"{traits.name}'s total memory is not verified against a vLLM log"))
    why_version = version_problem(version)
    if why_version:
        approx.append(("version", why_version))
    return warnings, approx


def _could_be_smaller(arch, fmt) -> bool:
    """What llmctl does not model about this model could make it need less
    memory than estimated: a quantization of unknown size (sized at 1 byte per
    weight), linear-attention layers of unknown state size or a hybrid
    pattern not read (sized as attention layers). An uncounted vision tower
    only adds memory, so it never turns "does not fit" into "may start"."""
    return bool(fmt.approximate or (arch.linear_attention_layers and arch.linear_attention is None)
                or "hybrid_override_pattern" in (arch.approximate or "") or "not an architecture llmctl models" in (arch.approximate or ""))


def _floor_tenth(x: float) -> float:
    """The one concurrency figure verdicts, reasons and rows use: floored to
    0.1 (a capacity is never shown, or judged, higher than computed)."""
    return math.floor(max(0.0, x) * 10 + 1e-9) / 10


def _verdict(problem, kv_avail, cap, one_request, fits_len, max_model_len, margin, weights, overhead, budget, gmu, total,
             unmodelled=0.0):
    """The verdict and its reason. A plan resting on what llmctl does not model
    about the model, where that could make it smaller (``unmodelled``: the
    "architecture" band, :func:`_could_be_smaller`) says "does not fit" only
    when even the edge of that band does not fit — the memory it uses that much
    lower, the KV it holds that much higher; in between it is "tight" and says
    it may not start (advice never picks such a plan)."""
    margin = unmodelled or margin
    g = lambda b: round(b / GIB, 2)  # noqa: E731
    conc = _floor_tenth(cap.max_concurrency)
    if problem:
        return "does_not_fit", f"{problem}; vLLM refuses this TP size"
    # unmodelled: "does not fit" only when the weights alone, at the low edge of the band, exceed the budget
    if unmodelled and kv_avail <= 0 < budget - weights * (1 - margin):
        return "tight", (
            f"weights {g(weights)} GiB + activations/overhead {g(overhead)} GiB per GPU exceed {g(budget)} GiB by "
            f"{g(-kv_avail)} GiB, within the ±{margin:.0%} band of this approximate estimate: it may not start; "
            "use more GPUs (--tp), a quantized checkpoint, or a larger GPU for certainty")
    if unmodelled and 0 < kv_avail and (cap.max_concurrency < 1 or kv_avail < one_request) \
            and cap.max_concurrency * (1 + margin) >= 1 and kv_avail * (1 + margin) >= one_request:
        return "tight", (
            f"KV cache holds {cap.tokens:,} tokens ({g(kv_avail)} GiB per GPU), just under one {max_model_len:,}-token "
            f"request ({g(one_request)} GiB), within the ±{margin:.0%} band of this approximate estimate: it may not start"
            + (f"; --max-model-len {fits_len} fits" if fits_len > 0 else ""))
    if kv_avail <= 0:
        return "does_not_fit", (
            f"weights {g(weights)} GiB + activations/overhead {g(overhead)} GiB per GPU exceed "
            f"{g(budget)} GiB ({gmu:g} × {g(total)} GiB); "
            "use more GPUs (--tp), a quantized checkpoint, or a larger GPU"
        )
    if cap.max_concurrency < 1 or kv_avail - one_request < 0:
        return "does_not_fit", (
            f"KV cache holds {cap.tokens:,} tokens ({g(kv_avail)} GiB per GPU) but one {max_model_len:,}-token "
            f"request needs {g(one_request)} GiB; vLLM refuses to start"
            + (f"; --max-model-len {fits_len} would fit" if fits_len > 0 else "")
        )
    # tight: fewer than TIGHT_CONCURRENCY requests fit, or would if the estimate is `margin` too high
    tight = cap.max_concurrency * (1 - margin) < TIGHT_CONCURRENCY
    reason = (
        f"{g(kv_avail)} GiB of KV cache per GPU = {cap.tokens:,} tokens, "
        f"{conc:.1f} concurrent {max_model_len:,}-token requests"
    )
    if tight:
        reason += f" (fewer than {TIGHT_CONCURRENCY:g}"
        if conc >= TIGHT_CONCURRENCY:
            reason += f" if the estimate is {margin:.0%} high"
        if cap.max_concurrency * (1 - margin) < 1:
            reason += f"; it may not start if the estimate is {margin:.0%} high"
        reason += "; lower --max-model-len or add GPUs for headroom)"
    return ("tight" if tight else "fits"), reason
