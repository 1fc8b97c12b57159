"""Preflight (issue 11): what one replica asks Ray for, and whether a cluster
holds min_replicas / max_replicas of it, before anything is deployed.

The placement arithmetic is checked on node data written out by hand; the
verdicts are checked against real Ray heads: the session's CPU-only head and
a head that advertises 2 (logical) L4 GPUs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llmctl import compat
from llmctl.launch import preflight as P

from helpers import make_model_dir
from helpers import llmctl, write_app


def _gpu_llm(tp: int, mn: int = 1, mx: int = 1, acc: str = "L4", source: str = "/models/x") -> dict:
    return {
        "model_loading_config": {"model_id": f"tp{tp}", "model_source": source},
        "accelerator_type": acc,
        "engine_kwargs": {"tensor_parallel_size": tp, "max_model_len": 512},
        "deployment_config": {"max_ongoing_requests": 4,
                              "autoscaling_config": {"min_replicas": mn, "max_replicas": mx, "target_ongoing_requests": 2}},
    }


def _config(*llms: dict) -> dict:
    return {"applications": [{"name": "app", "route_prefix": "/", "import_path": "ray.serve.llm:build_openai_app",
                              "args": {"llm_configs": list(llms)}}]}


def test_replica_bundles_follow_ray_serve_llm():
    # TP 2 on L4: two {GPU 1, accelerator_type:L4 0.001} bundles, the replica actor's CPU 1 in the first
    bundles, strategy = P.replica_bundles(_gpu_llm(2))
    assert bundles == [{"GPU": 1.0, "accelerator_type:L4": 0.001, "CPU": 1.0}, {"GPU": 1.0, "accelerator_type:L4": 0.001}]
    assert strategy == "PACK"
    # CPU: the explicit bundle plus the actor's CPU: 2 CPUs per replica
    cpu = {"model_loading_config": {"model_id": "c"}, "placement_group_config": {"bundles": [{"CPU": 1}]}}
    assert P.replica_bundles(cpu)[0] == [{"CPU": 2.0}]


def _node(ip: str, **res: float) -> P.Node:
    return P.Node(ip, ip, dict(res), dict(res))


def test_placement_arithmetic_on_hand_written_nodes():
    two_l4 = [_node("10.0.0.1", CPU=8, GPU=2, **{"accelerator_type:L4": 2})]
    ok = P.check(_config(_gpu_llm(1, 1, 2)), None, nodes=two_l4)
    assert ok.ok and not ok.warnings  # 2 replicas of 1 GPU on 2 GPUs
    tp4 = P.check(_config(_gpu_llm(4)), None, nodes=two_l4)
    assert not tp4.ok and "GPU 4 per replica" in tp4.errors[0] and "GPU 2 free of 2" in tp4.errors[0]
    many = P.check(_config(_gpu_llm(1, 1, 8)), None, nodes=two_l4)
    assert many.ok and "max_replicas 8 is out of reach: the cluster holds 2 replicas" in many.warnings[0]
    wrong_gpu = P.check(_config(_gpu_llm(1, acc="H100")), None, nodes=two_l4)
    assert not wrong_gpu.ok and "no node has H100 GPUs" in wrong_gpu.errors[0]
    # free < total: the replicas would wait for other apps
    busy = [P.Node("n", "10.0.0.1", {"CPU": 8, "GPU": 2, "accelerator_type:L4": 2}, {"CPU": 8, "GPU": 0, "accelerator_type:L4": 2})]
    waits = P.check(_config(_gpu_llm(1)), None, nodes=busy)
    assert waits.ok and "other applications hold the rest" in waits.warnings[0]
    # TP 2 spread over two 1-GPU nodes: PACK places bundles on different nodes; STRICT_PACK cannot
    split = [_node("a", CPU=4, GPU=1, **{"accelerator_type:L4": 1}), _node("b", CPU=4, GPU=1, **{"accelerator_type:L4": 1})]
    assert P.check(_config(_gpu_llm(2)), None, nodes=split).ok
    strict = _gpu_llm(2) | {"placement_group_config": {"bundles": [{"GPU": 1}, {"GPU": 1}], "strategy": "STRICT_PACK"}}
    assert not P.check(_config(strict), None, nodes=split).ok


def test_usage_strings_of_the_dashboard():
    assert P.parse_usage("3.0/8.0 CPU\n0.0/2.0 GPU\n0B/9.31GiB memory") == {"CPU": (3.0, 8.0), "GPU": (0.0, 2.0)}


# --------------------------------------------------------------------------
# real heads


@pytest.mark.cluster
def test_gpu_config_on_the_cpu_head_is_refused_before_deploying(cluster_home, tmp_path):
    serve = write_app(tmp_path, "gpu_pf", "/gpupf", _gpu_llm(1, source=str(make_model_dir(tmp_path / "m"))))
    r = llmctl("check", serve)
    assert r.code == 2, (r.out, r.err)
    assert "gpu_pf/LLMServer:tp1: min_replicas 1 cannot start on this cluster: no node has L4 GPUs" in r.err
    r = llmctl("up", serve)
    assert r.code == 2 and "nothing was deployed" in r.err, r.err
    st = llmctl("status", "--json")
    assert "gpu_pf" not in [a["name"] for a in st.json()["applications"]]


@pytest.fixture(scope="module")
def l4_head(tmp_path_factory):
    """A second private head advertising 2 logical L4 GPUs (nothing GPU runs on it)."""
    from llmctl.launch import cluster

    home = tmp_path_factory.mktemp("l4-home")
    old = os.environ.get("LLMCTL_HOME")
    os.environ["LLMCTL_HOME"] = str(home)
    try:
        state = cluster.start_head(num_cpus=8, num_gpus=2, resources={"accelerator_type:L4": 2})
    finally:
        if old is None:
            os.environ.pop("LLMCTL_HOME", None)
        else:
            os.environ["LLMCTL_HOME"] = old
    yield home, state
    os.environ["LLMCTL_HOME"] = str(home)
    try:
        res = cluster.stop_head(state)
    finally:
        if old is None:
            os.environ.pop("LLMCTL_HOME", None)
        else:
            os.environ["LLMCTL_HOME"] = old
    assert not res.remaining


@pytest.mark.cluster
@pytest.mark.parametrize("tp,mx,code,needle", [
    (1, 1, 0, "OK: the cluster can start it"),
    (4, 1, 2, "min_replicas 1 cannot start on this cluster: needs GPU 4 per replica"),
    (1, 8, 0, "max_replicas 8 is out of reach: the cluster holds 2 replicas"),
])
def test_preflight_against_a_head_with_two_l4(l4_head, tmp_path, tp, mx, code, needle):
    home, state = l4_head
    serve = write_app(tmp_path, f"l4_{tp}_{mx}", "/l4", _gpu_llm(tp, 1, mx, source=str(make_model_dir(tmp_path / "m"))))
    r = llmctl("check", serve, "--address", state.dashboard_url, "--no-versions", env={"LLMCTL_HOME": str(home)})
    assert r.code == code, (r.out, r.err)
    assert needle in r.out + r.err
    # The versions the head reports are the same for every config: asked once (a Ray job of several seconds).
    ask_versions = tp == 1 and mx == 1
    data = llmctl("check", serve, "--address", state.dashboard_url, "--json", *([] if ask_versions else ["--no-versions"]),
                  env={"LLMCTL_HOME": str(home)}).json()
    assert data["ok"] is (code == 0)
    (node,) = data["nodes"]
    assert node["total"]["GPU"] == 2 and node["total"]["accelerator_type:L4"] == 2
    if not ask_versions:
        assert "versions" not in data
        return
    # The head runs this venv: the versions it reports are the ones installed here.
    local = compat.check()
    v = data["versions"]
    assert (v["ray"], v["vllm"], v["ray_pins_vllm"]) == (local.ray, local.vllm, local.pinned)
    assert (v["warning"] is None) is (local.warning is None)


@pytest.mark.cluster
@pytest.mark.parametrize("tp,code", [(1, 0), (4, 2)])
def test_check_api_is_what_check_json_prints(l4_head, tmp_path, monkeypatch, tp, code):
    """``llmctl.check`` is the core ``llmctl check`` renders: the same report, the same verdict."""
    import llmctl as api

    home, state = l4_head
    monkeypatch.setenv("LLMCTL_HOME", str(home))
    serve = write_app(tmp_path, f"api_{tp}", "/api", _gpu_llm(tp, 1, 1, source=str(make_model_dir(tmp_path / "m"))))
    rep = api.check(serve, address=state.dashboard_url, versions=False)
    r = llmctl("check", serve, "--address", state.dashboard_url, "--json", "--no-versions", env={"LLMCTL_HOME": str(home)})
    assert r.code == code and rep.ok is (code == 0), (r.out, r.err)
    mine, cli = rep.to_json(), r.json()
    assert mine.pop("seconds") >= 0 and cli.pop("seconds") >= 0
    assert mine == cli
    assert rep.versions is None and rep.lora_stores == [] and (rep.preflight.errors == []) is rep.ok


# --------------------------------------------------------------------------
# the cluster's versions (issue 12: the version guard where it can be learned)


def test_version_probe_reads_package_metadata_in_a_shell():
    """The job's entrypoint, run here through /bin/sh as Ray runs it: what it prints is what this venv has."""
    import subprocess
    import sys

    from llmctl.launch.versions import PROBE, parse

    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    r = subprocess.run(["/bin/sh", "-c", PROBE], capture_output=True, text=True, env=env, timeout=60)
    data = parse(r.stdout)
    local = compat.check()
    assert (data["ray"], data["vllm"]) == (local.ray, local.vllm)
    assert compat.ray_vllm_pin(data["ray_requires"]) == compat.ray_vllm_pin()
    with pytest.raises(Exception, match="printed no LLMCTL_VERSIONS line"):
        parse("Traceback (most recent call last):\n  ...")


@pytest.mark.parametrize("cluster_vllm,fragment", [("0.29.0", None), ("0.33.1", "replicas fail at import")])
def test_version_guard_judges_a_clusters_ray_by_its_own_pin(cluster_vllm, fragment):
    """A cluster's Ray is judged by the vllm requirement read on the cluster, not by the Ray installed here."""
    requires = ['vllm[audio]==0.29.0; extra == "llm"']
    c = compat.check(cluster_vllm, "2.60.0", requires)
    assert c.pinned == "==0.29.0"
    assert (c.warning is None) if fragment is None else (fragment in c.warning)
    other = compat.check(cluster_vllm, "2.99.0", ['vllm==0.40.0; extra == "llm"'])
    assert other.pinned == "==0.40.0" and "Ray 2.99.0" in other.warning


@pytest.mark.cluster
def test_up_learns_a_remote_clusters_versions_and_leaves_no_job(l4_head):
    """What `up --address` says about a cluster llmctl did not start (the l4 head runs this venv)."""
    from llmctl.launch.deploy import cluster_versions_steps
    from llmctl.launch.serve_api import ServeClient

    _, state = l4_head
    client = ServeClient(state.dashboard_url, token=state.ray_token)  # a cluster llmctl did not start: its token given
    config = {"applications": [{"name": "pinned", "import_path": "ray.serve.llm:build_openai_app",
                                "args": {"llm_configs": [{"model_loading_config": {"model_id": "m"},
                                                          "runtime_env": {"pip": ["vllm==0.29.0"]}}]}}]}
    steps = [s.message for s in cluster_versions_steps(client, config)]
    local = compat.check()
    assert steps[0].startswith(f"cluster: Ray {local.ray}, vLLM {local.vllm} on the head node"), steps
    if local.warning:
        assert steps[1].startswith(f"warning: on the cluster: vLLM {local.vllm} with Ray {local.ray}"), steps
    assert steps[-1].startswith("warning: pinned install their own packages (runtime_env)"), steps
    assert not [j for j in client._json("GET", "/api/jobs/") or [] if str(j.get("submission_id", "")).startswith("llmctl-versions")]


def test_preflight_does_not_import_ray(tmp_path):
    """The placement arithmetic is plain Python (the CLI stays light)."""
    import subprocess
    import sys

    code = "import sys, llmctl.launch.preflight; print('ray' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ})
    assert r.stdout.strip() == "False", r.stderr
    assert Path(P.__file__).read_text().count("import ray") == 0
