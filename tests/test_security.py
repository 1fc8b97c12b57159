"""Issue 22: secure by default.

Part 1 — the local head runs with Ray's token authentication: its dashboard
(Serve, state, log and job APIs) refuses calls without the head's token, and
every llmctl call sends it; a remote cluster's token comes from
``--ray-token-env`` or Ray's own conventions.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import httpx
import psutil
import pytest

from helpers import run_cli
from llmctl.launch import address, cluster, raytoken

# --------------------------------------------------------------------------
# no cluster


def test_token_file_is_0600_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        p = raytoken.write_token_file(tmp_path / "sub" / "ray-token", "abc")
        assert stat.S_IMODE(p.stat().st_mode) == 0o600 and p.read_text() == "abc"
        raytoken.write_token_file(p, "def")  # replaced, still 0600
        assert stat.S_IMODE(p.stat().st_mode) == 0o600 and p.read_text() == "def"
    finally:
        os.umask(old)
    assert len({raytoken.new_token() for _ in range(20)}) == 20 and len(raytoken.new_token()) >= 32


def test_head_environment_names_the_token_file_only(tmp_path):
    env = raytoken.head_environ({"RAY_AUTH_TOKEN": "x", "RAY_AUTH_MODE": "disabled", "PATH": "/bin"}, tmp_path / "t")
    assert env == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(tmp_path / "t"), "PATH": "/bin"}


def test_remote_token_follows_rays_conventions(tmp_path):
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    env = {"HOME": str(home)}
    assert raytoken.remote_token(None, env) == (None, "")
    (home / ".ray" / "auth_token").write_text("from-home\n")
    assert raytoken.remote_token(None, env) == ("from-home", "~/.ray/auth_token")
    (tmp_path / "f").write_text("from-path")
    env["RAY_AUTH_TOKEN_PATH"] = str(tmp_path / "f")
    assert raytoken.remote_token(None, env)[0] == "from-path"
    env["RAY_AUTH_TOKEN"] = "from-env"
    assert raytoken.remote_token(None, env)[0] == "from-env"
    env["MINE"] = "named"
    assert raytoken.remote_token("MINE", env) == ("named", "$MINE")
    from llmctl.errors import UsageError

    with pytest.raises(UsageError) as e:
        raytoken.remote_token("UNSET_VAR", env)
    assert e.value.param == "ray_token_env" and e.value.exit_code == 2 and "UNSET_VAR" in e.value.message


def test_ray_token_env_flag_unset_is_exit_2(capsys, monkeypatch):
    monkeypatch.delenv("LLMCTL_NO_SUCH_TOKEN", raising=False)
    r = run_cli(capsys, "status", "--address", "http://127.0.0.1:9", "--ray-token-env", "LLMCTL_NO_SUCH_TOKEN")
    assert r.code == 2 and "--ray-token-env" in r.err and "Traceback" not in r.err, r.err
    assert len([ln for ln in r.err.splitlines() if ln.strip()]) == 1


# --------------------------------------------------------------------------
# the session's local head


PROTECTED = ("/api/serve/applications/", "/api/jobs/", "/api/v0/nodes?detail=1", "/api/v0/tasks?limit=10",
             "/api/v0/actors?limit=10", "/api/v0/runtime_envs", "/nodes?view=summary", "/api/version")


@pytest.mark.cluster
def test_local_head_dashboard_refuses_calls_without_its_token(cluster_home):
    st = cluster_home.state
    token = st.ray_token
    tfile = Path(st.ray_token_file)
    # a fresh random token, 0600, beside cluster.json, not in it
    assert tfile.parent == cluster_home.home and tfile.name == raytoken.TOKEN_FILE
    assert stat.S_IMODE(tfile.stat().st_mode) == 0o600 and token and len(token) >= 32
    assert token not in (cluster_home.home / "cluster.json").read_text()
    url = cluster_home.dashboard_url
    for path in PROTECTED:
        none = httpx.get(url + path, timeout=30, trust_env=False)
        wrong = httpx.get(url + path, timeout=30, trust_env=False, headers={"Authorization": "Bearer " + "0" * 64})
        right = httpx.get(url + path, timeout=30, trust_env=False, headers=cluster_home.headers)
        assert (none.status_code, wrong.status_code, right.status_code) == (401, 403, 200), path
    # the job API: no code runs without the token
    sid = "llmctl-security-probe"
    r = httpx.post(url + "/api/jobs/", json={"entrypoint": "echo pwned", "submission_id": sid}, timeout=30, trust_env=False)
    assert r.status_code == 401
    jobs = httpx.get(url + "/api/jobs/", timeout=30, trust_env=False, headers=cluster_home.headers).json()
    assert sid not in {j.get("submission_id") for j in jobs}
    # the log API
    node = httpx.get(url + "/api/v0/nodes?detail=1", headers=cluster_home.headers, timeout=30).json()["data"]["result"]["result"][0]
    logs = f"/api/v0/logs?node_id={node['node_id']}"
    assert httpx.get(url + logs, timeout=30).status_code == 401
    assert httpx.get(url + logs, timeout=30, headers=cluster_home.headers).status_code == 200


@pytest.mark.cluster
def test_local_head_token_never_on_a_command_line_in_an_environment_or_a_log(cluster_home):
    st = cluster_home.state
    token = st.ray_token
    seen = 0
    for pid in cluster.session_pids(st.pid):
        try:
            p = psutil.Process(pid)
            cmd = " ".join(p.cmdline())
            env = p.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        assert token not in cmd, (pid, p.name())
        assert token not in json.dumps(env) and "RAY_AUTH_TOKEN" not in env, (pid, p.name())
        if p.name() in ("ray", "gcs_server", "raylet"):
            assert env.get("RAY_AUTH_MODE") == "token" and env.get("RAY_AUTH_TOKEN_PATH") == st.ray_token_file
            seen += 1
    assert seen >= 3
    session = Path(st.temp_dir)
    leaked = [str(p) for p in session.rglob("*") if p.is_file() and not p.is_symlink() and token.encode() in p.read_bytes()]
    assert not leaked, leaked


@pytest.mark.cluster
def test_llmctl_sends_the_local_heads_token(cluster_home, capsys):
    r = run_cli(capsys, "status")
    assert r.code in (0, 1), r.err  # 1: some other test's app is not RUNNING; either way the dashboard answered
    assert cluster_home.state.ray_token_file in r.out and "Authorization: Bearer" in r.out
    assert cluster_home.state.ray_token not in r.out + r.err
    r = run_cli(capsys, "status", "--json")
    assert r.json()["ray_token_file"] == cluster_home.state.ray_token_file
    target = address.resolve_target(None)
    assert target.ray_token == cluster_home.state.ray_token
    from llmctl.launch.serve_api import ServeClient

    with ServeClient(target.dashboard_url, token=target.ray_token) as c:
        node_id = c.nodes()[0]["node_id"]
        assert c.list_logs(node_id)  # the log API
        from llmctl.launch import versions

        v = versions.learn(c)  # a job on the head (POST /api/jobs/, its logs, its cleanup)
    assert v.ray


@pytest.mark.cluster
def test_remote_cluster_token_from_flag_or_rays_conventions(cluster_home, tmp_path, monkeypatch, capsys):
    """The session's head seen as a remote cluster (another LLMCTL_HOME, no state)."""
    monkeypatch.setenv("LLMCTL_HOME", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ray/auth_token
    for var in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(var, raising=False)
    url = cluster_home.dashboard_url
    token = cluster_home.state.ray_token
    r = run_cli(capsys, "status", "--address", url)
    assert r.code == 3 and "asks for a Ray token" in r.err and "--ray-token-env" in r.err, r.err
    monkeypatch.setenv("RAY_AUTH_TOKEN", "f" * 64)
    r = run_cli(capsys, "status", "--address", url)
    assert r.code == 3 and "refused the Ray token" in r.err, r.err
    monkeypatch.setenv("MY_CLUSTER_TOKEN", token)
    r = run_cli(capsys, "status", "--address", url, "--ray-token-env", "MY_CLUSTER_TOKEN")
    assert r.code in (0, 1) and f"cluster: {url}" in r.out, r.err
    monkeypatch.delenv("RAY_AUTH_TOKEN")
    (tmp_path / "tok").write_text(token + "\n")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "tok"))
    r = run_cli(capsys, "status", "--address", url, "--json")
    assert r.code in (0, 1) and r.json()["dashboard_url"] == url and r.json()["ray_token_file"] is None
    assert token not in r.out + r.err
