"""KV-cache bytes per token and how vLLM's KV cache manager turns bytes into
tokens: layer specs, page sizes, groups, blocks, and the "GPU KV cache
size" figure it logs (docs/vllm-memory-2026.md §1-§4 is the source reading).

1. Every layer with a cache of its own gets a spec (vllm/v1/kv_cache_interface.py):
   full attention, sliding window, chunked local attention (bytes per token
   per layer: 2 × max(1, KV heads / TP) × head_dim × dtype; MLA: the latent,
   replicated on every rank, plus DeepSeek V3.2's indexer keys), or a
   Mamba/Gated-DeltaNet state (one page per sequence: conv + SSM state).
   Layers that share another layer's KV (Gemma 3n/4) have none.
2. Hybrid linear-attention models raise the attention block so one
   attention page holds a state page (platforms/interface.py
   _align_hybrid_block_size); unequal attention pages are unified by
   scaling the smaller block (kv_cache_utils.unify_kv_cache_spec_page_size).
3. Layers are grouped (_get_kv_cache_groups_uniform_page_size): g = the
   smallest layer count of a kind, or the largest when within 1.5×; a kind of
   n layers becomes cdiv(n, g) groups. One block id is a page in each of g
   layers: ``num_blocks = KV bytes // (g × page)`` on the most loaded GPU.
4. A request at max_model_len needs, per group: cdiv(L, block) (full),
   cdiv(min(W − 1 + in-flight, L), block) [+ 1 from 0.26] (sliding),
   cdiv(min(C + in-flight, L), block) (chunked), 1 state block, 2 with
   prefix caching (Mamba, 0.29's default for hybrids); in-flight tokens =
   max_num_batched_tokens × concurrent batches (PP under Ray Serve LLM's
   Ray executor; PP + 1 with async scheduling under ``vllm serve``, 0.26+).
5. The logged figure: ``num_blocks // groups × block`` up to vLLM 0.20.0;
   ``int(num_blocks / blocks_per_request × L)`` (= maximum concurrency ×
   max_model_len; get_kv_cache_capacity, the fix of vLLM issue #40691)
   from 0.20.1: logs of 0.20.1rc1.dev91 and 0.20.2 report it for hybrid
   models (where the two differ), a 0.20.0 log the older figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from llmctl.arch import ModelArch
from llmctl.sizing.formats import _cdiv, _check_positive, kv_dtype_bytes, kv_head_bytes
from llmctl.sizing.params import pp_partition
from llmctl.sizing.versions import VllmVersion, parse_vllm_version

# vLLM's default KV block size on CUDA (CacheConfig.block_size = 16 for the
# FlashAttention/FlashInfer backends; vllm/config/cache.py). Dense MLA is
# sized with 16 too (FlashMLA's 64 differs by less than a block per request);
# sparse MLA (DeepSeek V3.2's FLASHMLA_SPARSE / indexer kernels) uses 64.
BLOCK_SIZE = 16
SPARSE_MLA_BLOCK = 64
# DeepSeek V3.2: fp8_ds_mla latent = 512 fp8 NoPE + 4 fp32 scales + 64 bf16 RoPE
# (mla_attention.py); indexer key = index_head_dim fp8 + one fp32 scale per 128.
FP8_DS_MLA_BYTES = 656

# A request's KV figures are computed per stage and per kind of layer:
#   kinds: "full", "sliding", "chunked", "mamba"


def _full_geometry(arch: ModelArch) -> tuple[int, int]:
    return (arch.full_kv_heads or arch.num_key_value_heads), (arch.full_head_dim or arch.head_dim_effective)


def kv_bytes_per_token_layer(arch: ModelArch, tp: int = 1, kv_cache_dtype: str = "auto", dtype: str = "auto",
                             kind: str = "full") -> int:
    """KV bytes one attention layer keeps per token on one GPU.

    GQA/MHA: K and V, max(1, kv_heads / tp) heads × head_dim each (vLLM
    replicates KV heads when tp > kv_heads; e.g. vllm/model_executor/models/
    llama.py ``num_kv_heads = max(1, total_num_kv_heads // tp_size)``); full
    layers of Gemma 4 have their own KV heads and head_dim.
    MLA: one compressed latent of kv_lora_rank + qk_rope_head_dim, no factor
    2, the same on every TP rank (MLAAttentionSpec, head count 1); with
    DeepSeek V3.2's indexer the indexer's keys join the latent (one group,
    MLA + indexer pages), and an fp8 cache is either vLLM's standard layout
    (``fp8``: FlashInfer's sparse MLA) or DeepSeek's (``fp8_ds_mla``: FlashMLA
    sparse) — :func:`llmctl.sizing.versions.sparse_mla_kv_cache_dtype` says
    which the engine picks.
    """
    _check_positive("tp", tp)
    b = kv_dtype_bytes(arch, kv_cache_dtype, dtype)
    if arch.mla is not None:
        latent = (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * b
        if arch.indexer is not None:
            if (kv_cache_dtype or "").strip().lower() == "fp8_ds_mla":
                latent = FP8_DS_MLA_BYTES
            idx = arch.indexer.head_dim + arch.indexer.head_dim // 128 * 4
            latent += idx * arch.indexer.layers / arch.num_hidden_layers
        return int(latent) if float(latent).is_integer() else latent  # type: ignore[return-value]
    heads, hd = _full_geometry(arch) if kind == "full" else (arch.num_key_value_heads, arch.head_dim_effective)
    return 2 * max(1, heads // tp) * kv_head_bytes(kv_cache_dtype, hd, b)


def mamba_page_bytes(arch: ModelArch, tp: int = 1, dtype: str = "auto", spec: int = 0) -> int:
    """Bytes of one sequence's state in one linear-attention layer on one GPU
    (mamba_utils.py gated_delta_net_state_shape / mamba2_state_shape; conv
    state in the model dtype, SSM state in mamba_ssm_dtype when set; MTP
    speculative decoding keeps ``spec`` more conv rows)."""
    la = arch.linear_attention
    if la is None:
        return 0
    from llmctl.sizing.formats import weight_format

    conv_b = int(weight_format(arch, dtype).dtype_bytes)
    ssm_b = la.ssm_state_bytes or conv_b
    if la.kind == "gdn":
        conv = (la.conv_kernel - 1 + spec) * (2 * la.key_head_dim * la.num_key_heads + la.value_head_dim * la.num_value_heads) // tp
        ssm = (la.num_value_heads // tp) * la.value_head_dim * la.key_head_dim
    else:
        ng = la.num_key_heads + (0 if la.num_key_heads % tp == 0 else tp - la.num_key_heads)
        conv = (la.conv_kernel - 1 + spec) * ((la.intermediate_size or 0) + 2 * ng * la.key_head_dim) // tp
        ssm = (la.num_value_heads // tp) * la.value_head_dim * la.key_head_dim
    return conv * conv_b + ssm * ssm_b


@dataclass(frozen=True)
class Kind:
    """One kind of cache-owning layer: how many there are on the model and
    what a block of one of them holds."""

    name: str  # full | sliding | chunked | mamba
    layers: int  # whole model, own cache only
    page: int  # bytes of one block of one layer on one GPU (after alignment / unification)
    block: int  # tokens per block (attention kinds)


@dataclass(frozen=True)
class Layout:
    """How vLLM groups a model's caches (whole model), and what one request needs."""

    kinds: tuple[Kind, ...]
    g: int  # layers per group
    groups: tuple[tuple[str, int], ...]  # (kind, number of groups)

    @property
    def n_groups(self) -> int:
        return sum(n for _, n in self.groups)

    @property
    def page(self) -> int:
        return max(k.page for k in self.kinds)

    @property
    def min_block(self) -> int:
        return min((k.block for k in self.kinds if k.name != "mamba"), default=BLOCK_SIZE)


def _own_counts(arch: ModelArch, spec: int = 0) -> dict[str, int]:
    """Cache-owning layers by kind; with MTP speculative decoding (``spec`` >
    0) the model's MTP layers are full-attention layers with a cache too."""
    mtp = arch.num_nextn_predict_layers if spec else 0
    return {
        "full": arch.full_attention_layers - arch.kv_shared_full_layers + mtp,
        "sliding": arch.sliding_window_layers - arch.kv_shared_sliding_layers,
        "chunked": arch.chunked_attention_layers,
        "mamba": arch.linear_attention_layers if arch.linear_attention is not None else 0,
    }


def layout(arch: ModelArch, tp: int = 1, kv_cache_dtype: str = "auto", dtype: str = "auto",
           spec: int = 0) -> Layout:
    """Specs, page sizes and groups of a model as vLLM builds them (module docstring, steps 1-3)."""
    counts = _own_counts(arch, spec)
    block = SPARSE_MLA_BLOCK if arch.indexer is not None else BLOCK_SIZE
    per_tok = {k: kv_bytes_per_token_layer(arch, tp, kv_cache_dtype, dtype, kind=k) for k in ("full", "sliding", "chunked")}
    pages = {k: per_tok[k] * block for k in per_tok}
    blocks = {k: block for k in per_tok}
    mamba = mamba_page_bytes(arch, tp, dtype, spec) if counts.get("mamba") else 0
    if mamba:
        # the attention block grows until one attention page holds a state page; the state page is padded to it
        attn_1 = per_tok["full"]
        b = max(block, block * _cdiv(mamba, block * attn_1))
        blocks = {k: b for k in per_tok}
        pages = {k: per_tok[k] * b for k in per_tok}
        mamba = pages["full"]
    present = [k for k in ("full", "sliding", "chunked") if counts.get(k)]
    top = max((pages[k] for k in present), default=0)
    for k in present:  # unify unequal attention pages: scale the smaller block when it divides, else pad
        if pages[k] < top:
            if top % pages[k] == 0:
                blocks[k] *= top // pages[k]
            pages[k] = top
    kinds = [Kind(k, counts[k], pages[k], blocks[k]) for k in present]
    if counts.get("mamba"):
        kinds.append(Kind("mamba", counts["mamba"], mamba, blocks["full"]))
    sizes = [k.layers for k in kinds] or [1]
    lo, hi = min(sizes), max(sizes)
    g = hi if hi < lo * 1.5 else lo
    return Layout(tuple(kinds), g, tuple((k.name, _cdiv(k.layers, g)) for k in kinds))


def in_flight_tokens(v: VllmVersion, mnbt: int, pp: int = 1, executor: str = "ray") -> int:
    """Tokens scheduled but not yet freed (VllmConfig.max_in_flight_tokens,
    0.29): one batch per concurrent step — PP batches under the Ray executor
    (Ray Serve LLM's; no async scheduling), PP + 1 with async scheduling
    (``vllm serve``'s default with the V2 model runner). Before 0.26 (0.25 read):
    one batch."""
    if not v.at_least(26):
        return mnbt
    return mnbt * (pp if executor == "ray" else pp + 1)


def blocks_per_request(lay: Layout, arch: ModelArch, length: int, *, mnbt: int, v: VllmVersion, pp: int = 1,
                       executor: str = "ray", prefix_caching: Optional[bool] = None, spec: int = 0, dcp: int = 1) -> int:
    """Block ids one request of ``length`` tokens holds, summed over groups.
    ``dcp``: decode context parallelism shards a full-attention request's
    tokens over the DCP ranks (kv_cache_interface.py FullAttentionSpec.
    max_memory_usage_bytes: cdiv(max_model_len, dcp_world_size))."""
    inflight = in_flight_tokens(v, mnbt, pp, executor)
    total = 0
    for k in lay.kinds:
        n = _cdiv(k.layers, lay.g)
        if k.name == "full":
            per = _cdiv(_cdiv(length, dcp), k.block)
        elif k.name == "sliding":
            window = arch.sliding_window or length
            # + 1: a window need not start at a block boundary (0.20+; the 0.20 and 0.22
            # Gemma 4 logs' concurrency needs it; the <= 0.19 logs report no per-request figure it changes)
            per = _cdiv(min(window - 1 + inflight, length), k.block) + (1 if v.at_least(20) else 0)
        elif k.name == "chunked":
            per = _cdiv(min((arch.attention_chunk_size or length) + inflight, length), k.block)
        else:  # one state block per sequence; align mode with prefix caching keeps two; + 1 per speculative token
            pc = prefix_caching if prefix_caching is not None else v.at_least(29)
            per = (2 if pc else 1) + spec
        total += n * per
    return total


def _stage_counts(arch: ModelArch, pp: int, spec: int = 0) -> list[dict[str, int]]:
    """Cache-owning layers of each kind on each pipeline stage (kinds assumed
    spread evenly over the layers: interleaved patterns)."""
    whole = _own_counts(arch, spec)
    n = arch.num_hidden_layers
    return [{k: round(c * part / n) for k, c in whole.items()} for part in pp_partition(n, pp)]


def kv_bytes_per_token(arch: ModelArch, tp: int = 1, pp: int = 1, kv_cache_dtype: str = "auto", dtype: str = "auto") -> int:
    """KV bytes per token of context on the most loaded GPU, for the layers
    whose cache grows with the context (full attention, own cache).
    Sliding-window and chunked layers hold at most their window (see
    :func:`kv_capacity`); linear-attention layers a fixed state."""
    if arch.compressed is not None:  # DeepSeek V4: the compressed caches (llmctl.sizing.dsv4)
        import llmctl.sizing.dsv4 as dsv4

        b = kv_dtype_bytes(arch, kv_cache_dtype, dtype)
        return int(max(dsv4.kv_token_bytes(arch, b, rs) for rs in dsv4.stage_ratios(arch, pp)))
    per_layer = kv_bytes_per_token_layer(arch, tp, kv_cache_dtype, dtype)
    return int(max(c["full"] for c in _stage_counts(arch, pp)) * per_layer)


def kv_bytes_per_token_replica(arch: ModelArch, tp: int = 1, pp: int = 1, kv_cache_dtype: str = "auto",
                               dtype: str = "auto") -> int:
    """The same, summed over every GPU of one replica (TP × PP GPUs)."""
    if arch.compressed is not None:
        import llmctl.sizing.dsv4 as dsv4

        return int(dsv4.kv_token_bytes(arch, kv_dtype_bytes(arch, kv_cache_dtype, dtype)) * tp)
    per_layer = kv_bytes_per_token_layer(arch, tp, kv_cache_dtype, dtype)
    return int(_own_counts(arch)["full"] * per_layer * tp)


@dataclass(frozen=True)
class KVCapacity:
    tokens: int  # what vLLM logs as "GPU KV cache size: N tokens" (per replica)
    max_concurrency: float  # max_model_len requests that fit at once
    blocks: int  # KV block ids (the most loaded stage's pool)
    block_size: int = BLOCK_SIZE  # tokens per attention block (raised for hybrid linear-attention models)
    groups: int = 1


def _stage_block_bytes(lay: Layout, arch: ModelArch, pp: int, spec: int = 0) -> list[int]:
    """Bytes of one block id on each stage: the group's layers there × page."""
    if pp == 1:
        return [lay.g * lay.page]
    out = []
    for counts in _stage_counts(arch, pp, spec):
        g_s = max((_cdiv(counts[k.name], n) for k, (_, n) in zip(lay.kinds, lay.groups) if counts[k.name]), default=0)
        out.append(max(g_s, 1) * lay.page)
    return out


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
    vllm_version: "str | VllmVersion | None" = None,
    executor: str = "ray",
    prefix_caching: Optional[bool] = None,
    speculative_tokens: int = 0,
    dcp: int = 1,
) -> KVCapacity:
    """Tokens of KV cache per replica as vLLM reports them, and the
    concurrency of max_model_len requests (module docstring). With PP each
    stage has its own pool; the smallest block count wins
    (get_kv_cache_configs: min over workers). ``dcp`` (decode context
    parallel size): each rank holds 1/dcp of every request's tokens, so the
    same pool holds dcp times the tokens (kv_cache_utils.py: "Multiplying the
    GPU KV cache size by the dcp_world_size")."""
    v = parse_vllm_version(vllm_version)
    if stage_kv_bytes is None:
        stage_kv_bytes = [kv_bytes_available] * pp
    if arch.compressed is not None:  # DeepSeek V4 (llmctl.sizing.dsv4)
        import llmctl.sizing.dsv4 as dsv4

        blocks, conc, _, groups = dsv4.capacity(arch, stage_kv_bytes, max_model_len, pp, kv_dtype_bytes(arch, kv_cache_dtype, dtype),
                                                in_flight_tokens(v, max_num_batched_tokens, pp, executor))
        return KVCapacity(int(conc * max_model_len), conc, blocks, dsv4.MLA_BLOCK, groups)
    lay = layout(arch, tp, kv_cache_dtype, dtype, speculative_tokens)
    per_block = _stage_block_bytes(lay, arch, pp, speculative_tokens)
    blocks = min(int(max(0.0, b) // pb) for b, pb in zip(stage_kv_bytes, per_block))
    bpr = blocks_per_request(lay, arch, max_model_len, mnbt=max_num_batched_tokens, v=v, pp=pp, executor=executor,
                             prefix_caching=prefix_caching, spec=speculative_tokens, dcp=dcp)
    conc = blocks / bpr if bpr else 0.0
    if v.at_least(20, 1):
        tokens = int(conc * max_model_len)
    else:
        tokens = blocks // lay.n_groups * lay.min_block * dcp
    return KVCapacity(tokens, conc, blocks, lay.min_block, lay.n_groups)


def one_request_bytes(arch: ModelArch, length: int, tp: int, pp: int, kv_cache_dtype: str, dtype: str, mnbt: int,
                      v: VllmVersion, executor: str = "ray", prefix_caching: Optional[bool] = None, spec: int = 0,
                      dcp: int = 1) -> float:
    """KV bytes per GPU (the most loaded stage) one request of ``length`` tokens needs."""
    if arch.compressed is not None:
        import llmctl.sizing.dsv4 as dsv4

        return dsv4.one_request_bytes(arch, length, pp, kv_dtype_bytes(arch, kv_cache_dtype, dtype),
                                      in_flight_tokens(v, mnbt, pp, executor))
    lay = layout(arch, tp, kv_cache_dtype, dtype, spec)
    bpr = blocks_per_request(lay, arch, length, mnbt=mnbt, v=v, pp=pp, executor=executor, prefix_caching=prefix_caching,
                             spec=spec, dcp=dcp)
    return bpr * max(_stage_block_bytes(lay, arch, pp, spec))


def max_len(arch: ModelArch, stage_kv: list[float], tp: int, pp: int, kv_cache_dtype: str, dtype: str, mnbt: int,
            v: VllmVersion, executor: str = "ray", prefix_caching: Optional[bool] = None, spec: int = 0,
            dcp: int = 1) -> int:
    """The largest context length one request can have (binary search, as
    vLLM's _estimate_max_model_len_from_groups does), capped at the model's
    context length when known."""
    avail = min(stage_kv)
    if avail <= 0:
        return 0
    hi = arch.context_limit or 10_000_000

    def need(x: int) -> float:
        return one_request_bytes(arch, x, tp, pp, kv_cache_dtype, dtype, mnbt, v, executor, prefix_caching, spec, dcp)

    if need(1) > avail:
        return 0
    if need(hi) <= avail:
        return hi
    lo = 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if need(mid) <= avail:
            lo = mid
        else:
            hi = mid - 1
    return lo
