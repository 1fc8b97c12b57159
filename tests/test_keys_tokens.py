"""Keys and tokens (issue 38): the API-key ingress fails closed below its
minimum key length (one rule, MIN_KEY_CHARS of the module the nodes run), and
`up` and `check --security` report a short key; the local head's HF-token
hand-over checks the in-memory file it writes to and names the real failure;
the HF token goes to a head only when an app needs it; a system without memfd
(macOS) gets one line saying to use --address. No Ray cluster is started."""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest
import yaml

from helpers import run_cli
from llmctl.errors import UsageError
from llmctl.launch import apikey, tokens

MODEL = {"model_loading_config": {"model_id": "qwen", "model_source": "Qwen/Qwen2.5-0.5B-Instruct"},
         "accelerator_type": "L4", "engine_kwargs": {"max_model_len": 4096},
         "deployment_config": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 1}}}


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


def _serve(tmp_path: Path, model: dict | None = None, key_env: str | None = None) -> Path:
    args: dict = {"llm_configs": [model or MODEL]}
    if key_env:
        args["ingress_cls_config"] = {"ingress_cls": "llmctl_apikey:ApiKeyIngress",
                                      "ingress_extra_kwargs": {"api_key_env": key_env}}
    f = tmp_path / "serve.yaml"
    f.write_text(yaml.safe_dump({"applications": [{"name": "chat", "route_prefix": "/",
                                                   "import_path": "ray.serve.llm:build_openai_app", "args": args}]},
                                sort_keys=False))
    return f


@pytest.fixture
def no_cluster(monkeypatch):
    """`up` must stop before any cluster is reached or started."""
    from llmctl.launch import cluster, deploy

    def refuse(*args, **kwargs):
        raise AssertionError("up went on to start or reach a cluster")

    monkeypatch.setattr(cluster, "start_head", refuse)
    monkeypatch.setattr(deploy._address, "resolve_target", refuse)


# --------------------------------------------------------------------------
# API keys: one minimum length


@pytest.fixture
def ingress_module(monkeypatch):
    """The ingress module as the nodes load it, with Ray's OpenAiIngress stubbed
    (the real one imports vLLM: about a minute)."""
    stub = types.ModuleType("ray.serve.llm.ingress")
    stub.OpenAiIngress = type("OpenAiIngress", (), {})
    monkeypatch.setitem(sys.modules, "ray.serve.llm.ingress", stub)
    spec = importlib.util.spec_from_file_location("llmctl_apikey_keylen", apikey.SOURCE_DIR / "__init__.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_ingress_fails_closed_below_the_minimum_key_length(ingress_module, monkeypatch, tmp_path):
    mod = ingress_module
    assert apikey.min_key_chars() == mod.MIN_KEY_CHARS >= 16  # llmctl reads the nodes' rule, not a copy
    short, enough = "k" * (mod.MIN_KEY_CHARS - 1), "k" * mod.MIN_KEY_CHARS
    monkeypatch.setenv("LLMCTL_TEST_KEY", f"  {short} ")
    with pytest.raises(RuntimeError, match=rf"environment variable LLMCTL_TEST_KEY has {len(short)} characters, fewer "
                                           rf"than {mod.MIN_KEY_CHARS}.*refuses to start") as e:
        mod.load_key("LLMCTL_TEST_KEY", None)
    assert short not in str(e.value)  # never the key
    key_file = tmp_path / "key"
    key_file.write_text("x\n")
    with pytest.raises(RuntimeError, match=r"file .*key has 1 characters"):
        mod.load_key(None, str(key_file))
    monkeypatch.setenv("LLMCTL_TEST_KEY", enough)
    assert mod.load_key("LLMCTL_TEST_KEY", None) == enough.encode()
    with pytest.raises(RuntimeError, match="no API key on this node"):  # still closed without one
        mod.load_key("LLMCTL_SURELY_UNSET_VAR", str(tmp_path / "none"))


def test_up_refuses_a_short_key_before_deploying(capsys, tmp_path, monkeypatch, no_cluster):
    m = apikey.min_key_chars()
    serve = _serve(tmp_path, key_env="LLMCTL_TEST_KEY")
    monkeypatch.setenv("LLMCTL_TEST_KEY", "abc")
    r = run_cli(capsys, "up", serve)
    assert r.code == 2, r.err
    (line,) = [ln for ln in r.err.splitlines() if ln.startswith("error")]
    assert "deployed" not in r.err + r.out
    assert line.startswith("error: application 'chat': $LLMCTL_TEST_KEY holds a 3-character API key, and llmctl's ingress "
                           f"refuses keys shorter than {m} characters"), line
    assert "openssl rand" in line
    # a running local head that holds a short key: the same, naming the head
    config = yaml.safe_load(serve.read_text())
    with pytest.raises(UsageError, match="the local Ray head was started with it: .* holds a 3-character"):
        apikey.check_local_key(config, {"LLMCTL_TEST_KEY": "abc"}, {}, starting=False)
    assert apikey.check_local_key(config, {}, {"LLMCTL_TEST_KEY": "k" * m}, starting=True) == []


def test_check_security_reports_a_short_key(monkeypatch):
    from llmctl.launch import security
    from llmctl.launch.serve_api import AppSummary

    class Client:
        url = "http://127.0.0.1:1"

        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def status(self):
            return {"applications": {"chat": {}}}

    target = types.SimpleNamespace(dashboard_url=Client.url, ray_token=None, local=None)
    monkeypatch.setattr(security._address, "resolve_target", lambda *a, **k: target)
    monkeypatch.setattr(security, "ServeClient", Client)
    monkeypatch.setattr(security, "summarize", lambda status, url: [
        AppSummary(name="chat", status="RUNNING", message="", route_prefix="/", model_ids=["m"], endpoint=None,
                   deployments=[], api_key_env="LLMCTL_TEST_KEY")])
    for name in ("dashboard_rows", "leak_rows"):
        monkeypatch.setattr(security, name, lambda *a, **k: [])
    monkeypatch.setenv("LLMCTL_TEST_KEY", "abc")
    rep = security.security_check("chat")
    (row,) = [r for r in rep.findings if r.check == "API key length"]
    assert row.target == "chat" and "3-character API key" in row.result and "abc" not in row.result
    monkeypatch.setenv("LLMCTL_TEST_KEY", "k" * 40)
    rep = security.security_check("chat")
    assert not rep.findings and any(r.check == "API key length" for r in rep.rows)


# --------------------------------------------------------------------------
# the HF token on the local head


def test_which_apps_need_the_hf_token(tmp_path):
    def config(**mlc) -> dict:
        model = {**MODEL, "model_loading_config": {"model_id": "m", **mlc}}
        return yaml.safe_load(_serve(tmp_path, model).read_text())

    assert tokens.needs_hf_token(config(model_source="Qwen/Qwen2.5-0.5B-Instruct"))
    assert tokens.needs_hf_token(config())  # the id is the source
    assert not tokens.needs_hf_token(config(model_source="/models/qwen"))
    assert not tokens.needs_hf_token(config(model_source="s3://bucket/qwen"))
    assert not tokens.needs_hf_token(config(model_source={"bucket_uri": "s3://bucket/qwen"}))
    assert tokens.needs_hf_token(config(model_source="/models/qwen", tokenizer_source="Qwen/Qwen2.5-0.5B-Instruct"))
    named = {**MODEL, "model_loading_config": {"model_id": "m", "model_source": "/models/qwen"},
             "runtime_env": {"env_vars": {"HF_TOKEN": "${MY_HF_TOKEN}"}}}
    assert tokens.needs_hf_token(yaml.safe_load(_serve(tmp_path, named).read_text()))


@pytest.fixture
def head_file():
    """An in-memory token file held by this process, standing in for the head's."""
    fd = tokens.new_token_fd("")
    yield os.getpid(), fd
    os.close(fd)


def test_the_token_goes_to_the_head_only_when_an_app_needs_it(tmp_path, head_file):
    pid, fd = head_file
    local = {**MODEL, "model_loading_config": {"model_id": "m", "model_source": "/models/qwen"}}
    env = {"HF_TOKEN": "hf_user_token_0123456789"}
    assert tokens.hand_over(yaml.safe_load(_serve(tmp_path, local).read_text()), pid, fd, env) == ([], [], "")
    assert tokens.read(pid, fd) == ""  # no app needs it: the head holds none
    msgs, names, value = tokens.hand_over(yaml.safe_load(_serve(tmp_path).read_text()), pid, fd, env)
    assert value == env["HF_TOKEN"] and tokens.read(pid, fd) == env["HF_TOKEN"] and names == []
    assert "handed to the local head in memory" in msgs[0] and env["HF_TOKEN"] not in msgs[0]


def test_a_failed_hand_over_names_the_real_failure(tmp_path):
    named = {**MODEL, "runtime_env": {"env_vars": {"HF_TOKEN": "${MY_HF_TOKEN}"}}}
    config = yaml.safe_load(_serve(tmp_path, named).read_text())
    fd = tokens.new_token_fd("")
    os.close(fd)  # the head's descriptor is gone
    with pytest.raises(UsageError) as e:
        tokens.hand_over(config, os.getpid(), fd, {"MY_HF_TOKEN": "hf_x"})
    msg = e.value.message
    assert msg.startswith(f"cannot read the local Ray head's in-memory Hugging Face token file /proc/{os.getpid()}/fd/{fd}: "
                          "No such file or directory"), msg
    assert "started without" not in msg and "\n" not in msg and "send_token=True" in msg
    # an app that only downloads from the Hub: the same failure is a warning (an ungated model needs no token)
    msgs, _, _ = tokens.hand_over(yaml.safe_load(_serve(tmp_path).read_text()), os.getpid(), fd, {"HF_TOKEN": "hf_x"})
    assert msgs[0].startswith("warning: cannot read the local Ray head's in-memory Hugging Face token file")


def test_no_memfd_is_one_line_saying_to_use_address(capsys, tmp_path, monkeypatch, no_cluster):
    monkeypatch.delattr(os, "memfd_create", raising=False)
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(UsageError, match=r"cannot start a local Ray head on macOS: .* pass address with its dashboard URL"):
        tokens.require_memfd()
    r = run_cli(capsys, "up", _serve(tmp_path))
    assert r.code == 2, r.err
    (line,) = [ln for ln in r.err.splitlines() if ln.startswith("error")]
    assert line.startswith("error: llmctl cannot start a local Ray head on macOS: ") and "pass --address" in line, line
    assert "starting a local Ray head" not in r.err + r.out
    assert "AttributeError" not in r.err and "internal error" not in r.err
