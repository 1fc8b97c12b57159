"""Configs written by others that validate used to get wrong (issue 38): each
test writes a config of that shape (none copied from anywhere) and checks
the verdict against what Ray 2.60 / vLLM / Kubernetes do with it —
placeholder models, class paths Ray imports, parser names, ``${VAR}`` in a
container's shell script, autoscaling keys Serve ignores."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from helpers import run_cli
from llmctl.validate import validate_paths

SOURCE = "Qwen/Qwen2.5-7B-Instruct"


def _model(tmp_path: Path, text: str, name: str = "model.yaml") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


def _codes(diags, code: str) -> list:
    return [d for d in diags if d.code == code]


# --------------------------------------------------------------------------
# placeholder model ids and sources


@pytest.mark.parametrize("mlc,field,code", [
    # (model_loading_config, the field reported, its code)
    ("{model_id: my-app, model_source: org/model-name}", "model_loading_config.model_source", "placeholder"),
    ("{model_id: my-app, model_source: huggingface-org/model-name}", "model_loading_config.model_source", "placeholder"),
    ("{model_id: 'org/model-name'}", "model_loading_config.model_id", "placeholder"),  # the source defaults to the id
    ("{model_id: '<hf-model-id>'}", "model_loading_config.model_id", "placeholder"),
    ("{model_id: my-app, model_source: '<hf-model-id>'}", "model_loading_config.model_source", "placeholder"),
    ("{model_id: my-app, model_source: '/models/<model-name>'}", "model_loading_config.model_source", "placeholder"),
    ("{model_id: unique-model-id, model_source: Qwen/Qwen2.5-7B-Instruct}", "model_loading_config.model_id",
     "placeholder-model-id"),
])
def test_placeholder_models_are_reported(tmp_path, mlc, field, code):
    diags = validate_paths([_model(tmp_path, f"model_loading_config: {mlc}\naccelerator_type: L4\n")])
    found = [d for d in diags if d.code in ("placeholder", "placeholder-model-id")]
    assert [(d.field, d.code) for d in found] == [(field, code)], [str(d) for d in diags]
    (d,) = found
    # a source vLLM cannot load is an error; an id that only looks like a placeholder deploys (a warning)
    assert d.severity == ("warning" if code == "placeholder-model-id" else "error")
    assert d.line == 1 and "template's placeholder" in d.message
    assert not _codes(diags, "check-failed")


@pytest.mark.parametrize("mlc", [
    "{model_id: model, model_source: Qwen/Qwen2.5-7B-Instruct}",  # one template word is a plausible real id
    "{model_id: qwen-7b, model_source: Qwen/Qwen2.5-7B-Instruct}",
    "{model_id: gpt2}",
    "{model_id: opt, model_source: facebook/opt-125m}",
    "{model_id: hermes-model-v2, model_source: NousResearch/Hermes-3-Llama-3.1-8B}",
])
def test_real_model_names_are_not_placeholders(tmp_path, mlc):
    diags = validate_paths([_model(tmp_path, f"model_loading_config: {mlc}\naccelerator_type: L4\n")])
    assert not [d for d in diags if d.code in ("placeholder", "placeholder-model-id")], [str(d) for d in diags]


def test_a_serve_file_with_a_placeholder_source_is_refused(capsys, tmp_path):
    serve = tmp_path / "serve.yaml"
    serve.write_text(yaml.safe_dump({"applications": [{
        "name": "app", "route_prefix": "/", "import_path": "ray.serve.llm:build_openai_app",
        "args": {"llm_configs": [{"model_loading_config": {"model_id": "chat", "model_source": "your-org/your-model"},
                                  "accelerator_type": "L4"}]}}]}, sort_keys=False))
    r = run_cli(capsys, "validate", serve)
    assert r.code == 2
    assert (f"{serve}:9: applications[0].args.llm_configs[0].model_loading_config.model_source: 'your-org/your-model' is a "
            "template's placeholder, not a model: vLLM cannot load it") in r.err, r.err


# --------------------------------------------------------------------------
# class and function paths Ray imports: one rule (builders.class_path_problem)


@pytest.mark.parametrize("extra,field", [
    ("callback_config: {callback_class: my_callbacks.audit:AuditCallback}", "callback_config.callback_class"),
    ("callback_config: {callback_class: my_callbacks.audit.AuditCallback, callback_kwargs: {level: 2}}",
     "callback_config.callback_class"),
    ("deployment_config: {autoscaling_config: {min_replicas: 1, max_replicas: 2, target_ongoing_requests: 8, "
     "policy: {policy_function: 'my_scaling.policy:scale'}}}", "deployment_config.autoscaling_config.policy.policy_function"),
    ("runtime_env: {env_vars: {RAYLLM_VLLM_ENGINE_CLS: 'my_engine.mod:Engine'}}", "runtime_env.env_vars.RAYLLM_VLLM_ENGINE_CLS"),
])
def test_import_paths_no_installed_package_provides(capsys, tmp_path, extra, field):
    f = _model(tmp_path, f"model_loading_config: {{model_id: m, model_source: {SOURCE}}}\naccelerator_type: L4\n{extra}\n")
    remote = run_cli(capsys, "validate", f)  # may exist on the cluster's nodes only: a warning
    assert remote.code == 0, remote.err
    line = next(ln for ln in remote.err.splitlines() if f": {field}: " in ln)
    assert "warning: module 'my_" in line and "is not importable on this machine" in line
    local = run_cli(capsys, "validate", "--local", f)  # the apps run here: an error
    assert local.code == 2 and f": {field}: module 'my_" in local.err, local.err
    assert "check-failed" not in local.err and "crashed" not in local.err


def test_import_paths_an_installed_package_provides_pass(tmp_path):
    f = _model(tmp_path, f"model_loading_config: {{model_id: m, model_source: {SOURCE}}}\naccelerator_type: L4\n"
                         "callback_config: {callback_class: 'ray.llm._internal.common.callbacks.base:CallbackBase'}\n"
                         "deployment_config: {autoscaling_config: {min_replicas: 1, max_replicas: 2, target_ongoing_requests: 8, "
                         "policy: {policy_function: 'ray.serve.autoscaling_policy:default_autoscaling_policy'}}}\n")
    diags = validate_paths([f], local_node=True)
    assert not _codes(diags, "class-path") and not diags.errors, [str(d) for d in diags]
    gone = _model(tmp_path, f.read_text().replace("CallbackBase", "NoSuchCallback"), "gone.yaml")
    (d,) = _codes(validate_paths([gone], local_node=False), "class-path")  # Ray's own wheel: an error anywhere
    assert d.severity == "error" and "defines no 'NoSuchCallback'" in d.message


# --------------------------------------------------------------------------
# tool_call_parser / reasoning_parser against the target vLLM's registries


def test_a_parser_name_vllm_does_not_register_is_refused_with_the_valid_one(capsys, tmp_path):
    f = _model(tmp_path, f"model_loading_config: {{model_id: m, model_source: {SOURCE}}}\naccelerator_type: L4\n"
                         "engine_kwargs: {reasoning_parser: deepseek-r1, enable_auto_tool_choice: true, tool_call_parser: herm}\n")
    r = run_cli(capsys, "validate", f)
    assert r.code == 2
    lines = r.err.splitlines()
    assert any(ln.startswith(f"{f}:3: engine_kwargs.reasoning_parser: 'deepseek-r1' is not a reasoning parser vLLM 0.29.0 ")
               and "(did you mean 'deepseek_r1'?)" in ln and ln.endswith("vLLM refuses to start") for ln in lines), lines
    assert any("engine_kwargs.tool_call_parser: 'herm' is not a tool call parser" in ln and "'hermes'" in ln for ln in lines)
    fixed = _model(tmp_path, f.read_text().replace("deepseek-r1", "deepseek_r1").replace("herm}", "hermes}"), "fixed.yaml")
    assert not _codes(validate_paths([fixed]), "unknown-parser")


def test_a_parser_name_without_a_close_match_lists_the_registered_ones(tmp_path):
    from llmctl.recipes import registered_parsers

    f = _model(tmp_path, f"model_loading_config: {{model_id: m, model_source: {SOURCE}}}\nengine_kwargs: {{reasoning_parser: zz}}\n")
    (d,) = _codes(validate_paths([f]), "unknown-parser")
    assert d.is_error and all(n in d.message for n in registered_parsers("0.29.0")["reasoning_parsers"])


def test_parser_names_against_another_vllm_and_with_a_plugin(tmp_path):
    def base(extra: str) -> str:
        return f"model_loading_config: {{model_id: m, model_source: {SOURCE}}}\nengine_kwargs: {{reasoning_parser: my_thinker{extra}}}\n"

    f = _model(tmp_path, base(""))
    (d,) = _codes(validate_paths([f], vllm_version="0.32.0"), "unknown-parser")  # its own registry: an error
    assert d.is_error and "vLLM 0.32.0" in d.message
    (d,) = _codes(validate_paths([f], vllm_version="0.31.0"), "unknown-parser")  # only an older release's: a warning
    assert d.severity == "warning" and "vLLM 0.29.0 registers" in d.message and "the target is vLLM 0.31.0" in d.message
    plugin = _model(tmp_path, base(", reasoning_parser_plugin: /opt/parsers/mine.py"), "plugin.yaml")
    assert not _codes(validate_paths([plugin]), "unknown-parser")  # a plugin may register it


# --------------------------------------------------------------------------
# ${VAR} in a Kubernetes container's command / args


@pytest.fixture(scope="module")
def rayservice() -> dict:
    from llmctl.kuberay import manifest as M

    serve = {"applications": [{"name": "chat", "route_prefix": "/", "import_path": "ray.serve.llm:build_openai_app",
                               "args": {"llm_configs": [{
                                   "model_loading_config": {"model_id": "m", "model_source": SOURCE},
                                   "accelerator_type": "L4",
                                   "deployment_config": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 2,
                                                                                "target_ongoing_requests": 16}}}]}}]}
    return M.build(serve, "serve.yaml", M.KubeOptions(node_selector="gke")).data


def _with_init_containers(rs: dict, containers: list[dict]) -> str:
    rs = copy.deepcopy(rs)
    rs["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["initContainers"] = containers
    return yaml.safe_dump(rs, sort_keys=False)


def test_a_shell_script_in_a_container_expands_its_variables(rayservice):
    from llmctl.validate.files import validate_text

    text = _with_init_containers(rayservice, [
        {"name": "fetch", "image": "busybox", "env": [{"name": "MODEL_FILE", "value": "w.bin"}],
         "command": ["sh", "-c", "wget -O /models/${MODEL_FILE} https://example.invalid/${MODEL_FILE} && ls $HOME"]},
        {"name": "login", "image": "busybox", "command": ["/bin/bash", "-ec"], "args": ["echo ${REGION} > /cfg/region"]},
        {"name": "probe", "image": "busybox", "command": ["sleep", "1"],
         "startupProbe": {"exec": {"command": ["sh", "-c", "test -s /models/${MODEL_FILE}"]}}},
    ])
    diags = validate_text("rs.yaml", text)
    assert not [d for d in diags if d.code in ("unexpanded-variable", "template")], [str(d) for d in diags]
    assert not diags.errors, [str(d) for d in diags.errors]


def test_a_variable_kubernetes_leaves_literal_is_still_reported(rayservice):
    from llmctl.validate.files import validate_text

    text = _with_init_containers(rayservice, [
        {"name": "plain", "image": "busybox", "command": ["/app/fetch", "--file", "${MODEL_FILE}"]},
        # the arguments after a shell's script are its positional parameters, passed as written
        {"name": "positional", "image": "busybox", "command": ["sh", "-c", "cp \"$1\" /models", "sh", "${MODEL_FILE}"]},
        {"name": "env", "image": "busybox", "command": ["true"], "env": [{"name": "X", "value": "${MODEL_FILE}"}]},
    ])
    diags = validate_text("rs.yaml", text)
    got = {d.field.rsplit(".", 2)[-2] + "." + d.field.rsplit(".", 2)[-1]: d.code for d in diags
           if d.code in ("unexpanded-variable", "template")}
    assert got == {"initContainers[0].command[2]": "unexpanded-variable", "initContainers[1].command[4]": "unexpanded-variable",
                   "env[0].value": "template"}, [str(d) for d in diags]
    plain = next(d for d in diags if d.field.endswith("initContainers[0].command[2]"))
    assert "Kubernetes passes a container's command and args as written, expanding only $(MODEL_FILE)" in plain.message


# --------------------------------------------------------------------------
# autoscaling keys Serve ignores: warnings (the app deploys); options it refuses: errors


def test_serve_ignores_unknown_autoscaling_keys_and_refuses_unknown_deployment_options():
    """The premise of the severities below, asked of the installed Ray."""
    from ray import serve
    from ray.serve.config import AutoscalingConfig

    asc = AutoscalingConfig(min_replicas=1, max_replicas=2, upscale_delay=5)
    assert asc.upscale_delay_s == AutoscalingConfig().upscale_delay_s  # ignored: the default applies

    class App:
        pass

    with pytest.raises(TypeError):
        serve.deployment(App, upscale_delay_s=5)


def test_a_misspelled_autoscaling_key_is_a_warning_a_misspelled_option_an_error(capsys, tmp_path):
    dc = "deployment_config: {{max_ongoing_requests: 16, {top}autoscaling_config: {{min_replicas: 1, max_replicas: 2, " \
         "target_ongoing_requests: 8{inner}}}}}\n"
    head = f"model_loading_config: {{model_id: m, model_source: {SOURCE}}}\naccelerator_type: L4\n"
    ignored = _model(tmp_path, head + dc.format(top="", inner=", upscale_delay: 5"))
    r = run_cli(capsys, "validate", ignored)
    assert r.code == 0, r.err
    assert (f"{ignored}:3: deployment_config.autoscaling_config.upscale_delay: warning: unknown autoscaling option (did you "
            "mean 'upscale_delay_s'?): Serve ignores it and deploys with the default") in r.err.splitlines(), r.err
    assert run_cli(capsys, "validate", "--strict", ignored).code == 2
    refused = _model(tmp_path, head + dc.format(top="max_ongoing: 4, ", inner=""), "refused.yaml")
    r = run_cli(capsys, "validate", refused)
    assert r.code == 2 and "deployment_config.max_ongoing: unknown deployment option (did you mean 'max_ongoing_requests'?)" in r.err
