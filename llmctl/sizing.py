"""Memory arithmetic: does a model fit, at which TP, with how much KV cache.

Pure functions over a :class:`~llmctl.catalog.ModelArch` (no I/O, no printing).
The model follows what vLLM (V1 engine) does at start-up, step by step:

1. ``Worker.determine_available_memory`` (vllm/v1/worker/gpu_worker.py):
   ``available KV = total_memory × gpu_memory_utilization − (weights +
   peak activation + non-torch memory) − CUDA-graph estimate``.
2. ``get_kv_cache_configs`` / ``get_max_concurrency_for_kv_cache_config``
   (vllm/v1/core/kv_cache_utils.py): the KV pool is split into blocks of
   ``block_size`` (16) tokens; for hybrid sliding-window models the hybrid
   allocator groups layers and a request holds at most ``window − 1 +
   max_num_batched_tokens`` tokens in each sliding group.  vLLM logs
   ``GPU KV cache size: N tokens`` = max concurrency × max_model_len, and
   refuses to start when one max_model_len request does not fit.

Every constant carries its source next to it; docs/sizing.md has the method,
the published vLLM figures it is checked against and where it is weakest.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional

from llmctl.catalog import ModelArch

GIB = 1024**3

# --------------------------------------------------------------------------
# Constants (each with its source)

# vLLM's default KV block size on CUDA (CacheConfig.block_size = 16 for the
# FlashAttention/FlashInfer backends; vllm/config/cache.py). MLA backends use
# 64 (FlashMLA) — the difference is below one block per request.
BLOCK_SIZE = 16

# vLLM pads the vocabulary of VocabParallelEmbedding / ParallelLMHead to a
# multiple of 64 and then splits it evenly over TP ranks
# (vllm/model_executor/layers/vocab_parallel_embedding.py,
# DEFAULT_VOCAB_PADDING_SIZE = 64; num_embeddings_per_partition =
# divide(num_embeddings_padded, tp_size)).
VOCAB_PADDING = 64

# vLLM's default gpu_memory_utilization (CacheConfig).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9

# Non-torch memory per GPU (CUDA context share, cuBLAS workspaces and, when a
# replica spans several GPUs with tensor parallelism, the NCCL and custom
# all-reduce buffers) that vLLM's profiler subtracts.  vLLM 0.19 on H100 logs
# (llm-d-planner accuracy/results/v0.19.0, "Actual usage is ... GiB for
# non-torch memory"): 0.25-0.26 GiB at TP1, 2.07 GiB at TP2, 2.21 GiB at TP4,
# 0.07 GiB with pipeline parallelism only.  Older logs: 0.35 GiB (RTX 3090,
# vllm-project/vllm#10517), 1.79 / 3.58 GiB (H100 TP1 / TP2, #10511).
NON_TORCH_GIB_SINGLE = 0.3
NON_TORCH_GIB_TP = 2.1

# Peak activation of vLLM's profiling run (GPUModelRunner.profile_run: a
# forward pass over max_num_batched_tokens dummy tokens, then a dummy sampler
# run over max_num_seqs rows of float32 logits of the full vocabulary).
#   act = T × 2 B × ACT_HIDDEN_COPIES × hidden
#       + max_num_seqs × vocab × 4 B × SAMPLER_COPIES
# Fitted to the "GiB for peak activation" figures vLLM 0.19 logs on H100 with
# its defaults T = 8192, max_num_seqs = 1024 (llm-d-planner
# accuracy/results/v0.19.0): Llama-3.1-8B 1.89 GiB at TP 1, 2 and 4 (it does
# not shrink with TP, so the MLP intermediate — freed inside compiled graphs —
# is not the peak), Qwen2.5-7B / Qwen3-8B 2.21, gemma-2-9b 3.65, gemma-3-27b
# 3.99, gpt-oss-20b (TP2) 2.87, Llama-3.3-70B (TP4) 1.97.  With 4 hidden copies
# the sampler term needs 3.0-3.5 copies of the logits in every one of them
# (logits, softmax probabilities, the top-k/top-p sort); we take 3.25.
ACT_BYTES = 2
ACT_HIDDEN_COPIES = 4
SAMPLER_BYTES = 4
SAMPLER_COPIES = 3.25

# CUDA graphs.  vLLM >= 0.21 subtracts its profiled CUDA-graph estimate from
# the KV budget (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, "default since
# v0.21.0" in vllm/v1/worker/gpu_worker.py); earlier versions captured the
# graphs afterwards, out of the 1 − gpu_memory_utilization slack.  Pools seen:
# 0.91-1.14 GiB at TP1 and 1.55-1.66 GiB at TP2/TP4 (vLLM 0.19, H100,
# "CUDA graph pool memory: X GiB (actual)"), 0.51-1.85 GiB over 50 runs
# (llm-d-planner accuracy report).  We reserve 1.0 GiB (1.5 GiB with TP > 1).
CUDA_GRAPH_GIB = 1.0
CUDA_GRAPH_GIB_TP = 1.5

# Verdict thresholds.  "tight": it starts, but fewer than this many
# max_model_len requests fit at once, or the estimate's error band (the
# accuracy table in docs/sizing.md is within ±15 %) could flip it.
TIGHT_CONCURRENCY = 2.0
ESTIMATE_MARGIN = 0.15

# Weight storage per parameter, in bytes, by quantization scheme.
# int4 (AWQ / GPTQ, group size 128): 4-bit weights + an fp16 scale and a 4-bit
# zero point per group of 128 = 0.5 + (2 + 0.5) / 128 bytes per weight.
INT4_BYTES = 0.5 + 2.5 / 128
# fp8 with 128×128 block scales (DeepSeek-V3 style): one fp32 scale per 16384
# weights; per-tensor / per-channel scales are smaller still.
FP8_BYTES = 1.0 + 4 / (128 * 128)
INT8_BYTES = 1.0 + 4 / 4096  # w8a8 per-channel fp32 scale on ~4096-wide rows
# MXFP4 (gpt-oss experts): 4-bit E2M1 values + one 8-bit E8M0 scale per 32
# values = 4.25 bits (OCP Microscaling spec; gpt-oss model card).
MXFP4_BYTES = 4.25 / 8
# vLLM's MXFP4 MoE kernels on Hopper/Blackwell (Marlin, TRT-LLM) pad the
# expert hidden size to a multiple of 256 and the per-rank intermediate size to
# a multiple of 128 (fused_moe/oracle/mxfp4.py
# mxfp4_round_up_hidden_size_and_intermediate_size): gpt-oss 2880 -> 3072.
MXFP4_HIDDEN_ALIGN = 256
MXFP4_INTER_ALIGN = 128

# quant_method values of quantization_config -> scheme
_QUANT_SCHEMES = {
    "fp8": "fp8",
    "fbgemm_fp8": "fp8",
    "modelopt": "fp8",
    "ptpc_fp8": "fp8",
    "awq": "int4",
    "awq_marlin": "int4",
    "gptq": "int4",
    "gptq_marlin": "int4",
    "bitsandbytes": "int4",
    "mxfp4": "mxfp4",
    "int8": "int8",
    "w8a8": "int8",
    "experts_int8": "int8",
}

# --dtype values -> (bytes of unquantized tensors, quantization scheme or None
# meaning "whatever the checkpoint says")
_DTYPES: dict[str, tuple[Optional[float], Optional[str]]] = {
    "auto": (None, None),
    "bfloat16": (2, None),
    "bf16": (2, None),
    "float16": (2, None),
    "fp16": (2, None),
    "half": (2, None),
    "float32": (4, None),
    "fp32": (4, None),
    "float": (4, None),
    "fp8": (2, "fp8"),
    "int8": (2, "int8"),
    "int4": (2, "int4"),
    "awq": (2, "int4"),
    "gptq": (2, "int4"),
    "mxfp4": (2, "mxfp4"),
}

_KV_DTYPES = {
    "auto": None,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "float32": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "int8": 1,
}

DTYPE_CHOICES = tuple(_DTYPES)
KV_CACHE_DTYPE_CHOICES = tuple(_KV_DTYPES)


class SizingError(ValueError):
    """A parameter the arithmetic cannot work with (names the parameter)."""

    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param
        self.message = message


# --------------------------------------------------------------------------
# Parameter counting


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

    @property
    def total(self) -> int:
        return (
            self.attn_split + self.attn_kv + self.attn_replicated + self.mlp_split
            + self.experts + self.shared + self.router + self.norms
        )


def _tied(arch: ModelArch) -> bool:
    if arch.tie_word_embeddings is not None:
        return arch.tie_word_embeddings
    # transformers' config-class defaults: Gemma ties, Llama/Qwen2/Mistral don't.
    return arch.model_type.startswith("gemma")


def _is_gpt_oss(arch: ModelArch) -> bool:
    return arch.model_type == "gpt_oss"


def _attention(arch: ModelArch) -> tuple[int, int, int]:
    """(split, kv, replicated) attention parameters of one layer."""
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
    split = 2 * h * heads * hd  # q_proj + o_proj
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


def _layers(arch: ModelArch) -> list[_Layer]:
    h = arch.hidden_size
    attn_split, attn_kv, attn_rep = _attention(arch)
    norms = 2 * h
    if arch.model_type.startswith("gemma2") or arch.model_type.startswith("gemma3"):
        norms = 4 * h  # pre/post attention and pre/post feed-forward norms
    if arch.model_type.startswith(("qwen3", "gemma3")):
        norms += 2 * arch.head_dim_effective  # q_norm / k_norm
    if arch.mla is not None:
        pass  # MLA layernorms are counted in attn_rep
    dense = 3 * h * arch.intermediate_size  # gate, up, down
    out: list[_Layer] = []
    for i in range(arch.num_hidden_layers):
        moe = arch.moe
        if moe is None or i < moe.first_k_dense_replace:
            out.append(_Layer(attn_split, attn_kv, attn_rep, dense, 0, 0, 0, norms))
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
        out.append(_Layer(attn_split, attn_kv, attn_rep, 0, experts, shared, router, norms))
    return out


def count_parameters(arch: ModelArch) -> ParamCount:
    """Parameters from the architecture facts (see :class:`ParamCount`)."""
    h = arch.hidden_size
    if arch.vocab_size is None:
        raise SizingError("vocab_size", "the architecture has no vocab_size; cannot count embedding parameters")
    embedding = arch.vocab_size * h
    lm_head = 0 if _tied(arch) else arch.vocab_size * h
    layers = _layers(arch)
    attention = sum(l.attn_split + l.attn_kv + l.attn_replicated for l in layers)
    dense = sum(l.mlp_split for l in layers)
    experts = sum(l.experts for l in layers)
    shared = sum(l.shared for l in layers)
    router = sum(l.router for l in layers)
    norms = sum(l.norms for l in layers) + h  # + final norm
    total = embedding + lm_head + attention + dense + experts + shared + router + norms
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
    excluded = ("vision tower (not derivable from the text config)",) if arch.vision else ()
    return ParamCount(
        total=total, active=active, embedding=embedding, lm_head=lm_head, attention=attention,
        dense_mlp=dense, experts=experts, shared_experts=shared, router=router, norms=norms,
        mtp=mtp, excluded=excluded,
    )


# --------------------------------------------------------------------------
# Weight bytes


@dataclass(frozen=True)
class WeightFormat:
    """How the weights are stored on the GPU."""

    dtype_bytes: float  # unquantized tensors (embeddings, norms, ...)
    scheme: Optional[str]  # None (unquantized), fp8, int8, int4, mxfp4
    approximate: bool = False
    note: str = ""

    @property
    def label(self) -> str:
        if self.scheme is None:
            return {2: "bf16", 4: "fp32"}.get(int(self.dtype_bytes), f"{self.dtype_bytes}B")
        return self.scheme


def weight_format(arch: ModelArch, dtype: str = "auto") -> WeightFormat:
    """Resolve --dtype (and the checkpoint's quantization_config) to a WeightFormat."""
    key = (dtype or "auto").strip().lower()
    if key not in _DTYPES:
        raise SizingError("dtype", f"unknown dtype '{dtype}'; choose one of: {', '.join(DTYPE_CHOICES)}")
    unq, scheme = _DTYPES[key]
    if unq is None:
        # vLLM's dtype "auto": the config's torch_dtype, with float32 checkpoints
        # served in 16-bit (ModelConfig._get_and_verify_dtype).
        unq = 2
    approximate, note = False, ""
    if scheme is None and arch.quantization:
        qm = arch.quantization.lower()
        scheme = _QUANT_SCHEMES.get(qm)
        if scheme is None:
            scheme, approximate = "int8", True
            note = (
                f"weight size of quant_method '{arch.quantization}' is not known; assumed 1 byte per weight "
                "(pass the exact size from model.safetensors.index.json for a better figure)"
            )
    return WeightFormat(dtype_bytes=unq, scheme=scheme, approximate=approximate, note=note)


def _scheme_bytes(fmt: WeightFormat, kind: str) -> float:
    """Bytes per parameter of one kind of tensor under a weight format.

    kinds: "linear" (attention / dense-MLP / shared-expert projections),
    "expert" (routed experts), "plain" (embeddings, lm_head, norms, router).
    """
    if fmt.scheme is None or kind == "plain":
        return fmt.dtype_bytes
    if fmt.scheme == "mxfp4":
        # gpt-oss: only the MoE experts are MXFP4; attention, router,
        # embeddings and lm_head stay bf16 (quantization_config
        # modules_to_not_convert).
        return MXFP4_BYTES if kind == "expert" else fmt.dtype_bytes
    return {"fp8": FP8_BYTES, "int8": INT8_BYTES, "int4": INT4_BYTES}[fmt.scheme]


def safetensors_total_bytes(index: dict[str, Any]) -> int:
    """``metadata.total_size`` of a parsed model.safetensors.index.json."""
    try:
        size = int(index["metadata"]["total_size"])
    except (KeyError, TypeError, ValueError):
        raise SizingError("weights", "model.safetensors.index.json has no metadata.total_size") from None
    if size <= 0:
        raise SizingError("weights", "metadata.total_size must be positive")
    return size


def pp_partition(num_layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage as vLLM assigns them (vllm/distributed/utils.py
    get_pp_indices: the remainder goes to the stages before the last one)."""
    if pp < 1 or pp > num_layers:
        raise SizingError("pp", f"pipeline parallel size must be between 1 and the number of layers ({num_layers})")
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


def _round_up(x: float, align: int) -> int:
    return int(-(-x // align) * align)


def _padded_vocab(vocab: int) -> int:
    return -(-vocab // VOCAB_PADDING) * VOCAB_PADDING


@dataclass(frozen=True)
class WeightBytes:
    total: int  # whole model as loaded (all GPUs of one replica hold it once, plus replicas)
    per_gpu: int  # the most loaded GPU (worst pipeline stage)
    per_stage: tuple[int, ...]  # per GPU, for each pipeline stage
    replicated_per_gpu: int  # part of per_gpu that every TP rank holds in full
    fmt: WeightFormat
    from_index: bool = False


def _layer_bytes(layer: _Layer, arch: ModelArch, fmt: WeightFormat, tp: int) -> tuple[float, float]:
    """(bytes per GPU, of which replicated) for one layer at TP."""
    lin = _scheme_bytes(fmt, "linear")
    exp = _scheme_bytes(fmt, "expert")
    plain = _scheme_bytes(fmt, "plain")
    kvh = arch.num_key_value_heads
    # k/v: each rank holds max(1, kv_heads / tp) heads (replicated when tp > kv heads)
    kv_frac = max(1, kvh // tp) / kvh if arch.mla is None else 0
    replicated = layer.attn_replicated * lin + layer.router * plain + layer.norms * plain
    experts = layer.experts * exp / tp
    if fmt.scheme == "mxfp4" and layer.experts and arch.moe is not None:
        h = arch.hidden_size
        inter = arch.moe.moe_intermediate_size or arch.intermediate_size
        hp = _round_up(h, MXFP4_HIDDEN_ALIGN)
        ip = _round_up(-(-inter // tp), MXFP4_INTER_ALIGN)
        experts = experts * (hp * ip) / (h * inter / tp)
    split = (layer.attn_split + layer.mlp_split + layer.shared) * lin / tp + experts
    kv = layer.attn_kv * lin * kv_frac
    return split + kv + replicated, replicated


def weight_bytes(
    arch: ModelArch,
    *,
    tp: int = 1,
    pp: int = 1,
    dtype: str = "auto",
    weights_total_bytes: Optional[int] = None,
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
    them).
    """
    _check_positive("tp", tp)
    _check_positive("pp", pp)
    fmt = weight_format(arch, dtype)
    pc = count_parameters(arch)
    layers = _layers(arch)
    plain = _scheme_bytes(fmt, "plain")
    vocab_rows = _padded_vocab(arch.vocab_size or 0)
    emb_gpu = vocab_rows / tp * arch.hidden_size * plain
    parts = pp_partition(arch.num_hidden_layers, pp)
    per_stage: list[float] = []
    rep_stage: list[float] = []
    start = 0
    for s, n in enumerate(parts):
        b = 0.0
        rep = 0.0
        for layer in layers[start:start + n]:
            lb, lr = _layer_bytes(layer, arch, fmt, tp)
            b += lb
            rep += lr
        start += n
        if s == 0:
            b += emb_gpu
        if s == pp - 1:
            if not _tied(arch) or pp > 1:
                b += emb_gpu  # lm_head (a tied head on a later stage is a separate copy)
            b += arch.hidden_size * plain  # final norm
            rep += arch.hidden_size * plain
        per_stage.append(b)
        rep_stage.append(rep)
    total_model = 0.0
    for layer in layers:
        lb, _ = _layer_bytes(layer, arch, fmt, 1)
        total_model += lb
    total_model += (pc.embedding + pc.lm_head + arch.hidden_size) * plain
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
    worst = max(range(pp), key=lambda i: per_stage[i])
    return WeightBytes(
        total=int(total_model),
        per_gpu=int(per_stage[worst]),
        per_stage=tuple(int(b) for b in per_stage),
        replicated_per_gpu=int(rep_stage[worst]),
        fmt=fmt,
        from_index=from_index,
    )


# --------------------------------------------------------------------------
# KV cache bytes


def kv_dtype_bytes(arch: ModelArch, kv_cache_dtype: str = "auto", dtype: str = "auto") -> int:
    """Bytes per KV element: "auto" follows the activation dtype (16-bit, or
    fp32 with --dtype float32) — not the weight quantization."""
    key = (kv_cache_dtype or "auto").strip().lower()
    if key not in _KV_DTYPES:
        raise SizingError(
            "kv_cache_dtype", f"unknown KV cache dtype '{kv_cache_dtype}'; choose one of: {', '.join(KV_CACHE_DTYPE_CHOICES)}"
        )
    b = _KV_DTYPES[key]
    if b is None:
        b = int(weight_format(arch, dtype).dtype_bytes)
    return b


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
    Sliding layers are assumed spread evenly (interleaved patterns)."""
    parts = pp_partition(arch.num_hidden_layers, pp)
    out = []
    for n in parts:
        swa = round(arch.sliding_window_layers * n / arch.num_hidden_layers)
        out.append((n - swa, swa))
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


# --------------------------------------------------------------------------
# Activation, non-torch and CUDA-graph memory


def default_max_num_batched_tokens(gpu_memory_bytes: int) -> int:
    """vLLM's default for the OpenAI server (EngineArgs.get_batch_defaults):
    16384 on GPUs of ≥160 GiB, 8192 on ≥70 GiB (H100/H200), 2048 otherwise."""
    if gpu_memory_bytes >= 160 * GIB:
        return 16384
    if gpu_memory_bytes >= 70 * GIB:
        return 8192
    return 2048


def default_max_num_seqs(gpu_memory_bytes: int) -> int:
    """vLLM's default max_num_seqs (EngineArgs.get_batch_defaults): 1024 on
    GPUs of ≥70 GiB, 256 otherwise."""
    return 1024 if gpu_memory_bytes >= 70 * GIB else 256


def activation_bytes(arch: ModelArch, *, tp: int = 1, max_num_batched_tokens: int = 8192, max_num_seqs: int = 256) -> int:
    """Peak activation memory of vLLM's profiling run on one GPU:
    ``T × 2 B × 4 × hidden + max_num_seqs × vocab × 4 B × 3.25`` (constants
    ACT_* and SAMPLER_* above).  The same on every TP rank: vLLM's logged
    peak does not shrink with TP (the logits are all-gathered to full vocab)."""
    h = arch.hidden_size
    forward = max_num_batched_tokens * ACT_BYTES * ACT_HIDDEN_COPIES * h
    sampler = max_num_seqs * (arch.vocab_size or 0) * SAMPLER_BYTES * SAMPLER_COPIES
    return int(forward + sampler)


def non_torch_bytes(tp: int = 1, pp: int = 1) -> int:
    """Memory outside PyTorch's allocator per GPU (NON_TORCH_GIB_*)."""
    gib = NON_TORCH_GIB_TP if tp > 1 else NON_TORCH_GIB_SINGLE
    return int(gib * GIB)


def cuda_graph_bytes(tp: int = 1) -> int:
    """CUDA-graph memory current vLLM reserves from the KV budget (CUDA_GRAPH_GIB*)."""
    return int((CUDA_GRAPH_GIB_TP if tp > 1 else CUDA_GRAPH_GIB) * GIB)


# --------------------------------------------------------------------------
# KV capacity (how vLLM turns bytes into tokens)


@dataclass(frozen=True)
class KVCapacity:
    tokens: int  # what vLLM logs as "GPU KV cache size: N tokens" (per replica)
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
    group; vLLM logs tokens = concurrency × max_model_len.
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
            cap = KVCapacity(int(conc * max_model_len), conc, blocks)
        else:
            lo, hi = min(full, swa), max(full, swa)
            g = hi if hi < lo * 1.5 else lo
            n_full, n_swa = _cdiv(full, g), _cdiv(swa, g)
            blocks = int(avail // (BLOCK_SIZE * per_layer * g))
            per_req = n_full * _cdiv(max_model_len, BLOCK_SIZE) + n_swa * _cdiv(
                min(window - 1 + max_num_batched_tokens, max_model_len), BLOCK_SIZE
            )
            conc = blocks / per_req
            cap = KVCapacity(int(conc * max_model_len), conc, blocks)
        if best is None or cap.tokens < best.tokens:
            best = cap
    assert best is not None
    return best


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --------------------------------------------------------------------------
# TP rules


def tp_problem(arch: ModelArch, tp: int) -> Optional[str]:
    """Why vLLM would refuse this TP size for the model (None when it accepts it).

    Rules: attention heads divisible by TP (ModelConfig.verify_with_parallel_config);
    KV heads divisible by TP, or TP divisible by KV heads (attention layers'
    asserts); the 64-padded vocabulary divisible by TP (VocabParallelEmbedding
    divide()); with block-quantized fp8 or int4 group-quantized checkpoints,
    the per-rank MLP / expert width must stay a multiple of the 128 block /
    group size.
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
    fmt_scheme = _QUANT_SCHEMES.get((arch.quantization or "").lower())
    if fmt_scheme in ("fp8", "int4") and arch.quantization not in ("fbgemm_fp8", "modelopt", "ptpc_fp8"):
        widths = []
        if arch.moe is None or arch.moe.first_k_dense_replace:
            widths.append(arch.intermediate_size)
        if arch.moe is not None:
            widths.append(arch.moe.moe_intermediate_size or arch.intermediate_size)
        for w in widths:
            if (w // tp) % 128 or w % tp:
                return f"TP {tp} splits the {w}-wide MLP into {w / tp:g}-wide shards, not a multiple of the 128 quantization block"
    return None


def valid_tp_sizes(arch: ModelArch, gpus_per_node: int = 8) -> list[int]:
    """TP sizes vLLM accepts for the model, up to one node (see :func:`tp_problem`).
    Not necessarily powers of two (e.g. 6 for 48 heads), though 1/2/4/8 are
    what one node offers in practice."""
    return [t for t in range(1, gpus_per_node + 1) if tp_problem(arch, t) is None]


# --------------------------------------------------------------------------
# The plan


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


def _check_positive(name: str, value: Any) -> None:
    if value is None or value < 1:
        raise SizingError(name, f"{name} must be a positive integer (got {value})")


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

    ``max_model_len`` defaults to the model's max_position_embeddings (vLLM's
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
        max_model_len = arch.max_position_embeddings
        if max_model_len is None:
            raise SizingError("max_model_len", "the model's max_position_embeddings is unknown; pass max_model_len")
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
    if arch.max_position_embeddings and max_model_len > arch.max_position_embeddings:
        warnings.append(
            f"max_model_len {max_model_len} exceeds the model's max_position_embeddings "
            f"({arch.max_position_embeddings}); vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
        )
    if arch.vision:
        warnings.append("vision tower not counted: weights are a little higher than shown")

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
        tight = cap.max_concurrency < TIGHT_CONCURRENCY or cap.tokens * (1 - ESTIMATE_MARGIN) < max_model_len
        verdict = "tight" if tight else "fits"
        reason = (
            f"{g(kv_avail)} GiB of KV cache per GPU = {cap.tokens:,} tokens, "
            f"{cap.max_concurrency:.1f} concurrent {max_model_len:,}-token requests"
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
        max_concurrency=round(max(0.0, cap.max_concurrency), 2) if not problem else 0.0,
        headroom_gib=g(headroom),
        max_model_len_fits=fits_len if not problem else 0,
        verdict=verdict,
        reason=reason,
        warnings=tuple(warnings),
        approximate=fmt.approximate or bool(arch.vision),
        max_num_batched_tokens=max_num_batched_tokens,
    )


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
    max_position_embeddings when known."""
    avail = min(stage_kv)
    if avail <= 0:
        return 0
    hi = arch.max_position_embeddings or 10_000_000
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


# --------------------------------------------------------------------------
# Advice


def max_model_len_that_fits(
    arch: ModelArch, gpu_memory_bytes: int, tp: int = 1, **kwargs: Any
) -> int:
    """The largest max_model_len that still starts at this TP (0 when the
    weights alone do not fit, or the TP size is invalid)."""
    p = plan(arch, gpu_memory_bytes=gpu_memory_bytes, tp=tp, max_model_len=kwargs.pop("max_model_len", None) or 1, **kwargs)
    if tp_problem(arch, tp):
        return 0
    return p.max_model_len_fits


def advise_tp(
    arch: ModelArch,
    gpu_memory_bytes: int,
    *,
    gpus_per_node: int = 8,
    min_concurrency: float = 1.0,
    max_model_len: Optional[int] = None,
    allow_tight: bool = True,
    **kwargs: Any,
) -> Optional[tuple[int, Plan]]:
    """The smallest valid TP whose plan fits with at least ``min_concurrency``
    max_model_len requests at once (None when no TP on one node does)."""
    for t in valid_tp_sizes(arch, gpus_per_node):
        p = plan(arch, gpu_memory_bytes=gpu_memory_bytes, tp=t, max_model_len=max_model_len, **kwargs)
        if p.verdict == "does_not_fit" or (p.verdict == "tight" and not allow_tight):
            continue
        if p.max_concurrency >= min_concurrency:
            return t, p
    return None


def plan_for_gpu(
    arch: Optional[ModelArch],
    gpu: Any,
    *,
    tp: int,
    pp: int = 1,
    max_model_len: Optional[int] = None,
    gpu_memory_utilization: Optional[float] = None,
    dtype: str = "auto",
    kv_cache_dtype: str = "auto",
) -> Optional[Plan]:
    """:func:`plan` for a GPU type of llmctl.hardware, or None when it cannot be
    computed (architecture unknown, CPU, unknown memory, values sizing rejects).
    The one place gen-config and validate ask whether a choice fits."""
    if arch is None or gpu.is_cpu or not gpu.memory_gib:
        return None
    try:
        return plan(
            arch, gpu_memory_bytes=gpu.memory_bytes, tp=tp, pp=pp, max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION,
            dtype=dtype, kv_cache_dtype=kv_cache_dtype,
        )
    except (ValueError, TypeError):
        return None
