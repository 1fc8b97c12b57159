"""Parameter counts by tensor (how each decoder layer and the parts around
it are built, by kind of layer) and vLLM's TP-size rules; the bytes those
parameters take per GPU are :mod:`llmctl.sizing.weights`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from llmctl.arch import ModelArch
from llmctl.sizing.formats import VOCAB_PADDING, SizingError, _padded_vocab, pp_partition  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class ParamCount:
    """Parameters of the language model as vLLM loads it.

    ``total`` counts every expert and the embeddings once when tied; it
    excludes the MTP / next-n prediction layers (``mtp``: vLLM loads them only
    for speculative decoding) and vision towers (not derivable from the text
    config; ``excluded`` says so).
    """

    total: int
    active: int
    embedding: int
    lm_head: int
    attention: int
    dense_mlp: int
    experts: int
    shared_experts: int
    router: int
    norms: int
    mtp: int = 0
    excluded: tuple[str, ...] = ()
    linear_attention: int = 0  # Gated DeltaNet / Mamba2 layers' projections and state parameters
    extras: int = 0  # per-layer embeddings and their projections, AltUp / LAuReL, the V3.2 indexer
    vision: int = 0  # the vision tower (and projector) when its formula is known

    @property
    def total_with_mtp(self) -> int:
        return self.total + self.mtp


@dataclass(frozen=True)
class _Layer:
    """Parameters of one decoder layer, by how vLLM shards them over TP."""

    attn_split: int  # q / o projections (and MLA q_b, kv_b): split over TP
    attn_kv: int  # k / v projections: split while TP <= kv heads, else replicated per head
    attn_replicated: int  # MLA q_a / kv_a (ReplicatedLinear), attention sinks
    mlp_split: int  # dense MLP
    experts: int  # routed experts (FusedMoE: each expert split over TP)
    shared: int  # shared experts (split over TP)
    router: int  # replicated
    norms: int  # replicated
    linear_split: int = 0  # linear-attention (Gated DeltaNet / Mamba2) projections and conv: split over TP
    extra_replicated: int = 0  # per-layer extras every rank holds (PLE gates, the V3.2 indexer, AltUp coefficients)
    extra_split: int = 0  # per-layer extras split over TP (Gemma 3n LAuReL)
    kind: str = "full"  # full | sliding | chunked | linear | none (Nemotron-H's MLP / MoE blocks)

    @property
    def total(self) -> int:
        return (
            self.attn_split + self.attn_kv + self.attn_replicated + self.mlp_split
            + self.experts + self.shared + self.router + self.norms
            + self.linear_split + self.extra_replicated + self.extra_split
        )


def _tied(arch: ModelArch) -> bool:
    if arch.tie_word_embeddings is not None:
        return arch.tie_word_embeddings
    # transformers' config-class defaults: Gemma ties, Llama/Qwen2/Mistral don't.
    return arch.model_type.startswith("gemma")


def _is_gpt_oss(arch: ModelArch) -> bool:
    return arch.model_type == "gpt_oss"


def _attention(arch: ModelArch, kind: str = "full") -> tuple[int, int, int]:
    """(split, kv, replicated) attention parameters of one layer (full layers
    of Gemma 4 have their own KV heads and head_dim; Qwen3-Next / Qwen3.5's
    gated attention doubles q_proj)."""
    h = arch.hidden_size
    heads = arch.num_attention_heads
    if arch.mla is not None:
        m = arch.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        replicated = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank  # kv_a_proj_with_mqa + kv_a_layernorm
        if m.q_lora_rank:
            replicated += h * m.q_lora_rank + m.q_lora_rank  # q_a_proj + q_a_layernorm
            split = m.q_lora_rank * heads * qk  # q_b_proj
        else:
            split = h * heads * qk  # q_proj
        split += m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)  # kv_b_proj
        split += heads * m.v_head_dim * h  # o_proj
        return split, 0, replicated
    hd = arch.head_dim_effective
    kvh = arch.num_key_value_heads
    if kind == "full":
        hd = arch.full_head_dim or hd
        kvh = arch.full_kv_heads or kvh
    split = (3 if arch.attn_output_gate else 2) * h * heads * hd  # q_proj (+ gate) + o_proj
    kv = 2 * h * kvh * hd  # k_proj + v_proj
    replicated = 0
    if arch.attention_bias:
        split += heads * hd
        kv += 2 * kvh * hd
        if _is_gpt_oss(arch):
            split += h  # gpt-oss o_proj has a bias too
    if _is_gpt_oss(arch):
        replicated += heads  # attention sinks, one per head
    return split, kv, replicated


def _linear_attention(arch: ModelArch) -> tuple[int, int]:
    """(split, replicated) parameters of one linear-attention layer.
    Gated DeltaNet (transformers Qwen3NextGatedDeltaNet): in_proj_qkvz
    h × (2·key_dim + 2·value_dim), in_proj_ba h × 2·v_heads, conv1d
    (2·key_dim + value_dim) × kernel, out_proj value_dim × h; dt_bias, A_log
    and the gated norm are small. Mamba2 (MambaMixer2): in_proj h × (2·I +
    2·groups·state + heads), conv1d (I + 2·groups·state) × kernel (+ bias),
    out_proj I × h; dt_bias, A_log, D and the norm."""
    la = arch.linear_attention
    h = arch.hidden_size
    if la is None:  # state size unknown: sized as an attention layer (the plan says approximate)
        split, kv, rep = _attention(arch, "linear")
        return split + kv, rep
    if la.kind == "gdn":
        key_dim, value_dim = la.num_key_heads * la.key_head_dim, la.num_value_heads * la.value_head_dim
        split = h * (2 * key_dim + 2 * value_dim) + h * 2 * la.num_value_heads
        split += (2 * key_dim + value_dim) * la.conv_kernel + value_dim * h
        return split, 2 * la.num_value_heads + la.value_head_dim
    inter = la.intermediate_size or 2 * h
    conv_dim = inter + 2 * la.num_key_heads * la.key_head_dim
    split = h * (inter + conv_dim + la.num_value_heads) + conv_dim * (la.conv_kernel + 1) + inter * h + inter
    return split, 3 * la.num_value_heads


def _kinds(arch: ModelArch) -> list[str]:
    """The kind of every layer, kinds spread evenly over the layers (the
    interleaved patterns of every hybrid model llmctl knows)."""
    n = arch.num_hidden_layers
    kinds = ["full"] * n
    placed = 0
    for kind, count in (("linear", arch.linear_attention_layers), ("sliding", arch.sliding_window_layers),
                        ("chunked", arch.chunked_attention_layers)):
        free = [i for i, k in enumerate(kinds) if k == "full"]
        for j in range(count):
            kinds[free[(j * len(free)) // count]] = kind
        placed += count
    return kinds


def _per_layer_extras(arch: ModelArch) -> tuple[int, int]:
    """(replicated, split) per-layer parameters beyond attention and MLP."""
    h = arch.hidden_size
    rep, split = 0, 0
    ple = arch.per_layer_embeddings
    if ple is not None:
        rep += 2 * h * ple.hidden_size + h  # per_layer_input_gate + per_layer_projection (ReplicatedLinear) + norm
        if ple.altup_inputs:
            n = ple.altup_inputs
            rep += n * n + n * n * n + h * n + 2 * h  # AltUp correction / prediction coefs, router + its norm, scale
        if ple.laurel_rank:
            split += 2 * h * ple.laurel_rank + h  # LAuReL linear_left / linear_right + norm
    if arch.indexer is not None and arch.mla is not None:
        ix, m = arch.indexer, arch.mla
        per = (m.q_lora_rank or h) * ix.n_heads * ix.head_dim + h * ix.head_dim + 2 * ix.head_dim + h * ix.n_heads
        rep += per * ix.layers // arch.num_hidden_layers  # wq_b, wk, k_norm, weights_proj (ReplicatedLinear)
    return rep, split


def _pattern_layers(arch: ModelArch) -> list[_Layer]:
    """Nemotron-H (vllm/model_executor/models/nemotron_h.py), one block per layer by hybrid_override_pattern:
    M a MambaMixer2, * attention (QKVParallelLinear + o_proj), - a NemotronHMLP (up_proj / down_proj, relu², no
    gate), E a NemotronHMoE (GateLinear router and a
    float32 e_score_correction_bias, relu² experts of moe_intermediate_size over moe_latent_size or hidden, the
    shared experts one NemotronHMLP, fc1 / fc2_latent_proj ReplicatedLinear with a latent); one RMSNorm a block."""
    h, moe = arch.hidden_size, arch.moe
    out: list[_Layer] = []
    for c in arch.block_pattern or "":
        if c == "M":
            split, rep = _linear_attention(arch)
            out.append(_Layer(0, 0, rep, 0, 0, 0, 0, h, linear_split=split, kind="linear"))
        elif c == "*":
            a = _attention(arch, "full")
            out.append(_Layer(a[0], a[1], a[2], 0, 0, 0, 0, h, kind="full"))
        elif c == "-":
            inter = arch.intermediate_size
            out.append(_Layer(0, 0, 0, 2 * h * inter, 0, 0, 0, h, kind="none"))
        elif c == "E" and moe is not None:
            width = moe.latent_size or h
            experts = moe.num_experts * 2 * width * (moe.moe_intermediate_size or arch.intermediate_size)
            shared = 2 * h * (moe.shared_expert_intermediate_size or 0)
            latent = 2 * h * moe.latent_size if moe.latent_size else 0
            out.append(_Layer(0, 0, 0, 0, experts, shared, h * moe.num_experts + moe.num_experts, h,
                              extra_replicated=latent, kind="none"))
    return out


def _layers(arch: ModelArch) -> list[_Layer]:
    if arch.block_pattern:
        return _pattern_layers(arch)
    h = arch.hidden_size
    norms = 2 * h
    if arch.model_type.startswith(("gemma2", "gemma3", "gemma4")):
        norms = 4 * h  # pre/post attention and pre/post feed-forward norms
    if arch.model_type.startswith(("qwen3", "gemma3", "gemma4")):
        norms += 2 * arch.head_dim_effective  # q_norm / k_norm
    extra_rep, extra_split = _per_layer_extras(arch)
    moe = arch.moe
    dense_width = (moe.dense_intermediate_size if moe else None) or arch.intermediate_size
    dense = 3 * h * dense_width  # gate, up, down
    dense_upto = (moe.first_k_dense_replace + moe.dense_layers) if moe else 0
    out: list[_Layer] = []
    for i, kind in enumerate(_kinds(arch)):
        if kind == "linear":
            a_split, a_rep = _linear_attention(arch)
            attn = (0, 0, a_rep)
            lin = a_split
        else:
            attn = _attention(arch, kind)
            lin = 0
        common = dict(attn_split=attn[0], attn_kv=attn[1], attn_replicated=attn[2], norms=norms, linear_split=lin,
                      extra_replicated=extra_rep, extra_split=extra_split, kind=kind)
        # Llama 4: layer i is MoE when (i + 1) % interleave_moe_layer_step == 0 (transformers Llama4TextDecoderLayer)
        if moe is None or i < dense_upto or (i + 1) % moe.layer_step:
            wide = 2 if i >= arch.num_hidden_layers - arch.double_wide_mlp_layers else 1
            out.append(_Layer(mlp_split=dense * wide, experts=0, shared=0, router=0, **common))
            continue
        inter = moe.moe_intermediate_size or arch.intermediate_size
        experts = moe.num_experts * 3 * h * inter
        router = h * moe.num_experts
        if _is_gpt_oss(arch):
            experts += moe.num_experts * (2 * inter + h)  # gate_up and down biases
            router += moe.num_experts  # router bias
        shared = 0
        if moe.shared_expert_intermediate_size:  # Qwen2-MoE style: one wide shared expert + its gate
            shared = 3 * h * moe.shared_expert_intermediate_size + h
        elif moe.num_shared_experts:  # DeepSeek style: n shared experts of moe_intermediate_size
            shared = moe.num_shared_experts * 3 * h * inter
        beside = 3 * h * arch.intermediate_size if moe.dense_beside else 0  # Gemma 4: a dense MLP next to the experts
        out.append(_Layer(mlp_split=beside, experts=experts, shared=shared, router=router, **common))
    return out


def _globals(arch: ModelArch) -> tuple[int, int, int]:
    """(vocab-parallel, split, replicated) parameters outside the decoder
    layers besides embeddings / lm_head: Gemma's per-layer embedding table
    and its projection, Gemma 3n's AltUp projections, a vision tower."""
    h, n = arch.hidden_size, arch.num_hidden_layers
    vocab, split, rep = 0, 0, 0
    ple = arch.per_layer_embeddings
    if ple is not None:
        vocab += ple.vocab_size * n * ple.hidden_size  # embed_tokens_per_layer (VocabParallelEmbedding)
        split += h * n * ple.hidden_size  # per_layer_model_projection (ColumnParallel)
        rep += ple.hidden_size  # its norm
        if ple.altup_inputs:
            split += 2 * (ple.altup_inputs - 1) * h * h  # altup_projections + altup_unembed_projections
    tower = arch.vision_tower
    if tower is not None and tower.parameters:
        split += tower.parameters - tower.replicated
        rep += tower.replicated
    return vocab, split, rep


def count_parameters(arch: ModelArch) -> ParamCount:
    """Parameters from the architecture facts (see :class:`ParamCount`)."""
    h = arch.hidden_size
    if arch.vocab_size is None:
        raise SizingError("vocab_size", "the architecture has no vocab_size; cannot count embedding parameters")
    if arch.compressed is not None:
        return _dsv4_count(arch)
    embedding = arch.vocab_size * h
    lm_head = 0 if _tied(arch) else arch.vocab_size * h
    layers = _layers(arch)
    attention = sum(l.attn_split + l.attn_kv + l.attn_replicated for l in layers)
    dense = sum(l.mlp_split for l in layers)
    experts = sum(l.experts for l in layers)
    shared = sum(l.shared for l in layers)
    router = sum(l.router for l in layers)
    norms = sum(l.norms for l in layers) + h  # + final norm
    linear = sum(l.linear_split for l in layers)
    g_vocab, g_split, g_rep = _globals(arch)
    tower = arch.vision_tower
    vision = tower.parameters if tower is not None and tower.parameters else 0
    extras = sum(l.extra_replicated + l.extra_split for l in layers) + g_vocab + g_split + g_rep - vision
    total = embedding + lm_head + attention + dense + experts + shared + router + norms + linear + extras + vision
    active = total
    if arch.moe is not None and arch.moe.num_experts:
        active = total - experts + experts * arch.moe.num_experts_per_tok // arch.moe.num_experts
    mtp = 0
    if arch.num_nextn_predict_layers:
        # DeepSeek-V3 MTP module: one more (MoE) decoder layer, enorm + hnorm,
        # eh_proj (2h -> h), shared_head norm, and its own copies of the
        # embedding and output head in the checkpoint (model.layers.61.*).
        last = layers[-1]
        per = last.total + 2 * h + 2 * h * h + h + embedding + arch.vocab_size * h
        mtp = arch.num_nextn_predict_layers * per
    excluded = ("vision tower (no formula for this tower in llmctl.vision)",) if arch.vision and not vision else ()
    return ParamCount(
        total=total, active=active, embedding=embedding, lm_head=lm_head, attention=attention,
        dense_mlp=dense, experts=experts, shared_experts=shared, router=router, norms=norms,
        mtp=mtp, excluded=excluded, linear_attention=linear, extras=extras, vision=vision,
    )


def safetensors_total_bytes(index: dict[str, Any]) -> int:
    """``metadata.total_size`` of a parsed model.safetensors.index.json."""
    try:
        size = int(index["metadata"]["total_size"])
    except (KeyError, TypeError, ValueError):
        raise SizingError("weights", "model.safetensors.index.json has no metadata.total_size") from None
    if size <= 0:
        raise SizingError("weights", "metadata.total_size must be positive")
    return size


def tp_problem(arch: ModelArch, tp: int, expert_parallel: bool = False) -> Optional[str]:
    """Why vLLM would refuse this TP size for the model (None when it accepts it).

    Rules: attention heads divisible by TP (ModelConfig.verify_with_parallel_config);
    KV heads divisible by TP, or TP divisible by KV heads (attention layers'
    asserts); the 64-padded vocabulary divisible by TP (VocabParallelEmbedding
    divide()); with block-quantized fp8 or int4 group-quantized checkpoints,
    the per-rank MLP / expert width must stay a multiple of the 128 block /
    group size (routed experts are not split with ``expert_parallel``).
    """
    if tp < 1:
        return "tensor parallel size must be at least 1"
    heads = arch.num_attention_heads
    if heads % tp:
        return f"TP {tp} does not divide the {heads} attention heads"
    kvh = arch.num_key_value_heads
    if arch.mla is None and (kvh % tp if tp <= kvh else tp % kvh):
        return f"TP {tp} and the {kvh} KV heads do not divide one another"
    if arch.vocab_size and _padded_vocab(arch.vocab_size) % tp:
        return f"TP {tp} does not divide the padded vocabulary ({_padded_vocab(arch.vocab_size)})"
    block = _quant_block(arch)
    if block:
        widths = []
        if arch.moe is None or arch.moe.first_k_dense_replace:
            widths.append(arch.intermediate_size)
        if arch.moe is not None and not (expert_parallel and tp > 1):
            widths.append(arch.moe.moe_intermediate_size or arch.intermediate_size)
        for w in widths:
            if (w // tp) % block or w % tp:
                return f"TP {tp} splits the {w}-wide MLP into {w / tp:g}-wide shards, not a multiple of the {block} quantization block"
    return None


def _quant_block(arch: ModelArch) -> Optional[int]:
    """The width a rank's MLP shard must be a multiple of: an fp8 checkpoint's
    weight_block_size, a group-quantized checkpoint's group size (fp8.py /
    the Marlin and Machete kernels' group constraint), else None."""
    q = arch.quant_info
    if q is None:
        return None
    if q.scheme == "fp8" and q.block:
        return q.block[1]
    if q.scheme == "int4" and not q.experts_only and q.group_size and q.group_size > 0:
        return q.group_size
    return None


def valid_tp_sizes(arch: ModelArch, gpus_per_node: int = 8, expert_parallel: bool = False) -> list[int]:
    """TP sizes vLLM accepts for the model, up to one node (see :func:`tp_problem`).
    Not necessarily powers of two (e.g. 6 for 48 heads), though 1/2/4/8 are
    what one node offers in practice."""
    return [t for t in range(1, gpus_per_node + 1) if tp_problem(arch, t, expert_parallel) is None]



def _dsv4_count(arch: ModelArch) -> ParamCount:
    """DeepSeek V4's parameters by kind (llmctl.sizing.dsv4.layer_params); MTP layers apart."""
    from llmctl.sizing.dsv4 import layer_params

    per = [layer_params(arch, i) for i in range(arch.num_hidden_layers)]
    emb = arch.vocab_size * arch.hidden_size
    attention = sum(p["attn_rep"] + p["attn_split"] for p in per)
    experts = sum(p["experts"] for p in per)
    shared = sum(p["shared"] for p in per)
    router = arch.num_hidden_layers * arch.hidden_size * arch.moe.num_experts
    rest = sum(p["plain"] + p["fp32"] + p["int32"] for p in per) - router
    total = 2 * emb + attention + experts + shared + router + rest + arch.hidden_size
    active = total - experts + experts * arch.moe.num_experts_per_tok // arch.moe.num_experts
    mtp = arch.num_nextn_predict_layers * (per[-1]["attn_rep"] + per[-1]["attn_split"] + per[-1]["experts"] + per[-1]["shared"])
    return ParamCount(total=total, active=active, embedding=emb, lm_head=emb, attention=attention, dense_mlp=0,
                      experts=experts, shared_experts=shared, router=router, norms=0, mtp=mtp, extras=rest)
