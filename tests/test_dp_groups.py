"""A DP group is one unit (issue 40): `up --dry-run` / `diff` plan a change to a
DP app's engine arguments as the restart of whole groups (Ray Serve's gang
rollout), and `kuberay` sizes worker pods to hold whole ranks of a group on
one node, as Ray's gang placement group places them. The apps are what
`gen-config --dp N --enable-expert-parallel` writes; no cluster."""

from __future__ import annotations

import copy
import math
import types

import pytest
import yaml

from helpers import load_yaml, run_cli, serve_file
from llmctl import rollout
from llmctl.builders import llm_deployments
from llmctl.hardware import by_ray_type
from llmctl.launch import update
from llmctl.placement import place_replica, replica_bundles
from llmctl.validate import load_deployable


def _dp_app(capsys, tmp_path, *args: str, model: str = "qwen3-30b-a3b", gpu: str = "H100") -> tuple[dict, object]:
    """(the app with its llm_config inlined, the serve file) of gen-config --dp … --enable-expert-parallel."""
    out = tmp_path / "gen"
    r = run_cli(capsys, "gen-config", "-m", model, "--gpu", gpu, "--enable-expert-parallel", *args, "--yes", "-o", out)
    assert r.code == 0, r.err
    path = serve_file(out)
    return load_deployable(path, local_node=False)["applications"][0], path


def _ray_round_up(n: int, gang: int) -> int:
    """Ray Serve's own rounding of a rollout batch to whole gangs (DeploymentState._round_up_to_gang_size)."""
    from ray.serve._private.deployment_state import DeploymentState

    fake = types.SimpleNamespace(get_gang_config=lambda: types.SimpleNamespace(gang_size=gang))
    return DeploymentState._round_up_to_gang_size(fake, n)


def _plan(app: dict, change, ranks_running: int | None = None):
    """Serve's plan of PUTting ``app`` changed by ``change(llm)`` over ``app`` deployed by llmctl."""
    old = rollout.canonical(app, update._llm_defaults())
    (dep, _, dp), = list(llm_deployments(app))
    deps = {dep: {"target_num_replicas": ranks_running}} if ranks_running else {}
    status = {"applications": {app["name"]: {"deployed_app_config": old, "deployments": deps}}}
    new = copy.deepcopy(app)
    change(new["args"]["llm_config"])
    _, p = update.lift_and_plan(status, {"applications": [new]}, [app["name"]])
    return p, dep, dp


def _seqs(llm):
    llm["engine_kwargs"]["max_num_seqs"] = 64


@pytest.mark.parametrize("groups", [1, 2, 3])
def test_an_engine_argument_change_restarts_whole_dp_groups(capsys, tmp_path, groups):
    app, _ = _dp_app(capsys, tmp_path, "--dp", "2", "--min-replicas", str(groups))
    p, dep, dp = _plan(app, _seqs, ranks_running=None if groups == 3 else groups * 2)
    assert dp == 2 and p.kinds() == {app["name"]: rollout.ROLLING}
    (c,) = [c for c in p.changes if c.field == "engine_kwargs.max_num_seqs"]
    assert c.deployment == dep and f"all {dp} ranks together" in c.why
    assert not [c for c in p.changes if c.deployment == "(args)"]  # the DP app's llm_config is the deployment's, once
    r = next(r for r in p.rollouts if r.deployment == dep)
    ranks = groups * dp
    wave = _ray_round_up(max(int(rollout.DEFAULT_ROLLING_UPDATE_PERCENTAGE * ranks), 1), dp)
    assert (r.gang, r.replicas, r.wave, r.waves, r.serving_min) == (dp, ranks, wave, math.ceil(ranks / wave), ranks - wave)
    assert r.wave % dp == 0 and r.serving_min % dp == 0  # never 1 rank of N
    lines = "\n".join(p.lines())
    assert f"{groups} DP group(s) of {dp} ranks" in lines
    assert (f"{dep} has no DP group serving" in lines) == (groups == 1)


def test_a_surge_starts_whole_dp_groups_and_must_fit_as_one(capsys, tmp_path):
    app, _ = _dp_app(capsys, tmp_path, "--dp", "2", "--min-replicas", "2")
    app["args"]["llm_config"]["deployment_config"]["max_surge_percent"] = 25
    p, dep, dp = _plan(app, _seqs, ranks_running=4)
    r = next(r for r in p.rollouts if r.deployment == dep)
    rank_gpus = sum(b.get("GPU", 0) for b in replica_bundles(app["args"]["llm_config"])[0])
    assert r.surge == _ray_round_up((25 * 4 + 99) // 100, dp) == dp
    assert r.serving_min == r.replicas and r.extra["GPU"] == r.surge * rank_gpus
    # a group's ranks are placed together: 1 free GPU on each of two nodes does not hold a 2-rank group's surge
    one = {"GPU": rank_gpus, "CPU": 8.0, "accelerator_type:H100": 1.0}
    assert rollout.surge_problem(p, [dict(one), dict(one)]) is None  # PACK: over two nodes
    assert "max_surge_percent" in rollout.surge_problem(p, [dict(one)])


def test_a_non_dp_app_still_rolls_replica_by_replica(capsys, tmp_path):
    app, _ = _dp_app(capsys, tmp_path, "--min-replicas", "4")  # expert parallel, no DP
    old = rollout.canonical(app, update._llm_defaults())
    new = copy.deepcopy(app)
    _seqs(new["args"]["llm_configs"][0])
    _, p = update.lift_and_plan({"applications": {app["name"]: {"deployed_app_config": old, "deployments": {}}}},
                                {"applications": [new]}, [app["name"]])
    r = next(r for r in p.rollouts if r.deployment.startswith("LLMServer:"))
    assert r.gang == 1 and r.wave == max(int(rollout.DEFAULT_ROLLING_UPDATE_PERCENTAGE * 4), 1) == 1


def test_kuberay_diff_of_a_dp_app_plans_the_group_restart(capsys, tmp_path):
    """`llmctl diff` of the RayService before and after an engine-argument change of a DP app."""
    old_app, old_serve = _dp_app(capsys, tmp_path / "a", "--dp", "2")
    _, new_serve = _dp_app(capsys, tmp_path / "b", "--dp", "2", "--engine-arg", "max_num_seqs=64")
    manifests = []
    for serve in (old_serve, new_serve):
        out = serve.parent / "rs.yaml"
        assert run_cli(capsys, "kuberay", serve, "--output", out).code == 0
        manifests.append(out)
    r = run_cli(capsys, "diff", *manifests)
    assert r.code == 0, r.err
    assert "DP group(s) of 2 ranks" in r.out and "restarted a whole group at a time" in r.out


# --------------------------------------------------------------------------
# kuberay: worker pods of whole ranks


def _groups(manifest: dict) -> list[dict]:
    return manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]


def _pod_gpus(group: dict) -> int:
    return int(group["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])


@pytest.mark.parametrize("model, gpu, args", [
    ("qwen3-30b-a3b", "H100", ["--dp", "2"]),
    ("qwen3-30b-a3b", "H100", ["--dp", "4", "--tp", "2", "--max-replicas", "2"]),
    ("qwen3-235b-a22b", "H100", ["--dp", "16"]),  # a group over two nodes
    ("qwen3-30b-a3b", "L4", ["--dp", "8", "--tp", "2"]),  # 16 GPUs of 4-GPU L4 nodes
])
def test_kuberay_pods_hold_whole_ranks_of_a_dp_group_on_one_node(capsys, tmp_path, model, gpu, args):
    app, serve = _dp_app(capsys, tmp_path, *args, model=model, gpu=gpu)
    out = tmp_path / "rs.yaml"
    r = run_cli(capsys, "kuberay", serve, "--output", out)
    assert r.code == 0, r.err
    assert run_cli(capsys, "validate", out).code == 0  # llmctl's own check of pods against the placement
    manifest = next(d for d in yaml.safe_load_all(out.read_text()) if d.get("kind") == "RayService")
    llm = yaml.safe_load(manifest["spec"]["serveConfigV2"])["applications"][0]["args"]["llm_config"]
    ek = llm["engine_kwargs"]
    dp, tp = ek["data_parallel_size"], ek.get("tensor_parallel_size", 1)
    node = by_ray_type(llm["accelerator_type"]).gpus_per_node
    (group,) = _groups(manifest)
    G = _pod_gpus(group)
    assert G == min(node, dp * tp) and G % tp == 0  # whole ranks; a node's worth at most
    assert any(m["mountPath"] == "/dev/shm" for m in group["template"]["spec"]["containers"][0].get("volumeMounts", []))
    # Ray's placement: each group is one gang placement group of every rank's bundles (PACK); a rank's TP
    # workers must share a pod. Place the most groups Serve runs on the most pods the group scales to.
    bundles, _ = replica_bundles(llm)
    per_rank = [{k: v for k, v in b.items() if not k.startswith("accelerator_type")} for b in bundles]
    pods = [{"GPU": float(G), "CPU": 1e6} for _ in range(group["maxReplicas"])]
    groups = llm["deployment_config"]["autoscaling_config"]["max_replicas"]
    for _ in range(groups * dp):
        assert place_replica(per_rank, "STRICT_PACK", pods)
    # and the same group on 1-GPU pods (what kuberay wrote before) cannot hold a TP > 1 rank
    if tp > 1:
        assert not place_replica(per_rank, "STRICT_PACK", [{"GPU": 1.0, "CPU": 1e6}] * (dp * tp))


def test_gpus_per_node_given_must_hold_whole_ranks(capsys, tmp_path):
    _, serve = _dp_app(capsys, tmp_path, "--dp", "4", "--tp", "2")
    r = run_cli(capsys, "kuberay", serve, "--output", tmp_path / "rs.yaml", "--gpus-per-node", "3")
    assert r.code == 2 and r.err.count("\n") == 1 and "TP 2" in r.err
    r = run_cli(capsys, "kuberay", serve, "--output", tmp_path / "rs.yaml", "--gpus-per-node", "4")
    assert r.code == 0, r.err
    manifest = next(d for d in yaml.safe_load_all((tmp_path / "rs.yaml").read_text()) if d.get("kind") == "RayService")
    assert _pod_gpus(_groups(manifest)[0]) == 4 and load_yaml(serve)
