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
    assert len(RECIPES) >= 60
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
    with pytest.raises(UsageError, match="^--tool-calling: gemma-2-9b-it has no tool calling recipe"):
        llmctl.generate("gemma-2-9b-it", gpu="H100", tool_calling=True, write_files=False)


def test_embedding_models_get_their_pooling_settings(capsys, tmp_path):
    r = run_cli(capsys, "gen-config", "-m", "qwen3-embedding-0.6b", "--gpu", "L4", "--yes", "-o", tmp_path)
    assert r.code == 0, r.err
    gen = llmctl.generate("qwen3-embedding-0.6b", gpu="L4", write_files=False)
    assert gen.documents[0].data["engine_kwargs"]["runner"] == "pooling"
    r = run_cli(capsys, "models", "--task", "embed", "--json")
    assert r.code == 0 and [m["id"] for m in r.json()] == ["qwen3-embedding-0.6b"]
    assert {m["id"] for m in run_cli(capsys, "models", "--task", "rerank", "--json").json()} == {"bge-reranker-v2-m3"}


def test_interactive_flow_offers_the_recipes_of_models_that_have_them(monkeypatch):
    """On a terminal, a model with tool calling / reasoning recipes is asked
    about each (showing the settings); yes writes them, a model without
    recipes is not asked."""
    from llmctl.prompts import engine as prompts_engine
    from llmctl.prompts.session import Flags, Session

    asked: list[str] = []

    def confirm(message, default):
        asked.append(message)
        return True

    def select(message, choices, default=None, search=False):
        asked.append(message)
        assert [v for _, v in choices] == ["all", "image", "text"] and default == "all"
        return "text"

    monkeypatch.setattr(prompts_engine, "ask_confirm", confirm)
    monkeypatch.setattr(prompts_engine, "ask_select", select)
    terminal = Session(interactive=True, assume_yes=False)
    out = prompts_engine.recipe_args(terminal, Flags(), CATALOG["deepseek-r1"])
    assert asked == ["Turn on tool calling for deepseek-r1 (enable_auto_tool_choice=True, tool_call_parser=deepseek_v3; "
                     "needs vLLM's tool_chat_template_deepseekr1.jinja on the cluster)?",
                     "Turn on reasoning for deepseek-r1 (reasoning_parser=deepseek_r1; recommended: it thinks before answering)?"]
    assert out == {"trust_remote_code": True, "enable_auto_tool_choice": True, "tool_call_parser": "deepseek_v3",
                   "reasoning_parser": "deepseek_r1"}
    asked.clear()
    # a multimodal model is asked what it will take; "text only" writes the recipe's limits
    assert prompts_engine.recipe_args(terminal, Flags(), CATALOG["qwen3-vl-8b-instruct"]) == {
        "limit_mm_per_prompt": {"video": 0, "image": 0}} and asked == ["What will qwen3-vl-8b-instruct take as input?"]
    asked.clear()
    assert prompts_engine.recipe_args(terminal, Flags(), CATALOG["gemma-2-9b-it"]) == {} and asked == []
    # flags answer the question; --yes keeps the default (off)
    assert prompts_engine.recipe_args(terminal, Flags(tool_calling=False, reasoning=False), CATALOG["deepseek-r1"]) == {
        "trust_remote_code": True} and asked == []
    assert "reasoning_parser" not in prompts_engine.recipe_args(Session(interactive=True, assume_yes=True), Flags(),
                                                                 CATALOG["deepseek-r1"])


@pytest.mark.parametrize("model_id, inputs, expected", [
    ("qwen3-vl-8b-instruct", "text", {"limit_mm_per_prompt": {"video": 0, "image": 0}}),
    ("qwen3-vl-8b-instruct", "image", {"limit_mm_per_prompt": {"video": 0}}),
    ("gemma-4-31b-it", "text", {"language_model_only": True}),
])
def test_inputs_write_the_multimodal_recipe(model_id, inputs, expected):
    ek = llmctl.generate(model_id, gpu="H100", inputs=inputs, write_files=False).documents[0].data["engine_kwargs"]
    assert {k: ek[k] for k in expected} == expected
    everything = llmctl.generate(model_id, gpu="H100", inputs="all", write_files=False).documents[0].data["engine_kwargs"]
    assert not set(expected) & set(everything)


@pytest.mark.parametrize("args, message", [
    (["-m", "qwen2.5-7b-instruct", "--inputs", "text"],
     "error: --inputs text: qwen2.5-7b-instruct has no text-only recipe in llmctl's catalog"),
    (["-m", "qwen3-vl-8b-instruct", "--inputs", "video"], "error: --inputs 'video': expected all, image or text"),
])
def test_inputs_bad_values_exit_2(capsys, tmp_path, args, message):
    r = run_cli(capsys, "gen-config", *args, "--gpu", "H100", "--yes", "-o", tmp_path)
    assert r.code == 2 and r.err.startswith(message) and len(r.err.strip().splitlines()) == 1, r.err
    assert not any(tmp_path.iterdir())


def test_recipe_notes_reach_the_summary(capsys, tmp_path):
    """A recipe asks for what llmctl cannot write (a chat template file of
    vLLM's repository): gen-config says so when it writes that recipe."""
    note = CATALOG["deepseek-r1"].recipes["tool_calling"].note
    assert "examples/tool_chat_template_deepseekr1.jinja" in note and "chat_template" in note
    r = run_cli(capsys, "gen-config", "-m", "deepseek-r1", "--gpu", "B200", "--tool-calling", "--yes", "-o", tmp_path)
    assert r.code == 0 and "tool_chat_template_deepseekr1.jinja" in r.out + r.err
    r = run_cli(capsys, "gen-config", "-m", "deepseek-r1", "--gpu", "B200", "--yes", "-o", tmp_path / "plain")
    assert r.code == 0 and "tool_chat_template" not in r.out + r.err


def test_pooling_task_follows_the_architecture():
    """vLLM's pooling runner scores with a *ForSequenceClassification model
    (served on /v1/score) and embeds otherwise."""
    rerank = CATALOG["bge-reranker-v2-m3"]
    ek = rerank.recipe_for("pooling")
    assert EA.pooling_task(ek, rerank.architecture.architectures) == "classify"
    assert EA.pooling_task(CATALOG["qwen3-embedding-0.6b"].recipe_for("pooling"), ["Qwen3ForCausalLM"]) == "embed"
    assert EA.pooling_task({"runner": "pooling", "convert": "embed"}, ["XLMRobertaForSequenceClassification"]) == "embed"
    assert EA.pooling_task({"max_num_seqs": 8}, ["XLMRobertaForSequenceClassification"]) is None
