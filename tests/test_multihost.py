"""A real two-host Ray cluster (issues 9, 22, 38): head and worker in their own
network namespaces, llmctl outside both, talking to them over a private link
only. Both nodes run Ray's token authentication (the token in a 0600 file,
RAY_AUTH_TOKEN_PATH); llmctl reaches them with ``--address`` and
``--ray-token-env`` only, no RAY_AUTH_TOKEN anywhere. The worker declares a
custom resource the app's config requests, so the replica (a real vLLM CPU
engine) runs on the worker node.

One app, generated with ``--api-key-env`` (the key in the nodes' environment),
goes through its whole life in one test: up, chat, status by every address
form, logs, ``check --security``, bench, an in-place change, history,
rollback, the Python API's counterparts, down. A second cluster of two hosts
with one logical H100 each shows where Ray places a replica larger than a
node."""

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

from multihost import two_hosts
from helpers import llmctl

pytestmark = [pytest.mark.cluster, pytest.mark.own_cluster, pytest.mark.engine]

WORKER_RESOURCE = "llmctl_worker_node"
H100 = "accelerator_type:H100"
RAY_TOKEN = secrets.token_hex(32)
KEY_VAR, KEY = "LLMCTL_MH_API_KEY", "mh-key-" + secrets.token_hex(16)
ENV = {"MH_RAY_TOKEN": RAY_TOKEN}  # what the shell running llmctl holds: the Ray token, under a name of its own


@pytest.fixture(scope="module")
def hosts():
    with two_hosts({"num_cpus": 2, "env": {KEY_VAR: KEY}},
                   {"resources": {WORKER_RESOURCE: 1}, "num_cpus": 3, "env": {KEY_VAR: KEY}}, ray_token=RAY_TOKEN) as h:
        yield h


@pytest.fixture
def no_local_token(tmp_path, monkeypatch):
    """This process and llmctl's children hold neither the API key nor a Ray
    token (no RAY_AUTH_TOKEN*, no ~/.ray/auth_token): only ``--ray-token-env``."""
    monkeypatch.delenv(KEY_VAR, raising=False)
    for var in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


def _app(tmp_path, tiny_model, name: str, resource: str, *extra: str) -> tuple:
    """gen-config of the tiny model for a remote cluster, its replica bound to
    the nodes that hold ``resource``: (serve file, model config file, its data)."""
    out = tmp_path / name
    r = llmctl("gen-config", "--model", tiny_model, "--gpu", "cpu", "--app-name", name, "--route-prefix", f"/{name}",
               "--http-host", "0.0.0.0", *extra, "--yes", "--output-dir", out)
    assert r.code == 0, r.err
    mc = next((out / "model_config").glob("*.yaml"))
    llm = yaml.safe_load(mc.read_text())
    for b in llm["placement_group_config"]["bundles"]:
        b[resource] = 1  # only the worker node has it
    mc.write_text(yaml.safe_dump(llm, sort_keys=False))
    return next(out.glob("serve_*.yaml")), mc, llm


def test_refused_without_the_token_and_before_deploying(hosts, tiny_model, tmp_path, no_local_token):
    addr = ["--address", hosts.dashboard_url, "--ray-token-env", "MH_RAY_TOKEN"]
    # the dashboard and job API refuse calls without the token; llmctl without it: exit 3, with the fix
    for path in ("/api/serve/applications/", "/api/jobs/", "/api/version"):
        assert httpx.get(hosts.dashboard_url + path, timeout=30).status_code == 401, path
    assert httpx.post(hosts.dashboard_url + "/api/jobs/", json={"entrypoint": "id"}, timeout=30).status_code == 401
    no = llmctl("status", "--address", hosts.dashboard_url)
    assert no.code == 3 and "--ray-token-env" in no.err, no.err
    st = llmctl("status", *addr, "--json", env=ENV)
    assert st.code == 0 and sorted(n["ip"] for n in st.json()["nodes"]) == sorted([hosts.head_ip, hosts.worker_ip]), st.err

    # the file as written for the local head (127.0.0.1) is refused on a remote cluster, with the fix
    serve, _, _ = _app(tmp_path, tiny_model, "remote", WORKER_RESOURCE)
    loop = serve.with_name("loopback.yaml")
    loop.write_text(serve.read_text().replace("host: 0.0.0.0", "host: 127.0.0.1"))
    refused = llmctl("up", loop, *addr, env=ENV)
    assert refused.code == 2 and "--http-host 0.0.0.0" in refused.err, refused.err
    # a config nothing on the cluster can place: refused before deploying, naming the resource
    bad, _, _ = _app(tmp_path, tiny_model, "nowhere", "llmctl_no_such_node")
    r = llmctl("up", bad, *addr, env=ENV)
    assert r.code == 2 and "llmctl_no_such_node" in r.err, r.err
    assert llmctl("status", *addr, "--json", env=ENV).json()["applications"] == []


def test_one_app_on_two_hosts_from_up_to_down(hosts, tiny_model, tmp_path, no_local_token):
    addr = ["--address", hosts.dashboard_url, "--ray-token-env", "MH_RAY_TOKEN"]
    serve, mc, llm = _app(tmp_path, tiny_model, "secure", WORKER_RESOURCE, "--api-key-env", KEY_VAR)
    t0 = time.monotonic()
    up = llmctl("up", serve, *addr, "--timeout", "900", env=ENV)
    took = time.monotonic() - t0
    assert up.code == 0, (up.out, up.err)
    assert "secure is RUNNING" in up.out and "preflight: the cluster can hold it (2 node(s)" in up.err
    assert "uploaded to the cluster" in up.err and KEY not in up.out + up.err and RAY_TOKEN not in up.out + up.err
    assert "/models not checked: it needs the API key" in up.err  # the nodes hold it, this shell does not
    endpoint = f"http://{hosts.head_ip}:8000/secure"
    assert f"endpoint: {endpoint}/v1" in up.out

    # every route refuses a request without the key or with a wrong one; with it, a chat from outside both hosts
    for method, path in (("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("POST", "/tokenize"),
                         ("POST", "/v1/embeddings"), ("POST", "/invocations"), ("GET", "/openapi.json")):
        for headers in ({}, {"Authorization": "Bearer nope"}):
            got = httpx.request(method, endpoint + path, headers=headers, json={} if method == "POST" else None, timeout=60)
            assert got.status_code == 401 and got.json()["error"]["code"] == "invalid_api_key", (method, path)
    reply = httpx.post(endpoint + "/v1/chat/completions", headers={"Authorization": f"Bearer {KEY}"}, timeout=120,
                       json={"model": "tiny-llama", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["object"] == "chat.completion" and body["usage"]["completion_tokens"] > 0

    # the replica runs on the worker: Serve reports its node, and its log lines come from there
    st = llmctl("status", *addr, "--json", env=ENV)
    assert st.code == 0, st.err
    data = st.json()
    nodes = {n["ip"]: n for n in data["nodes"]}
    assert set(nodes) == {hosts.head_ip, hosts.worker_ip} and nodes[hosts.head_ip]["head"]
    assert all(n["state"] == "ALIVE" for n in nodes.values())
    (app,) = data["applications"]
    assert app["name"] == "secure" and app["endpoint"] == endpoint + "/v1"
    raw = httpx.get(f"{hosts.dashboard_url}/api/serve/applications/", timeout=30, headers=hosts.headers).json()
    replicas = raw["applications"]["secure"]["deployments"]["LLMServer:tiny-llama"]["replicas"]
    worker_id = next(n["node_id"] for n in data["nodes"] if n["ip"] == hosts.worker_ip)
    assert [r["node_id"] for r in replicas] == [worker_id]
    # the same cluster named by its GCS address and its Ray Client address: the token reaches Ray's own lookup
    for other in (f"{hosts.head_ip}:{hosts.GCS_PORT}", f"ray://{hosts.head_ip}:10001"):
        again = llmctl("status", "--address", other, "--ray-token-env", "MH_RAY_TOKEN", "--json", env=ENV)
        assert again.code == 0, (other, again.err)
        assert again.json()["dashboard_url"] == hosts.dashboard_url
        assert [a["endpoint"] for a in again.json()["applications"]] == [endpoint + "/v1"]
    logs = llmctl("logs", "secure", "--lines", "200", "--ray-token-env", "MH_RAY_TOKEN",
                  env={**ENV, "RAY_ADDRESS": f"{hosts.head_ip}:{hosts.GCS_PORT}"})
    assert logs.code == 0, logs.err
    assert "[replica LLMServer:tiny-llama" in logs.out and f"@{hosts.worker_ip}]" in logs.out, logs.out[-3000:]

    check = llmctl("security", "secure", *addr, "--api-key-env", "MH_KEY", "--json", env={**ENV, "MH_KEY": KEY})
    assert check.code == 0, check.out + check.err
    rows = check.json()["rows"]
    assert any(r["area"] == "leak" and "log API" in r["target"] for r in rows)
    assert KEY not in check.out and RAY_TOKEN not in check.out
    bench = llmctl("bench", "secure", *addr, "--requests", "2", "--concurrency", "1", "--max-tokens", "4",
                   "--api-key-env", "MH_KEY", "--json", env={**ENV, "MH_KEY": KEY})
    assert bench.code == 0 and bench.json()["summary"]["done"] == 2, bench.err

    # an in-place change (a second history entry), then rollback to the first
    llm["deployment_config"]["autoscaling_config"]["max_replicas"] = 2
    mc.write_text(yaml.safe_dump(llm, sort_keys=False))
    again = llmctl("up", serve, *addr, "--timeout", "600", env=ENV)
    assert again.code == 0 and "secure: in place" in again.err, (again.out, again.err)
    hist = llmctl("history", "secure", *addr, "--json", env=ENV)
    assert hist.code == 0 and [r["current"] for r in hist.json()["secure"]] == [False, True], hist.out + hist.err
    back = llmctl("rollback", "secure", *addr, "--yes", "--timeout", "600", env=ENV)
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
    """)], env={**os.environ, **ENV, "MH_KEY": KEY}, capture_output=True, text=True, timeout=600)
    assert api.returncode == 0, api.stderr[-3000:]
    assert json.loads(api.stdout.splitlines()[-1]) == {"apps": ["secure"], "entries": 3, "done": 2, "removed": ["secure"]}
    assert "RAY_AUTH_TOKEN" not in os.environ
    st = llmctl("status", *addr, "--json", env=ENV)
    assert st.code == 0 and st.json()["applications"] == [], st.out + st.err
    print(f"\ntwo hosts with token auth and an API key: up --address -> RUNNING in {took:.1f}s; "
          f"nodes {json.dumps({ip: n['proxy'] for ip, n in nodes.items()})}")


# Ray's own placement of an LLMConfig's engine workers, run as a Ray job on the cluster's head
PLACE = """
import json, sys
import ray, yaml
from ray.llm._internal.serve.core.configs.llm_config import LLMConfig
from ray.util.placement_group import placement_group, placement_group_table

engine = LLMConfig(**yaml.safe_load(open(sys.argv[1]))).get_engine_config()
ray.init()
pg = placement_group(engine.placement_bundles, strategy=engine.placement_strategy)
ray.get(pg.ready(), timeout=120)
ips = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
print("PLACED " + json.dumps({"strategy": engine.placement_strategy, "bundles": engine.placement_bundles,
                              "ips": [ips[n] for _, n in sorted(placement_group_table(pg)["bundles_to_node_id"].items())]}))
"""


@pytest.fixture
def gpu_hosts():
    """Two hosts that each declare one logical H100 (Ray schedules on counts;
    no engine runs here), for where a replica larger than a node goes."""
    with two_hosts({"num_cpus": 2, "num_gpus": 1, "resources": {H100: 1}},
                   {"resources": {H100: 1}, "num_cpus": 2, "num_gpus": 1}) as h:
        yield h


def test_a_pipeline_over_two_hosts_is_placed_one_stage_per_host(gpu_hosts, config_model, tmp_path):
    """A replica larger than a node, placed as Ray places it. vLLM's CPU engine
    cannot run one across hosts: Ray Serve LLM 2.60 gives a CPU-only LLMConfig
    vLLM's multiprocessing executor (``ray/llm/_internal/serve/engines/vllm/
    vllm_models.py``: CPUAccelerator -> EXECUTOR_BACKEND_MP), whose workers are
    processes of the replica's own node, and vLLM's CPU platform has no Ray
    device key (``CpuPlatform.ray_device_key == ''``; vLLM's Ray executor then
    raises "current platform cpu does not support ray"). So the layout
    gen-config writes for GPUs is shown with Ray's own placement-group API: each
    host declares one logical H100, gen-config writes TP 1 x PP 2 for nodes of
    one GPU, Ray's LLMConfig turns it into its bundles and strategy, and Ray
    places the two bundles one per host; llmctl's preflight on the live cluster
    agrees that it can start."""
    out = tmp_path / "pp2"
    r = llmctl("gen-config", "--model", config_model, "--gpu", "H100", "--tp", "1", "--pp", "2", "--gpus-per-node", "1",
               "--http-host", "0.0.0.0", "--yes", "-o", out)
    assert r.code == 0, r.err
    serve = next(out.glob("serve_*.yaml"))
    mc = next((out / "model_config").glob("*.yaml"))
    assert yaml.safe_load(mc.read_text())["placement_group_config"] == {"bundle_per_worker": {"GPU": 1}, "strategy": "PACK"}
    addr = ["--address", gpu_hosts.dashboard_url]
    check = llmctl("check", serve, *addr, "--no-versions", "--json")
    assert check.code == 0, check.out + check.err
    script = tmp_path / "place.py"
    script.write_text(PLACE)
    job = httpx.post(f"{gpu_hosts.dashboard_url}/api/jobs/", timeout=30,
                     json={"entrypoint": f"python {script} {mc}"}).json()["submission_id"]
    deadline = time.monotonic() + 300
    while (status := httpx.get(f"{gpu_hosts.dashboard_url}/api/jobs/{job}", timeout=30).json()["status"]) not in (
            "SUCCEEDED", "FAILED", "STOPPED"):
        assert time.monotonic() < deadline, status
        time.sleep(1)
    logs = httpx.get(f"{gpu_hosts.dashboard_url}/api/jobs/{job}/logs", timeout=30).json()["logs"]
    assert status == "SUCCEEDED", logs[-3000:]
    placed = json.loads(next(ln for ln in logs.splitlines() if ln.startswith("PLACED "))[len("PLACED "):])
    assert placed["strategy"] == "PACK" and len(placed["bundles"]) == 2 and all(b["GPU"] == 1 for b in placed["bundles"])
    assert sorted(placed["ips"]) == sorted([gpu_hosts.head_ip, gpu_hosts.worker_ip]), placed
    print(f"\nTP 1 x PP 2 over two hosts: Ray placed the stages on {placed['ips']}")
