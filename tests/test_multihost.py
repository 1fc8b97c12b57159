"""A real two-host Ray cluster (issue 9): head and worker in their own network
namespaces, llmctl outside both, talking to them over a private link only.
The worker declares a custom resource the tiny model's config requests, so
the replica (a real vLLM CPU engine) runs on the worker node."""

from __future__ import annotations

import json
import time

import httpx
import pytest
import yaml

from multihost import NoNamespaces, TwoHosts
from helpers import llmctl

pytestmark = [pytest.mark.cluster, pytest.mark.own_cluster, pytest.mark.engine]

WORKER_RESOURCE = "llmctl_worker_node"


@pytest.fixture(scope="module")
def hosts():
    h = TwoHosts()
    try:
        try:
            h.create()
        except NoNamespaces as e:
            pytest.skip(f"no network namespaces here: {e}")
        h.start_head(num_cpus=2)
        h.start_worker({WORKER_RESOURCE: 1}, num_cpus=3)
        yield h
    finally:
        h.destroy()


def _app(tmp_path, tiny_model, name: str, resource: str) -> tuple:
    out = tmp_path / name
    r = llmctl("gen-config", "--model", tiny_model, "--gpu", "cpu", "--app-name", name, "--route-prefix", f"/{name}",
               "--http-host", "0.0.0.0", "--yes", "--output-dir", out)
    assert r.code == 0, r.err
    serve = next(out.glob("serve_*.yaml"))
    mc = next((out / "model_config").glob("*.yaml"))
    llm = yaml.safe_load(mc.read_text())
    for b in llm["placement_group_config"]["bundles"]:
        b[resource] = 1  # only the worker node has it
    mc.write_text(yaml.safe_dump(llm, sort_keys=False))
    return serve, out


def test_two_hosts_up_chat_logs_status_down(hosts, tiny_model, tmp_path):
    assert sorted(hosts.alive_nodes()) == sorted([hosts.head_ip, hosts.worker_ip])
    addr = ["--address", hosts.dashboard_url]
    serve, _ = _app(tmp_path, tiny_model, "remote", WORKER_RESOURCE)

    # the file as written for the local head (127.0.0.1) is refused on a remote cluster, with the fix
    loop = serve.with_name("loopback.yaml")
    loop.write_text(serve.read_text().replace("host: 0.0.0.0", "host: 127.0.0.1"))
    refused = llmctl("up", loop, *addr)
    assert refused.code == 2 and "--http-host 0.0.0.0" in refused.err, refused.err

    t0 = time.monotonic()
    up = llmctl("up", serve, *addr, "--timeout", "600")
    took = time.monotonic() - t0
    assert up.code == 0, (up.out, up.err)
    assert "remote is RUNNING" in up.out and "preflight: the cluster can hold it (2 node(s)" in up.err
    endpoint = f"http://{hosts.head_ip}:8000/remote/v1"
    assert f"endpoint: {endpoint}" in up.out

    # a chat completion through the endpoint llmctl printed, from outside both hosts
    reply = httpx.post(f"{endpoint}/chat/completions", timeout=120, json={
        "model": "tiny-llama", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["object"] == "chat.completion" and body["usage"]["completion_tokens"] > 0

    # the replica runs on the worker: Serve reports its node, and its log lines come from there
    st = llmctl("status", *addr, "--json")
    assert st.code == 0, st.err
    data = st.json()
    nodes = {n["ip"]: n for n in data["nodes"]}
    assert set(nodes) == {hosts.head_ip, hosts.worker_ip} and nodes[hosts.head_ip]["head"]
    assert all(n["state"] == "ALIVE" for n in nodes.values())
    (app,) = [a for a in data["applications"] if a["name"] == "remote"]
    assert app["endpoint"] == endpoint
    raw = httpx.get(f"{hosts.dashboard_url}/api/serve/applications/", timeout=30).json()
    replicas = raw["applications"]["remote"]["deployments"]["LLMServer:tiny-llama"]["replicas"]
    worker_id = next(n["node_id"] for n in data["nodes"] if n["ip"] == hosts.worker_ip)
    assert [r["node_id"] for r in replicas] == [worker_id]
    # the same cluster named by its GCS address and its Ray Client address (flag and RAY_ADDRESS)
    for other in (["--address", f"{hosts.head_ip}:{hosts.GCS_PORT}"], ["--address", f"ray://{hosts.head_ip}:10001"]):
        again = llmctl("status", *other, "--json")
        assert again.code == 0, (other, again.err)
        assert again.json()["dashboard_url"] == hosts.dashboard_url
        assert [a["endpoint"] for a in again.json()["applications"]] == [endpoint]
    logs = llmctl("logs", "remote", "--lines", "200", env={"RAY_ADDRESS": f"{hosts.head_ip}:{hosts.GCS_PORT}"})
    assert logs.code == 0, logs.err
    assert "[replica LLMServer:tiny-llama" in logs.out and f"@{hosts.worker_ip}]" in logs.out, logs.out[-3000:]

    # a config nothing on the cluster can place: refused before deploying, naming the resource
    bad, _ = _app(tmp_path, tiny_model, "nowhere", "llmctl_no_such_node")
    r = llmctl("up", bad, *addr)
    assert r.code == 2 and "llmctl_no_such_node" in r.err, r.err
    assert "nowhere" not in [a["name"] for a in llmctl("status", *addr, "--json").json()["applications"]]

    down = llmctl("down", "remote", *addr)
    assert down.code == 0, down.err
    after = llmctl("status", *addr, "--json").json()
    assert "remote" not in [a["name"] for a in after["applications"]]
    print(f"\ntwo hosts: up --address -> RUNNING in {took:.1f}s; "
          f"nodes {json.dumps({ip: n['proxy'] for ip, n in nodes.items()})}")
