"""Weight and KV-cache storage formats: bytes per parameter by dtype and
quantization scheme, and the errors the sizing arithmetic raises."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from llmctl.arch import ModelArch
from llmctl.errors import SizingError, UsageError, param  # noqa: F401  (SizingError: re-exported)
from llmctl.quant import METHODS, NOT_IN_029, Quant, quant_from_config, scheme_quant

GIB = 1024**3

# Weight storage per parameter, in bytes, of a bare quantization scheme (llmctl.quant.scheme_quant,
# the one rule: Quant.bytes_per_weight). int4 (AWQ / GPTQ, group size 128): 4-bit weights + an fp16
# scale and a 4-bit zero point per group of 128 = 0.5 + (2 + 0.5) / 128. fp8 with 128×128 block
# scales (DeepSeek-V3 style): one fp32 scale per 16384 weights (vLLM fp8_utils.py
# create_fp8_scale_parameter). int8: w8a8 per-channel fp32 scale on ~4096-wide rows. MXFP4 (gpt-oss
# experts): 4-bit E2M1 values + one 8-bit E8M0 scale per 32 values = 4.25 bits.
INT4_BYTES = scheme_quant("int4").bytes_per_weight()
FP8_BYTES = scheme_quant("fp8").bytes_per_weight()
INT8_BYTES = scheme_quant("int8").bytes_per_weight()
MXFP4_BYTES = scheme_quant("mxfp4").bytes_per_weight()
# vLLM's MXFP4 MoE kernels on Hopper/Blackwell (Marlin, TRT-LLM) pad the
# expert hidden size to a multiple of 256 and the per-rank intermediate size to
# a multiple of 128 (fused_moe/oracle/mxfp4.py
# mxfp4_round_up_hidden_size_and_intermediate_size): gpt-oss 2880 -> 3072.
MXFP4_HIDDEN_ALIGN = 256
MXFP4_INTER_ALIGN = 128

# The sizing layer's dtype values -> (bytes of unquantized tensors, quantization
# scheme or None meaning "whatever the checkpoint says"). vLLM's dtypes, plus
# bare schemes (fp8, int4, …) that size a what-if checkpoint for llmctl's own
# benches and tests; `plan --dtype` takes vLLM's dtypes only
# (llmctl.planner.weights: a quantization goes to --quantization).
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
    "awq": (2, METHODS["awq"].scheme),
    "gptq": (2, METHODS["gptq"].scheme),
    "mxfp4": (2, "mxfp4"),
    "nvfp4": (2, "nvfp4"),  # a ModelOpt NVFP4 checkpoint of the model (4-bit E2M1, an fp8 scale per 16)
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
    "fp8_ds_mla": 1,  # DeepSeek's sparse-MLA page layout (FlashMLA sparse): MLA models with an indexer only
    "int8": 1,
    # packed formats (uint8 storage): the bytes of one head's K or V per token are _PACKED_KV's
    "nvfp4": 1,
    "nvfp4_4over6": 1,
    "int8_per_token_head": 1,
    "fp8_per_token_head": 1,
    "int4_per_token_head": 1,
}

# Bytes of one KV head's K (or V) for one token, from its head size, in the packed formats of vLLM 0.32:
# NVFP4 (FlashInfer's spec, vllm/utils/torch_utils.py nvfp4_kv_cache_full_dim: fp4 data + an fp8 scale per 16) and
# the per-token-head modes (Triton's spec, triton_attn.py customize_spec: the data + one fp32 scale per side).
# Standard attention layers only: MLA takes fp8_ds_mla / nvfp4_ds_mla, turboquant / ultraquant pack otherwise.
_PACKED_KV = {
    "nvfp4": lambda hd: hd // 2 + hd // 16,
    "nvfp4_4over6": lambda hd: hd // 2 + hd // 16,
    "int8_per_token_head": lambda hd: hd + 4,
    "fp8_per_token_head": lambda hd: hd + 4,
    "int4_per_token_head": lambda hd: hd // 2 + 4,
}

DTYPE_CHOICES = tuple(_DTYPES)
KV_CACHE_DTYPE_CHOICES = tuple(_KV_DTYPES)



@dataclass(frozen=True)
class WeightFormat:
    """How the weights are stored on the GPU: bytes per parameter by kind of
    tensor (:func:`_scheme_bytes`)."""

    dtype_bytes: float  # unquantized tensors (embeddings, norms, ...)
    scheme: Optional[str]  # None (unquantized), fp8, int8, int4, nvfp4, mxfp4
    approximate: bool = False
    note: str = ""
    linear_bytes: Optional[float] = None  # dense / shared-expert / linear-attention projections
    attention_bytes: Optional[float] = None  # attention projections
    expert_bytes: Optional[float] = None  # routed experts
    lm_head_bytes: Optional[float] = None
    expert_scheme: Optional[str] = None  # routed experts' scheme when it differs from ``scheme`` (DeepSeek V4 MXFP4)

    @property
    def label(self) -> str:
        if self.scheme is None:
            return {2: "bf16", 4: "fp32"}.get(int(self.dtype_bytes), f"{self.dtype_bytes}B")
        return self.scheme




def weight_format(arch: ModelArch, dtype: str = "auto", quantization: Optional[str] = None) -> WeightFormat:
    """Resolve --dtype, the engine's ``quantization`` and the checkpoint's
    quantization_config to a WeightFormat."""
    key = (dtype or "auto").strip().lower()
    if key not in _DTYPES:
        raise SizingError("dtype", f"unknown dtype '{dtype}'; choose one of: {', '.join(DTYPE_CHOICES)}")
    unq, forced = _DTYPES[key]
    if unq is None:
        # vLLM's dtype "auto": the config's torch_dtype, with float32 checkpoints
        # served in 16-bit (ModelConfig._get_and_verify_dtype).
        unq = 2
    q: Optional[Quant] = None
    note = ""
    qm = (quantization or "").strip().lower() or None
    if forced is not None:  # --dtype fp8 / int4 / awq …: the scheme llmctl has always sized them with
        linear = expert = scheme_quant(forced).bytes_per_weight()
        return WeightFormat(unq, forced, linear_bytes=linear, attention_bytes=linear, expert_bytes=expert)
    if arch.quantization:
        q = arch.quant_info
    elif qm in METHODS and METHODS[qm].online:
        # online quantization of an unquantized checkpoint: fp8 per tensor on every linear and expert
        # (online/fp8.py); int8 routed experts only (experts_int8.py)
        q = Quant(method=qm, scheme=METHODS[qm].scheme, experts_only=METHODS[qm].experts_only)
    elif qm in NOT_IN_029:
        q = quant_from_config({"quant_method": qm})
    elif qm:
        note = f"quantization '{qm}' needs a checkpoint quantized that way; this one is not: vLLM refuses to load it"
        return WeightFormat(unq, None, approximate=True, note=note)
    if q is None:
        return WeightFormat(unq, None)
    b = q.bytes_per_weight()
    linear = unq if q.experts_only else b
    return WeightFormat(
        dtype_bytes=unq, scheme=q.scheme, approximate=bool(q.approximate), note=q.approximate or "",
        linear_bytes=linear, attention_bytes=linear if q.attention else unq, expert_bytes=q.expert_bytes_per_weight(),
        lm_head_bytes=b if q.lm_head else unq, expert_scheme=q.expert_scheme,
    )


def _scheme_bytes(fmt: WeightFormat, kind: str) -> float:
    """Bytes per parameter of one kind of tensor under a weight format.

    kinds: "linear" (dense-MLP / shared-expert / linear-attention
    projections), "attention", "expert" (routed experts), "lm_head", "plain"
    (embeddings, norms, routers, vision towers)."""
    if fmt.scheme is None or kind == "plain":
        return fmt.dtype_bytes
    value = {"linear": fmt.linear_bytes, "attention": fmt.attention_bytes, "expert": fmt.expert_bytes,
             "lm_head": fmt.lm_head_bytes}.get(kind)
    return fmt.dtype_bytes if value is None else value


def kv_dtype_bytes(arch: ModelArch, kv_cache_dtype: str = "auto", dtype: str = "auto") -> int:
    """Bytes per KV element: "auto" follows the activation dtype (16-bit, or
    fp32 with --dtype float32) — not the weight quantization."""
    key = (kv_cache_dtype or "auto").strip().lower()
    if key not in _KV_DTYPES:
        raise SizingError(
            "kv_cache_dtype", f"unknown KV cache dtype '{kv_cache_dtype}'; choose one of: {', '.join(KV_CACHE_DTYPE_CHOICES)}"
        )
    if key == "fp8_ds_mla" and (arch.mla is None or arch.indexer is None):
        raise SizingError("kv_cache_dtype", f"{param('kv_cache_dtype', kv_cache_dtype)}: DeepSeek's sparse-MLA layout "
                                            "(FlashMLA sparse); for a model with MLA and an indexer only — use fp8")
    if key in _PACKED_KV and (arch.mla is not None or arch.compressed is not None):
        raise SizingError("kv_cache_dtype", f"{param('kv_cache_dtype', kv_cache_dtype)}: packs standard attention heads; "
                                            "an MLA model's KV cache is not sized in it (vLLM's MLA layouts are "
                                            "fp8_ds_mla and nvfp4_ds_mla)")
    b = _KV_DTYPES[key]
    if b is None:
        b = int(weight_format(arch, dtype).dtype_bytes)
    return b


def kv_head_bytes(kv_cache_dtype: str, head_dim: int, elem_bytes: int) -> int:
    """Bytes of one KV head's K (or V) for one token: head_dim x the element
    size, or the packed size of NVFP4 / per-token-head formats."""
    packed = _PACKED_KV.get((kv_cache_dtype or "auto").strip().lower())
    return packed(head_dim) if packed else head_dim * elem_bytes


def _check_positive(name: str, value: Any) -> None:
    if value is None or value < 1:
        raise SizingError(name, f"{name} must be a positive integer (got {value})")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(x: float, align: int) -> int:
    return int(-(-x // align) * align)


# vLLM pads the vocabulary of VocabParallelEmbedding / ParallelLMHead to a
# multiple of 64 and then splits it evenly over TP ranks
# (vllm/model_executor/layers/vocab_parallel_embedding.py,
# DEFAULT_VOCAB_PADDING_SIZE = 64; num_embeddings_per_partition =
# divide(num_embeddings_padded, tp_size)).
VOCAB_PADDING = 64


def pp_partition(num_layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage as vLLM assigns them (vllm/distributed/utils.py
    get_pp_indices: the remainder goes to the stages before the last one)."""
    if pp < 1 or pp > num_layers:
        raise SizingError("pp", f"pipeline parallel size must be between 1 and the number of layers ({num_layers})")
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


def _padded_vocab(vocab: int) -> int:
    return -(-vocab // VOCAB_PADDING) * VOCAB_PADDING
