"""KV-cache bytes per token and how vLLM's KV cache manager turns bytes into
tokens (blocks, hybrid sliding-window groups, pipeline stages)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from llmctl.catalog import ModelArch
from llmctl.sizing.formats import _cdiv, _check_positive, kv_dtype_bytes
from llmctl.sizing.params import pp_partition

# vLLM's default KV block size on CUDA (CacheConfig.block_size = 16 for the
# FlashAttention/FlashInfer backends; vllm/config/cache.py). MLA backends use
# 64 (FlashMLA) — the difference is below one block per request.
BLOCK_SIZE = 16

def kv_bytes_per_token_layer(arch: ModelArch, tp: int = 1, kv_cache_dtype: str = "auto", dtype: str = "auto") -> int:
    """KV bytes one attention layer keeps per token on one GPU.

    GQA/MHA: K and V, max(1, kv_heads / tp) heads × head_dim each (vLLM
    replicates KV heads when tp > kv_heads; e.g. vllm/model_executor/models/
    llama.py ``num_kv_heads = max(1, total_num_kv_heads // tp_size)``).
    MLA: one compressed latent of kv_lora_rank + qk_rope_head_dim, no factor
    2, the same on every TP rank (MLAAttentionSpec, head count 1).
    """
    _check_positive("tp", tp)
    b = kv_dtype_bytes(arch, kv_cache_dtype, dtype)
    if arch.mla is not None:
        return (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * b
    heads = max(1, arch.num_key_value_heads // tp)
    return 2 * heads * arch.head_dim_effective * b


def _stage_layer_kinds(arch: ModelArch, pp: int) -> list[tuple[int, int]]:
    """(full-attention layers, sliding-window layers) on each pipeline stage.
    Sliding and linear-attention layers are assumed spread evenly (interleaved
    patterns); linear-attention layers (fixed-size state) hold no growing KV."""
    parts = pp_partition(arch.num_hidden_layers, pp)
    out = []
    for n in parts:
        swa = round(arch.sliding_window_layers * n / arch.num_hidden_layers)
        lin = round(arch.linear_attention_layers * n / arch.num_hidden_layers)
        out.append((max(0, n - swa - lin), swa))
    return out


def kv_bytes_per_token(
    arch: ModelArch, tp: int = 1, pp: int = 1, kv_cache_dtype: str = "auto", dtype: str = "auto"
) -> int:
    """KV bytes per token of context on the most loaded GPU, for the layers
    whose cache grows with the context (full attention).  Sliding-window
    layers hold at most the window (see :func:`kv_capacity`)."""
    per_layer = kv_bytes_per_token_layer(arch, tp, kv_cache_dtype, dtype)
    return max(full for full, _ in _stage_layer_kinds(arch, pp)) * per_layer


def kv_bytes_per_token_replica(
    arch: ModelArch, tp: int = 1, pp: int = 1, kv_cache_dtype: str = "auto", dtype: str = "auto"
) -> int:
    """The same, summed over every GPU of one replica (TP × PP GPUs)."""
    per_layer = kv_bytes_per_token_layer(arch, tp, kv_cache_dtype, dtype)
    return arch.full_attention_layers * per_layer * tp



@dataclass(frozen=True)
class KVCapacity:
    tokens: int  # what vLLM logs as "GPU KV cache size: N tokens" (per replica)
    # (max_model_len requests that fit: concurrency; for hybrid sliding-window
    # models tokens / max_model_len is not the concurrency)
    max_concurrency: float  # max_model_len requests that fit at once
    blocks: int  # KV blocks per GPU (worst stage)


def kv_capacity(
    arch: ModelArch,
    kv_bytes_available: float,
    *,
    max_model_len: int,
    tp: int = 1,
    pp: int = 1,
    kv_cache_dtype: str = "auto",
    dtype: str = "auto",
    max_num_batched_tokens: int = 8192,
    stage_kv_bytes: Optional[list[float]] = None,
) -> KVCapacity:
    """Tokens of KV cache per replica, as vLLM's KV cache manager counts them.

    Full attention only: blocks = bytes // (block_size × bytes per token);
    tokens = blocks × block_size.
    Hybrid (sliding-window + full layers), vLLM's hybrid allocator
    (kv_cache_utils._get_kv_cache_groups_uniform_page_size): layers are put in
    groups of g layers (g = the smaller layer count, or the larger when within
    1.5×), every group shares one pool of pages of g layers; a request at
    max_model_len needs cdiv(L, 16) blocks in each full group and
    cdiv(min(window − 1 + max_num_batched_tokens, L), 16) in each sliding
    group.  vLLM logs "GPU KV cache size" as num_blocks // groups × 16
    (kv_cache_utils._report_kv_cache_config, 0.9.2+), a pool figure: a
    request's sliding layers hold less than its full layers.
    With PP, each stage has its own pool; the smallest capacity wins.
    """
    per_layer = kv_bytes_per_token_layer(arch, tp, kv_cache_dtype, dtype)
    stages = _stage_layer_kinds(arch, pp)
    if stage_kv_bytes is None:
        stage_kv_bytes = [kv_bytes_available] * pp
    best: Optional[KVCapacity] = None
    for (full, swa), avail in zip(stages, stage_kv_bytes):
        avail = max(0.0, avail)
        window = arch.sliding_window or 0
        if swa == 0 or window >= max_model_len:
            # every layer keeps the whole context: one pool, tokens = blocks × 16
            blocks = int(avail // (BLOCK_SIZE * per_layer * (full + swa)))
            tokens = blocks * BLOCK_SIZE
            cap = KVCapacity(tokens, tokens / max_model_len, blocks)
        elif full == 0:
            # every layer slides (Mistral-7B-v0.1 style): a request holds at most the window
            blocks = int(avail // (BLOCK_SIZE * per_layer * swa))
            per_req = _cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), BLOCK_SIZE)
            conc = blocks / per_req
            cap = KVCapacity(blocks * BLOCK_SIZE, conc, blocks)
        else:
            lo, hi = min(full, swa), max(full, swa)
            g = hi if hi < lo * 1.5 else lo
            n_full, n_swa = _cdiv(full, g), _cdiv(swa, g)
            blocks = int(avail // (BLOCK_SIZE * per_layer * g))
            per_req = n_full * _cdiv(max_model_len, BLOCK_SIZE) + n_swa * _cdiv(
                min(window - 1 + max_num_batched_tokens, max_model_len), BLOCK_SIZE
            )
            conc = blocks / per_req
            # _report_kv_cache_config: num_blocks // len(kv_cache_groups) × block_size
            cap = KVCapacity(blocks // (n_full + n_swa) * BLOCK_SIZE, conc, blocks)
        if best is None or cap.max_concurrency < best.max_concurrency:
            best = cap
    assert best is not None
    return best



def _one_request_bytes(arch, length, tp, pp, kv_cache_dtype, dtype, mnbt) -> float:
    """KV bytes per GPU (worst stage) that one request of ``length`` tokens needs."""
    per_layer = kv_bytes_per_token_layer(arch, tp, kv_cache_dtype, dtype)
    worst = 0.0
    window = arch.sliding_window or 0
    for full, swa in _stage_layer_kinds(arch, pp):
        b = full * _cdiv(length, BLOCK_SIZE) * BLOCK_SIZE * per_layer
        if swa:
            held = length if window >= length else min(window - 1 + mnbt, length)
            b += swa * _cdiv(held, BLOCK_SIZE) * BLOCK_SIZE * per_layer
        worst = max(worst, b)
    return worst


def _max_len(arch, stage_kv, tp, pp, kv_cache_dtype, dtype, mnbt) -> int:
    """The largest context length one request can have (binary search, as
    vLLM's _estimate_max_model_len_from_groups does), capped at
    the model's context length when known."""
    avail = min(stage_kv)
    if avail <= 0:
        return 0
    hi = arch.context_limit or 10_000_000
    if _one_request_bytes(arch, 1, tp, pp, kv_cache_dtype, dtype, mnbt) > avail:
        return 0
    if _one_request_bytes(arch, hi, tp, pp, kv_cache_dtype, dtype, mnbt) <= avail:
        return hi
    lo = 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _one_request_bytes(arch, mid, tp, pp, kv_cache_dtype, dtype, mnbt) <= avail:
            lo = mid
        else:
            hi = mid - 1
    return lo

