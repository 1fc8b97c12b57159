"""The model catalog and the GPU table: loaded, checked, traced to their sources."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from helpers import REPO, run_cli
from llmctl.catalog import ModelArch, ModelProfile, load_catalog, load_entry, resolve_model
from llmctl.errors import CatalogError, ModelNotFound
from tools.facts import arch_dict_from_facts, model_id_of, row_problem
from llmctl.hardware import GPUS

ALL_FACTS = [r for name in ("reference_model_facts.yaml", "reference_model_facts_2026.yaml")
             for r in yaml.safe_load((REPO / "tests" / "data" / name).read_text(encoding="utf-8"))]
FACTS = [r for r in ALL_FACTS if row_problem(r) is None]  # the rows with every needed number sourced
CATALOG = load_catalog()


def test_every_facts_row_is_in_the_catalog_or_left_out_with_a_reason():
    ids = {p.hf_repo for p in CATALOG.values()}
    for r in ALL_FACTS:
        assert (r["hf_repo"] in ids) == (row_problem(r) is None), r["hf_repo"]
    assert len(CATALOG) >= 50
    # 2025-2026 releases, quantized variants and embedding / reranking models are in
    families = {p.family for p in CATALOG.values()}
    assert {"llama-4", "qwen3.5", "gemma-4", "kimi-k2", "deepseek-r1"} <= families
    assert sum(1 for p in CATALOG.values() if p.architecture.quantization) >= 5
    assert {"embed", "rerank"} <= {p.task for p in CATALOG.values()}


def test_catalog_is_large_and_covers_the_families_asked_for():
    assert len(CATALOG) >= 25
    families = {p.family for p in CATALOG.values()}
    for fam in ("llama-3.1", "llama-3.2", "llama-3.3", "qwen2.5", "qwen3", "mistral", "mixtral",
                "gemma-2", "gemma-3", "phi-3.5", "deepseek-r1-distill", "deepseek-v3", "gpt-oss", "pixtral"):
        assert fam in families, fam
    assert any(p.architecture.moe for p in CATALOG.values() if p.family == "qwen3"), "a Qwen3 MoE"
    assert any(p.task == "vision" for p in CATALOG.values())
    assert any(p.architecture.mla for p in CATALOG.values())


@pytest.mark.parametrize("row", FACTS, ids=[r["hf_repo"] for r in FACTS])
def test_entry_matches_the_reference_facts_it_cites(row):
    entry = CATALOG[model_id_of(row["hf_repo"])]
    assert entry.hf_repo == row["hf_repo"]
    assert entry.gated == bool(row.get("gated"))
    expected, fill_sources, _ = arch_dict_from_facts(row)
    want = ModelArch.model_validate(expected).model_dump(mode="json")
    got = entry.architecture.model_dump(mode="json")
    for key in want:
        assert got[key] == want[key], f"{entry.id}: architecture.{key}"
    # Every number is traceable: the facts' own sources plus a source per filled default.
    for src in row["source"]:
        assert src in entry.sources
    for src in fill_sources:
        assert src in entry.sources
    # Raw facts that must never drift, checked straight against the row.
    a = entry.architecture
    for key in ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size"):
        if row[key] is None:  # a documented default, sourced in the entry (e.g. MHA encoders' KV heads)
            assert any(src.startswith(f"{key}: ") for src in entry.sources), key
            continue
        assert getattr(a, key) == row[key], key
    if row.get("head_dim") is not None:
        assert a.head_dim == row["head_dim"]


def test_derived_fields_agree_with_the_code():
    sizing = pytest.importorskip("llmctl.sizing")
    for p in CATALOG.values():
        assert p.parameters is not None, p.id
        pc = sizing.count_parameters(p.architecture)
        assert (p.parameters.total, p.parameters.active) == (int(pc.total), int(pc.active)), p.id
        for gpu in GPUS.values():
            if gpu.is_cpu:
                continue
            # the recommendation is what sizing.choose (the one rule) picks, and it starts
            choice = sizing.choose(p.architecture, gpu)
            rec = p.recommended.get(gpu.name)
            if not choice.fits:
                assert rec is None, (p.id, gpu.name)
                continue
            assert rec is not None and (rec.tp, rec.max_model_len) == (choice.tp, choice.max_model_len), (p.id, gpu.name)
            assert choice.plan.verdict in ("fits", "tight"), (p.id, gpu.name, choice.plan.reason)


def test_sliding_window_layers_follow_the_published_layer_patterns():
    # gpt-oss: layer_types alternate sliding/full (facts: 12 + 12, 18 + 18)
    assert CATALOG["gpt-oss-20b"].architecture.sliding_window_layers == 12
    assert CATALOG["gpt-oss-120b"].architecture.sliding_window_layers == 18
    # Gemma 2 alternates: 42 layers -> 21 local; Gemma 3: every 6th is global: 34 - 34 // 6 = 29
    assert CATALOG["gemma-2-9b-it"].architecture.sliding_window_layers == 21
    assert CATALOG["gemma-3-4b-it"].architecture.sliding_window_layers == 29
    # Qwen2.5 configures a window but use_sliding_window is false
    assert CATALOG["qwen2.5-7b-instruct"].architecture.sliding_window_layers == 0


def _copy_catalog(tmp_path: Path) -> Path:
    d = tmp_path / "cat"
    shutil.copytree(REPO / "model_catalog", d)
    return d


def test_broken_entry_names_its_file_and_field(tmp_path):
    d = _copy_catalog(tmp_path)
    f = d / "qwen3-8b.yaml"
    data = yaml.safe_load(f.read_text())
    data["architecture"]["num_key_value_heads"] = "eight"
    f.write_text(yaml.safe_dump(data))
    with pytest.raises(CatalogError) as e:
        load_entry(f)
    assert str(e.value).startswith(f"{f}: architecture.num_key_value_heads: ")


def test_inconsistent_entry_is_rejected(tmp_path):
    d = _copy_catalog(tmp_path)
    f = d / "qwen3-8b.yaml"
    data = yaml.safe_load(f.read_text())
    data["architecture"]["num_key_value_heads"] = 7  # 32 heads are not a multiple of 7
    f.write_text(yaml.safe_dump(data))
    with pytest.raises(CatalogError, match=r"architecture: .*not a multiple of num_key_value_heads \(7\)"):
        load_entry(f)


def test_entry_id_must_match_file_name(tmp_path):
    d = _copy_catalog(tmp_path)
    src = d / "qwen3-8b.yaml"
    dst = d / "other-name.yaml"
    src.rename(dst)
    with pytest.raises(CatalogError, match=r"other-name.yaml: id: 'qwen3-8b' must match the file name"):
        load_entry(dst)


def test_malformed_catalog_yaml_names_the_line(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("id: bad\nhf_repo: [unclosed\n")
    with pytest.raises(CatalogError, match=rf"^{f}:\d+: malformed YAML"):
        load_entry(f)


def test_resolve_by_id_and_by_repo_case_insensitive():
    assert resolve_model("qwen3-8b").hf_repo == "Qwen/Qwen3-8B"
    assert resolve_model("qwen/qwen3-8b").id == "qwen3-8b"


def test_resolve_local_dir_reads_config_json(tmp_path):
    from helpers import make_model_dir

    d = make_model_dir(tmp_path / "My Model")
    p = resolve_model(str(d))
    assert p.origin == "local" and p.architecture.num_attention_heads == 4
    assert p.hf_repo == str(d.resolve()) and p.id == "my model"


def test_resolve_unknown_offline_hf_repo_fails_clearly(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(ModelNotFound, match=r"^someorg/somemodel: cannot read config.json from the Hugging Face hub \(HF_HUB_OFFLINE is set"):
        resolve_model("someorg/somemodel")


def test_resolve_hf_repo_from_the_local_cache(monkeypatch, tmp_path):
    """A repo outside the catalog, read through huggingface_hub's cache offline."""
    import json

    from helpers import tiny_config

    hf_home = tmp_path / "hf"
    snap = hf_home / "hub" / "models--someorg--cached-model" / "snapshots" / ("a" * 40)
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(tiny_config()))
    refs = hf_home / "hub" / "models--someorg--cached-model" / "refs"
    refs.mkdir()
    (refs / "main").write_text("a" * 40)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_CACHE", str(hf_home / "hub"))
    monkeypatch.setattr(c, "HF_HUB_OFFLINE", True)
    p = resolve_model("someorg/cached-model")
    assert p.origin == "hf" and p.architecture.hidden_size == 64 and p.id == "cached-model"


def test_resolve_bucket_uri():
    p = resolve_model("s3://my-bucket/models/llama")
    assert p.origin == "bucket" and p.architecture is None and p.id == "llama"


# ---------------------------------------------------------------- GPU table


def test_every_gpu_maps_to_a_ray_accelerator_type_ray_accepts():
    import ray.util.accelerators.accelerators as ray_acc
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    ray_values = {v for k, v in vars(ray_acc).items() if k.isupper() and isinstance(v, str)}
    for name in ("L4", "A10G", "L40S", "A100-40G", "A100-80G", "H100", "H200", "B200"):
        g = GPUS[name]
        assert g.ray_type in ray_values, name
        LLMConfig.model_validate({"model_loading_config": {"model_id": "m"}, "accelerator_type": g.ray_type})
        assert 20 < g.memory_gib < 200
    assert GPUS["cpu"].ray_type is None


# ---------------------------------------------------------------- llmctl models


def test_models_table_and_json(capsys):
    r = run_cli(capsys, "models")
    assert r.code == 0
    for pid in ("llama-3.1-8b-instruct", "qwen3-30b-a3b", "deepseek-v3", "pixtral-12b"):
        assert pid in r.out
    r = run_cli(capsys, "models", "--json")
    data = r.json()
    assert len(data) == len(CATALOG)
    by_id = {d["id"]: d for d in data}
    assert by_id["qwen3-8b"]["architecture"]["num_key_value_heads"] == 8
    ModelProfile.model_validate(by_id["qwen3-8b"])


def test_models_filter(capsys):
    r = run_cli(capsys, "models", "--json", "--family", "gemma-3")
    ids = {d["id"] for d in r.json()}
    assert ids == {"gemma-3-4b-it", "gemma-3-12b-it", "gemma-3-27b-it"}


@pytest.mark.parametrize("row", FACTS, ids=[r["hf_repo"] for r in FACTS])
def test_a_catalog_entry_given_as_config_json_sizes_the_same(row, tmp_path):
    """The run-time path: the entry's facts written as a config.json in a
    local directory, resolved as `llmctl plan --model DIR` resolves it, give
    the catalog's parameters, layers and KV layout (one converter)."""
    import json

    from llmctl import sizing
    from tools.facts import config_from_facts
    from llmctl.sizing.kv import layout

    entry = CATALOG[model_id_of(row["hf_repo"])]
    cfg, _ = config_from_facts(row)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    runtime = resolve_model(str(tmp_path)).architecture
    cat = entry.architecture
    assert runtime == cat, entry.id
    pc = sizing.count_parameters(runtime)
    assert (pc.total, pc.active) == (entry.parameters.total, entry.parameters.active), entry.id
    for tp in (1, 2):
        assert layout(runtime, tp=tp) == layout(cat, tp=tp), (entry.id, tp)


def test_every_model_has_its_default_layout_on_every_gpu_it_fits_on():
    """The catalog's layouts are what llmctl.sizing.layouts.default_layout (the rule gen-config --yes
    follows) picks on each GPU type: single node, DP+EP or multi-node; a model that needs more than
    one node on some type has a DP+EP or multi-node layout there, never nothing."""
    from llmctl.sizing.layouts import default_layout

    kinds = set()
    for p in CATALOG.values():
        for gpu in GPUS.values():
            if gpu.is_cpu:
                continue
            lay = default_layout(p.architecture, gpu)
            entry = p.layouts.get(gpu.name)
            if lay is None:
                assert entry is None, (p.id, gpu.name)
                continue
            assert entry is not None and entry.model_dump() == lay.to_dict(), (p.id, gpu.name)
            assert lay.choice.plan.verdict in ("fits", "tight"), (p.id, gpu.name)
            kinds.add(entry.kind)
            if entry.kind == "DP+EP":
                assert p.architecture.moe is not None, p.id
            rec = p.recommended.get(gpu.name)
            assert (entry.kind == "single node") == (rec is not None), (p.id, gpu.name)
        assert p.layouts, p.id
    assert kinds == {"single node", "DP+EP", "multi-node"}


def test_the_catalog_holds_70_models_each_with_a_sourced_recipe_shown_by_models(capsys):
    """Issue 40's done-when: at least 70 models, every one with a recipe (each naming its source: a file of
    vLLM's docs or source, or a vllm-project/recipes file) and a default layout where it fits; `llmctl
    models` shows both."""
    assert len(CATALOG) >= 70
    for p in CATALOG.values():
        assert p.recipes, p.id
        assert all(r.source.strip() for r in p.recipes.values()), p.id
    r = run_cli(capsys, "models", "--json")
    assert all(d["recipes"] and all(v["source"] for v in d["recipes"].values()) for d in r.json())
    r = run_cli(capsys, "models", "--family", "gemma-2")
    header = next(line for line in r.out.splitlines() if "recipe" in line and "layout on H100" in line)
    row = next(line for line in r.out.splitlines() if "gemma-2-9b-it" in line)
    cells = [c.strip() for c in row.split("│")]
    assert cells[[c.strip() for c in header.split("┃")].index("recipe")] == "serving"
