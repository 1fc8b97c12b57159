"""Replicas that span nodes (issue 36): TP within a node, pipeline stages on
other nodes, as vLLM's Ray executor lays them out. `plan` sizes such a
replica and says how many nodes it takes, `gen-config` writes the placement
Ray Serve LLM needs (one bundle per engine worker, PACK), Ray's own LLMConfig
takes it, `validate` notes it, preflight places it on a cluster's nodes, and
`kuberay` gives it one pod per node."""

from __future__ import annotations

import importlib.util

import pytest
import yaml

from helpers import llmctl
from llmctl.launch import preflight as P

MODEL = "kimi-k2-instruct"  # about 1 T parameters: more than one node of H100s


def _node(ip: str, gpus: int, acc: str = "H100") -> P.Node:
    res = {"CPU": 64, "GPU": gpus, f"accelerator_type:{acc}": gpus}
    return P.Node(ip, ip, dict(res), dict(res))


def test_plan_sizes_a_replica_over_two_nodes():
    r = llmctl("plan", "--model", MODEL, "--gpu", "H100", "--tp", "8", "--pp", "2", "--json")
    assert r.code == 0, r.err
    (row,) = r.json()["rows"]
    assert (row["tp"], row["pp"], row["nodes"], row["gpus_per_node"]) == (8, 2, 2, 8)
    assert row["verdict"] in ("fits", "tight") and row["kv_cache_tokens"] > 0
    small = llmctl("plan", "--model", MODEL, "--gpu", "H100", "--tp", "4", "--pp", "4", "--gpus-per-node", "4", "--json")
    assert small.code == 0 and small.json()["rows"][0]["nodes"] == 4, small.err
    table = llmctl("plan", "--model", MODEL, "--gpu", "H100", "--tp", "8", "--pp", "2")
    assert table.code == 0 and "nodes" in table.out and "2 x 8" in table.out, table.out


@pytest.mark.parametrize("args, needle", [
    (["--tp", "8", "--gpus-per-node", "4"], "TP 8 is more than one H100 node's 4 GPUs"),
    (["--tp", "4", "--pp", "2", "--gpus-per-node", "6"], "a TP group would straddle two nodes"),
    (["--gpus-per-node", "0"], "must be a whole number of GPUs per node"),
])
def test_layouts_that_cannot_work_are_one_line_errors(args, needle):
    r = llmctl("plan", "--model", MODEL, "--gpu", "H100", *args)
    assert r.code == 2 and needle in r.err and r.err.count("\n") == 1 and "Traceback" not in r.err, r.err


def test_gen_config_writes_a_multi_node_replica_that_ray_validate_and_preflight_take(tmp_path):
    r = llmctl("gen-config", "--model", MODEL, "--gpu", "H100", "--tp", "8", "--pp", "2", "--yes", "-o", tmp_path)
    assert r.code == 0, r.err
    (mc,) = (tmp_path / "model_config").glob("*.yaml")
    llm = yaml.safe_load(mc.read_text())
    assert llm["placement_group_config"] == {"bundle_per_worker": {"GPU": 1}, "strategy": "PACK"}
    assert "spans 2 nodes" in mc.read_text()
    serve = next(tmp_path.glob("serve_*.yaml"))
    v = llmctl("validate", serve)
    assert v.code == 0 and "span 2 H100 nodes of 8" in v.err, v.err
    # Ray's own LLMConfig takes it, and its engine config asks for 16 one-GPU bundles placed PACK
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    cfg = LLMConfig(**llm)
    if importlib.util.find_spec("vllm") is not None:
        engine = cfg.get_engine_config()
        assert engine.placement_strategy == "PACK" and len(engine.placement_bundles) == 16
        assert all(b["GPU"] == 1 for b in engine.placement_bundles)
    config = {"applications": [{"name": "kimi", "route_prefix": "/", "import_path": "ray.serve.llm:build_openai_app",
                                "args": {"llm_configs": [llm]}}]}
    assert P.check(config, None, nodes=[_node("10.0.0.1", 8), _node("10.0.0.2", 8)]).ok
    one = P.check(config, None, nodes=[_node("10.0.0.1", 8)])
    assert not one.ok and "GPU 16 per replica" in one.errors[0], one.errors
    strict = {**llm, "placement_group_config": {"bundle_per_worker": {"GPU": 1}, "strategy": "STRICT_PACK"}}
    mc.write_text(yaml.safe_dump(strict, sort_keys=False))
    s = llmctl("validate", serve)
    assert s.code == 2 and "STRICT_PACK keeps a replica on one node" in s.err, s.err


def test_kuberay_gives_a_multi_node_replica_one_pod_per_node(tmp_path):
    r = llmctl("gen-config", "--model", MODEL, "--gpu", "H100", "--tp", "8", "--pp", "2", "--yes", "-o", tmp_path, "--kuberay")
    assert r.code == 0, r.err
    (manifest,) = tmp_path.glob("rayservice_*.yaml")
    rs = yaml.safe_load(manifest.read_text())
    (group,) = rs["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert int(limits["nvidia.com/gpu"]) == 8 and group["replicas"] == group["minReplicas"] == 2
