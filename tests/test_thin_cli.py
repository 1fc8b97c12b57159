"""Decisions the CLI used to make on its own live in the core (issue 39):
``gen-config --slo`` is ``generate(capacity=llmctl.capacity(...))``, the
``up --fix`` loop is ``llmctl.launch.fix.iter_up_fixing``, LoRA listing after
``up`` is ``llmctl.launch.lora.served_adapters``."""

from __future__ import annotations

import inspect

import pytest

import llmctl
from llmctl.errors import UsageError

from helpers import load_yaml, run_cli

SLO = "ttft_p95=500ms,itl_p95=40ms"


def test_generate_with_a_capacity_plan_is_gen_config_slo(tmp_path, capsys):
    """The Python API and the command line choose the same GPU, TP and replicas for the same targets."""
    table = llmctl.capacity("qwen3-0.6b", slo=SLO, rate=20, gpu="L4")
    gen = llmctl.generate("qwen3-0.6b", capacity=table, write_files=False)
    m = gen.spec.models[0]
    assert gen.capacity.startswith(f"capacity (estimate): {m.gpu.name} TP {m.tp}:")
    r = run_cli(capsys, "gen-config", "-m", "qwen3-0.6b", "--gpu", "L4", "--slo", SLO, "--rate", "20", "--yes", "--output-dir",
                str(tmp_path), "--json")
    assert r.code == 0, r.err
    assert gen.capacity in r.err
    (model_file,) = (tmp_path / "model_config").glob("*.yaml")
    doc = load_yaml(model_file)
    assert doc["accelerator_type"] == m.gpu.ray_type
    assert doc["engine_kwargs"]["tensor_parallel_size"] == m.tp
    assert doc["deployment_config"]["autoscaling_config"]["max_replicas"] == m.max_replicas


def test_a_capacity_plan_is_for_one_model():
    table = llmctl.capacity("qwen3-0.6b", slo=SLO, gpu="L4")
    with pytest.raises(UsageError) as e:
        llmctl.generate(["qwen3-0.6b", "qwen3-8b"], capacity=table, gpu="L4", write_files=False)
    assert str(e.value).startswith("slo: give exactly one model")


def test_the_fix_loop_and_lora_listing_are_core_functions():
    """The CLI's up calls them; nothing of theirs is left in llmctl/cli/up.py."""
    from llmctl.cli import up as cli_up
    from llmctl.launch.fix import iter_up_fixing
    from llmctl.launch.lora import served_adapters

    src = inspect.getsource(cli_up)
    assert "iter_up_fixing(" in src and "served_adapters(" in src
    assert "fixmod.plan(" not in src and "fixmod.apply(" not in src and "/models" not in src
    assert "approve" in inspect.signature(iter_up_fixing).parameters
    assert list(inspect.signature(served_adapters).parameters) == ["result", "serve_path"]


def test_up_takes_one_options_object_or_its_fields_as_keywords(capsys, tmp_path):
    """``up`` / ``iter_up`` / the fix loop take one UpOptions; its fields as keywords build it in one place."""
    from dataclasses import replace

    from llmctl.launch.deploy import UpOptions, iter_up, up
    from llmctl.launch.fix import iter_up_fixing

    base = UpOptions(address="http://h:8265", timeout=60, dry_run=True)
    assert UpOptions.of(base, timeout=30) == replace(base, timeout=30)
    assert UpOptions.of(base, address=None, ray_token_env=None) == base  # None keeps the object's
    assert UpOptions.of(address="x").address == "x" and UpOptions.of() == UpOptions()
    with pytest.raises(TypeError, match="unknown option.*tiemout"):
        next(iter_up(tmp_path / "serve.yaml", tiemout=3))
    with pytest.raises(TypeError, match="unknown option.*tiemout"):
        next(iter_up_fixing(tmp_path / "serve.yaml", approve=bool, tiemout=3))
    with pytest.raises(UsageError, match="timeout must be positive"):
        UpOptions(timeout=0)
    # up and iter_up cannot drift: the same parameters, up adds only on_event
    iu, u = inspect.signature(iter_up).parameters, inspect.signature(up).parameters
    assert [p for p in u if p != "on_event"] == list(iu)
    r = run_cli(capsys, "up", tmp_path / "serve.yaml", "--timeout", "0")
    assert (r.code, r.err.strip()) == (2, "error: --timeout must be positive (got 0)")


def test_security_is_a_command_and_check_security_its_alias(capsys, monkeypatch, tmp_path):
    """``llmctl security [APP]``; ``check --security`` does the same after a one-line note naming it."""
    monkeypatch.setenv("LLMCTL_HOME", str(tmp_path))
    new = run_cli(capsys, "security", "--address", "http://127.0.0.1:9", "--json")
    old = run_cli(capsys, "check", "--security", "--address", "http://127.0.0.1:9", "--json")
    assert new.code == old.code == 3, (new.err, old.err)  # no cluster there
    note, *rest = old.err.splitlines()
    assert note == "note: `llmctl check --security` is now `llmctl security`" and rest == new.err.splitlines()
    assert "llmctl security" not in new.err
    r = run_cli(capsys, "check", "serve.yaml", "--api-key-env", "KEY")
    assert r.code == 2 and "llmctl security" in r.err
    help_text = run_cli(capsys, "check", "--help").out
    assert "--security" not in help_text and "--api-key-env" not in help_text


def test_check_is_a_core_function_the_cli_renders():
    """``llmctl check`` calls llmctl.check (llmctl.launch.check) and renders its report; the API exports both checks."""
    from llmctl.cli import check as cli_check
    from llmctl.launch.check import CheckReport, check
    from llmctl.launch.security import security_check

    src = inspect.getsource(cli_check)
    assert "check(file, address=address, ray_token_env=ray_token_env" in src
    assert "preflight.check(" not in src and "store_check(" not in src and "load_deployable(" not in src
    assert llmctl.check is check and llmctl.check_security is security_check
    assert {"address", "ray_token_env", "versions"} <= set(inspect.signature(check).parameters)
    assert {"ok", "to_json"} <= set(dir(CheckReport))
