"""Validate never says OK about what it did not check (issue 38): a check that
crashes makes the result incomplete — exit 2, ``"valid": false, "incomplete":
true``, the check named in one line — and ``up`` refuses to deploy it.
``strict`` and ``debug`` are parameters of the core, not the environment."""

from __future__ import annotations

import os
import sys

import pytest
import yaml

from helpers import run_cli

MODEL = ("model_loading_config: {model_id: qwen, model_source: Qwen/Qwen2.5-7B-Instruct}\n"
         "accelerator_type: L4\nengine_kwargs: {max_model_len: 8192}\n"
         "deployment_config: {autoscaling_config: {min_replicas: 1, max_replicas: 2, target_ongoing_requests: 8}}\n")


@pytest.fixture(autouse=True)
def _launch_prepare_stays_the_function():
    """`llmctl up` in-process imports the submodule llmctl.launch.prepare, and
    importing a submodule binds it on its package, over the function
    llmctl.launch exports lazily under the same name (other tests call
    ``launch.prepare(...)`` in this worker): put the function back."""
    yield
    import llmctl.launch as launch

    mod = sys.modules.get("llmctl.launch.prepare")
    if mod is not None and launch.__dict__.get("prepare") is mod:
        launch.prepare = mod.prepare


def _serve(tmp_path):
    (tmp_path / "model_config").mkdir()
    (tmp_path / "model_config" / "qwen.yaml").write_text(MODEL)
    serve = tmp_path / "serve_x.yaml"
    serve.write_text(yaml.safe_dump({"applications": [{
        "name": "llm_app", "route_prefix": "/", "import_path": "ray.serve.llm:build_openai_app",
        "args": {"llm_configs": [str(tmp_path / "model_config" / "qwen.yaml")]}}]}, sort_keys=False))
    return serve


@pytest.fixture
def lora_check_crashes(monkeypatch):
    """One real check (the LoRA one) raising on every input, as a bug would."""
    import llmctl.validate.llm_config as llm_config

    def crash(*args, **kwargs):
        raise KeyError("lora\nconfig")

    monkeypatch.setattr(llm_config, "_check_lora", crash)


def test_a_crashed_check_makes_validate_fail_as_incomplete(capsys, tmp_path, lora_check_crashes):
    f = tmp_path / "m.yaml"
    f.write_text(MODEL)
    r = run_cli(capsys, "validate", f)
    assert r.code == 2, r.err
    line = next(ln for ln in r.err.splitlines() if "crashed" in ln and ln.startswith(str(f)))
    assert "llmctl's LoRA check crashed on this input (KeyError: " in line and "incomplete" in line
    assert "Traceback" not in r.err and "OK:" not in r.out
    assert any(ln.startswith("incomplete: 1 check crashed") for ln in r.err.splitlines()), r.err
    js = run_cli(capsys, "validate", "--json", f)
    assert js.code == 2
    data = js.json()
    assert data["valid"] is False and data["incomplete"] is True
    (d,) = [d for d in data["diagnostics"] if d["code"] == "check-failed"]
    assert d["severity"] == "error" and "LoRA check" in d["message"] and "\n" not in d["message"]


def test_a_crashed_check_is_raised_with_debug_given_as_a_parameter(capsys, tmp_path, lora_check_crashes, monkeypatch):
    from llmctl.cli import main
    from llmctl.validate import validate_paths

    monkeypatch.delenv("LLMCTL_DEBUG", raising=False)
    f = tmp_path / "m.yaml"
    f.write_text(MODEL)
    verdict = validate_paths([f])
    assert verdict.incomplete and not verdict.valid and [d.code for d in verdict.failed_checks] == ["check-failed"]
    with pytest.raises(KeyError):
        validate_paths([f], debug=True)
    with pytest.raises(KeyError):  # the CLI passes --debug to the core, wherever it stands
        main(["validate", str(f), "--debug"])
    assert "LLMCTL_DEBUG" not in os.environ  # and never through the environment


def test_strict_is_a_parameter_of_the_core(tmp_path):
    from llmctl.errors import ValidationFailed
    from llmctl.validate import load_deployable, validate_paths

    serve = _serve(tmp_path)
    model = tmp_path / "model_config" / "qwen.yaml"
    model.write_text(MODEL.replace("min_replicas: 1", "min_replicas: 0"))  # scale to zero: deploys, a warning
    lax, strict = validate_paths([serve]), validate_paths([serve], strict=True)
    assert lax.warnings and not lax.errors and lax.valid and not lax.incomplete
    assert not strict.valid and strict.failing == strict.warnings
    assert load_deployable(serve)["applications"][0]["name"] == "llm_app"
    with pytest.raises(ValidationFailed):
        load_deployable(serve, strict=True)


def test_up_refuses_an_incomplete_validation_before_any_cluster(capsys, tmp_path, lora_check_crashes, monkeypatch):
    from llmctl.errors import ValidationIncomplete
    from llmctl.launch import deploy
    from llmctl.launch.prepare import prepare

    serve = _serve(tmp_path)
    with pytest.raises(ValidationIncomplete) as e:
        prepare(serve)
    assert e.value.exit_code == 2
    first = e.value.message.splitlines()[0]
    assert first.startswith(f"{serve}: validation is incomplete, so it is not used: ") and "LoRA check crashed" in first
    assert f"`llmctl validate --debug {serve}` shows the traceback" in first

    def no_cluster(*args, **kwargs):
        raise AssertionError("up went on to the cluster after an incomplete validation")

    monkeypatch.setattr(deploy, "connect", no_cluster)
    r = run_cli(capsys, "up", serve, "--no-preflight")
    assert r.code == 2, r.err
    assert r.err.splitlines()[0].startswith("error: ") and "validation is incomplete" in r.err.splitlines()[0]
    assert "Traceback" not in r.err and "internal error" not in r.err


def test_gen_config_refuses_to_write_what_a_crashed_check_did_not_check(capsys, tmp_path, lora_check_crashes):
    r = run_cli(capsys, "gen-config", "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "L4", "--yes",
                "--output-dir", tmp_path / "out")
    assert r.code == 2 and "LoRA check crashed" in r.err, r.err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("*.yaml"))
