"""Issue 22 on the two-host network-namespace cluster: both nodes run with
Ray's token authentication (the token in a 0600 file, RAY_AUTH_TOKEN_PATH),
llmctl outside both reaches them with ``--address`` and ``--ray-token-env``;
an app generated with ``--api-key-env`` (the key in the nodes' environment)
refuses its routes without the key, serves with it, and ``check --security``
passes on it."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import textwrap
import time

import httpx
import pytest
import yaml

from multihost import NoNamespaces, TwoHosts
from helpers import llmctl

pytestmark = [pytest.mark.cluster, pytest.mark.own_cluster, pytest.mark.engine]

WORKER_RESOURCE = "llmctl_worker_node"
RAY_TOKEN = secrets.token_hex(32)
KEY_VAR, KEY = "LLMCTL_MH_API_KEY", "mh-key-" + secrets.token_hex(16)


@pytest.fixture(scope="module")
def hosts():
    h = TwoHosts(ray_token=RAY_TOKEN)
    try:
        try:
            h.create()
        except NoNamespaces as e:
            pytest.skip(f"no network namespaces here: {e}")
        h.start_head(num_cpus=2, env={KEY_VAR: KEY})
        h.start_worker({WORKER_RESOURCE: 1}, num_cpus=3, env={KEY_VAR: KEY})
        yield h
    finally:
        h.destroy()


def test_two_hosts_with_ray_token_and_api_key(hosts, tiny_model, tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_VAR, raising=False)
    for var in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ray/auth_token
    env = {"MH_RAY_TOKEN": RAY_TOKEN}
    addr = ["--address", hosts.dashboard_url, "--ray-token-env", "MH_RAY_TOKEN"]
    # the dashboard and job API refuse calls without the token; llmctl without it: exit 3, with the fix
    for path in ("/api/serve/applications/", "/api/jobs/", "/api/version"):
        assert httpx.get(hosts.dashboard_url + path, timeout=30).status_code == 401, path
    assert httpx.post(hosts.dashboard_url + "/api/jobs/", json={"entrypoint": "id"}, timeout=30).status_code == 401
    no = llmctl("status", "--address", hosts.dashboard_url)
    assert no.code == 3 and "--ray-token-env" in no.err, no.err
    st = llmctl("status", *addr, "--json", env=env)
    assert st.code == 0 and len(st.json()["nodes"]) == 2, st.err
    # the GCS address too: the token reaches Ray's own lookup of the dashboard
    gcs = llmctl("status", "--address", f"{hosts.head_ip}:{hosts.GCS_PORT}", "--ray-token-env", "MH_RAY_TOKEN", "--json", env=env)
    assert gcs.code == 0 and gcs.json()["dashboard_url"] == hosts.dashboard_url, gcs.err

    out = tmp_path / "secure"
    r = llmctl("gen-config", "--model", tiny_model, "--gpu", "cpu", "--app-name", "secure", "--route-prefix", "/secure",
               "--http-host", "0.0.0.0", "--api-key-env", KEY_VAR, "--yes", "--output-dir", out)
    assert r.code == 0, r.err
    mc = next((out / "model_config").glob("*.yaml"))
    llm = yaml.safe_load(mc.read_text())
    for b in llm["placement_group_config"]["bundles"]:
        b[WORKER_RESOURCE] = 1
    mc.write_text(yaml.safe_dump(llm, sort_keys=False))
    t0 = time.monotonic()
    up = llmctl("up", next(out.glob("serve_*.yaml")), *addr, "--timeout", "900", env=env)
    took = time.monotonic() - t0
    assert up.code == 0, (up.out, up.err)
    assert "uploaded to the cluster" in up.err and KEY not in up.out + up.err and RAY_TOKEN not in up.out + up.err
    assert "/models not checked: it needs the API key" in up.err  # the nodes hold it, this shell does not
    endpoint = f"http://{hosts.head_ip}:8000/secure"
    for method, path in (("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("POST", "/tokenize"),
                         ("POST", "/v1/embeddings"), ("POST", "/invocations"), ("GET", "/openapi.json")):
        for headers in ({}, {"Authorization": "Bearer nope"}):
            got = httpx.request(method, endpoint + path, headers=headers, json={} if method == "POST" else None, timeout=60)
            assert got.status_code == 401 and got.json()["error"]["code"] == "invalid_api_key", (method, path)
    auth = {"Authorization": f"Bearer {KEY}"}
    reply = httpx.post(endpoint + "/v1/chat/completions", headers=auth, timeout=120,
                       json={"model": "tiny-llama", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8})
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] > 0, reply.text
    check = llmctl("check", "--security", "secure", *addr, "--api-key-env", "MH_KEY", "--json",
                   env={**env, "MH_KEY": KEY})
    assert check.code == 0, check.out + check.err
    rows = check.json()["rows"]
    assert any(r["area"] == "leak" and "log API" in r["target"] for r in rows)
    assert KEY not in check.out and RAY_TOKEN not in check.out
    # every other command with the token named by --ray-token-env only (issue 38)
    logs = llmctl("logs", "secure", *addr, "--lines", "5", env=env)
    assert logs.code == 0 and "[replica LLMServer:" in logs.out, logs.err
    bench = llmctl("bench", "secure", *addr, "--requests", "2", "--concurrency", "1", "--max-tokens", "4",
                   "--api-key-env", "MH_KEY", "--json", env={**env, "MH_KEY": KEY})
    assert bench.code == 0 and bench.json()["summary"]["done"] == 2, bench.err
    llm["deployment_config"]["autoscaling_config"]["max_replicas"] = 2  # an in-place change: a second history entry
    mc.write_text(yaml.safe_dump(llm, sort_keys=False))
    again = llmctl("up", next(out.glob("serve_*.yaml")), *addr, "--timeout", "600", env=env)
    assert again.code == 0 and "secure: in place" in again.err, (again.out, again.err)
    hist = llmctl("history", "secure", *addr, "--json", env=env)
    assert hist.code == 0 and [r["current"] for r in hist.json()["secure"]] == [False, True], hist.out + hist.err
    back = llmctl("rollback", "secure", *addr, "--yes", "--timeout", "600", env=env)
    assert back.code == 0 and "rolling secure back to entry 1" in back.err, (back.out, back.err)
    # the Python API's counterparts, in a process whose environment has no RAY_AUTH_TOKEN either
    api = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import json, llmctl
        kw = dict(address={hosts.dashboard_url!r}, ray_token_env="MH_RAY_TOKEN")
        st = llmctl.status(**kw)
        rows = llmctl.history("secure", **kw)["secure"]
        res = llmctl.bench("secure", requests=2, concurrency=1, max_tokens=4, api_key_env="MH_KEY", **kw)
        plan = llmctl.rollback("secure", to=2, dry_run=True, **kw)
        gone = llmctl.down("secure", **kw)
        print(json.dumps({{"apps": [a.name for a in st.apps], "entries": len(rows), "done": res.done,
                           "removed": gone.removed}}))
    """)], env={**os.environ, **env, "MH_KEY": KEY}, capture_output=True, text=True, timeout=600)
    assert api.returncode == 0, api.stderr[-3000:]
    assert json.loads(api.stdout.splitlines()[-1]) == {"apps": ["secure"], "entries": 3, "done": 2, "removed": ["secure"]}
    assert "RAY_AUTH_TOKEN" not in os.environ
    st = llmctl("status", *addr, "--json", env=env)
    assert st.code == 0 and st.json()["applications"] == [], st.out + st.err
    print(f"\ntwo hosts with token auth and an API key: up --address -> RUNNING in {took:.1f}s")
