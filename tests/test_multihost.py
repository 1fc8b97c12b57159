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
H100 = "accelerator_type:H100"


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
    h = TwoHosts()
    try:
        try:
            h.create()
        except NoNamespaces as e:
            pytest.skip(f"no network namespaces here: {e}")
        h.start_head(num_cpus=2, num_gpus=1, resources={H100: 1})
        h.start_worker({H100: 1}, num_cpus=2, num_gpus=1)
        yield h
    finally:
        h.destroy()


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
