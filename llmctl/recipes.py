"""Tool-calling and reasoning recipes by model family, as vLLM's own
documentation gives them, and the parser names vLLM registers.

vLLM serves tool calls and reasoning output only when it is told how the model
writes them: ``enable_auto_tool_choice`` + ``tool_call_parser`` and
``reasoning_parser`` (``docs/features/tool_calling.md`` and
``docs/features/reasoning_outputs.md`` of vLLM name the parser per model
family). :data:`FAMILY_RECIPES` is that table, each row with the file and
section it was read from (vLLM 0.29.0, Ray 2.60's pin). Three users:

- ``tools/build_catalog.py`` (through :func:`tools.facts.recipes_of`) gives
  every catalog model of a documented family its recipes, where vLLM's
  per-model recipe (the facts row) names none;
- ``llmctl gen-config`` gives a model outside the catalog the recipes of its
  family, from its Hugging Face repo id (:func:`family_recipes`) or, for a
  local directory, from the tool-call format its chat template teaches
  (:func:`template_recipes`);
- tests check every parser named here against the names the target vLLM
  registers (:func:`registered_parsers`: ``llmctl/_parsers_vllm-<version>.json``,
  read from vLLM's source by ``tools/build_vllm_parsers.py``), so a parser
  vLLM renames fails a test, not a deployment.

Nothing here prints or reads the network.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

# The vLLM release the recipes are written for and checked against: the one
# Ray 2.60 pins (`ray[llm]==2.60.0` requires vllm==0.29.0, llmctl/compat.py).
TARGET_VLLM = "0.29.0"
_V = f"vLLM {TARGET_VLLM}"
TOOLS_DOC = f"{_V} docs/features/tool_calling.md"
REASONING_DOC = f"{_V} docs/features/reasoning_outputs.md"
MODELS_DOC = f"{_V} docs/models/supported_models.md"
_TEXT = "List of Text-only Language Models > Text Generation"
_MM = "List of Multimodal Language Models > Text Generation"
# What a "serving" row says after its supported-models row: the parser tables were read, and name none.
_NO_PARSER = ("no tool-call parser for {fam} in " + TOOLS_DOC + " (no section names it) and no reasoning parser in "
              + REASONING_DOC + ", section \"Supported Models\"; vllm-project/recipes (8959cf6) has no recipe for it")
_MISTRAL_FORMAT = ("vLLM's defaults: tokenizer_mode, config_format and load_format auto choose the Mistral format "
                   "(mistral-common tokenizer, params.json, consolidated*.safetensors) when the repo ships it and the "
                   "Transformers format otherwise (vllm/transformers_utils/config.py get_config, vllm/tokenizers/registry.py)")


@dataclass(frozen=True)
class FamilyRecipe:
    """One documented (family, feature) -> parser row."""

    family: str  # as shown to users
    pattern: str  # regular expression on the Hugging Face repo id (re.search)
    feature: str  # "tool_calling" | "reasoning" | "serving" | "text_only" (llmctl.catalog.RECIPE_FEATURES)
    parser: str  # "" for the settings-only features
    source: str  # file and section of vLLM's documentation (or source) it was read from
    chat_template: Optional[str] = None  # examples/*.jinja the source passes with --chat-template
    note: Optional[str] = None
    engine: tuple[tuple[str, Any], ...] = ()  # the settings of a "serving" / "text_only" row (none: vLLM's defaults)

    def recipe(self) -> dict[str, Any]:
        """The catalog ``recipes.<feature>`` mapping of this row."""
        if self.feature == "tool_calling":
            kwargs: dict[str, Any] = {"enable_auto_tool_choice": True, "tool_call_parser": self.parser}
        elif self.feature == "reasoning":
            kwargs = {"reasoning_parser": self.parser}
        else:
            kwargs = {k: (dict(v) if isinstance(v, tuple) else v) for k, v in self.engine}
        out: dict[str, Any] = {"engine_kwargs": kwargs, "source": self.source}
        notes = [template_note(self.chat_template, "vLLM's documentation")] if self.chat_template else []
        notes += [self.note] if self.note else []
        if notes:
            out["note"] = "; ".join(notes)
        if self.chat_template:
            out["chat_template"] = self.chat_template
        return out


def template_note(template: str, who: str = "vLLM's recipe") -> str:
    """What to do about a chat template file a recipe's source passes with --chat-template."""
    return (f"{who} also passes --chat-template {template}, a file of vLLM's source repository (not installed "
            "with vLLM): if tool calls come back as plain text, put it on every node and set "
            "engine_kwargs.chat_template to its path")


def _sec(doc: str, section: str, detail: str = "") -> str:
    return f"{doc}, section \"{section}\"" + (f" ({detail})" if detail else "")


_QWEN = _sec(TOOLS_DOC, "Qwen Models", "Qwen/Qwen2.5-*: the chat template already has Hermes-style tool use; --tool-call-parser hermes")
_QWEN3 = (_sec(TOOLS_DOC, "Qwen Models", "hermes for Qwen models") + "; "
          + _sec(REASONING_DOC, "Supported Models", "Qwen3 series: tool calling supported")
          + "; vLLM's recipes serve Qwen3-30B-A3B, Qwen3-32B, Qwen3-235B-A22B-Instruct-2507 and Qwen3-Next with hermes")
_LLAMA = _sec(TOOLS_DOC, "Llama Models (`llama3_json`)", "all Llama 3.1, 3.2 and 4 models; --tool-call-parser llama3_json "
              "--chat-template examples/tool_chat_template_llama3.1_json.jinja or …llama3.2_json.jinja")
_MISTRAL_NOTE = ("vLLM's documentation adds --chat-template examples/tool_chat_template_mistral_parallel.jinja only "
                 "with tokenizer_mode hf (Transformers format); the default (mistral-common) format needs no template")
# Qwen3 releases that think by default (the hybrid-thinking April 2025 release: Qwen3-8B,
# Qwen3-30B-A3B, …-FP8); the 2507 Instruct releases, Next-Instruct, Coder and VL do not think.
_QWEN3_THINKING = r"^Qwen/Qwen3-[\d.]+B(-A\d+B)?(-FP8|-AWQ)?$"
_QWEN3_CHAT = r"^Qwen/Qwen3-(?!VL|Omni|Coder|Embedding|Reranker)"

FAMILY_RECIPES: tuple[FamilyRecipe, ...] = (
    # --- tool calling (docs/features/tool_calling.md)
    FamilyRecipe("Hermes 2 Pro / 3", r"^NousResearch/Hermes-(2-Pro|2-Theta|3)", "tool_calling", "hermes",
                 _sec(TOOLS_DOC, "Hermes Models (`hermes`)")),
    FamilyRecipe("Qwen2.5", r"^Qwen/Qwen2\.5-[\d.]+B-Instruct", "tool_calling", "hermes", _QWEN),
    FamilyRecipe("QwQ", r"^Qwen/QwQ-32B", "tool_calling", "hermes", _sec(TOOLS_DOC, "Qwen Models", "Qwen/QwQ-32B")),
    FamilyRecipe("Qwen3-Coder", r"^Qwen/Qwen3-Coder", "tool_calling", "qwen3_xml",
                 _sec(TOOLS_DOC, "Qwen3-Coder Models (`qwen3_xml`)")),
    FamilyRecipe("Qwen3", _QWEN3_CHAT, "tool_calling", "hermes", _QWEN3),
    FamilyRecipe("Llama 3.1", r"Llama-3\.1-.*Instruct", "tool_calling", "llama3_json", _LLAMA,
                 chat_template="examples/tool_chat_template_llama3.1_json.jinja"),
    FamilyRecipe("Llama 3.2", r"Llama-3\.2-.*Instruct", "tool_calling", "llama3_json", _LLAMA,
                 chat_template="examples/tool_chat_template_llama3.2_json.jinja",
                 note="the same documentation also offers the pythonic parser with "
                      "examples/tool_chat_template_llama3.2_pythonic.jinja for Llama 3.2 1B/3B (section \"Models with "
                      "Pythonic Tool Calls\"), and warns that small Llama models often fail to emit tool calls correctly"),
    FamilyRecipe("Llama 3.3", r"Llama-3\.3-.*Instruct", "tool_calling", "llama3_json",
                 _LLAMA + "; Llama 3.3 uses the Llama 3.1 prompt format (Meta's Llama 3.3 model card)",
                 chat_template="examples/tool_chat_template_llama3.1_json.jinja"),
    FamilyRecipe("Llama 4", r"^meta-llama/Llama-4-", "tool_calling", "llama4_pythonic",
                 _sec(TOOLS_DOC, "Llama Models (`llama3_json`)", "for Llama 4: --tool-call-parser llama4_pythonic "
                      "--chat-template examples/tool_chat_template_llama4_pythonic.jinja"),
                 chat_template="examples/tool_chat_template_llama4_pythonic.jinja"),
    FamilyRecipe("Mistral", r"^mistralai/(Mistral-7B-Instruct-v0\.3|Mistral-(Small|Nemo|Large)-|Mixtral-8x22B-Instruct|Ministral-)",
                 "tool_calling", "mistral",
                 _sec(TOOLS_DOC, "Mistral Models (`mistral`)", "Mistral-7B-Instruct-v0.3 confirmed; additional Mistral "
                      "function-calling models are compatible"), note=_MISTRAL_NOTE),
    FamilyRecipe("DeepSeek-V3", r"^deepseek-ai/DeepSeek-V3(-0324)?$", "tool_calling", "deepseek_v3",
                 _sec(TOOLS_DOC, "DeepSeek-V3 Models (`deepseek_v3`)", "names deepseek-ai/DeepSeek-V3-0324"),
                 chat_template="examples/tool_chat_template_deepseekv3.jinja"),
    FamilyRecipe("DeepSeek-R1", r"^deepseek-ai/DeepSeek-R1(-0528)?$", "tool_calling", "deepseek_v3",
                 _sec(TOOLS_DOC, "DeepSeek-V3 Models (`deepseek_v3`)", "names deepseek-ai/DeepSeek-R1-0528"),
                 chat_template="examples/tool_chat_template_deepseekr1.jinja"),
    FamilyRecipe("DeepSeek-V3.1", r"^deepseek-ai/DeepSeek-V3\.1", "tool_calling", "deepseek_v31",
                 _sec(TOOLS_DOC, "DeepSeek-V3.1 Models (`deepseek_v31`)"),
                 chat_template="examples/tool_chat_template_deepseekv31.jinja"),
    FamilyRecipe("gpt-oss", r"^openai/gpt-oss-", "tool_calling", "openai", _sec(TOOLS_DOC, "OpenAI OSS Models (`openai`)")),
    FamilyRecipe("Kimi-K2", r"^moonshotai/Kimi-K2-Instruct", "tool_calling", "kimi_k2", _sec(TOOLS_DOC, "Kimi-K2 Models (`kimi_k2`)")),
    FamilyRecipe("GLM-4.5", r"^zai-org/GLM-4\.(5|6)", "tool_calling", "glm45", _sec(TOOLS_DOC, "GLM-4.5 Models (`glm45`)")),
    FamilyRecipe("GLM-4.7", r"^zai-org/GLM-4\.7", "tool_calling", "glm47", _sec(TOOLS_DOC, "GLM-4.7 Models (`glm47`)")),
    FamilyRecipe("Granite 4.0", r"^ibm-granite/granite-4\.0-", "tool_calling", "granite4", _sec(TOOLS_DOC, "IBM Granite")),
    FamilyRecipe("Phi-4-mini", r"^microsoft/Phi-4-mini-instruct", "tool_calling", "phi4_mini_json",
                 f"{_V} vllm/tool_parsers/__init__.py registers phi4_mini_json (Phi4MiniJsonToolParser, \"tool call "
                 "parser for phi-4-mini models\", vllm/tool_parsers/phi4mini_tool_parser.py) with "
                 "examples/tool_chat_template_phi4_mini.jinja; docs/features/tool_calling.md has no section for it",
                 chat_template="examples/tool_chat_template_phi4_mini.jinja"),
    # --- reasoning (docs/features/reasoning_outputs.md, "Supported Models")
    FamilyRecipe("DeepSeek R1", r"^deepseek-ai/DeepSeek-R1", "reasoning", "deepseek_r1",
                 _sec(REASONING_DOC, "Supported Models", "DeepSeek R1 series: deepseek_r1; the Quickstart serves "
                      "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B with it")),
    FamilyRecipe("QwQ", r"^Qwen/QwQ-32B", "reasoning", "deepseek_r1", _sec(REASONING_DOC, "Supported Models", "QwQ-32B")),
    FamilyRecipe("Qwen3 (thinking)", _QWEN3_THINKING, "reasoning", "qwen3",
                 _sec(REASONING_DOC, "Supported Models", "Qwen3 series: qwen3; reasoning is on by default")),
    FamilyRecipe("DeepSeek-V3.1", r"^deepseek-ai/DeepSeek-V3\.1", "reasoning", "deepseek_v3",
                 _sec(REASONING_DOC, "Supported Models", "DeepSeek-V3.1: deepseek_v3; thinking only with "
                      "chat_template_kwargs thinking=True")),
    FamilyRecipe("gpt-oss", r"^openai/gpt-oss-", "reasoning", "openai_gptoss",
                 f"{_V} docs/benchmarking/cli.md, section \"BFCL (Tool-Calling) Benchmark\" (vllm serve "
                 "openai/gpt-oss-20b --enable-auto-tool-choice --tool-call-parser openai --reasoning-parser openai_gptoss)"),
    FamilyRecipe("GLM-4.5", r"^zai-org/GLM-4\.5", "reasoning", "glm45", _sec(REASONING_DOC, "Supported Models", "GLM-4.5 series")),
    FamilyRecipe("Gemma 4", r"^google/gemma-4-", "reasoning", "gemma4",
                 _sec(REASONING_DOC, "Supported Models", "Gemma 4 series; reasoning off until enable_thinking=True")),
    # --- families vLLM serves with no parser of their own: the documented serving settings, and where the
    # parser tables were read without finding one (docs/models/supported_models.md names each as supported)
    *(FamilyRecipe(fam, pattern, "serving", "", _sec(MODELS_DOC, table, row) + "; " + _NO_PARSER.format(fam=fam),
                   note=note) for fam, pattern, table, row, note in (
        ("Gemma 2", r"^google/gemma-2-", _TEXT, "Gemma2ForCausalLM: google/gemma-2-9b, google/gemma-2-27b",
         "served with vLLM's defaults"),
        ("Gemma 3", r"^google/gemma-3-(4|12|27)b-it$", _MM,
         "Gemma3ForConditionalGeneration, T + I: google/gemma-3-4b-it, google/gemma-3-27b-it",
         "served with vLLM's defaults; --inputs text writes the text-only limits of "
         "docs/configuration/conserving_memory.md"),
        ("Phi-3.5 / Phi-4", r"^microsoft/(Phi-3\.5-mini-instruct|phi-4)$", _TEXT,
         "Phi3ForCausalLM: microsoft/Phi-4, microsoft/Phi-3-mini-4k-instruct",
         "served with vLLM's defaults; vllm-project/recipes Microsoft/Phi-4.md serves only the Phi-4-mini, "
         "-reasoning and -multimodal variants (Phi-4-mini-instruct, which has a parser, is its own row)"),
        ("Mixtral", r"^mistralai/Mixtral-8x7B-Instruct-v0\.1$", _TEXT,
         "MixtralForCausalLM: mistralai/Mixtral-8x7B-Instruct-v0.1",
         _MISTRAL_FORMAT + "; the mistral tool-call parser reads [TOOL_CALLS], a token this model's v1 vocabulary "
         "(32,000 tokens) does not have"),
        ("Pixtral (Transformers port)", r"^mistral-community/pixtral-12b$", _MM,
         "LlavaForConditionalGeneration, T + I, 'Pixtral (HF Transformers)': mistral-community/pixtral-12b",
         "the Transformers-format port, loaded with vLLM's defaults (config.json, no consolidated*.safetensors: "
         "the hf format); tokenizer_mode/config_format/load_format mistral apply to mistralai/Pixtral-12B-2409 "
         "(PixtralForConditionalGeneration, 'Pixtral (Mistral format)'), a different repo"),
    )),
    # text-only serving of a multimodal model: no memory reserved for images
    FamilyRecipe("Gemma 3", r"^google/gemma-3-(4|12|27)b-it$", "text_only", "",
                 _sec(f"{_V} docs/configuration/conserving_memory.md", "Multi-modal input limits",
                      "runs google/gemma-3-27b-it for text-only inference with limit_mm_per_prompt={\"image\": 0}"),
                 engine=(("limit_mm_per_prompt", (("image", 0),)),)),
    FamilyRecipe("Pixtral (Transformers port)", r"^mistral-community/pixtral-12b$", "text_only", "",
                 _sec(f"{_V} docs/configuration/conserving_memory.md", "Multi-modal input limits",
                      "disable unused modalities completely by setting its limit to zero"),
                 engine=(("limit_mm_per_prompt", (("image", 0),)),)),
)


def family_recipes(hf_repo: str) -> dict[str, dict[str, Any]]:
    """``{feature: recipe mapping}`` of the documented family a Hugging Face
    repo id belongs to (the first matching row per feature); {} when none."""
    out: dict[str, dict[str, Any]] = {}
    for row in FAMILY_RECIPES:
        if row.feature not in out and re.search(row.pattern, hf_repo or ""):
            out[row.feature] = row.recipe()
    return out


# A local model's chat template shows the tool-call format the model was
# taught; vLLM's parser for that format reads its output. Only formats whose
# markers are unambiguous are recognised.
_TEMPLATE_FORMATS = (
    ("<tool_call>", "hermes", _sec(TOOLS_DOC, "Qwen Models", "a chat template with Hermes-style tool use (<tool_call> "
                                   "blocks) is served with --tool-call-parser hermes")),
    ("[TOOL_CALLS]", "mistral", _sec(TOOLS_DOC, "Mistral Models (`mistral`)", "the [TOOL_CALLS] format")),
)


def template_recipes(chat_template: Optional[str]) -> dict[str, dict[str, Any]]:
    """The tool-calling recipe of the format a chat template teaches (it
    renders ``tools`` and writes <tool_call> blocks or [TOOL_CALLS]); {} when
    it shows none."""
    if not chat_template or "tools" not in chat_template:
        return {}
    for marker, parser, source in _TEMPLATE_FORMATS:
        if marker in chat_template:
            return {"tool_calling": {"engine_kwargs": {"enable_auto_tool_choice": True, "tool_call_parser": parser},
                                     "source": f"the model's chat template writes {marker} tool calls; {source}"}}
    return {}


def read_chat_template(model_dir: Path) -> Optional[str]:
    """The chat template a local model directory ships (chat_template.jinja,
    chat_template.json or tokenizer_config.json's ``chat_template``), or None."""
    try:
        jinja = model_dir / "chat_template.jinja"
        if jinja.is_file():
            return jinja.read_text(encoding="utf-8")
        for name in ("chat_template.json", "tokenizer_config.json"):
            path = model_dir / name
            if path.is_file():
                value = json.loads(path.read_text(encoding="utf-8")).get("chat_template")
                if isinstance(value, list):  # [{"name": "default", "template": …}, {"name": "tool_use", …}]
                    value = "\n".join(str(t.get("template") or "") for t in value if isinstance(t, dict))
                if isinstance(value, str) and value:
                    return value
    except (OSError, ValueError, AttributeError):
        return None
    return None


def parsers_path(version: str = TARGET_VLLM) -> Path:
    return Path(__file__).resolve().parent / f"_parsers_vllm-{version}.json"


@lru_cache(maxsize=4)
def registered_parsers(version: str = TARGET_VLLM) -> dict[str, Any]:
    """The parser names vLLM ``version`` registers (``tool_call_parsers``,
    ``reasoning_parsers``) and the chat templates its examples/ ships, as
    tools/build_vllm_parsers.py read them from vLLM's source."""
    return json.loads(parsers_path(version).read_text(encoding="utf-8"))


def recipe_parsers(engine_kwargs: dict[str, Any]) -> list[tuple[str, str]]:
    """``[(registry key, parser name)]`` a recipe's settings name."""
    out = []
    if "tool_call_parser" in engine_kwargs:
        out.append(("tool_call_parsers", str(engine_kwargs["tool_call_parser"])))
    if "reasoning_parser" in engine_kwargs:
        out.append(("reasoning_parsers", str(engine_kwargs["reasoning_parser"])))
    return out


# engine_kwargs key -> (registry key, the engine argument that loads more parsers from a file)
PARSER_ARGS = {"tool_call_parser": ("tool_call_parsers", "tool_parser_plugin"),
               "reasoning_parser": ("reasoning_parsers", "reasoning_parser_plugin")}


def shipped_parser_versions() -> list[tuple[int, ...]]:
    """The vLLM releases whose parser registries llmctl ships, oldest first."""
    found = []
    for f in Path(__file__).resolve().parent.glob("_parsers_vllm-*.json"):
        try:
            found.append(tuple(int(x) for x in f.stem.rpartition("-")[2].split(".")))
        except ValueError:
            continue
    return sorted(found)


def parser_registry(key: str, release: tuple[int, ...]) -> Optional[tuple[list[str], str, bool]]:
    """``(names, registry version, exact)`` of the ``tool_call_parser`` /
    ``reasoning_parser`` names vLLM ``release`` registers: its own shipped
    registry (``exact``), else the nearest older one llmctl ships; None when
    llmctl ships none at or below it."""
    shipped = [v for v in shipped_parser_versions() if v <= tuple(release)]
    if not shipped:
        return None
    label = ".".join(map(str, shipped[-1]))
    return list(registered_parsers(label)[PARSER_ARGS[key][0]]), label, shipped[-1] == tuple(release)
