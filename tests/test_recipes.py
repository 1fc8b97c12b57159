"""Model recipes (issue 12): every catalog recipe is a set of valid vLLM
engine arguments with a source; --tool-calling / --reasoning write them;
embedding and reranking models carry their pooling settings."""

from __future__ import annotations

import pytest

import llmctl
from llmctl import engine_args as EA
from llmctl.catalog import load_catalog
from llmctl.errors import UsageError

from helpers import run_cli

CATALOG = load_catalog()
RECIPES = [(p.id, feature, r) for p in CATALOG.values() for feature, r in p.recipes.items()]


@pytest.mark.parametrize("model_id,feature,recipe", RECIPES, ids=[f"{m}:{f}" for m, f, _ in RECIPES])
def test_every_recipe_is_valid_vllm_engine_arguments(model_id, feature, recipe):
    specs, _ = EA.engine_args()
    assert recipe.source.strip()
    for key, value in recipe.engine_kwargs.items():
        assert key in specs, f"{model_id}: {key} is not a vLLM engine argument"
        assert EA.check_value(key, value, specs=specs) is None, f"{model_id}: {key}={value!r}"
        assert EA.owned_reason(key) is None, f"{model_id}: {key} is a key llmctl owns"


def test_recipes_exist_where_the_facts_name_parsers():
    assert len(RECIPES) >= 20
    assert CATALOG["deepseek-r1"].recipe_for("reasoning") == {"reasoning_parser": "deepseek_r1"}
    assert CATALOG["qwen3-235b-a22b-instruct-2507"].recipe_for("tool_calling") == {
        "enable_auto_tool_choice": True, "tool_call_parser": "hermes"}
    assert CATALOG["qwen3-embedding-0.6b"].recipe_for("pooling") == {"runner": "pooling", "convert": "embed"}
    assert CATALOG["qwen3-embedding-0.6b"].embedding["dim"] == 1024


def test_tool_calling_and_reasoning_flags_write_the_recipe(tmp_path):
    gen = llmctl.generate("deepseek-r1", gpu="B200", tool_calling=True, reasoning=True, write_files=False)
    ek = gen.documents[0].data["engine_kwargs"]
    assert ek["tool_call_parser"] == "deepseek_v3" and ek["enable_auto_tool_choice"] is True
    assert ek["reasoning_parser"] == "deepseek_r1" and ek["trust_remote_code"] is True  # the recipe's required settings
    plain = llmctl.generate("deepseek-r1", gpu="B200", write_files=False).documents[0].data["engine_kwargs"]
    assert "tool_call_parser" not in plain and plain["trust_remote_code"] is True
    with pytest.raises(UsageError, match="^--tool-calling: qwen3-8b has no tool calling recipe"):
        llmctl.generate("qwen3-8b", gpu="H100", tool_calling=True, write_files=False)


def test_embedding_models_get_their_pooling_settings(capsys, tmp_path):
    r = run_cli(capsys, "gen-config", "-m", "qwen3-embedding-0.6b", "--gpu", "L4", "--yes", "-o", tmp_path)
    assert r.code == 0, r.err
    gen = llmctl.generate("qwen3-embedding-0.6b", gpu="L4", write_files=False)
    assert gen.documents[0].data["engine_kwargs"]["runner"] == "pooling"
    r = run_cli(capsys, "models", "--task", "embed", "--json")
    assert r.code == 0 and [m["id"] for m in r.json()] == ["qwen3-embedding-0.6b"]
    assert {m["id"] for m in run_cli(capsys, "models", "--task", "rerank", "--json").json()} == {"bge-reranker-v2-m3"}
