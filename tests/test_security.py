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
    assert tfile.parent == cluster_home.home and tfile.name.startswith(raytoken.TOKEN_FILE + "-")
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


# --------------------------------------------------------------------------
# part 2 without a cluster: the ingress's key check, gen-config, validate


def _asgi_app():
    fastapi = pytest.importorskip("fastapi")
    app = fastapi.FastAPI()

    @app.get("/v1/models")
    def models():
        return {"data": [{"id": "m"}]}

    @app.post("/tokenize")
    def tokenize():
        return {"tokens": [1]}

    return app


@pytest.mark.engine  # the module imports Ray's OpenAiIngress, which imports vLLM (about a minute here)
def test_ingress_key_check_refuses_every_path_without_the_key():
    pytest.importorskip("fastapi")
    from starlette.testclient import TestClient

    from llmctl.launch.apikey import SOURCE_DIR
    import importlib.util

    spec = importlib.util.spec_from_file_location("llmctl_apikey_under_test", SOURCE_DIR / "__init__.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # imports Ray's OpenAiIngress, as the replica does
    app = _asgi_app()
    app.add_middleware(mod.ApiKeyMiddleware, key=b"s3cret-key-0123456789")
    c = TestClient(app)
    for method, path in (("GET", "/v1/models"), ("POST", "/tokenize"), ("GET", "/docs"), ("GET", "/openapi.json"),
                         ("POST", "/invocations"), ("GET", "/nope")):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret-key-0123456789"},
                        {"Authorization": "s3cret-key-0123456789"}):
            r = c.request(method, path, headers=headers)
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", (method, path, headers)
            assert r.headers["www-authenticate"].startswith("Bearer")
    ok = {"Authorization": "Bearer s3cret-key-0123456789"}
    assert c.get("/v1/models", headers=ok).json() == {"data": [{"id": "m"}]}
    assert c.post("/tokenize", headers={"authorization": "bearer s3cret-key-0123456789"}).status_code == 200
    assert c.get("/nope", headers=ok).status_code == 404
    # fail closed: no key on the node, no ingress
    with pytest.raises(RuntimeError, match="refuses to start"):
        mod.load_key("LLMCTL_SURELY_UNSET_VAR", "/nonexistent/key")
    assert mod.load_key("LLMCTL_SURELY_UNSET_VAR", __file__)  # the file, when the variable is unset


def test_ingress_module_imports_nothing_of_llmctl():
    import ast

    from llmctl.launch.apikey import SOURCE_DIR

    tree = ast.parse((SOURCE_DIR / "__init__.py").read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(n.split(".")[0] == "llmctl" for n in names), names


def test_package_is_deterministic_and_holds_the_module():
    import io
    import zipfile

    from llmctl.launch import apikey

    uri, data = apikey.package()
    assert apikey.package() == (uri, data) and uri.startswith("gcs://_ray_pkg_") and uri.endswith(".zip")
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert "llmctl_apikey/__init__.py" in names


def test_gen_config_api_key_env_writes_the_ingress_and_validates(capsys, tmp_path, config_model):
    import yaml

    r = run_cli(capsys, "gen-config", "--model", config_model, "--gpu", "cpu", "--yes", "--api-key-env", "MY_KEY",
                "-o", tmp_path)
    assert r.code == 0, r.err
    serve = next(tmp_path.glob("serve_*.yaml"))
    app = yaml.safe_load(serve.read_text())["applications"][0]
    assert app["args"]["ingress_cls_config"] == {"ingress_cls": "llmctl_apikey:ApiKeyIngress",
                                                 "ingress_extra_kwargs": {"api_key_env": "MY_KEY"}}
    assert "export MY_KEY=" in r.out
    assert run_cli(capsys, "validate", serve).code == 0
    # no flag, no terminal: no key; a GPU app says so
    r = run_cli(capsys, "gen-config", "--model", config_model, "--gpu", "L4", "--yes", "-o", tmp_path / "gpu")
    assert r.code == 0 and "no API key" in r.err
    assert "ingress_cls_config" not in next((tmp_path / "gpu").glob("serve_*.yaml")).read_text()
    r = run_cli(capsys, "gen-config", "--model", config_model, "--gpu", "cpu", "--yes", "--api-key-env", "sk-live key",
                "-o", tmp_path / "bad")
    assert r.code == 2 and "--api-key-env" in r.err and "Traceback" not in r.err


@pytest.mark.parametrize("kwargs, fragment", [
    ({}, "needs api_key_env"),
    ({"api_key": "sk-123"}, "unknown argument"),
    ({"api_key_env": "sk-live 123"}, "not an environment variable name"),
    ({"api_key_file": "relative/key"}, "absolute path"),
])
def test_validate_knows_the_api_key_ingress(capsys, tmp_path, config_model, kwargs, fragment):
    import yaml

    assert run_cli(capsys, "gen-config", "--model", config_model, "--gpu", "cpu", "--yes", "--api-key-env", "K",
                   "-o", tmp_path).code == 0
    serve = next(tmp_path.glob("serve_*.yaml"))
    data = yaml.safe_load(serve.read_text())
    data["applications"][0]["args"]["ingress_cls_config"]["ingress_extra_kwargs"] = kwargs
    serve.write_text(yaml.safe_dump(data))
    r = run_cli(capsys, "validate", serve, "--json")
    assert r.code == 2, r.err
    found = r.json()["diagnostics"]
    assert any(d["code"] == "api-key" and fragment in d["message"] for d in found), found


# --------------------------------------------------------------------------
# part 4: KubeRay


def test_kuberay_manifest_mounts_the_api_key_from_the_secret(capsys, tmp_path):
    import yaml

    from llmctl.launch.apikey import SOURCE_DIR

    r = run_cli(capsys, "gen-config", "--model", "qwen2.5-7b-instruct", "--gpu", "L4", "--yes", "--kuberay",
                "--api-key-secret", "llm-api-key:key", "-o", tmp_path)
    assert r.code == 0, r.err
    manifest = next(tmp_path.glob("rayservice_*.yaml"))
    v = run_cli(capsys, "validate", manifest)
    assert v.code == 0, v.out + v.err
    docs = list(yaml.safe_load_all(manifest.read_text()))
    cm, rs = docs
    assert cm["kind"] == "ConfigMap" and cm["data"]["__init__.py"] == (SOURCE_DIR / "__init__.py").read_text()
    serve = yaml.safe_load(rs["spec"]["serveConfigV2"])
    icc = serve["applications"][0]["args"]["ingress_cls_config"]
    assert icc["ingress_cls"] == "llmctl_apikey:ApiKeyIngress"
    key_file = icc["ingress_extra_kwargs"]["api_key_file"]
    groups = [rs["spec"]["rayClusterConfig"]["headGroupSpec"], *rs["spec"]["rayClusterConfig"]["workerGroupSpecs"]]
    for g in groups:
        spec = g["template"]["spec"]
        c = spec["containers"][0]
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        vols = {v["name"]: v for v in spec["volumes"]}
        key_mount = next(m for p, m in mounts.items() if key_file.startswith(p + "/"))
        assert key_mount["readOnly"] and vols[key_mount["name"]]["secret"]["secretName"] == "llm-api-key"
        assert vols[key_mount["name"]]["secret"]["items"] == [{"key": "key", "path": key_file.rsplit("/", 1)[1]}]
        env = {e["name"]: e.get("value") for e in c["env"]}
        module_mount = next(m for p, m in mounts.items() if p == env["PYTHONPATH"] + "/llmctl_apikey")
        assert vols[module_mount["name"]]["configMap"]["name"] == cm["metadata"]["name"]
        assert not any("KEY" in n and n != "PYTHONPATH" for n in env)  # the key is never in the environment
    # a keyed serve file without a Secret: refused, naming the flag
    keyed = tmp_path / "keyed"
    assert run_cli(capsys, "gen-config", "--model", "qwen2.5-7b-instruct", "--gpu", "L4", "--yes", "--api-key-env", "K",
                   "-o", keyed).code == 0
    r = run_cli(capsys, "kuberay", next(keyed.glob("serve_*.yaml")), "--output", "-")
    assert r.code == 2 and "--api-key-secret" in r.err
    r = run_cli(capsys, "kuberay", next(keyed.glob("serve_*.yaml")), "--output", "-", "--api-key-secret", "no-colon")
    assert r.code == 2 and "--api-key-secret" in r.err and "NAME:KEY" in r.err


@pytest.mark.cluster
def test_security_command_and_its_old_spelling_on_the_session_head(cluster_home, capsys):
    """``llmctl security`` measures the head's dashboard (it keeps its token); ``check --security`` is the same
    after a one-line note; an app that is not there is one line, exit 2."""
    r = run_cli(capsys, "security", "--json")
    rows = r.json()["rows"]
    dash = {(row["target"], row["check"], row["finding"]) for row in rows if row["area"] == "dashboard"}
    assert dash and not any(finding for _, _, finding in dash)
    assert r.code == (2 if any(row["finding"] for row in rows) else 0), r.err
    old = run_cli(capsys, "check", "--security", "--json")
    assert old.err.splitlines()[0] == "note: `llmctl check --security` is now `llmctl security`"
    assert {(row["target"], row["check"], row["finding"]) for row in old.json()["rows"] if row["area"] == "dashboard"} == dash
    gone = run_cli(capsys, "security", "no-such-app")
    assert gone.code == 2 and gone.err.startswith("error: no application named 'no-such-app'") and len(gone.err.splitlines()) == 1
