"""The memory plan of one replica: weights, overheads, KV cache, concurrency
and a fits / tight / does-not-fit verdict."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Optional

from llmctl.catalog import ModelArch
from llmctl.sizing.formats import GIB, SizingError, _check_positive, kv_dtype_bytes, weight_format
from llmctl.sizing.kv import (
    _max_len,
    _one_request_bytes,
    kv_bytes_per_token,
    kv_bytes_per_token_replica,
    kv_capacity,
)
from llmctl.sizing.params import tp_problem, weight_bytes
from llmctl.sizing.profile import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    activation_bytes,
    cuda_graph_bytes,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    non_torch_bytes,
)

# Verdict thresholds.  "tight": it starts, but fewer than this many
# max_model_len requests fit at once, or the estimate's error band (the
# accuracy table in docs/sizing.md is within ±15 %) could flip it.
TIGHT_CONCURRENCY = 2.0
ESTIMATE_MARGIN = 0.15

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

    @property
    def fits(self) -> bool:
        return self.verdict != "does_not_fit"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["warnings"] = list(self.warnings)
        return d


def plan(
    arch: ModelArch,
    *,
    gpu_memory_bytes: int,
    tp: int = 1,
    pp: int = 1,
    max_model_len: Optional[int] = None,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    dtype: str = "auto",
    kv_cache_dtype: str = "auto",
    weights_total_bytes: Optional[int] = None,
    max_num_batched_tokens: Optional[int] = None,
    max_num_seqs: Optional[int] = None,
    enforce_eager: bool = False,
    count_cuda_graphs: bool = True,
) -> Plan:
    """Memory plan of one replica (TP × PP GPUs of ``gpu_memory_bytes`` each).

    ``max_model_len`` defaults to the model's context length (vLLM's
    default).  ``count_cuda_graphs=False`` models vLLM < 0.21, which did not
    take CUDA-graph memory out of the KV budget.  The verdict is "does_not_fit" when the TP size is invalid for
    the model, the weights and overheads exceed the budget, or one
    max_model_len request does not fit in the KV cache (vLLM refuses to start);
    "tight" when fewer than two such requests fit or the estimate's error
    margin could tip it; "fits" otherwise.
    """
    _check_positive("tp", tp)
    _check_positive("pp", pp)
    if gpu_memory_bytes is None or gpu_memory_bytes <= 0:
        raise SizingError("gpu_memory", "GPU memory must be positive")
    if not (0 < gpu_memory_utilization <= 1):
        raise SizingError("gpu_memory_utilization", f"gpu_memory_utilization must be in (0, 1] (got {gpu_memory_utilization})")
    if max_model_len is None:
        max_model_len = arch.context_limit
        if max_model_len is None:
            raise SizingError("max_model_len", "the model's context length (max_position_embeddings) is unknown; give max_model_len")
    _check_positive("max_model_len", max_model_len)
    if max_num_batched_tokens is None:
        max_num_batched_tokens = default_max_num_batched_tokens(gpu_memory_bytes)
    if max_num_seqs is None:
        max_num_seqs = default_max_num_seqs(gpu_memory_bytes)
    warnings: list[str] = []
    problem = tp_problem(arch, tp)
    fmt = weight_format(arch, dtype)
    if fmt.note:
        warnings.append(fmt.note)
    kvb = kv_dtype_bytes(arch, kv_cache_dtype, dtype)
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
    if arch.vision:
        warnings.append("vision tower not counted: weights are a little higher than shown")
    if arch.approximate:
        warnings.append(f"approximate: {arch.approximate}")

    wb = weight_bytes(arch, tp=tp, pp=pp, dtype=dtype, weights_total_bytes=weights_total_bytes)
    act = activation_bytes(arch, tp=tp, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs)
    nt = non_torch_bytes(tp, pp)
    graphs = 0 if (enforce_eager or not count_cuda_graphs) else cuda_graph_bytes(tp)
    budget = gpu_memory_bytes * gpu_memory_utilization
    stage_kv = [budget - w - act - nt - graphs for w in wb.per_stage]
    kv_avail = min(stage_kv)
    cap = kv_capacity(
        arch, kv_avail, max_model_len=max_model_len, tp=tp, pp=pp, kv_cache_dtype=kv_cache_dtype,
        dtype=dtype, max_num_batched_tokens=max_num_batched_tokens, stage_kv_bytes=stage_kv,
    )
    per_tok = kv_bytes_per_token(arch, tp, pp, kv_cache_dtype, dtype)
    per_tok_rep = kv_bytes_per_token_replica(arch, tp, pp, kv_cache_dtype, dtype)
    one_request = _one_request_bytes(arch, max_model_len, tp, pp, kv_cache_dtype, dtype, max_num_batched_tokens)
    headroom = kv_avail - one_request
    fits_len = _max_len(arch, stage_kv, tp, pp, kv_cache_dtype, dtype, max_num_batched_tokens)

    g = lambda b: round(b / GIB, 2)  # noqa: E731
    # The one concurrency figure verdicts, reasons and rows use: floored to 0.1
    # (a capacity is never shown, or judged, higher than computed).
    conc = math.floor(max(0.0, cap.max_concurrency) * 10 + 1e-9) / 10
    if problem:
        verdict, reason = "does_not_fit", f"{problem}; vLLM refuses this TP size"
    elif kv_avail <= 0:
        verdict = "does_not_fit"
        reason = (
            f"weights {g(wb.per_gpu)} GiB + activations/overhead {g(act + nt + graphs)} GiB per GPU exceed "
            f"{g(budget)} GiB ({gpu_memory_utilization:g} × {g(gpu_memory_bytes)} GiB); "
            "use more GPUs (--tp), a quantized checkpoint, or a larger GPU"
        )
    elif cap.tokens < max_model_len or headroom < 0:
        verdict = "does_not_fit"
        reason = (
            f"KV cache holds {cap.tokens:,} tokens ({g(kv_avail)} GiB per GPU) but one {max_model_len:,}-token "
            f"request needs {g(one_request)} GiB; vLLM refuses to start"
            + (f"; --max-model-len {fits_len} would fit" if fits_len > 0 else "")
        )
    else:
        tight = conc < TIGHT_CONCURRENCY or cap.tokens * (1 - ESTIMATE_MARGIN) < max_model_len
        verdict = "tight" if tight else "fits"
        reason = (
            f"{g(kv_avail)} GiB of KV cache per GPU = {cap.tokens:,} tokens, "
            f"{conc:.1f} concurrent {max_model_len:,}-token requests"
        )
        if tight:
            reason += f" (fewer than {TIGHT_CONCURRENCY:g}; lower --max-model-len or add GPUs for headroom)"
    return Plan(
        tp=tp,
        pp=pp,
        gpu_memory_gib=round(gpu_memory_bytes / GIB, 2),
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len,
        weight_format=fmt.label,
        kv_cache_dtype_bytes=kvb,
        weights_gib_per_gpu=g(wb.per_gpu),
        weights_gib_total=g(wb.total),
        activation_gib=g(act),
        non_torch_gib=g(nt),
        cuda_graph_gib=g(graphs),
        budget_gib=g(budget),
        kv_cache_gib=g(kv_avail),
        kv_bytes_per_token=per_tok,
        kv_bytes_per_token_replica=per_tok_rep,
        kv_cache_tokens=max(0, cap.tokens) if not problem else 0,
        max_concurrency=conc if not problem else 0.0,
        headroom_gib=g(headroom),
        max_model_len_fits=fits_len if not problem else 0,
        verdict=verdict,
        reason=reason,
        warnings=tuple(warnings),
        approximate=fmt.approximate or bool(arch.vision) or bool(arch.approximate),
        max_num_batched_tokens=max_num_batched_tokens,
    )

