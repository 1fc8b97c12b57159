"""A checkpoint's ``quantization_config`` as vLLM stores its weights on the
GPU: bytes per weight by tensor kind, and which tensors stay unquantized.

Bytes per weight (vLLM 0.29, docs/vllm-memory-2026.md §6, each with its vLLM
class): fp8 per-tensor / per-channel 1; fp8 block ``[bn, bk]`` 1 + 4/(bn·bk)
(one fp32 scale per block); int8 W8A8 1 (+ a per-channel scale); 4-bit
group-quantized (AWQ, GPTQ, compressed-tensors W4A16) ``bits/8`` + a 2-byte
scale per group + packed zero points per group when asymmetric (AWQ keeps
them: 0.5 + 2.5/g on Marlin); NVFP4 (ModelOpt, compressed-tensors) 0.5 + one
fp8 scale per 16 = 0.5625; MXFP4 (gpt-oss experts) 0.5 + one e8m0 scale per
32 = 0.53125; ``experts_int8`` int8 experts, 16-bit linears. Embeddings and
lm_head stay in the model dtype unless the config quantizes lm_head (GPTQ
``lm_head: true``; ModelOpt unless excluded). What vLLM 0.29 cannot load
(bitsandbytes, GGUF) or llmctl cannot read is ``approximate``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field


@dataclass(frozen=True)
class Method:
    """One quantization method name, as a checkpoint's ``quant_method`` or
    ``engine_kwargs.quantization`` spells it."""

    scheme: str  # how the weights are stored when the config says no more: fp8 | int8 | int4 | nvfp4 | mxfp4
    online: bool = False  # vLLM quantizes an unquantized checkpoint with it; else it needs a checkpoint quantized so
    family: str = ""  # the vLLM method it is a kernel or alias of (awq_marlin -> awq); "" for itself
    experts_only: bool = False  # only the routed experts are quantized (online experts_int8, gpt-oss MXFP4)
    vllm: Optional[str] = ">=0.29"  # vLLM releases whose ``quantization`` choices list it; None: a quant_method
    #                                 of checkpoints only (vLLM reads it under another name, or not at all)
    loadable: bool = True  # vLLM 0.29 (Ray 2.60's pin) loads such checkpoints


# Every quantization method llmctl knows (vllm/model_executor/layers/quantization/__init__.py
# QUANTIZATION_METHODS of 0.29-0.33, the same list in each; tests/test_facts.py checks it
# against the shipped engine-argument tables), the one table the quantization rules read.
METHODS: dict[str, Method] = {
    "fp8": Method("fp8", online=True),
    "fbgemm_fp8": Method("fp8", online=True),
    "ptpc_fp8": Method("fp8", online=True, vllm=None),
    "deepseek_v4_fp8": Method("fp8"),
    "modelopt": Method("fp8"),
    "modelopt_fp4": Method("nvfp4", family="modelopt"),
    "modelopt_mxfp8": Method("fp8", family="modelopt"),
    "modelopt_mixed": Method("nvfp4", family="modelopt"),
    "nvfp4": Method("nvfp4", vllm=None),
    "awq": Method("int4"),
    "auto_awq": Method("int4", family="awq"),
    "awq_marlin": Method("int4", family="awq"),
    "gptq": Method("int4"),
    "auto_gptq": Method("int4", family="gptq"),
    "gptq_marlin": Method("int4", family="gptq"),
    "auto-round": Method("int4", vllm=None),
    "moe_wna16": Method("int4"),
    "compressed-tensors": Method("int4"),
    "quark": Method("fp8"),
    "fp_quant": Method("nvfp4"),
    "mxfp4": Method("mxfp4", experts_only=True),
    "gpt_oss_mxfp4": Method("mxfp4", family="mxfp4", experts_only=True),
    "experts_int8": Method("int8", online=True, experts_only=True),
    "int8": Method("int8", vllm=None),
    "w8a8": Method("int8", vllm=None),
    "bitsandbytes": Method("int4", vllm=None, loadable=False),
    "gguf": Method("int4", vllm=None, loadable=False),
}
NOT_IN_029 = tuple(n for n, m in METHODS.items() if not m.loadable)
ONLINE_METHODS = tuple(n for n, m in METHODS.items() if m.online)


def family(method: str) -> str:
    """The vLLM method a name is a kernel or alias of (``awq_marlin`` -> ``awq``)."""
    key = method.lower()
    m = METHODS.get(key)
    return (m.family or key) if m is not None else key


def methods_for(name: str) -> list[str]:
    """The vLLM quantization methods a name stands for: itself when it is one
    (``fp8``, ``awq``), the methods of its scheme when it names a scheme
    (``int4`` -> awq, gptq, …); [] when it names no quantization (``bfloat16``)."""
    key = str(name).strip().lower()
    listed = [n for n, m in METHODS.items() if m.vllm is not None]
    if key in listed:
        return [key]
    scheme = METHODS[key].scheme if key in METHODS else key
    return [n for n in listed if METHODS[n].scheme == scheme and not METHODS[n].family]


def needs_checkpoint(method: str) -> bool:
    """Whether ``engine_kwargs.quantization: method`` needs a checkpoint quantized with it."""
    m = METHODS.get(method.lower())
    return m is not None and m.vllm is not None and not m.online


def scheme_quant(scheme: str) -> "Quant":
    """The Quant llmctl sizes a bare scheme with (``--dtype fp8|int8|int4|nvfp4|mxfp4``): fp8 in 128x128
    blocks, int8 W8A8 per channel, 4-bit groups of 128 with zero points, NVFP4, MXFP4."""
    if scheme == "fp8":
        return Quant(method=scheme, scheme=scheme, block=(128, 128))
    if scheme == "int4":
        return Quant(method=scheme, scheme=scheme, bits=4, group_size=128, zero_points=True)
    if scheme in ("nvfp4", "mxfp4"):
        return Quant(method=scheme, scheme=scheme, bits=4)
    return Quant(method=scheme, scheme="int8")


class Quant(BaseModel):
    """How a checkpoint's weights are stored (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: str
    scheme: str  # fp8 | int8 | int4 | nvfp4 | mxfp4
    bits: int = 8
    group_size: Optional[int] = Field(default=None, description="weights per scale (4-bit groups, fp4 blocks)")
    block: Optional[tuple[int, int]] = Field(default=None, description="fp8 weight_block_size")
    zero_points: bool = False  # asymmetric 4-bit: packed zero points per group
    lm_head: bool = False  # lm_head quantized too
    attention: bool = True  # attention projections quantized (NVFP4 recipes often exclude them)
    experts_only: bool = False  # only routed experts quantized (gpt-oss MXFP4, experts_int8)
    expert_scheme: Optional[str] = None  # routed experts stored otherwise than the linears (DeepSeek V4 expert_dtype)
    scale_bytes: int = 4  # bytes of one fp8 block scale (float32; e8m0 1)
    kv_cache_dtype: Optional[str] = None  # the KV cache the checkpoint declares (ModelOpt fp8), what vLLM's "auto" becomes
    approximate: Optional[str] = None

    def expert_bytes_per_weight(self) -> float:
        """Bytes per routed-expert weight (the linears' unless ``expert_scheme`` says otherwise)."""
        if self.expert_scheme is None:
            return self.bytes_per_weight()
        return self.model_copy(update={"scheme": self.expert_scheme, "expert_scheme": None}).bytes_per_weight()

    def bytes_per_weight(self) -> float:
        if self.scheme == "fp8":
            if self.block:
                return 1.0 + self.scale_bytes / (self.block[0] * self.block[1])
            return 1.0
        if self.scheme == "int8":
            return 1.0 + 4 / 4096
        if self.scheme == "nvfp4":
            return 0.5 + 1 / 16
        if self.scheme == "mxfp4":
            return 0.5 + 1 / 32
        g = self.group_size or 128
        b = self.bits / 8 + 2 / g
        if self.zero_points:
            b += (self.bits / 8) / g
        return b


def _ignored(names: Any, *fragments: str) -> bool:
    if not isinstance(names, list):
        return False
    text = " ".join(str(n) for n in names).lower()
    return any(f in text for f in fragments)


def _modelopt_kv_cache(qc: dict) -> Optional[str]:
    """The KV-cache dtype a ModelOpt checkpoint declares, as vLLM reads it
    (vllm/utils/torch_utils.py get_kv_cache_quant_algo_string, 0.14-0.33):
    ``kv_cache_scheme`` or ``kv_cache_quant_algo``, top level or under
    ``quantization``; "FP8", or ``{dynamic: false, num_bits: 8, type: float}``,
    is fp8_e4m3. Anything else: None (vLLM keeps "auto" or warns)."""
    inner = qc.get("quantization") if isinstance(qc.get("quantization"), dict) else qc
    algo = (inner.get("kv_cache_scheme") or qc.get("kv_cache_scheme") or inner.get("kv_cache_quant_algo")
            or qc.get("kv_cache_quant_algo"))
    if isinstance(algo, dict):
        fp8 = algo.get("dynamic") is False and algo.get("num_bits") == 8 and algo.get("type") == "float"
        return "fp8_e4m3" if fp8 else None
    return "fp8_e4m3" if isinstance(algo, str) and algo.lower() == "fp8" else None


def quant_from_config(qc: dict) -> Quant:
    """A Quant from a config.json ``quantization_config`` mapping."""
    method = str(qc.get("quant_method") or qc.get("quant_algo") or "unknown").lower()
    ignore = qc.get("ignore") or qc.get("modules_to_not_convert") or qc.get("exclude_modules") or qc.get("ignored_layers")
    attention = not _ignored(ignore, "self_attn", "attn")
    if method in NOT_IN_029:
        return Quant(method=method, scheme="int4", bits=4, group_size=64,
                     approximate=f"quant_method '{method}' is not a quantization method of vLLM 0.29 (Ray 2.60's pin); "
                                 "sized as 4-bit")
    known = METHODS.get(method)
    if known is not None and known.scheme == "fp8" and known.online:
        block = qc.get("weight_block_size")
        return Quant(method=method, scheme="fp8", block=tuple(block) if isinstance(block, list) and len(block) == 2 else None,
                     attention=attention)
    if method == "deepseek_v4_fp8":
        # vllm/models/deepseek_v4/quant_config.py DeepseekV4FP8Config: fp8 blocks on every linear;
        # routed experts MXFP4 for expert_dtype fp4 (NVFP4 when moe_quant_algo says so, ue8m0 linear
        # scales) or fp8 blocks with float32 scales for expert_dtype fp8 (Flash-Base)
        block = qc.get("weight_block_size")
        fp4 = str(qc.get("expert_dtype") or "fp4") == "fp4"
        experts = ("nvfp4" if str(qc.get("moe_quant_algo") or "").upper() == "NVFP4" else "mxfp4") if fp4 else None
        return Quant(method=method, scheme="fp8", block=tuple(block) if isinstance(block, list) and len(block) == 2 else (128, 128),
                     expert_scheme=experts, scale_bytes=1 if fp4 else 4, attention=attention)
    if known is not None and known.scheme == "mxfp4":
        return Quant(method=method, scheme="mxfp4", bits=4, group_size=32, experts_only=True)
    if method == "experts_int8":
        return Quant(method=method, scheme="int8", experts_only=True)
    if family(method) in ("awq", "gptq", "auto-round"):
        bits = int(qc.get("bits") or qc.get("w_bit") or 4)
        group = int(qc.get("group_size") or qc.get("q_group_size") or 128)
        zp = method.startswith("awq") or qc.get("zero_point") is True or qc.get("sym") is False
        return Quant(method=method, scheme="int4" if bits == 4 else "int8", bits=bits, group_size=group if group > 0 else None,
                     zero_points=zp, lm_head=bool(qc.get("lm_head")), attention=attention)
    if method == "modelopt" or method == "modelopt_fp4":
        algo = str(qc.get("quant_algo") or (qc.get("quantization") or {}).get("quant_algo") or "FP8").upper()
        lm = not _ignored(ignore, "lm_head")
        kv = _modelopt_kv_cache(qc)
        if "FP4" in algo:
            return Quant(method=method, scheme="nvfp4", bits=4, group_size=int(qc.get("group_size") or 16),
                         lm_head=lm, attention=attention, kv_cache_dtype=kv)
        return Quant(method=method, scheme="fp8", lm_head=lm, attention=attention, kv_cache_dtype=kv)
    if method == "compressed-tensors":
        return _compressed_tensors(qc, attention)
    if method in ("int8", "w8a8"):
        return Quant(method=method, scheme="int8", attention=attention)
    return Quant(method=method, scheme="int8",
                 approximate=f"weight size of quant_method '{method}' not known; assumed 1 byte per weight")


def _compressed_tensors(qc: dict, attention: bool) -> Quant:
    """compressed-tensors: the first config group's weights (num_bits, type,
    strategy, group_size, symmetric) and ``format`` (nvfp4-pack-quantized)."""
    groups = qc.get("config_groups") or {}
    first = next(iter(groups.values()), {}) if isinstance(groups, dict) else {}
    w = (first or {}).get("weights") or {}
    bits = int(w.get("num_bits") or 8)
    kind = str(w.get("type") or "int").lower()
    fmt = str(qc.get("format") or "").lower()
    lm = any("lm_head" in str(t) for t in (first or {}).get("targets") or [])
    if "nvfp4" in fmt or (bits == 4 and kind == "float"):
        return Quant(method="compressed-tensors", scheme="nvfp4", bits=4, group_size=int(w.get("group_size") or 16),
                     lm_head=lm, attention=attention)
    if bits == 8:
        return Quant(method="compressed-tensors", scheme="fp8" if kind == "float" else "int8", lm_head=lm, attention=attention)
    group = w.get("group_size")
    ignore = qc.get("ignore")
    # Kimi K2 Thinking / K2.5 INT4 (pack-quantized, group 32): ignore lists re:.*shared_experts.* and
    # re:.*mlp\.(gate|up|gate_up|down)_proj.* -- every MLP but the routed experts stays bf16
    # (compressed_tensors.py should_ignore_layer matches those regexes per module)
    experts_only = _ignored(ignore, "shared_expert") and _ignored(ignore, "mlp\\.(gate", "mlp.gate_proj", "mlp.(gate")
    return Quant(method="compressed-tensors", scheme="int4", bits=bits, group_size=int(group) if group else None,
                 zero_points=w.get("symmetric") is False, lm_head=lm, attention=attention, experts_only=experts_only,
                 approximate=None if group or w.get("strategy") == "channel" else "compressed-tensors group size not given")
