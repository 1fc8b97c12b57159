"""The local Ray head llmctl owns: ports, binding, state file, stop by PID;
and the pieces of `up` that need no engine (token filling, resource maths)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import psutil
import pytest

from llmctl import launch
from llmctl.launch import address, cluster, serve_api, tokens, watch
from llmctl.errors import ClusterUnreachable, DeployFailed, UsageError

RAY_DEFAULTS = {6379, 8265, 10001, 8000, 9000, 52365}
SRC = Path(cluster.__file__).resolve().parent


# --------------------------------------------------------------------------
# the running head (session fixture)


@pytest.mark.cluster
def test_head_binds_loopback_only_and_no_default_ports(ray_head):
    import psutil

    pids = set(cluster.session_pids(ray_head.state.pid))
    assert ray_head.state.pid in pids
    listening = [c for c in psutil.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN and c.pid in pids]
    assert listening, "the head listens on nothing?"
    for c in listening:
        assert c.laddr.ip in ("127.0.0.1", "::ffff:127.0.0.1"), f"pid {c.pid} listens on {c.laddr}"
        assert c.laddr.port not in RAY_DEFAULTS, f"pid {c.pid} uses Ray's default port {c.laddr.port}"


@pytest.mark.cluster
def test_state_file(ray_head):
    data = json.loads((ray_head.home / "cluster.json").read_text())
    st = ray_head.state
    assert data["pid"] == st.pid and data["dashboard_url"] == st.dashboard_url
    assert data["dashboard_url"].startswith("http://127.0.0.1:")
    assert data["temp_dir"] == st.temp_dir and len(st.temp_dir) <= 30  # Ray's socket paths must stay short
    assert data["serve_http_port"] == st.ports["serve_http"]
    assert set(RAY_DEFAULTS).isdisjoint(v for k, v in st.ports.items())
    assert {"gcs", "dashboard", "client_server", "node_manager", "object_manager", "metrics_export",
            "dashboard_agent_listen", "dashboard_agent_grpc", "runtime_env_agent", "min_worker",
            "max_worker"} <= set(st.ports)  # fmt: skip
    assert data["pids"] and all(int(p) > 0 for p in data["pids"])
    assert Path(st.temp_dir, "session_latest", "logs").is_dir()


@pytest.mark.cluster
def test_found_from_state_and_second_start_refused(cluster_home):
    t = address.resolve_target(None)
    assert t.is_local and t.dashboard_url == cluster_home.dashboard_url
    t = address.resolve_target(cluster_home.state.gcs_address)  # a Ray address of the local head
    assert t.is_local and t.dashboard_url == cluster_home.dashboard_url
    with pytest.raises(Exception, match="already running"):
        cluster.start_head()


# --------------------------------------------------------------------------
# no cluster


def test_no_state_means_unreachable(llmctl_home):
    with pytest.raises(ClusterUnreachable) as e:
        address.resolve_target(None)
    assert e.value.exit_code == 3 and "llmctl up" in e.value.message


def test_stale_state_is_not_a_cluster(llmctl_home):
    stale = cluster.ClusterState(
        pid=2**22 + 12345, pid_create_time=1.0, ports={"gcs": 1, "serve_http": 2}, dashboard_url="http://127.0.0.1:1",
        gcs_address="127.0.0.1:1", temp_dir="/tmp/llmctl-none", serve_http_port=2, num_cpus=1, num_gpus=0,
        log_file="/dev/null", started_at=0.0,
    )  # fmt: skip
    cluster.save_state(stale)
    assert cluster.running_state() is None
    with pytest.raises(ClusterUnreachable):
        address.resolve_target(None)
    res = cluster.stop_head(stale)  # nothing to kill, nothing raised
    assert res.pids == [] and res.remaining == []


def test_state_file_of_the_previous_version_still_finds_its_head(llmctl_home):
    """State version 1 kept the leader's /proc start ticks; they are turned
    into its creation time, so a head started before an upgrade is still
    found (and stoppable), and a reused PID still is not taken for it."""
    import os
    import subprocess
    import sys
    import time

    import psutil

    head = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env={"PATH": "/bin", "MARK": "head"})
    me = psutil.Process(head.pid)
    deadline = time.monotonic() + 30
    while "-c" not in me.cmdline() and time.monotonic() < deadline:  # until the child has exec'd (its own environment)
        time.sleep(0.01)
    ticks = round((me.create_time() - psutil.boot_time()) * os.sysconf("SC_CLK_TCK"))
    old = {"pid": me.pid, "pid_start_ticks": ticks, "ports": {"gcs": 1, "serve_http": 2}, "dashboard_url": "http://127.0.0.1:1",
           "gcs_address": "127.0.0.1:1", "temp_dir": "/tmp/llmctl-none", "serve_http_port": 2, "num_cpus": 1, "num_gpus": 0,
           "log_file": "/dev/null", "started_at": 0.0, "version": 1}  # fmt: skip
    cluster.state_path().write_text(json.dumps(old))
    st = cluster.load_state()
    assert st.version == cluster.STATE_VERSION and abs(st.pid_create_time - me.create_time()) < 0.02
    try:
        assert cluster.is_alive(st) and cluster.head_environ(st)["MARK"] == "head"
        cluster.state_path().write_text(json.dumps({**old, "pid_start_ticks": ticks - 1000}))  # the PID, another process
        st = cluster.load_state()
        assert not cluster.is_alive(st) and cluster.cluster_pids(st) == [] and cluster.head_environ(st) is None
    finally:
        head.kill()
        head.wait()


def test_http_address_used_as_is(llmctl_home):
    t = address.resolve_target("http://10.0.0.5:8265/")
    assert t.dashboard_url == "http://10.0.0.5:8265" and not t.is_local
    # a Ray address where nothing listens: unreachable (exit 3), named, quickly
    with pytest.raises(ClusterUnreachable, match=r"no Ray cluster answers at 127\.0\.0\.1:1 "):
        address.resolve_target("ray://127.0.0.1:1")
    with pytest.raises(ClusterUnreachable, match=r"127\.0\.0\.1:1 "):
        address.resolve_target("127.0.0.1:1")
    with pytest.raises(UsageError, match="expected http://HOST:PORT"):
        address.resolve_target("ray://no-port")


# --------------------------------------------------------------------------
# ports


def test_ports_free_distinct_and_not_defaults(monkeypatch):
    monkeypatch.setenv("LLMCTL_PORT_RANGE", "26000-26999")
    for _ in range(5):
        ports = cluster.pick_ports()
        singles = [v for k, v in ports.items() if k not in ("min_worker", "max_worker")]
        assert len(set(singles)) == len(singles)
        assert all(26000 <= p <= 26999 for p in ports.values())
        assert ports["max_worker"] - ports["min_worker"] + 1 == cluster.WORKER_PORTS
        assert not set(singles) & set(range(ports["min_worker"], ports["max_worker"] + 1))
        assert RAY_DEFAULTS.isdisjoint(range(min(ports.values()), max(ports.values()) + 1))


@pytest.mark.parametrize("bad", ["26000", "a-b", "26000-26010"])
def test_bad_port_range(monkeypatch, bad):
    monkeypatch.setenv("LLMCTL_PORT_RANGE", bad)
    with pytest.raises(UsageError):
        cluster.pick_ports()


def test_never_ray_stop():
    """Ray's `stop` command kills every Ray cluster on the machine: llmctl must never run it."""
    for path in SRC.rglob("*.py"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            assert not re.search(r"""["']stop["']""", code) or "ray" not in code.lower(), f"{path}:{n}: {line}"
            assert not re.search(r"""["']ray\s+stop""", code), f"{path}:{n}: {line}"


# --------------------------------------------------------------------------
# preparing `up`: tokens from the environment


def _serve_with_token(tmp_path, tiny_model, value="${MY_HF_TOKEN}"):
    import yaml

    (tmp_path / "model_config").mkdir()
    llm = {
        "model_loading_config": {"model_id": "tiny-llama", "model_source": str(tiny_model)},
        "engine_kwargs": {"tensor_parallel_size": 1, "dtype": "float32", "enforce_eager": True, "max_model_len": 512},
        "placement_group_config": {"bundles": [{"CPU": 1}]},
        "runtime_env": {"env_vars": {"HF_TOKEN": value, "OTHER": "plain"}},
        "deployment_config": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 1}},
    }
    (tmp_path / "model_config" / "tiny-llama.yaml").write_text(yaml.safe_dump(llm))
    serve = tmp_path / "serve.yaml"
    serve.write_text(yaml.safe_dump({"applications": [{
        "name": "llm_app", "route_prefix": "/", "import_path": "ray.serve.llm:build_openai_app",
        "args": {"llm_configs": ["model_config/tiny-llama.yaml"]}}]}))  # fmt: skip
    return serve


def test_prepare_fills_token_and_inlines(tmp_path, monkeypatch, config_model):
    monkeypatch.chdir(tmp_path)  # Ray opens relative llm_configs paths from the working directory
    serve = _serve_with_token(tmp_path, config_model)
    p = launch.prepare(serve, environ={"MY_HF_TOKEN": "hf_secret_value"})
    (llm,) = p.config["applications"][0]["args"]["llm_configs"]
    assert isinstance(llm, dict), "model config must be inlined, not a path"
    assert llm["runtime_env"]["env_vars"] == {"HF_TOKEN": "hf_secret_value", "OTHER": "plain"}
    assert p.secrets == ["hf_secret_value"] and p.env_vars_used == ["MY_HF_TOKEN"]
    assert p.model_ids == {"llm_app": ["tiny-llama"]}
    # the file on disk still names the variable only
    assert "hf_secret_value" not in (tmp_path / "model_config" / "tiny-llama.yaml").read_text()
    assert serve_api.scrub("error: token hf_secret_value rejected", p.secrets) == "error: token *** rejected"


def test_prepare_unset_token_names_variable(tmp_path, monkeypatch, config_model):
    monkeypatch.chdir(tmp_path)  # Ray opens relative llm_configs paths from the working directory
    serve = _serve_with_token(tmp_path, config_model)
    with pytest.raises(UsageError) as e:
        launch.prepare(serve, environ={})
    assert "MY_HF_TOKEN" in e.value.message and e.value.exit_code == 2


def test_hand_over_token_to_the_local_head(tmp_path, monkeypatch, config_model):
    """The Hub token goes into the head's in-memory token file and its entry
    leaves the payload (Ray Serve LLM would copy a replica's HF_TOKEN into
    runtime_envs Ray logs); other references stay for Ray to fill."""
    import os

    monkeypatch.chdir(tmp_path)
    serve = _serve_with_token(tmp_path, config_model)
    fd = tokens.new_token_fd("")  # this process stands in for the head
    try:
        pid = os.getpid()
        with pytest.raises(UsageError, match=r"HF_TOKEN from the environment variable MY_HF_TOKEN, which is not set"):
            tokens.hand_over(launch.prepare(serve, send_tokens=False).config, pid, fd, {})
        p = launch.prepare(serve, send_tokens=False)
        msgs, names, value = tokens.hand_over(p.config, pid, fd, {"MY_HF_TOKEN": "hf_from_shell"})
        (llm,) = p.config["applications"][0]["args"]["llm_configs"]
        assert llm["runtime_env"]["env_vars"] == {"OTHER": "plain"}
        assert names == ["MY_HF_TOKEN"] and value == "hf_from_shell" and tokens.read(pid, fd) == "hf_from_shell"
        assert "hf_from_shell" not in " ".join(msgs) and "HF_TOKEN (from $MY_HF_TOKEN)" in msgs[0]
        # unset in this shell: the token the head holds is used, and said so
        msgs, _, value = tokens.hand_over(launch.prepare(serve, send_tokens=False).config, pid, fd, {})
        assert value == "hf_from_shell" and "already holds" in msgs[1]
        # a new one replaces it, with a warning
        msgs, _, value = tokens.hand_over(launch.prepare(serve, send_tokens=False).config, pid, fd, {"MY_HF_TOKEN": "hf_new"})
        assert value == "hf_new" and tokens.read(pid, fd) == "hf_new" and msgs[1].startswith("warning:")
    finally:
        os.close(fd)
    # a head without a token file (older llmctl): references go to Ray untouched
    p = launch.prepare(serve, send_tokens=False)
    assert tokens.hand_over(p.config, os.getpid(), None, {"MY_HF_TOKEN": "x"}) == ([], [], "")
    assert p.config["applications"][0]["args"]["llm_configs"][0]["runtime_env"]["env_vars"]["HF_TOKEN"] == "${MY_HF_TOKEN}"


def test_user_token_as_huggingface_hub_reads_it(tmp_path):
    f = tmp_path / "token"
    f.write_text("hf_from_file\n")
    assert tokens.user_token({"HF_TOKEN": " hf_env ", "HF_TOKEN_PATH": str(f)}) == "hf_env"
    assert tokens.user_token({"HUGGING_FACE_HUB_TOKEN": "hf_old"}) == "hf_old"
    assert tokens.user_token({"HF_TOKEN_PATH": str(f)}) == "hf_from_file"
    (tmp_path / "hub").mkdir()
    (tmp_path / "hub" / "token").write_text("hf_home")
    assert tokens.user_token({"HF_HOME": str(tmp_path / "hub")}) == "hf_home"
    assert tokens.user_token({"HF_TOKEN_PATH": str(tmp_path / "none")}) == ""
    env = tokens.head_environ({"HF_TOKEN": "a", "HUGGING_FACE_HUB_TOKEN": "b", "PATH": "/bin"}, "/tmp/llmctl-x")
    assert env == {"PATH": "/bin", "HF_TOKEN_PATH": "/tmp/llmctl-x/hf-token"}


def test_compose_keeps_other_apps_and_pins_local_http(tmp_path, monkeypatch, config_model):
    monkeypatch.chdir(tmp_path)
    serve = _serve_with_token(tmp_path, config_model)
    p = launch.prepare(serve, environ={"MY_HF_TOKEN": "x" * 8})
    other = {"name": "other", "route_prefix": "/other", "import_path": "m:app"}
    current = {"applications": {"other": {"deployed_app_config": other}}, "http_options": {"host": "0.0.0.0", "port": 8000}}
    local = cluster.ClusterState(
        pid=1, pid_create_time=1.0, ports={"serve_http": 26500, "serve_grpc": 26501}, dashboard_url="http://127.0.0.1:1",
        gcs_address="127.0.0.1:2", temp_dir="/tmp/x", serve_http_port=26500, num_cpus=8, num_gpus=0,
        log_file="/dev/null", started_at=0,
    )  # fmt: skip
    payload = launch.compose(p, current, local)
    assert [a["name"] for a in payload["applications"]] == ["other", "llm_app"]
    assert payload["http_options"] == {"host": "127.0.0.1", "port": 26500}
    assert payload["grpc_options"]["port"] == 26501
    clash = {"applications": {"other": {"deployed_app_config": {**other, "route_prefix": "/"}}}}
    with pytest.raises(UsageError, match="route_prefix"):
        launch.compose(p, clash, local)
    imperative = {"applications": {"other": {"deployed_app_config": None}}}
    with pytest.raises(DeployFailed, match="serve.run"):
        launch.compose(p, imperative, local)


# --------------------------------------------------------------------------
# resources and failure text


def test_missing_gpu_named():
    nodes = [{"state": "ALIVE", "resources_total": {"CPU": 8.0, "memory": 1e10, "node:127.0.0.1": 1.0}}]
    need = {"CPU": 1.0, "GPU": 1.0, "accelerator_type:A10G": 0.001}
    short = watch.missing_resources(need, nodes)
    assert short == {"GPU": 0.0, "accelerator_type:A10G": 0.0}
    text = watch._infeasible_text("gpu_app", "LLMServer:x", need, short, nodes)
    assert "needs GPU:1 (accelerator_type:A10G) but the cluster has GPU:0" in text
    assert watch.missing_resources({"CPU": 4.0}, nodes) is None


def test_missing_accelerator_type_only():
    nodes = [{"state": "ALIVE", "resources_total": {"CPU": 8.0, "GPU": 4.0, "accelerator_type:L4": 1.0}}]
    need = {"CPU": 1.0, "GPU": 1.0, "accelerator_type:A10G": 0.001}
    short = watch.missing_resources(need, nodes)
    assert short == {"accelerator_type:A10G": 0.0}
    assert "no node has that accelerator" in watch._infeasible_text("a", "d", need, short, nodes)


def test_reason_from_ray_traceback_message():
    msg = (
        "The deployment failed to start 3 times in a row. Error:\n\x1b[36mray::ServeReplica\x1b[39m (pid=42, ip=127.0.0.1)\n"
        '  File "x.py", line 1, in f\n    raise RuntimeError(traceback.format_exc()) from None\n'
        "RuntimeError: Traceback (most recent call last):\n  File \"y.py\", line 2, in g\n"
        "OSError: missing-models/tiny-llama is not a local folder and is not a valid model identifier\n"
    )
    assert launch.reason_from_message(msg).startswith("OSError: missing-models/tiny-llama is not a local folder")
    assert launch.reason_from_message("plain message") == "plain message"


def test_head_command_passes_num_gpus_only_when_given():
    """GPU detection is Ray's (CUDA_VISIBLE_DEVICES, MIG, accelerator_type):
    the head gets --num-gpus only for a number the user gave, 0 included."""
    ports = cluster.pick_ports()
    assert "--num-gpus" not in cluster._head_command(ports, "/tmp/x", 8, None)
    for n in (0, 2):
        cmd = cluster._head_command(ports, "/tmp/x", 8, n)
        assert cmd[cmd.index("--num-gpus") + 1] == str(n)


@pytest.mark.parametrize("user, expected", [(None, "1000"), ("", "1000"), ("5000", "5000")])
def test_head_exports_metrics_each_second_unless_the_user_says(monkeypatch, user, expected):
    """`top`'s 2 s refreshes need fresher metrics than Ray's 10 s default
    (tests/test_capacity_e2e.py sees it under load); a value already in the
    environment is the user's and wins."""
    if user is None:
        monkeypatch.delenv("RAY_metrics_report_interval_ms", raising=False)
    else:
        monkeypatch.setenv("RAY_metrics_report_interval_ms", user)
    assert cluster._ray_env()["RAY_metrics_report_interval_ms"] == expected


def test_vllm_ipc_sockets_go_in_the_heads_temp_dir_unless_the_user_says(monkeypatch):
    monkeypatch.delenv("VLLM_RPC_BASE_PATH", raising=False)
    assert cluster._ray_env("/tmp/llmctl-x")["VLLM_RPC_BASE_PATH"] == "/tmp/llmctl-x"
    assert "VLLM_RPC_BASE_PATH" not in cluster._ray_env()
    monkeypatch.setenv("VLLM_RPC_BASE_PATH", "/run/mine")
    assert cluster._ray_env("/tmp/llmctl-x")["VLLM_RPC_BASE_PATH"] == "/run/mine"


@pytest.mark.cluster
@pytest.mark.own_cluster
def test_down_cluster_stops_head_by_pid(llmctl_home, monkeypatch):
    """`llmctl down --cluster` stops a head llmctl started: every process of
    its session is gone, the state file and the private temp dir removed.
    The Hugging Face token of the shell that started it reaches no Ray
    process's environment, and the head holds none until an app needs it
    (a Hub model): then `up`'s hand-over puts it in the head's in-memory
    token file, which the Ray processes read (HF_TOKEN_PATH)."""
    import os
    import subprocess
    import sys

    token = "hf_shell_token_for_the_head_0123456789"
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", token)
    state = cluster.start_head(num_cpus=1)  # GPUs left to Ray's detection
    try:
        pids = cluster.session_pids(state.pid)
        assert len(pids) > 5
        import httpx

        assert "--num-gpus" not in psutil.Process(state.pid).cmdline() and state.num_gpus is None
        nodes = httpx.get(state.dashboard_url + "/nodes?view=summary", timeout=10, trust_env=False,
                          headers={"Authorization": f"Bearer {state.ray_token}"}).json()
        totals = [n["raylet"]["resourcesTotal"] for n in nodes["data"]["summary"]]
        assert totals and all("GPU" not in t and t["CPU"] == 1 for t in totals), totals  # Ray found none on this CPU box
        link = Path(state.temp_dir, "hf-token")
        assert link.is_symlink() and link.read_text() == "" and tokens.read(state.pid, state.token_fd) == ""
        local = {"applications": [{"name": "a", "import_path": "ray.serve.llm:build_openai_app", "args": {"llm_configs": [
            {"model_loading_config": {"model_id": "m", "model_source": "/models/local-copy"}}]}}]}
        assert tokens.hand_over(local, state.pid, state.token_fd, os.environ) == ([], [], "")  # no app needs it
        assert link.read_text() == ""
        hub = {"applications": [{"name": "a", "import_path": "ray.serve.llm:build_openai_app", "args": {"llm_configs": [
            {"model_loading_config": {"model_id": "m", "model_source": "meta-llama/Llama-3.1-8B-Instruct"}}]}}]}
        msgs, _, value = tokens.hand_over(hub, state.pid, state.token_fd, os.environ)
        assert value == token and msgs and link.read_text() == token and token not in json.dumps(state.to_json())
        checked = set()
        for pid in pids:
            try:
                env = dict(kv.split(b"=", 1) for kv in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in kv)
            except OSError:
                continue  # ended meanwhile
            if b"PATH" not in env:
                continue  # a process that set its title (setproctitle) wrote over its environ block: nothing to read
            assert b"HF_TOKEN" not in env and b"HUGGING_FACE_HUB_TOKEN" not in env, (pid, cluster._comm(pid))
            name = cluster._comm(pid)
            if name in ("ray", "gcs_server", "raylet"):  # helpers Ray starts with a filtered environment need not have it
                assert env.get(b"HF_TOKEN_PATH") == str(link).encode(), (pid, name)
            checked.add(name)
        assert {"ray", "gcs_server", "raylet"} <= checked, checked
    except BaseException:
        cluster.stop_head(state)
        raise
    assert tokens.write(state.pid, state.token_fd, "hf_replaced") and link.read_text() == "hf_replaced"
    p = subprocess.run([sys.executable, "-m", "llmctl", "down", "--cluster"], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "stopped the local Ray head" in p.stdout
    assert cluster.session_pids(state.pid) == []
    assert not any(Path(f"/proc/{pid}").exists() and cluster._session_id(pid) == state.pid for pid in pids)
    assert not (llmctl_home / "cluster.json").exists()
    assert not Path(state.temp_dir).exists()
    assert tokens.read(state.pid, state.token_fd) is None  # the token lived in memory only, and is gone
    assert state.ray_token_file and not Path(state.ray_token_file).exists()  # issue 22: the Ray token file goes with the head
    # nothing left to stop: idempotent, exit 0, says so
    p = subprocess.run([sys.executable, "-m", "llmctl", "down", "--cluster"], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "no local Ray head was running" in p.stdout


def test_a_dashboard_that_does_not_answer_is_a_timeout_not_no_cluster(tmp_path):
    """Issue 7: a cluster that takes the connection but does not answer in
    time is RequestTimeout (exit 1); nothing listening is ClusterUnreachable
    (exit 3). Through the CLI too: one line, no traceback."""
    import os
    import socket
    import subprocess
    import sys

    from llmctl.errors import RequestTimeout

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts (the kernel completes the handshake) and never answers
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    try:
        with pytest.raises(RequestTimeout) as e:
            serve_api.ServeClient(url, timeout=0.5).status()
        assert e.value.exit_code == 1 and url in e.value.message
        p = subprocess.run([sys.executable, "-m", "llmctl", "status", "--address", url], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=120, env={**os.environ, "LLMCTL_HOME": str(tmp_path)})
        assert p.returncode == 1, p.stderr
        assert p.stderr.startswith("error: ") and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    finally:
        silent.close()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    with pytest.raises(ClusterUnreachable) as e:
        serve_api.ServeClient(f"http://127.0.0.1:{port}", timeout=0.5).status()
    assert e.value.exit_code == 3


def test_a_head_that_fails_to_start_is_retried_once_with_twice_the_wait(llmctl_home, monkeypatch):
    """Ray's raylet has a fixed 30 s to register (``ray/_private/node.py``); on a
    busy machine it can miss it and ``ray start`` exits. The start is tried once
    more, waiting twice as long. Stand-ins for ``ray start``: the first exits
    with Ray's message, the second answers the dashboard's route only after
    6 s, longer than the 5 s given (so only the doubled wait, 10 s, catches it;
    4 s to spare for a Python start on a busy machine)."""
    import sys

    server = (
        "import http.server, sys, time; time.sleep(6)\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers(); self.wfile.write(b'{}')\n"
        "    def log_message(self, *a): pass\n"
        "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n"
    )
    failing = "print('Exception: The current node timed out during startup.'); raise SystemExit(1)"
    commands = []

    def fake(ports, *_args, **_kw):
        cmd = [sys.executable, "-c", failing] if not commands else [sys.executable, "-c", server, str(ports["dashboard"])]
        commands.append(cmd)
        return cmd

    monkeypatch.setattr(cluster, "_head_command", fake)
    state = cluster.start_head(num_cpus=1, timeout=5)
    try:
        assert len(commands) == 2 and cluster.load_state().pid == state.pid
    finally:
        assert not cluster.stop_head(state).remaining

    commands.clear()
    monkeypatch.setattr(cluster, "_head_command", lambda *a, **k: commands.append(1) or [sys.executable, "-c", failing])
    with pytest.raises(Exception, match=r"(?s)did not start \(2 attempts\).*timed out during startup"):
        cluster.start_head(num_cpus=1, timeout=1)
    assert len(commands) == 2 and cluster.load_state() is None


def _heads_of(home: Path) -> list[psutil.Process]:
    """The `ray start --head` processes started for this LLMCTL_HOME (they inherit it)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = p.info["cmdline"] or []
            if "start" in cmd and "--head" in cmd and p.environ().get("LLMCTL_HOME") == str(home):
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


@pytest.mark.cluster
@pytest.mark.own_cluster
@pytest.mark.engine
def test_two_ups_at_once_start_one_head_and_down_stops_it(tiny_model, tmp_path, llmctl_home):
    """Two `llmctl up` started together against one LLMCTL_HOME (two
    terminals, a CI job beside a user): one starts the head, the other waits
    for the start lock and deploys to that head; both succeed, one head, one
    token file and one app exist, and `down --cluster` leaves no process
    behind. The app scales from zero (``--min-replicas 0``): what is tested is
    who starts the head and where both deploy, so no vLLM engine starts (two
    engine starts killed half-way cost the lane about a core-minute). The
    history survives the head: after `down --cluster` and `up` (a new port
    block), `history` still lists the deployment."""
    import subprocess
    import sys

    from helpers import llmctl

    r = llmctl("gen-config", "--model", tiny_model, "--model-id", "tiny-twice", "--gpu", "cpu", "--min-replicas", "0",
               "--max-replicas", "1", "--yes", "-o", tmp_path)
    assert r.code == 0, r.err
    serve = next(tmp_path.glob("serve_*.yaml"))
    # --no-wait: what is tested is who starts the head and where both deploy
    ups = [subprocess.Popen([sys.executable, "-m", "llmctl", "up", str(serve), "--no-wait"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        results = [(p.wait(timeout=900), *p.communicate()) for p in ups]
        heads = _heads_of(llmctl_home)
        assert len(heads) == 1, [h.pid for h in heads]
        assert cluster.load_state().pid == heads[0].pid
        for code, out, err in results:
            assert code == 0, (out, err)
        started = [err for _, _, err in results if "started a local Ray head" in err]
        assert len(started) == 1, [e for _, _, e in results]
        assert len(list(llmctl_home.glob("ray-token-*"))) == 1
        st = llmctl("status", "--json")
        assert [a["name"] for a in st.json()["applications"]] == ["llm_app"], st.out + st.err  # both deployed it
        session = cluster.session_pids(heads[0].pid)
        first = llmctl("history", "--json")
        assert first.code == 0 and len(first.json()["llm_app"]) == 1, first.err
    finally:
        for p in ups:
            p.kill()
        down = llmctl("down", "--cluster")
    assert down.code == 0, down.err
    assert not _heads_of(llmctl_home) and not [p for p in session if psutil.pid_exists(p) and
                                                psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not list(llmctl_home.glob("ray-token*"))
    # a new head (a new port block) under the same LLMCTL_HOME keeps the history
    again = llmctl("up", serve, "--no-wait")
    try:
        assert again.code == 0, again.err
        h = llmctl("history", "--json")
        assert h.code == 0 and [r["n"] for r in h.json()["llm_app"]] == [1] and h.json()["llm_app"][0]["current"], h.out + h.err
    finally:
        assert llmctl("down", "--cluster").code == 0
