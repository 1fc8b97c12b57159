"""Weight bytes per GPU: how vLLM shards each tensor over tensor- and
pipeline-parallel ranks, by storage format (bf16, fp8 blocks, 4-bit groups,
NVFP4, MXFP4 with its padding), plus the buffers vLLM allocates with the
model and measures as weights."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from llmctl.arch import ModelArch
from llmctl.sizing.formats import (
    MXFP4_HIDDEN_ALIGN,
    MXFP4_INTER_ALIGN,
    SizingError,
    WeightFormat,
    _check_positive,
    _round_up,
    _scheme_bytes,
    weight_format,
)
from llmctl.sizing.rope import rope_cache_bytes
from llmctl.sizing.params import _globals, _Layer, _layers, _padded_vocab, _tied, count_parameters, pp_partition


@dataclass(frozen=True)
class WeightBytes:
    total: int  # whole model as loaded (all GPUs of one replica hold it once, plus replicas)
    per_gpu: int  # the most loaded GPU (worst pipeline stage)
    per_stage: tuple[int, ...]  # per GPU, for each pipeline stage
    replicated_per_gpu: int  # part of per_gpu that every TP rank holds in full
    fmt: WeightFormat
    from_index: bool = False


def expert_width_per_rank(arch: ModelArch, tp: int, expert_parallel: bool = False) -> int:
    """One routed expert's intermediate width on one rank: split over TP
    (column/row-parallel, rounded up), or whole with expert parallelism
    (FusedMoEParallelConfig.make: the MoE layer runs with tp_size 1)."""
    inter = (arch.moe.moe_intermediate_size if arch.moe else None) or arch.intermediate_size
    return inter if expert_parallel else -(-inter // tp)


def triton_mxfp4_expert_bytes(h: int, i: int, prepad64: bool, scales_kept: bool) -> int:
    """One MXFP4 expert (hidden ``h``, intermediate ``i`` on this rank) as
    vLLM's TRITON MoE backend holds it on Hopper (:func:`llmctl.sizing.versions.mxfp4_triton_layout`):
    Mxfp4MoEMethod.create_weights rounds the intermediate to 64; _swizzle_mxfp4
    hands triton_kernels each uint8 value tensor transposed (the packed axis
    first), whose HopperMXValueLayout pre-pads both byte dimensions to 64 (when
    ``prepad64``) and, after its transpose, pads them to 16 and 32; the e8m0
    scales (one byte per 32 values) are swizzled by HopperMXScaleLayout, rows
    padded to 2 x num_warps(8) x 2 x 8 = 256, columns to 2 (the originals kept
    beside them when ``scales_kept``); the biases become float32."""
    ip = _round_up(i, 64)
    p = 64 if prepad64 else 1

    def values(packed: int, other: int) -> int:
        return _round_up(_round_up(other, p), 16) * _round_up(_round_up(packed, p), 32)

    w = values(h // 2, 2 * ip) + values(ip // 2, h)  # w13 [2i, h/2], w2 [h, i/2]
    swizzled = _round_up(2 * ip, 256) * _round_up(h // 32, 2) + _round_up(h, 256) * _round_up(ip // 32, 2)
    original = 2 * ip * (h // 32) + h * (ip // 32)
    return w + swizzled + (original if scales_kept else 0) + (2 * ip + h) * 4


def _layer_bytes(layer: _Layer, arch: ModelArch, fmt: WeightFormat, tp: int,
                 expert_parallel: bool = False, ep_size: int = 0,
                 mxfp4_triton: Optional[tuple[bool, bool]] = None) -> tuple[float, float]:
    """(bytes per GPU, of which replicated) for one layer at TP.  With expert
    parallelism the routed experts are dealt out whole over the TP ranks
    (fused_moe/layer.py determine_expert_map: E // ep each, the first E % ep
    ranks one more — the most loaded rank is counted). ``ep_size``: the
    ranks the experts are dealt over when that is not TP: with data-parallel
    attention the EP group is every rank of every DP rank, DP x TP
    (vllm/config/parallel.py: the EP group spans DP x PCP x TP)."""
    attn = _scheme_bytes(fmt, "attention")
    lin = _scheme_bytes(fmt, "linear")
    exp = _scheme_bytes(fmt, "expert")
    plain = _scheme_bytes(fmt, "plain")
    kvh = arch.num_key_value_heads
    if layer.kind == "full" and arch.full_kv_heads:
        kvh = arch.full_kv_heads
    # k/v: each rank holds max(1, kv_heads / tp) heads (replicated when tp > kv heads)
    kv_frac = max(1, kvh // tp) / kvh if arch.mla is None else 0
    replicated = layer.attn_replicated * attn + layer.router * plain + layer.norms * plain + layer.extra_replicated * lin
    ranks = max(ep_size, tp)
    ep = expert_parallel and ranks > 1 and arch.moe is not None
    if ep:
        share = -(-arch.moe.num_experts // ranks) / arch.moe.num_experts
    else:
        share = 1 / tp
    experts = layer.experts * exp * share
    if fmt.scheme == "mxfp4" and layer.experts and arch.moe is not None:
        h = arch.hidden_size
        i_rank = expert_width_per_rank(arch, tp, ep)
        if mxfp4_triton is not None:
            local = -(-arch.moe.num_experts // ranks) if ep else arch.moe.num_experts
            experts = local * triton_mxfp4_expert_bytes(h, i_rank, *mxfp4_triton)
        else:
            hp = _round_up(h, MXFP4_HIDDEN_ALIGN)
            ip = _round_up(i_rank, MXFP4_INTER_ALIGN)
            experts = experts * (hp * ip) / (h * i_rank)
    split = layer.attn_split * attn / tp + (layer.mlp_split + layer.shared + layer.linear_split + layer.extra_split) * lin / tp
    kv = layer.attn_kv * attn * kv_frac
    return split + experts + kv + replicated, replicated


def weight_bytes(
    arch: ModelArch,
    *,
    tp: int = 1,
    pp: int = 1,
    dtype: str = "auto",
    weights_total_bytes: Optional[int] = None,
    expert_parallel: bool = False,
    quantization: Optional[str] = None,
    max_num_batched_tokens: Optional[int] = None,
    mtp: bool = False,
    ep_size: int = 0,
    mxfp4_triton: Optional[tuple[bool, bool]] = None,
) -> WeightBytes:
    """Weight bytes of the model and per GPU at TP × PP.

    Embeddings and lm_head are vocab-parallel (split over TP, padded to 64);
    attention and MLP projections and every MoE expert are split over TP;
    k/v projections are replicated once TP exceeds the KV heads; norms, the
    MoE router and MLA's q_a / kv_a projections (ReplicatedLinear) are
    replicated.  Embeddings sit on the first pipeline stage, lm_head on the
    last.  With ``weights_total_bytes`` (e.g. metadata.total_size of
    model.safetensors.index.json) the per-GPU split keeps this structure but
    is scaled to the exact total (MTP layers included, since checkpoints carry
    them).  ``expert_parallel`` (vLLM's enable_expert_parallel) deals whole
    experts out over the TP ranks instead of splitting each one.
    ``quantization``: the engine's (online fp8, experts_int8; a checkpoint's
    own quantization_config wins).  ``max_num_batched_tokens``: buffers vLLM
    allocates with the model and measures as weights (Gemma 3n/4 per-layer
    inputs, Qwen3-VL deepstack: T × width × 2 B on the first stage).
    ``mtp``: MTP speculative decoding loads the model's next-token layers
    (one decoder layer each, plus its input projection and norms) on the
    last stage.  ``ep_size``: with ``expert_parallel``, the ranks the
    experts are dealt over (DP x TP with data-parallel attention; default TP).
    """
    _check_positive("tp", tp)
    _check_positive("pp", pp)
    fmt = weight_format(arch, dtype, quantization)
    if arch.compressed is not None:
        return _dsv4(arch, fmt, tp, pp, max_num_batched_tokens or 8192, expert_parallel, weights_total_bytes, ep_size)
    pc = count_parameters(arch)
    layers = _layers(arch)
    plain = _scheme_bytes(fmt, "plain")
    head = _scheme_bytes(fmt, "lm_head")
    vocab_rows = _padded_vocab(arch.vocab_size or 0)
    emb_gpu = vocab_rows / tp * arch.hidden_size * plain
    head_gpu = vocab_rows / tp * arch.hidden_size * head
    g_vocab, g_split, g_rep = _globals(arch)
    first_extra = g_vocab / tp * plain + g_split / tp * plain + g_rep * plain  # PLE table / projections, vision tower
    first_rep = g_rep * plain
    if max_num_batched_tokens:
        first_extra += _buffers(arch, max_num_batched_tokens)
    parts = pp_partition(arch.num_hidden_layers, pp)
    per_stage: list[float] = []
    rep_stage: list[float] = []
    start = 0
    for s, n in enumerate(parts):
        b = 0.0
        rep = 0.0
        for layer in layers[start:start + n]:
            lb, lr = _layer_bytes(layer, arch, fmt, tp, expert_parallel, ep_size, mxfp4_triton)
            b += lb
            rep += lr
        start += n
        if s == 0:
            b += emb_gpu + first_extra
            rep += first_rep
        if s == pp - 1:
            if not _tied(arch) or pp > 1:
                b += head_gpu  # lm_head (a tied head on a later stage is a separate copy)
            b += arch.hidden_size * plain  # final norm
            rep += arch.hidden_size * plain
            if mtp and arch.num_nextn_predict_layers:
                h = arch.hidden_size
                last, last_rep = _layer_bytes(layers[-1], arch, fmt, tp, expert_parallel, ep_size, mxfp4_triton)
                b += arch.num_nextn_predict_layers * (last + 2 * h * h / tp * _scheme_bytes(fmt, "linear") + 3 * h * plain)
                rep += arch.num_nextn_predict_layers * last_rep
        per_stage.append(b)
        rep_stage.append(rep)
    total_model = 0.0
    for layer in layers:
        lb, _ = _layer_bytes(layer, arch, fmt, 1, mxfp4_triton=mxfp4_triton)
        total_model += lb
    total_model += (pc.embedding + arch.hidden_size) * plain + pc.lm_head * head + (g_vocab + g_split + g_rep) * plain
    from_index = weights_total_bytes is not None
    if from_index:
        if weights_total_bytes <= 0:
            raise SizingError("weights", "weights_total_bytes must be positive")
        mtp_bytes = 0.0
        if pc.mtp:
            mtp_bytes = _layer_bytes(layers[-1], arch, fmt, 1)[0] * arch.num_nextn_predict_layers
            mtp_bytes += (pc.mtp - layers[-1].total * arch.num_nextn_predict_layers) * plain
        scale = weights_total_bytes / (total_model + mtp_bytes)
        per_stage = [b * scale for b in per_stage]
        rep_stage = [r * scale for r in rep_stage]
        total_model = total_model * scale
    rope = rope_cache_bytes(arch, plain)  # every stage builds its layers' rope caches (sizing/rope.py)
    per_stage = [b + rope for b in per_stage]
    rep_stage = [r + rope for r in rep_stage]
    worst = max(range(pp), key=lambda i: per_stage[i])
    return WeightBytes(
        total=int(total_model),
        per_gpu=int(per_stage[worst]),
        per_stage=tuple(int(b) for b in per_stage),
        replicated_per_gpu=int(rep_stage[worst]),
        fmt=fmt,
        from_index=from_index,
    )



def _dsv4(arch: ModelArch, fmt: WeightFormat, tp: int, pp: int, tokens: int, ep: bool,
          total_bytes: Optional[int], ep_size: int = 0) -> WeightBytes:
    """DeepSeek V4 (:mod:`llmctl.sizing.dsv4`); a safetensors total scales it as above."""
    import llmctl.sizing.dsv4 as dsv4

    stages, total = dsv4.weight_stages(arch, fmt, tp, pp, tokens, expert_parallel=ep, ep_size=ep_size)
    if total_bytes:
        stages, total = [b * total_bytes / total for b in stages], float(total_bytes)
    worst = max(range(pp), key=lambda i: stages[i])
    return WeightBytes(total=int(total), per_gpu=int(stages[worst]), per_stage=tuple(int(b) for b in stages),
                       replicated_per_gpu=0, fmt=fmt, from_index=bool(total_bytes))


def _buffers(arch: ModelArch, tokens: int) -> int:
    """Persistent buffers sized by max_num_batched_tokens that vLLM allocates
    while building the model, so its weights figure includes them
    (docs/vllm-memory-2026.md F6): Gemma 3n/4 per-layer inputs
    [T, layers, per-layer width] and Qwen3-VL's deepstack buffers."""
    out = 0
    if arch.per_layer_embeddings is not None:
        out += tokens * arch.num_hidden_layers * arch.per_layer_embeddings.hidden_size * 2
    if arch.vision_tower is not None:
        out += tokens * arch.vision_tower.buffer_per_token
    return out
