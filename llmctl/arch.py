"""A model's architecture as the sizing uses it (:class:`ModelArch`), and the
one converter from a Hugging Face ``config.json`` to it
(:func:`arch_from_hf_config`).

Every model goes through the converter: a config.json read at run time (a
local directory, the hub's cache), a published start-up log's config in
tests/data, and the catalog itself (tools/build_catalog.py turns each
reference-facts row into a config.json-shaped dict, :mod:`tools.facts`, and
converts that). So a model's numbers cannot depend on where it came from.

The converter reads config.json the way vLLM's model classes and config
classes read it (each rule names the vLLM / transformers code it follows):
text_config / llm_config nesting, layer kinds (``layer_types``,
``full_attention_interval``, Gemma's sliding patterns, Qwen2's windows,
Nemotron-H's pattern), MoE spellings and layouts (DeepSeek's dense first
layers and shared experts, Qwen's shared expert and sparse step, Llama 4's
interleave, Gemma 4's MoE block beside a dense MLP), MLA and DeepSeek V3.2's
indexer, Gated DeltaNet and Mamba2 state shapes, Gemma 3n/4 per-layer
embeddings and KV sharing, Gemma 4's second KV geometry, vision towers
(:mod:`llmctl.vision`) and ``quantization_config`` (:mod:`llmctl.quant`).
What it cannot read it records in ``approximate`` instead of guessing.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmctl.arch_families import unmodelled_reason
from llmctl.arch_v4 import CompressedAttention, compressed_from_config
from llmctl.quant import Quant, quant_from_config
from llmctl.vision import VisionTower, vision_from_config


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MoE(_Strict):
    """Mixture-of-experts fields, normalised across config.json spellings
    (num_experts / num_local_experts / n_routed_experts)."""

    num_experts: int = Field(gt=0, description="routed experts per MoE layer")
    num_experts_per_tok: int = Field(gt=0)
    moe_intermediate_size: Optional[int] = Field(
        default=None, description="FFN width of one expert; None means intermediate_size (Mixtral, gpt-oss)"
    )
    num_shared_experts: int = Field(default=0, ge=0)
    shared_expert_intermediate_size: Optional[int] = None
    first_k_dense_replace: int = Field(default=0, ge=0, description="leading layers with a dense MLP")
    layer_step: int = Field(default=1, ge=1, description="every layer_step-th layer is MoE (Llama 4 interleave_moe_layer_step)")
    dense_intermediate_size: Optional[int] = Field(default=None, description="FFN width of the dense layers, when it differs")
    dense_layers: int = Field(default=0, ge=0, description="further layers with a dense MLP (Qwen mlp_only_layers)")
    dense_beside: bool = Field(default=False, description="every MoE layer also has a dense MLP (Gemma 4 enable_moe_block)")
    gated: bool = Field(default=True, description="experts have gate and up projections (False: Nemotron-H's relu² up / down only)")
    latent_size: Optional[int] = Field(default=None, description="routed experts work in this latent width (Nemotron-H moe_latent_size)")


class MLA(_Strict):
    """Multi-head latent attention (DeepSeek-V2/V3)."""

    kv_lora_rank: int = Field(gt=0)
    q_lora_rank: Optional[int] = None
    qk_rope_head_dim: int = Field(gt=0)
    qk_nope_head_dim: int = Field(gt=0)
    v_head_dim: int = Field(gt=0)


class Indexer(_Strict):
    """DeepSeek V3.2's sparse-attention indexer (vllm/model_executor/models/
    deepseek_v2.py Indexer, DeepseekV32IndexerCache): its own fp8 key cache of
    ``head_dim + head_dim / 128 × 4`` bytes per token on every layer that has one."""

    n_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    topk: int = Field(gt=0)
    layers: int = Field(gt=0, description="layers with an indexer")


class LinearAttention(_Strict):
    """The fixed-size recurrent state of linear-attention layers
    (vllm/model_executor/layers/mamba/mamba_utils.py): Gated DeltaNet
    (Qwen3-Next, Qwen3.5) or Mamba2 (granite-4.0-h, Nemotron-H)."""

    kind: Literal["gdn", "mamba2"]
    conv_kernel: int = Field(gt=0)
    # gdn: key/value heads and head dims; mamba2: num_value_heads = SSM heads,
    # value_head_dim = head_dim, key_head_dim = state size, num_key_heads = n_groups
    num_key_heads: int = Field(gt=0)
    num_value_heads: int = Field(gt=0)
    key_head_dim: int = Field(gt=0)
    value_head_dim: int = Field(gt=0)
    intermediate_size: Optional[int] = Field(default=None, description="mamba2: expand × hidden (the x channels)")
    ssm_state_bytes: Optional[int] = Field(default=None, description="bytes of the SSM state dtype when not the model's")


class PerLayerEmbeddings(_Strict):
    """Gemma 3n / Gemma 4 per-layer embeddings: a vocab-parallel table of
    ``vocab_size × layers × hidden_size`` (gemma3n.py / gemma4.py
    embed_tokens_per_layer) and per-layer projections."""

    vocab_size: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    altup_inputs: int = Field(default=0, ge=0, description="Gemma 3n AltUp streams (0: none)")
    laurel_rank: int = Field(default=0, ge=0)


class ModelArch(_Strict):
    """Architecture facts as config.json gives them (None = not known)."""

    architectures: list[str] = Field(min_length=1)
    model_type: str
    num_hidden_layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int = Field(gt=0)
    head_dim: Optional[int] = Field(
        default=None, gt=0, description="explicit head_dim; None means hidden_size / num_attention_heads"
    )
    max_position_embeddings: Optional[int] = Field(default=None, gt=0)
    vocab_size: Optional[int] = Field(default=None, gt=0)
    torch_dtype: Optional[str] = None
    tie_word_embeddings: Optional[bool] = None
    attention_bias: bool = False
    rope_scaling: Optional[dict[str, Any]] = None  # rope_scaling, or transformers 5's rope_parameters
    rotary_dim: Optional[int] = Field(default=None, gt=0, description="rotated dimensions per head when fewer than "
                                      "head_dim (config rotary_dim, or head_dim x partial_rotary_factor)")
    sliding_window: Optional[int] = Field(default=None, gt=0)
    sliding_window_layers: int = Field(
        default=0, ge=0, description="layers whose KV cache is bounded by sliding_window"
    )
    moe: Optional[MoE] = None
    mla: Optional[MLA] = None
    quantization: Optional[str] = Field(default=None, description="quant_method of quantization_config")
    num_nextn_predict_layers: int = Field(default=0, ge=0)
    vision: bool = False
    linear_attention_layers: int = Field(
        default=0, ge=0, description="layers with a fixed-size state instead of a growing KV cache (Gated DeltaNet, Mamba)"
    )
    approximate: Optional[str] = Field(default=None, description="why llmctl's sizing of this architecture is approximate")
    # 2026 architectures (None / 0: not this kind of model)
    linear_attention: Optional[LinearAttention] = None
    chunked_attention_layers: int = Field(default=0, ge=0, description="layers with chunked local attention (Llama 4)")
    attention_chunk_size: Optional[int] = Field(default=None, gt=0)
    kv_shared_full_layers: int = Field(default=0, ge=0, description="full-attention layers reusing another layer's KV")
    kv_shared_sliding_layers: int = Field(default=0, ge=0, description="sliding layers reusing another layer's KV")
    full_kv_heads: Optional[int] = Field(default=None, gt=0, description="KV heads of full-attention layers when they differ")
    full_head_dim: Optional[int] = Field(default=None, gt=0, description="head_dim of full-attention layers when it differs")
    indexer: Optional[Indexer] = None
    per_layer_embeddings: Optional[PerLayerEmbeddings] = None
    vision_tower: Optional[VisionTower] = None
    quant: Optional[Quant] = None
    attn_output_gate: bool = Field(default=False, description="gated attention: q_proj also yields a gate (Qwen3-Next, Qwen3.5)")
    compressed: Optional[CompressedAttention] = Field(default=None, description="DeepSeek V4's SWA + compressed caches")
    double_wide_mlp_layers: int = Field(default=0, ge=0, description="last layers whose MLP is twice intermediate_size (Gemma 4 E2B)")
    cacheless_layers: int = Field(default=0, ge=0, description="layers with neither a KV cache nor a state (Nemotron-H's MLP / MoE blocks)")
    block_pattern: Optional[str] = Field(default=None, description="Nemotron-H hybrid_override_pattern: one block per layer (M, *, -, E)")

    @model_validator(mode="after")
    def _consistent(self) -> "ModelArch":
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError("head_dim is not given and hidden_size is not a multiple of num_attention_heads")
        if self.sliding_window_layers and self.sliding_window is None:
            raise ValueError("sliding_window_layers > 0 needs sliding_window")
        kinds = self.sliding_window_layers + self.linear_attention_layers + self.chunked_attention_layers + self.cacheless_layers
        if kinds > self.num_hidden_layers:
            raise ValueError("sliding_window_layers + linear_attention_layers + chunked_attention_layers + cacheless_layers "
                             "exceed num_hidden_layers")
        if self.kv_shared_sliding_layers > self.sliding_window_layers:
            raise ValueError("kv_shared_sliding_layers exceeds sliding_window_layers")
        if self.kv_shared_full_layers > self.full_attention_layers:
            raise ValueError("kv_shared_full_layers exceeds the full-attention layers")
        return self

    @property
    def quant_info(self) -> Optional[Quant]:
        """How the weights are quantized: the parsed quantization_config, or
        — for a ``quantization`` set without one (a catalog entry of an older
        llmctl, ``model_copy(update={"quantization": ...})``) — what the method
        alone says (fp8: 128 × 128 blocks, the common fp8 checkpoint layout)."""
        if not self.quantization:
            return None
        if self.quant is not None and self.quant.method == str(self.quantization).lower():
            return self.quant
        extra = {"weight_block_size": [128, 128]} if str(self.quantization).lower() == "fp8" else {}
        return quant_from_config({"quant_method": self.quantization, **extra})

    @property
    def head_dim_effective(self) -> int:
        return self.head_dim if self.head_dim is not None else self.hidden_size // self.num_attention_heads

    @property
    def full_attention_layers(self) -> int:
        """Layers whose KV cache grows with the context (own cache or shared)."""
        return (self.num_hidden_layers - self.sliding_window_layers - self.linear_attention_layers
                - self.chunked_attention_layers - self.cacheless_layers)

    @property
    def context_limit(self) -> Optional[int]:
        """The longest max_model_len vLLM accepts for the model without
        VLLM_ALLOW_LONG_MAX_MODEL_LEN (vLLM's _get_and_verify_max_len: the rope
        factor extends max_position_embeddings except for llama3/longrope/su/
        mrope scaling, which already bake it into max_position_embeddings; yarn
        scales the original context). None when unknown."""
        if self.max_position_embeddings is None:
            return None
        limit = self.max_position_embeddings
        rs = self.rope_scaling or {}
        kind = rs.get("rope_type") or rs.get("type")
        if rs and kind not in ("llama3", "longrope", "su", "mrope", "default", None):
            factor = self.rope_factor
            if kind == "yarn" and rs.get("original_max_position_embeddings"):
                limit = max(limit, int(rs["original_max_position_embeddings"] * factor))
            elif factor > 1:
                limit = int(limit * factor)
        return limit

    @property
    def rope_factor(self) -> float:
        """Context extension factor from rope_scaling (1.0 when none)."""
        rs = self.rope_scaling or {}
        try:
            return float(rs.get("factor", 1.0) or 1.0)
        except (TypeError, ValueError):
            return 1.0


# --------------------------------------------------------------------------
# config.json -> ModelArch


ENCODERS = ("xlm-roberta", "bert", "roberta")


def _first(cfg: dict, *keys: str, default: Any = None) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def _kind(t: Any) -> str:
    """A ``layer_types`` entry as full / sliding / chunked / linear."""
    s = str(t).lower()
    if "sliding" in s or s == "local":
        return "sliding"
    if "chunk" in s:
        return "chunked"
    if "linear" in s or "mamba" in s or "deltanet" in s or s in ("ssm", "recurrent"):
        return "linear"
    return "full"


def layer_kinds(cfg: dict, n: int) -> list[str]:
    """The kind of every decoder layer, as vLLM builds the model.

    ``layer_types`` wins when present (transformers' configs, Qwen3.5,
    gpt-oss, Gemma 3n/4, granite's attention/mamba); then Qwen3-Next / Qwen3.5's
    ``full_attention_interval`` (full at (i + 1) % interval == 0;
    vllm/transformers_utils/configs/qwen3_next.py hard-codes 4); Llama 4's
    chunked local attention (``attention_chunk_size``; every
    ``no_rope_layers`` 0 is global: transformers Llama4TextConfig); then the
    sliding-window spellings of Gemma 2/3, Qwen2, Mistral and Phi-3."""
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and len(pattern) == n:
        # vllm/model_executor/models/nemotron_h.py ALL_DECODER_LAYER_TYPES: one block per layer, M a Mamba2
        # mixer (a state), * attention (a KV cache), - an MLP and E a MoE (neither)
        return [{"M": "linear", "*": "full"}.get(c, "none") for c in pattern]
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == n:
        return [_kind(t) for t in types]
    interval = cfg.get("full_attention_interval")
    if interval and str(cfg.get("model_type", "")).startswith(("qwen3_next", "qwen3_5")):
        step = 4 if str(cfg.get("model_type")).startswith("qwen3_next") else int(interval)
        return ["full" if (i + 1) % step == 0 else "linear" for i in range(n)]
    if cfg.get("attention_chunk_size"):
        nope = cfg.get("no_rope_layers")
        if isinstance(nope, list) and len(nope) == n:
            return ["chunked" if use_rope else "full" for use_rope in nope]
        step = int(cfg.get("no_rope_layer_interval") or 4)
        return ["full" if (i + 1) % step == 0 else "chunked" for i in range(n)]
    window = cfg.get("sliding_window")
    if not window or cfg.get("use_sliding_window") is False:
        return ["full"] * n
    if cfg.get("use_sliding_window") is True and cfg.get("max_window_layers") is not None:
        # Qwen2: layers >= max_window_layers use the window
        return ["sliding" if i >= int(cfg["max_window_layers"]) else "full" for i in range(n)]
    pattern_n = cfg.get("sliding_window_pattern")
    if pattern_n:  # Gemma 3: every pattern-th layer is global
        return ["full" if (i + 1) % int(pattern_n) == 0 else "sliding" for i in range(n)]
    if cfg.get("model_type") in ("gemma2",) or cfg.get("cache_implementation") == "hybrid":
        return ["sliding" if i % 2 == 0 else "full" for i in range(n)]  # Gemma 2 alternates local / global
    return ["sliding"] * n  # Mistral v0.1 / Phi-3 style: every layer slides


def _moe(get, model_type: str, n_layers: int) -> Optional[MoE]:
    n_exp = get("num_experts", "num_local_experts", "n_routed_experts")
    if not n_exp:
        return None
    if model_type.startswith("gemma4") and get("enable_moe_block") is False:
        return None
    mlp_only = get("mlp_only_layers") or []
    step = get("decoder_sparse_step")
    dense_layers = len(mlp_only) if isinstance(mlp_only, list) else 0
    layer_step = int(get("interleave_moe_layer_step", default=1) or 1)
    if step and int(step) > 1:
        layer_step = int(step)
    shared = int(get("n_shared_experts", "num_shared_experts", default=0) or 0)
    dense_inter = None
    if model_type.startswith("nemotron_h"):
        # nemotron_h.py NemotronHMoE: relu² experts (up / down), the shared experts one NemotronHMLP of
        # n_shared_experts × moe_shared_expert_intermediate_size, routed experts over moe_latent_size when set
        sh = get("moe_shared_expert_intermediate_size")
        return MoE(num_experts=int(n_exp), num_experts_per_tok=int(get("num_experts_per_tok", default=1)),
                   moe_intermediate_size=get("moe_intermediate_size"), num_shared_experts=shared,
                   shared_expert_intermediate_size=int(sh) * max(shared, 1) if sh and shared else None,
                   gated=False, latent_size=get("moe_latent_size"))
    if model_type.startswith("llama4"):
        # transformers Llama4TextMoe: one shared expert of intermediate_size beside the routed ones;
        # the dense layers have intermediate_size_mlp
        shared = 1
        dense_inter = get("intermediate_size_mlp")
    return MoE(
        num_experts=int(n_exp),
        num_experts_per_tok=int(get("num_experts_per_tok", "experts_per_token", "top_k_experts", "moe_topk", default=1)),
        moe_intermediate_size=get("moe_intermediate_size", "expert_intermediate_size"),
        num_shared_experts=shared,
        shared_expert_intermediate_size=get("shared_expert_intermediate_size"),
        first_k_dense_replace=int(get("first_k_dense_replace", default=0) or 0),
        layer_step=layer_step,
        dense_intermediate_size=dense_inter,
        dense_layers=dense_layers,
        dense_beside=bool(model_type.startswith("gemma4") and get("enable_moe_block")),
    )


def _linear_attention(get, model_type: str, dtype_bytes_of) -> Optional[LinearAttention]:
    if get("linear_num_value_heads"):
        ssm = get("mamba_ssm_dtype")
        return LinearAttention(
            kind="gdn", conv_kernel=int(get("linear_conv_kernel_dim", default=4)),
            num_key_heads=int(get("linear_num_key_heads")), num_value_heads=int(get("linear_num_value_heads")),
            key_head_dim=int(get("linear_key_head_dim")), value_head_dim=int(get("linear_value_head_dim")),
            ssm_state_bytes=dtype_bytes_of(ssm) if ssm else None,
        )
    heads = get("mamba_n_heads", "mamba_num_heads")
    if heads:
        hidden = get("hidden_size")
        expand = get("mamba_expand", default=2)
        head_dim = get("mamba_d_head", "mamba_head_dim")
        inter = int(heads) * int(head_dim) if head_dim else int(expand * hidden)
        ssm = get("mamba_ssm_cache_dtype") if model_type.startswith("nemotron_h") else None
        return LinearAttention(
            kind="mamba2", conv_kernel=int(get("mamba_d_conv", "conv_kernel", default=4)),
            num_key_heads=int(get("mamba_n_groups", "n_groups", default=1)), num_value_heads=int(heads),
            key_head_dim=int(get("mamba_d_state", "ssm_state_size", default=128)),
            value_head_dim=int(head_dim or inter // int(heads)), intermediate_size=inter,
            ssm_state_bytes=dtype_bytes_of(ssm or "float32") if model_type.startswith("nemotron_h") else None,
        )
    return None


def _rotary_dim(get: Any, rope: Any, head_dim: Any) -> Optional[int]:
    """Rotated dimensions per head, when fewer than head_dim: vLLM's get_rope
    builds its cos/sin cache over ``rotary_dim`` (MiniMax-M2's config key), or
    ``head_dim × partial_rotary_factor`` (Qwen3-Next / 3.5, GLM-4.x, Phi-4-mini;
    top level or in a flat rope_parameters). None: the whole head."""
    explicit = get("rotary_dim")
    if isinstance(explicit, int) and explicit > 0:
        return explicit
    factor = get("partial_rotary_factor")
    if factor is None and isinstance(rope, dict):
        factor = rope.get("partial_rotary_factor")
    if not isinstance(head_dim, int) or not isinstance(factor, (int, float)) or not 0 < factor < 1:
        return None
    return int(head_dim * factor)


def _dtype_bytes(name: Any) -> Optional[int]:
    return {"float32": 4, "fp32": 4, "float16": 2, "bfloat16": 2, "auto": None}.get(str(name).lower())


def arch_from_hf_config(cfg: dict) -> ModelArch:
    """Build a ModelArch from a (possibly multimodal) Hugging Face config.json dict."""
    outer = cfg
    text = cfg.get("text_config") or cfg.get("llm_config") or cfg

    def get(*keys: str, default: Any = None) -> Any:
        v = _first(text, *keys)
        if v is None and text is not outer:
            v = _first(outer, *keys)
        return default if v is None else v

    model_type = str(text.get("model_type") or outer.get("model_type") or "unknown")
    rope = get("rope_scaling") or get("rope_parameters")  # transformers 5 renamed it; vLLM reads either
    outer_type = str(outer.get("model_type") or model_type)
    n_layers = get("num_hidden_layers", "n_layer", "num_layers")
    heads = get("num_attention_heads", "n_head")
    hidden = get("hidden_size", "n_embd", "d_model")
    merged = dict(outer)
    merged.update(text)
    kinds = layer_kinds(merged, int(n_layers)) if isinstance(n_layers, int) and n_layers > 0 else []
    shared_n = int(get("num_kv_shared_layers", default=0) or 0)
    shared = kinds[len(kinds) - shared_n:] if shared_n else []
    mla = None
    if get("kv_lora_rank"):
        mla = MLA(kv_lora_rank=get("kv_lora_rank"), q_lora_rank=get("q_lora_rank"), qk_rope_head_dim=get("qk_rope_head_dim"),
                  qk_nope_head_dim=get("qk_nope_head_dim"), v_head_dim=get("v_head_dim"))
    indexer = None
    if mla is not None and get("index_n_heads") and get("index_head_dim"):
        indexer = Indexer(n_heads=int(get("index_n_heads")), head_dim=int(get("index_head_dim")),
                          topk=int(get("index_topk", default=2048)), layers=_indexer_layers(get, int(n_layers)))
    ple = None
    if get("hidden_size_per_layer_input") and get("vocab_size_per_layer_input"):
        ple = PerLayerEmbeddings(vocab_size=int(get("vocab_size_per_layer_input")), hidden_size=int(get("hidden_size_per_layer_input")),
                                 altup_inputs=int(get("altup_num_inputs", default=0) or 0) if model_type.startswith("gemma3n") else 0,
                                 laurel_rank=int(get("laurel_rank", default=0) or 0) if model_type.startswith("gemma3n") else 0)
    full_kv, full_hd = None, None
    if model_type.startswith("gemma4"):
        # vllm/transformers_utils/configs/gemma4.py gemma4_layer_config: full layers use global_head_dim,
        # and num_global_key_value_heads only with attention_k_eq_v
        full_hd = get("global_head_dim")
        if get("attention_k_eq_v"):
            full_kv = get("num_global_key_value_heads")
    qc = outer.get("quantization_config") or text.get("quantization_config") or {}
    compressed = compressed_from_config(get, model_type, int(n_layers)) if isinstance(n_layers, int) else None
    if compressed is not None and isinstance(qc, dict) and qc.get("quant_method") in ("fp8", "deepseek_v4_fp8"):
        # models/config.py DeepseekV4ForCausalLMConfig: fp8 becomes deepseek_v4_fp8, whose
        # experts follow expert_dtype (quant_config.py DeepseekV4FP8Config; default fp4)
        qc = {**qc, "quant_method": "deepseek_v4_fp8", "expert_dtype": compressed.expert_dtype}
    quant = quant_from_config(qc) if isinstance(qc, dict) and qc else None
    tower = vision_from_config(outer, model_type=outer_type, text_hidden=hidden)
    vision = tower is not None or any(k in outer for k in ("vision_config", "vision_tower", "image_token_index", "image_token_id"))
    kv_heads = get("num_key_value_heads", "num_kv_heads", default=heads)
    approx = []
    why_arch = unmodelled_reason(list(outer.get("architectures") or text.get("architectures") or []))
    if why_arch:
        approx.append(why_arch)
    if quant is not None and quant.approximate:
        approx.append(quant.approximate)
    if model_type in ENCODERS:
        approx.append("an encoder (BERT-style) sized as a decoder")
    pattern = merged.get("hybrid_override_pattern")
    if pattern and (not isinstance(pattern, str) or len(pattern) != n_layers or set(pattern) - set("M*-E")):
        approx.append("Nemotron-H's hybrid_override_pattern does not match num_hidden_layers or has unknown blocks: "
                      "sized as a plain decoder")
        pattern = None
    if any(k == "linear" for k in kinds) and _linear_attention(get, model_type, _dtype_bytes) is None:
        approx.append("linear-attention layers whose state size config.json does not give")
    return ModelArch(
        architectures=outer.get("architectures") or text.get("architectures") or ["unknown"],
        model_type=model_type if text is not outer else outer_type,
        num_hidden_layers=n_layers,
        hidden_size=hidden,
        intermediate_size=get("intermediate_size", "ffn_dim", default=4 * hidden if isinstance(hidden, int) else None),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=get("head_dim"),
        max_position_embeddings=get("max_position_embeddings", "n_positions", "max_seq_len"),
        vocab_size=get("vocab_size"),
        torch_dtype=get("torch_dtype", "dtype"),
        tie_word_embeddings=get("tie_word_embeddings"),
        attention_bias=bool(get("attention_bias", default=False)) or model_type == "qwen2",
        rope_scaling=rope,
        rotary_dim=_rotary_dim(get, rope, get("head_dim") or (hidden // heads if isinstance(hidden, int) and heads else None)),
        sliding_window=get("sliding_window"),
        sliding_window_layers=kinds.count("sliding") if compressed is None else 0,  # V4's window is part of its own caches
        moe=_moe(get, model_type, int(n_layers)),
        mla=mla,
        quantization=(qc.get("quant_method") if isinstance(qc, dict) else None),
        num_nextn_predict_layers=int(get("num_nextn_predict_layers", "mtp_num_hidden_layers", default=0) or 0),
        vision=vision,
        linear_attention_layers=kinds.count("linear"),
        approximate="; ".join(approx) or None,
        linear_attention=_linear_attention(get, model_type, _dtype_bytes),
        chunked_attention_layers=kinds.count("chunked"),
        attention_chunk_size=get("attention_chunk_size") if "chunked" in kinds else None,
        kv_shared_full_layers=shared.count("full"),
        kv_shared_sliding_layers=shared.count("sliding"),
        full_kv_heads=full_kv if full_kv and full_kv != kv_heads else None,
        full_head_dim=full_hd if full_hd and full_hd != get("head_dim") else None,
        indexer=indexer,
        per_layer_embeddings=ple,
        vision_tower=tower,
        quant=quant,
        # transformers Qwen3NextAttention always doubles q_proj; Qwen3.5 says attn_output_gate
        attn_output_gate=bool(get("attn_output_gate", default=model_type.startswith("qwen3_next"))),
        compressed=compressed,
        # gemma4.py Gemma4DecoderLayer: use_double_wide_mlp doubles the MLP of the KV-shared layers
        double_wide_mlp_layers=shared_n if model_type.startswith("gemma4") and get("use_double_wide_mlp") else 0,
        cacheless_layers=kinds.count("none"),
        block_pattern=pattern if isinstance(pattern, str) else None,
    )


def _indexer_layers(get, n_layers: int) -> int:
    """Layers with an indexer (deepseek_v32/attention.py: skip when
    max(layer − index_skip_topk_offset + 1, 0) % index_topk_freq != 0, or 'S'
    in index_topk_pattern; defaults offset 2, freq 1 → every layer)."""
    pattern = get("index_topk_pattern")
    if isinstance(pattern, str) and len(pattern) >= n_layers:
        return sum(1 for c in pattern[:n_layers] if c != "S")
    freq = int(get("index_topk_freq", default=1) or 1)
    offset = int(get("index_skip_topk_offset", default=2) or 2)
    return sum(1 for i in range(n_layers) if max(i - offset + 1, 0) % freq == 0)
