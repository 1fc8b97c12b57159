"""Scripted gen-config: files Ray accepts, validate exits 0, values round-trip."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import files_under, load_yaml, make_model_dir, run_cli, run_subprocess, serve_file


def _ray_accepts(serve_path: Path) -> list[dict]:
    """Ray's own classes accept the files: ServeDeploySchema for the serve
    config, LLMConfig for each model config it references."""
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig
    from ray.serve.schema import ServeDeploySchema

    serve = load_yaml(serve_path)
    ServeDeploySchema.model_validate(serve)
    (app,) = serve["applications"]
    assert app["import_path"] == "ray.serve.llm:build_openai_app"
    configs = []
    for p in app["args"]["llm_configs"]:
        assert Path(p).is_absolute(), "absolute, so `serve run` works from any directory"
        data = load_yaml(Path(p))
        LLMConfig.model_validate(data)
        configs.append(data)
    return configs


def test_one_model(capsys, tmp_path):
    out = tmp_path / "out"
    r = run_cli(capsys, "gen-config", "--model", "qwen3-8b", "--gpu", "L4", "--tp", "1", "--min-replicas", "1",
                "--max-replicas", "3", "--max-model-len", "8192", "--yes", "-o", out)
    assert r.code == 0, r.err
    serve = serve_file(out)
    assert [p.name for p in files_under(out / "model_config")] == ["qwen3-8b.yaml"]
    (cfg,) = _ray_accepts(serve)
    assert cfg["model_loading_config"] == {"model_id": "qwen3-8b", "model_source": "Qwen/Qwen3-8B"}
    assert cfg["accelerator_type"] == "L4"
    assert cfg["engine_kwargs"] == {"tensor_parallel_size": 1, "max_model_len": 8192}
    dc = cfg["deployment_config"]
    asc = dc["autoscaling_config"]
    assert (asc["min_replicas"], asc["max_replicas"]) == (1, 3)
    # targets from the sizing plan: below what a replica holds, which caps what Serve sends it
    assert 1 <= asc["target_ongoing_requests"] <= dc["max_ongoing_requests"]
    assert "Autoscaling: one replica holds" in (out / "model_config" / "qwen3-8b.yaml").read_text()
    assert "runtime_env" not in cfg  # not gated
    # stdout names the files and the next commands
    assert str(serve) in r.out and f"llmctl up {serve}" in r.out and f"serve run {serve}" in r.out
    v = run_cli(capsys, "validate", serve)
    assert v.code == 0, v.err
    assert "OK: 1 file valid" in v.out


def test_three_models_in_one_app(capsys, tmp_path):
    out = tmp_path / "app"
    r = run_cli(capsys, "gen-config", "-m", "llama-3.1-8b-instruct", "-m", "qwen2.5-7b-instruct", "-m", "mistral-7b-instruct-v0.3",
                "--gpu", "A100-80G", "--gpu", "L40S", "--gpu", "H100", "--tp", "2", "--tp", "1", "--tp", "1",
                "--min-replicas", "1", "--max-replicas", "4", "--max-model-len", "16K",
                "--app-name", "chat-app", "--route-prefix", "/llm", "--yes", "-o", out)
    assert r.code == 0, r.err
    serve = serve_file(out)
    configs = _ray_accepts(serve)
    assert [c["model_loading_config"]["model_id"] for c in configs] == [
        "llama-3.1-8b-instruct", "qwen2.5-7b-instruct", "mistral-7b-instruct-v0.3"]
    assert [c["accelerator_type"] for c in configs] == ["A100-80G", "L40S", "H100"]
    assert [c["engine_kwargs"]["tensor_parallel_size"] for c in configs] == [2, 1, 1]
    assert all(c["engine_kwargs"]["max_model_len"] == 16384 for c in configs)
    # gated Llama: the token variable's NAME only
    assert configs[0]["runtime_env"] == {"env_vars": {"HF_TOKEN": "${HF_TOKEN}"}}
    app = load_yaml(serve)["applications"][0]
    assert (app["name"], app["route_prefix"]) == ("chat-app", "/llm")
    v = run_cli(capsys, "validate", serve, *sorted((out / "model_config").glob("*.yaml")))
    assert v.code == 0, v.err


def test_cpu_config_for_a_local_model(capsys, tmp_path):
    model = make_model_dir(tmp_path / "tiny llama #1")
    out = tmp_path / "cpu"
    r = run_cli(capsys, "gen-config", "--model", model, "--gpu", "cpu", "--yes", "-o", out)
    assert r.code == 0, r.err
    (cfg,) = _ray_accepts(serve_file(out))
    assert "accelerator_type" not in cfg
    assert cfg["placement_group_config"] == {"bundles": [{"CPU": 1}]}
    ek = cfg["engine_kwargs"]
    assert (ek["dtype"], ek["enforce_eager"], ek["max_model_len"]) == ("float32", True, 512)
    assert ek["kv_cache_memory_bytes"] >= 64 * 1024 * 1024
    assert cfg["model_loading_config"]["model_source"] == str(model.resolve())
    assert cfg["model_loading_config"]["model_id"] == "tiny llama #1"


def test_lora_token_env_and_fast_download(capsys, tmp_path):
    out = tmp_path / "lora"
    r = run_cli(capsys, "gen-config", "-m", "llama-3.1-8b-instruct", "--gpu", "L40S", "--max-model-len", "8192",
                "--lora-path", "s3://bucket/adapters/", "--max-lora-adapters", "8", "--hf-token-env", "MY_HF_TOKEN",
                "--fast-download", "--yes", "-o", out)
    assert r.code == 0, r.err
    (cfg,) = _ray_accepts(serve_file(out))
    assert cfg["lora_config"] == {"dynamic_lora_loading_path": "s3://bucket/adapters", "max_num_adapters_per_replica": 8}
    assert cfg["engine_kwargs"]["enable_lora"] is True and cfg["engine_kwargs"]["max_loras"] == 8
    assert cfg["runtime_env"]["env_vars"] == {"HF_TOKEN": "${MY_HF_TOKEN}", "HF_HUB_ENABLE_HF_TRANSFER": "1"}


def test_bucket_source_is_written_as_bucket_uri(capsys, tmp_path):
    out = tmp_path / "b"
    r = run_cli(capsys, "gen-config", "-m", "gs://my-bucket/llama-8b", "--gpu", "L4", "--yes", "-o", out)
    assert r.code == 0, r.err
    (cfg,) = _ray_accepts(serve_file(out))
    assert cfg["model_loading_config"] == {"model_id": "llama-8b", "model_source": {"bucket_uri": "gs://my-bucket/llama-8b"}}


def test_the_token_value_never_reaches_disk(capsys, tmp_path, monkeypatch):
    secret = "hf_" + "Q" * 34
    monkeypatch.setenv("HF_TOKEN", secret)
    out = tmp_path / "g"
    r = run_cli(capsys, "gen-config", "-m", "llama-3.2-1b-instruct", "--gpu", "L4", "--yes", "-o", out)
    assert r.code == 0, r.err
    for f in files_under(out):
        assert secret not in f.read_text()
    assert secret not in r.out + r.err


def test_existing_file_needs_force(capsys, tmp_path):
    out = tmp_path / "o"
    args = ["gen-config", "-m", "qwen3-0.6b", "--gpu", "L4", "--max-model-len", "4096", "--yes", "-o", out]
    assert run_cli(capsys, *args).code == 0
    target = out / "model_config" / "qwen3-0.6b.yaml"
    target.write_text("# mine\n")
    before = files_under(out)
    r = run_cli(capsys, *args)
    assert r.code == 2
    assert r.err.strip() == f"error: {target}: already exists; pass --force to overwrite it"
    assert target.read_text() == "# mine\n" and files_under(out) == before
    r = run_cli(capsys, *args, "--force")
    assert r.code == 0 and target.read_text() != "# mine\n"


def test_written_files_get_the_umask_mode_or_keep_the_replaced_ones(capsys, tmp_path):
    """Generated files are written through 0600 temporary files: a new file
    gets what open() would give it (0666 minus the umask), a file replaced
    with --force keeps its mode."""
    import os
    import stat

    def modes(d):
        return {p.name: stat.S_IMODE(p.stat().st_mode) for p in files_under(d)}

    def gen(out, *extra):
        return run_cli(capsys, "gen-config", "-m", "qwen3-0.6b", "--gpu", "L4", "--max-model-len", "4096", "--yes",
                       "-o", out, *extra).code

    old = os.umask(0o027)
    try:
        assert gen(tmp_path / "a") == 0
        assert len(modes(tmp_path / "a")) == 2 and set(modes(tmp_path / "a").values()) == {0o640}
        os.umask(0o022)
        assert gen(tmp_path / "b") == 0
        assert set(modes(tmp_path / "b").values()) == {0o644}
        model = tmp_path / "b" / "model_config" / "qwen3-0.6b.yaml"
        os.chmod(model, 0o600)
        assert gen(tmp_path / "b", "--force") == 0
        assert stat.S_IMODE(model.stat().st_mode) == 0o600  # replaced: its mode kept
    finally:
        os.umask(old)
    assert not [n for n in modes(tmp_path) if n.endswith(".tmp")]


def test_serve_file_works_from_another_directory(capsys, tmp_path, monkeypatch):
    """The serve file references absolute paths: validate (and serve run) from elsewhere."""
    out = tmp_path / "x"
    assert run_cli(capsys, "gen-config", "-m", "qwen3-0.6b", "--gpu", "L4", "--max-model-len", "4096", "--yes", "-o", out).code == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert run_cli(capsys, "validate", serve_file(out)).code == 0


@pytest.mark.engine  # Ray's LLMServingArgs imports vLLM's protocol models
def test_serve_file_args_are_what_build_openai_app_accepts(capsys, tmp_path, monkeypatch):
    out = tmp_path / "x"
    assert run_cli(capsys, "gen-config", "-m", "qwen3-0.6b", "--gpu", "L4", "--max-model-len", "4096", "--yes", "-o", out).code == 0
    monkeypatch.chdir(tmp_path)
    from ray.llm._internal.serve.core.ingress.builder import LLMServingArgs

    serve = load_yaml(serve_file(out))
    LLMServingArgs.model_validate(serve["applications"][0]["args"])  # what build_openai_app runs


def test_console_script_runs_without_a_terminal(tmp_path):
    r = run_subprocess("gen-config", "--model", "qwen3-0.6b", "--gpu", "L4", "--max-model-len", "2048", "--yes", "-o", tmp_path)
    assert r.code == 0, r.err
    assert "Traceback" not in r.err
    assert len(list(tmp_path.glob("serve_*.yaml"))) == 1


# ------------------------------------------------------------- round trip


_id_chars = st.characters(blacklist_categories=("Cs", "Cc"))
model_ids = st.text(_id_chars, min_size=1, max_size=40).filter(lambda s: s.strip() == s and s.strip() != "")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model_id=model_ids, app=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True),
       route=st.from_regex(r"/[A-Za-z0-9_.~%:#@'\"-]{0,15}", fullmatch=True).filter(lambda s: s == "/" or not s.endswith("/")))
def test_any_id_name_and_route_survive_the_yaml_round_trip(tmp_path_factory, model_id, app, route):
    from llmctl.catalog import load_catalog
    from llmctl.hardware import GPUS
    from llmctl.render import render_spec
    from llmctl.spec import DeploymentSpec, ModelSpec

    out = tmp_path_factory.mktemp("rt") / "dir with 'quotes' #hash: ünï"
    prof = load_catalog()["qwen3-0.6b"]
    spec = DeploymentSpec(app_name=app, route_prefix=route,
                          models=(ModelSpec(profile=prof, model_id=model_id, gpu=GPUS["L4"], max_model_len=2048),))
    spec.check()
    docs = render_spec(spec, out)
    model_doc, serve_doc = yaml.safe_load(docs[0].text), yaml.safe_load(docs[1].text)
    assert model_doc["model_loading_config"]["model_id"] == model_id
    a = serve_doc["applications"][0]
    assert (a["name"], a["route_prefix"]) == (app, route)
    assert a["args"]["llm_configs"] == [str(docs[0].path)]
    assert docs[0].path.parent == out.resolve() / "model_config"
    assert "/" not in docs[0].path.name[:-5] and docs[0].path.name.endswith(".yaml")


@pytest.mark.parametrize("model_id", ['a "quoted" id', "org/model:v1", "name # not a comment", "ünïcödé-模型", "yes", "null", "0123", "- dash", "key: value"])
def test_awkward_ids_through_the_cli(capsys, tmp_path, model_id):
    out = tmp_path / "o"
    r = run_cli(capsys, "gen-config", "-m", "qwen3-0.6b", "--model-id", model_id, "--gpu", "L4", "--max-model-len", "2048", "--yes", "-o", out)
    assert r.code == 0, r.err
    (cfg,) = _ray_accepts(serve_file(out))
    assert cfg["model_loading_config"]["model_id"] == model_id
