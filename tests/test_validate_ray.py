"""validate agrees with Ray 2.60 on what real configs do (issue 14): the
working directory for relative paths, vLLM frontend arguments, cluster-only
paths and classes, every builder, secrets and placeholders anywhere, and
ray_actor_options merged into the first placement bundle."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest
import yaml

from helpers import run_cli
from llmctl import builders

# Ray Serve LLM's builder modules import vLLM (or SGLang) at import time.
NEEDS_VLLM = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="Ray Serve LLM's builders import vLLM (the cpu extra: make setup)")

MODEL = {
    "model_loading_config": {"model_id": "qwen", "model_source": "Qwen/Qwen2.5-7B-Instruct"},
    "accelerator_type": "L4",
    "engine_kwargs": {"max_model_len": 8192},
    "deployment_config": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 8}},
}


def _write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _model(**changes) -> dict:
    """MODEL with ``a__b=value`` set at ``a.b``."""
    from llmctl.launch.failures import apply_changes

    return apply_changes(MODEL, {k.replace("__", "."): v for k, v in changes.items()})


def _serve(import_path: str, args: dict) -> dict:
    return {"applications": [{"name": "llm", "route_prefix": "/", "import_path": import_path, "args": args}]}


def _lines(r) -> list[str]:
    return r.err.strip().splitlines()


# --------------------------------------------------------------------------
# builders


@NEEDS_VLLM
def test_builder_fields_match_the_installed_ray():
    from ray.llm._internal.serve.core.ingress.builder import LLMServingArgs
    from ray.llm._internal.serve.serving_patterns.data_parallel.builder import DPOpenAiServingArgs
    from ray.llm._internal.serve.serving_patterns.prefill_decode.builder import PDServingArgs

    assert set(LLMServingArgs.model_fields) == builders.OPENAI.fields
    assert set(DPOpenAiServingArgs.model_fields) == builders.DP.fields
    assert set(PDServingArgs.model_fields) == builders.PD.fields


@NEEDS_VLLM
@pytest.mark.parametrize("path", sorted(builders.KNOWN_PATHS))
def test_known_import_paths_exist_in_the_installed_ray(path):
    from ray._common.utils import import_attr

    fn = import_attr(path.replace(":", "."))
    assert callable(fn) and fn.__name__ == path.split(":")[1]
    assert builders.ray_attr_exists(*builders.split_import_path(path))


@pytest.mark.parametrize("gone,current", [
    ("ray.serve.llm.builders:build_openai_app", "ray.serve.llm:build_openai_app"),
    ("ray.llm._internal.serve.builders.application_builders:build_openai_app", "ray.serve.llm:build_openai_app"),
    ("ray.llm._internal.serve.deployments.prefill_decode_disagg.prefill_decode_disagg:build_app", "ray.serve.llm:build_pd_openai_app"),
])
def test_gone_import_path_is_an_error_and_its_configs_are_still_checked(capsys, tmp_path, gone, current):
    bad = _model(deployment_config__autoscaling_config={"min_replicas": 3, "max_replicas": 1})
    args = {"prefill_config": bad, "decode_config": bad} if "prefill" in gone else {"llm_configs": [bad]}
    serve = _write(tmp_path / "serve.yaml", _serve(gone, args))
    r = run_cli(capsys, "validate", serve)
    assert r.code == 2
    assert f"{serve}:4: applications[0].import_path: '{gone}' does not exist in the installed Ray" in r.err
    assert f"use '{current}'" in r.err
    assert "min_replicas (3) must be <= max_replicas (1)" in r.err, r.err


def test_dp_and_pd_builders_get_every_check(capsys, tmp_path):
    dp = _write(tmp_path / "dp.yaml", _serve("ray.serve.llm:build_dp_openai_app",
                                             {"llm_config": _model(engine_kwargs={"tensor_parallel_size": 3})}))
    r = run_cli(capsys, "validate", dp)
    assert r.code == 2 and "applications[0].args.llm_config.engine_kwargs.tensor_parallel_size:" in r.err, r.err
    pd = _write(tmp_path / "pd.yaml", _serve("ray.serve.llm:build_pd_openai_app", {
        "prefill_config": MODEL, "decode_config": _model(model_loading_config={"model_id": "other", "model_source": "Qwen/Qwen2.5-7B-Instruct"}),
        "ingress_deployment_config": {}, "llm_configs": []}))
    r = run_cli(capsys, "validate", pd)
    lines = _lines(r)
    assert r.code == 2
    assert any("applications[0].args.llm_configs: unknown argument" in ln
               and "ray.serve.llm:build_pd_openai_app takes decode_config, ingress_cls_config" in ln for ln in lines), lines
    assert any("args.decode_config: model id 'other' differs from prefill_config's 'qwen'" in ln for ln in lines), lines
    # Ray refuses a P/D app whose pools have no kv_transfer_config (PDServingArgs._validate_kv_transfer_config)
    bare = _write(tmp_path / "pd_bare.yaml", _serve("ray.serve.llm:build_pd_openai_app", {"prefill_config": MODEL, "decode_config": MODEL}))
    r = run_cli(capsys, "validate", bare)
    assert r.code == 2 and sum("kv_transfer_config is required for P/D disaggregation" in ln for ln in _lines(r)) == 2, r.err
    pool = _model(engine_kwargs={"max_model_len": 8192, "kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}})
    ok = _write(tmp_path / "pd_ok.yaml", _serve("ray.serve.llm:build_pd_openai_app", {"prefill_config": pool, "decode_config": pool}))
    assert run_cli(capsys, "validate", ok).code == 0


# --------------------------------------------------------------------------
# relative llm_configs paths: Ray's working-directory rule


def _release_layout(tmp_path: Path) -> Path:
    """Ray's release tests: serve files reference ./configs/model_config/… and
    are deployed from the folder that holds configs/."""
    _write(tmp_path / "deploy" / "configs" / "model_config" / "qwen.yaml", MODEL)
    return _write(tmp_path / "deploy" / "configs" / "serve_qwen.yaml",
                  _serve("ray.serve.llm:build_openai_app", {"llm_configs": ["./configs/model_config/qwen.yaml"]}))


def test_relative_paths_resolve_against_the_working_directory(capsys, tmp_path, monkeypatch):
    serve = _release_layout(tmp_path)
    monkeypatch.chdir(tmp_path / "deploy")
    r = run_cli(capsys, "validate", "configs/serve_qwen.yaml")
    assert r.code == 0, r.err
    assert f"note: relative path resolved against {tmp_path / 'deploy'}" in r.err
    # From elsewhere it fails as `serve run` would, naming the directory used.
    monkeypatch.chdir(tmp_path)
    r = run_cli(capsys, "validate", serve)
    assert r.code == 2
    assert (f"model config file './configs/model_config/qwen.yaml' does not exist in {tmp_path} (Ray opens relative "
            "llm_configs paths from the working directory of the process that builds the app)") in r.err
    # --working-dir says where the deploy runs from.
    assert run_cli(capsys, "validate", "--working-dir", tmp_path / "deploy", serve).code == 0


def test_a_file_only_next_to_the_serve_file_is_named(capsys, tmp_path, monkeypatch):
    _write(tmp_path / "app" / "model_config" / "qwen.yaml", MODEL)
    serve = _write(tmp_path / "app" / "serve.yaml", _serve("ray.serve.llm:build_openai_app", {"llm_configs": ["model_config/qwen.yaml"]}))
    monkeypatch.chdir(tmp_path)
    r = run_cli(capsys, "validate", serve)
    assert r.code == 2
    assert f"it is there relative to the serve file's folder: run from {tmp_path / 'app'}" in r.err


# --------------------------------------------------------------------------
# engine_kwargs: vLLM frontend arguments (Ray's split) and Ray's own keys


def test_frontend_arguments_are_engine_kwargs(capsys, tmp_path):
    f = _write(tmp_path / "m.yaml", _model(engine_kwargs={
        "max_model_len": 8192, "enable_auto_tool_choice": True, "tool_call_parser": "hermes",
        "default_chat_template_kwargs": {"enable_thinking": False}, "reasoning_parser": "qwen3", "chat_template": "/t.jinja"}))
    r = run_cli(capsys, "validate", f)
    assert r.code == 0, r.err


# --------------------------------------------------------------------------
# what may exist only on the cluster


def test_cluster_only_paths_and_classes_warn_unless_local(capsys, tmp_path):
    f = _write(tmp_path / "m.yaml", _model(model_loading_config={"model_id": "m", "model_source": "/models/qwen"},
                                           server_cls="my_vllm_plugin.server:PluginServer"))
    r = run_cli(capsys, "validate", f)
    assert r.code == 0, r.err
    assert (f"{f}:12: server_cls: warning: module 'my_vllm_plugin.server' is not importable on this machine; it must exist "
            "on the cluster's nodes (validate --local makes this an error)") in _lines(r), r.err
    assert "model_loading_config.model_source: warning: local model path '/models/qwen' does not exist here" in r.err
    r = run_cli(capsys, "validate", "--local", f)
    assert r.code == 2
    assert f"{f}:12: server_cls: module 'my_vllm_plugin.server' is not importable on this machine" in _lines(r)
    # A custom request router: Serve imports it where the app is built, so here it is a warning too.
    routed = _write(tmp_path / "r.yaml", _model(deployment_config__request_router_config={
        "request_router_class": "my_router.mod:Router", "request_router_kwargs": {"k": 1}}))
    r = run_cli(capsys, "validate", routed)
    assert r.code == 0, r.err
    assert "request_router_config.request_router_class: warning: module 'my_router.mod' is not importable" in r.err
    assert run_cli(capsys, "validate", "--local", routed).code == 2
    # Ray's own classes are found without importing them.
    assert run_cli(capsys, "validate", "--local", _write(tmp_path / "ok.yaml", _model(
        server_cls="ray.llm._internal.serve.core.server.llm_server:LLMServer"))).code == 0


def test_global_debug_flag_after_the_subcommand(capsys, tmp_path, monkeypatch):
    from llmctl.cli import main
    from llmctl.errors import LlmctlError

    monkeypatch.delenv("LLMCTL_DEBUG", raising=False)
    f = _write(tmp_path / "m.yaml", MODEL)
    assert run_cli(capsys, "validate", f, "--debug").code == 0
    assert run_cli(capsys, "validate", "--debug", f).code == 0
    # taken as the global option: an error is raised with its traceback instead of one line
    bad = ["validate", str(f), "--working-dir", str(tmp_path / "no-such-dir")]
    with pytest.raises(LlmctlError):
        main([*bad, "--debug"])
    assert main(bad) == 2
    assert "LLMCTL_DEBUG" not in os.environ  # for this call only: nothing leaks into later in-process calls


# --------------------------------------------------------------------------
# secrets and placeholders


@pytest.mark.parametrize("where,value,code_loc", [
    ("engine_kwargs__hf_token", "hf_" + "Q" * 34, "engine_kwargs.hf_token: holds a Hugging Face token in plain text"),
    ("runtime_env__env_vars__OPENAI_API_KEY", "sk-" + "a1" * 20, "runtime_env.env_vars.OPENAI_API_KEY: holds an OpenAI API key"),
    ("runtime_env__env_vars__AWS_SECRET_ACCESS_KEY", "abc/def+ghi", "runtime_env.env_vars.AWS_SECRET_ACCESS_KEY: holds a secret"),
    ("runtime_env__env_vars__HF_TOKEN", "<YOUR-HF-TOKEN>", "runtime_env.env_vars.HF_TOKEN: unfilled placeholder '<YOUR-HF-TOKEN>'"),
    ("model_loading_config__model_source", "<YOUR_MODEL_ID>", "model_loading_config.model_source: unfilled placeholder"),
    ("engine_kwargs__hf_token", "${HF_TOKEN}", "engine_kwargs.hf_token: '${HF_TOKEN}' is not expanded here"),
])
def test_secrets_and_placeholders_are_errors(capsys, tmp_path, where, value, code_loc):
    f = _write(tmp_path / "m.yaml", _model(**{where: value}))
    r = run_cli(capsys, "validate", f)
    assert r.code == 2
    assert any(code_loc in ln for ln in _lines(r)), r.err
    assert value not in r.out


def test_references_and_true_are_not_secrets(capsys, tmp_path):
    f = _write(tmp_path / "m.yaml", _model(engine_kwargs={"max_model_len": 8192, "hf_token": True},
                                           runtime_env={"env_vars": {"HF_TOKEN": "${HF_TOKEN}", "HF_HUB_ENABLE_HF_TRANSFER": "1"}}))
    assert run_cli(capsys, "validate", f).code == 0


def test_token_in_an_application_runtime_env(capsys, tmp_path):
    serve = _serve("ray.serve.llm:build_openai_app", {"llm_configs": [MODEL]})
    serve["applications"][0]["runtime_env"] = {"env_vars": {"HF_TOKEN": "hf_" + "z" * 34}}
    r = run_cli(capsys, "validate", _write(tmp_path / "serve.yaml", serve))
    assert r.code == 2 and "applications[0].runtime_env.env_vars.HF_TOKEN: holds a Hugging Face token" in r.err


# --------------------------------------------------------------------------
# ray_actor_options merged into the first bundle


def test_num_gpus_in_ray_actor_options(capsys, tmp_path):
    f = _write(tmp_path / "m.yaml", _model(deployment_config__ray_actor_options={"num_gpus": 0.95}))
    r = run_cli(capsys, "validate", f)
    assert r.code == 0
    assert ("deployment_config.ray_actor_options.num_gpus: warning: Ray Serve LLM adds ray_actor_options.num_gpus (0.95) to the "
            "engine's first placement bundle (1 GPU), so one node must hold 1.95 GPUs for it") in r.err
    f = _write(tmp_path / "big.yaml", {
        "model_loading_config": {"model_id": "q", "model_source": "Qwen/Qwen2.5-72B-Instruct"}, "accelerator_type": "H100",
        "engine_kwargs": {"tensor_parallel_size": 8, "max_model_len": 8192},
        "deployment_config": {"ray_actor_options": {"num_gpus": 8}}})
    r = run_cli(capsys, "validate", f)
    assert r.code == 2
    assert "so one node must hold 9 GPUs for it, more than a node of 8 GPUs has" in r.err, r.err


@pytest.mark.parametrize("deployment, warned", [
    ({"autoscaling_config": {"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 2}}, "autoscaling_config.max_replicas"),
    ({"num_replicas": 3}, "num_replicas"),
    ({"autoscaling_config": {"min_replicas": 1, "max_replicas": 1}}, None),
    ({"num_replicas": 1}, None),
    ({"num_replicas": "auto"}, "num_replicas"),  # Serve's default autoscaling: up to 100
    ({"num_replicas": "auto", "autoscaling_config": {"max_replicas": 1}}, None),
    ({"num_replicas": "auto", "autoscaling_config": {"min_replicas": 0}}, "num_replicas"),  # still up to 100
])
def test_cpu_replicas_sharing_a_node_are_a_warning(capsys, tmp_path, deployment, warned):
    """Several CPU-only replicas: a warning at the field that allows them (never for one replica, never for GPUs)."""
    cpu = {k: v for k, v in MODEL.items() if k not in ("accelerator_type", "deployment_config")}
    f = _write(tmp_path / "cpu.yaml", {**cpu, "placement_group_config": {"bundles": [{"CPU": 2}]}, "deployment_config": deployment})
    r = run_cli(capsys, "validate", f)
    assert r.code == 0, r.err
    hits = [ln for ln in _lines(r) if "CPU-only replicas" in ln]
    if warned is None:
        assert not hits, r.err
    else:
        (hit,) = hits
        # the bundle's 2 CPUs and the replica actor's 1 (Ray Serve LLM merges them into the first bundle)
        assert f"deployment_config.{warned}: warning:" in hit and "Ray reserves 3 CPU per replica" in hit, hit
    gpu = _write(tmp_path / "gpu.yaml", _model(deployment_config=deployment))  # L4: each replica has its own GPU
    assert "CPU-only replicas" not in run_cli(capsys, "validate", gpu).err


@pytest.mark.parametrize("deployment, missing", [
    ({"num_replicas": "auto"}, ["max_replicas", "target_ongoing_requests"]),
    ({"num_replicas": "auto", "autoscaling_config": {"max_replicas": 3}}, ["target_ongoing_requests"]),
    ({"num_replicas": "auto", "autoscaling_config": {"target_ongoing_requests": 16}}, ["max_replicas"]),
    ({"num_replicas": "auto", "autoscaling_config": {"max_replicas": 3, "target_ongoing_requests": 16}}, []),
    ({"autoscaling_config": {"min_replicas": 1, "max_replicas": 3, "target_ongoing_requests": 16}}, []),
    ({"num_replicas": 2}, []),
])
def test_num_replicas_auto_left_to_serves_defaults_is_a_warning(capsys, tmp_path, deployment, missing):
    """auto is Serve's AutoscalingConfig.default(): up to 100 replicas, a new one above 2 requests in flight.
    The figures in the message are Serve's and the config's own: compared here with Serve's DeploymentConfig."""
    from test_replica_counts import serve_counts
    from ray.serve.config import AutoscalingConfig

    f = _write(tmp_path / "m.yaml", _model(engine_kwargs__tensor_parallel_size=2, deployment_config=deployment))
    r = run_cli(capsys, "validate", f)
    assert r.code == 0, r.err
    hits = [ln for ln in _lines(r) if "auto is Serve's default autoscaling" in ln]
    assert not [ln for ln in _lines(r) if "never scales" in ln], r.err  # auto's target is Serve's 2, not Ray Serve LLM's 1e9
    if not missing:
        assert not hits, r.err
        return
    (hit,) = hits
    assert "deployment_config.num_replicas: warning:" in hit
    assert hit.split("; set autoscaling_config's ")[1].startswith(" and ".join(missing))
    most = serve_counts(deployment)[1]
    assert (f"up to {most} replicas ({most * 2} GPUs)" in hit) == ("max_replicas" in missing), hit  # TP 2: 2 GPUs each
    target = AutoscalingConfig.default().target_ongoing_requests
    assert (f"more than {target:g} requests in flight" in hit) == ("target_ongoing_requests" in missing), hit


@pytest.mark.parametrize("deployment, field", [
    ({"num_replicas": "2"}, "num_replicas"),
    ({"num_replicas": 2.0}, "num_replicas"),
    ({"num_replicas": True}, "num_replicas"),
    ({"autoscaling_config": {"min_replicas": 1, "max_replicas": "3", "target_ongoing_requests": 8}}, "autoscaling_config.max_replicas"),
    ({"autoscaling_config": {"min_replicas": 1.0, "max_replicas": 3, "target_ongoing_requests": 8}}, "autoscaling_config.min_replicas"),
])
def test_a_count_serve_reads_leniently_is_a_warning(capsys, tmp_path, deployment, field):
    """Serve deploys these (pydantic's lax mode), as the number it reads: a warning naming that number, not an error."""
    from test_replica_counts import serve_counts

    counts = serve_counts(deployment)
    assert counts is not None  # Serve takes it
    f = _write(tmp_path / "m.yaml", _model(deployment_config=deployment))
    r = run_cli(capsys, "validate", f)
    assert r.code == 0, r.err
    (hit,) = [ln for ln in _lines(r) if "Serve reads it as" in ln]
    read = int(re.search(r"Serve reads it as (\d+)", hit).group(1))
    assert f"deployment_config.{field}: warning:" in hit and read in counts, hit


@pytest.mark.parametrize("deployment", [{"num_replicas": "two"}, {"num_replicas": 2.5}, {"num_replicas": -1},
                                        {"autoscaling_config": {"max_replicas": "²"}}])
def test_a_count_serve_refuses_is_an_error(capsys, tmp_path, deployment):
    from test_replica_counts import serve_counts

    assert serve_counts(deployment) is None
    r = run_cli(capsys, "validate", _write(tmp_path / "m.yaml", _model(deployment_config=deployment)))
    assert r.code == 2 and "must be " in r.err, r.err
