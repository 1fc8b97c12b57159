"""`up --fix` pieces: editing a config file's text in place (comments kept),
finding the LLMConfig a failure belongs to, the diff, the backup."""

from __future__ import annotations

import pytest
import yaml

import llmctl
from llmctl import yaml_edit
from llmctl.errors import LlmctlError
from llmctl.launch import fix


def test_set_value_keeps_everything_else(tmp_path):
    gen = llmctl.generate("qwen3-8b", gpu="H100", max_model_len=8192, max_num_seqs=64, output_dir=tmp_path)
    text = gen.model_files[0].read_text()
    new = yaml_edit.set_value(text, ["engine_kwargs", "max_model_len"], 4096)
    changed = [(a, b) for a, b in zip(text.splitlines(), new.splitlines()) if a != b]
    assert changed == [("  max_model_len: 8192", "  max_model_len: 4096")]
    added = yaml_edit.set_value(new, ["engine_kwargs", "gpu_memory_utilization"], 0.85)
    assert len(added.splitlines()) == len(text.splitlines()) + 1
    data = yaml.safe_load(added)
    assert data["engine_kwargs"]["gpu_memory_utilization"] == 0.85 and data["engine_kwargs"]["max_num_seqs"] == 64
    assert [ln for ln in added.splitlines() if ln.startswith("#")] == [ln for ln in text.splitlines() if ln.startswith("#")]
    nested = yaml_edit.set_value(text, ["runtime_env", "env_vars", "X"], "1")
    assert yaml.safe_load(nested)["runtime_env"] == {"env_vars": {"X": "1"}}
    with pytest.raises(yaml_edit.EditError):
        yaml_edit.set_value("a: {b: 1}\n", ["a", "b"], 2)


def test_plan_and_apply_a_fix_with_a_backup(tmp_path):
    gen = llmctl.generate("qwen3-8b", gpu="H100", max_model_len=8192, output_dir=tmp_path)
    p = fix.plan(gen.serve_file, "llm_app", "qwen3-8b", {"engine_kwargs.max_model_len": 4096}, fix="set max_model_len")
    assert p.file == gen.model_files[0] and "-  max_model_len: 8192" in p.diff() and "+  max_model_len: 4096" in p.diff()
    before = p.file.read_text()
    bak = fix.apply(p)
    assert bak.name == "qwen3-8b.yaml.bak" and bak.read_text() == before
    assert yaml.safe_load(p.file.read_text())["engine_kwargs"]["max_model_len"] == 4096
    again = fix.apply(fix.plan(gen.serve_file, "llm_app", "qwen3-8b", {"engine_kwargs.max_model_len": 2048}))
    assert again.name == "qwen3-8b.yaml.bak.1"  # an earlier backup is never overwritten
    assert not [d for d in llmctl.validate_files([gen.serve_file]) if d.is_error]


def test_inline_llm_config_is_fixed_in_the_serve_file(tmp_path):
    serve = tmp_path / "serve.yaml"
    serve.write_text("# my app\napplications:\n- name: a\n  route_prefix: /\n  import_path: ray.serve.llm:build_openai_app\n"
                     "  args:\n    llm_configs:\n    - model_loading_config:\n        model_id: m\n"
                     "      engine_kwargs:\n        max_model_len: 512\n")
    p = fix.plan(serve, "a", "m", {"engine_kwargs.max_model_len": 128})
    assert p.file == serve and p.prefix == ["applications", 0, "args", "llm_configs", 0]
    fix.apply(p)
    assert serve.read_text().startswith("# my app\n")
    assert yaml.safe_load(serve.read_text())["applications"][0]["args"]["llm_configs"][0]["engine_kwargs"]["max_model_len"] == 128
    with pytest.raises(LlmctlError, match="no LLMConfig with model_id 'x'"):
        fix.plan(serve, "a", "x", {"engine_kwargs.max_model_len": 1})


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600])
def test_fix_keeps_the_mode_of_the_users_file(tmp_path, mode):
    """The fixed file (written through a 0600 temporary file) and its backup
    keep the mode the user's file had."""
    import os
    import stat

    gen = llmctl.generate("qwen3-8b", gpu="H100", max_model_len=8192, output_dir=tmp_path)
    model_file = gen.model_files[0]
    os.chmod(model_file, mode)
    bak = fix.apply(fix.plan(gen.serve_file, "llm_app", "qwen3-8b", {"engine_kwargs.max_model_len": 4096}))
    assert stat.S_IMODE(model_file.stat().st_mode) == mode
    assert stat.S_IMODE(bak.stat().st_mode) == mode
    assert not list(tmp_path.rglob("*.tmp"))
