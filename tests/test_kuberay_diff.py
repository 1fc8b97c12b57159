"""`llmctl diff` on RayService manifest pairs (issue 23): the class and the GPU
surge KubeRay's source says (llmctl/kuberay/diff.py cites it), built from
KubeRay's own LLM samples (tests/data/kuberay_samples). The expected surge is
read from the manifests here (pods × GPUs per pod × hosts), not from llmctl."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import yaml

from llmctl.kuberay import diff as kd
from helpers import llmctl

SAMPLES = Path(__file__).parent / "data" / "kuberay_samples"


def sample(name: str) -> dict:
    return next(d for d in yaml.safe_load_all((SAMPLES / name).read_text()) if d and d.get("kind") == "RayService")


def gpus_now(m: dict) -> int:
    """Worker pods × GPUs per pod (the container limit) × hosts, read straight from the manifest."""
    total = 0
    for g in m["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
        limit = g["template"]["spec"]["containers"][0].get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0)
        total += g.get("replicas", g.get("minReplicas", 0)) * int(limit) * g.get("numOfHosts", 1)
    return total


def edit(m: dict, fn) -> dict:
    m = copy.deepcopy(m)
    fn(m)
    return m


def workers(m):
    return m["spec"]["rayClusterConfig"]["workerGroupSpecs"]


def set_image(m, image="rayproject/ray-llm:2.60.0-py311-cu128"):
    workers(m)[0]["template"]["spec"]["containers"][0]["image"] = image


def set_gpus(m, n):
    c = workers(m)[0]["template"]["spec"]["containers"][0]
    c["resources"]["limits"]["nvidia.com/gpu"] = str(n)
    c["resources"]["requests"]["nvidia.com/gpu"] = str(n)
    if "num-gpus" in workers(m)[0].get("rayStartParams", {}):
        workers(m)[0]["rayStartParams"]["num-gpus"] = str(n)


def strategy(m, type_, **opts):
    m["spec"]["upgradeStrategy"] = {"type": type_, **({"clusterUpgradeOptions": opts} if opts else {})}


def serve_change(m):
    s = yaml.safe_load(m["spec"]["serveConfigV2"])
    s["applications"][0]["route_prefix"] = "/v2"
    m["spec"]["serveConfigV2"] = yaml.safe_dump(s)


LLM = sample("ray-service.llm-serve.yaml")
DS = sample("ray-service.deepseek.yaml")
HT = sample("ray-service.high-throughput-llm.yaml")

CASES = [
    # (id, old, new, class, surge(new manifest))
    ("identical", LLM, LLM, kd.NONE, lambda n: 0),
    ("serveConfigV2 only", LLM, edit(LLM, serve_change), kd.SERVE_ONLY, lambda n: 0),
    ("worker image, strategy unset", LLM, edit(LLM, set_image), kd.NEW_CLUSTER, gpus_now),
    ("GPU count 4 -> 8", LLM, edit(LLM, lambda m: set_gpus(m, 8)), kd.NEW_CLUSTER, gpus_now),
    ("worker replicas only", HT, edit(HT, lambda m: workers(m)[0].update(replicas=6, minReplicas=6, maxReplicas=6)),
     kd.CLUSTER_IN_PLACE, lambda n: 0),
    ("image, NewCluster", edit(DS, lambda m: strategy(m, "NewCluster")),
     edit(DS, lambda m: (set_image(m), strategy(m, "NewCluster"))), kd.NEW_CLUSTER, gpus_now),
    ("image, None", edit(LLM, lambda m: strategy(m, "None")), edit(LLM, lambda m: (set_image(m), strategy(m, "None"))),
     kd.NOT_APPLIED, lambda n: 0),
    ("image, incremental 50 %", LLM, edit(LLM, lambda m: (set_image(m), strategy(m, "NewClusterWithIncrementalUpgrade",
                                                                                  maxSurgePercent=50, stepSizePercent=25,
                                                                                  intervalSeconds=30, gatewayClassName="istio"))),
     kd.INCREMENTAL, lambda n: math.ceil(gpus_now(n) * 50 / 100)),
    ("image, incremental default surge", LLM, edit(LLM, lambda m: (set_image(m), strategy(m, "NewClusterWithIncrementalUpgrade"))),
     kd.INCREMENTAL, gpus_now),
    ("worker group appended", HT, edit(HT, lambda m: workers(m).append(dict(copy.deepcopy(workers(m)[0]), groupName="more"))),
     kd.CLUSTER_IN_PLACE, lambda n: 0),
    ("tolerations only", DS, edit(DS, lambda m: workers(m)[0]["template"]["spec"].update(tolerations=[])),
     kd.CLUSTER_IN_PLACE, lambda n: 0),
    ("upgrade strategy only", LLM, edit(LLM, lambda m: strategy(m, "None")), kd.NONE, lambda n: 0),
    ("head image + serve", DS, edit(DS, lambda m: (serve_change(m), m["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]
                                                   ["spec"]["containers"][0].update(image="rayproject/ray-llm:2.60.0"))),
     kd.NEW_CLUSTER, gpus_now),
    ("GPU count on deepseek (2 pods)", DS, edit(DS, lambda m: set_gpus(m, 4)), kd.NEW_CLUSTER, gpus_now),
]


@pytest.mark.parametrize("name,old,new,kind,surge", CASES, ids=[c[0] for c in CASES])
def test_diff_table(name, old, new, kind, surge):
    d = kd.diff(old, new)
    assert d.kind == kind, (name, d.lines())
    assert d.surge_gpus == surge(new), (name, d.lines())
    assert d.cluster_gpus == gpus_now(new)


def test_cluster_fields_are_named():
    d = kd.diff(LLM, edit(LLM, set_image))
    assert d.cluster_fields == ["workerGroupSpecs[0].template.spec.containers[0].image"]
    d = kd.diff(HT, edit(HT, lambda m: workers(m)[0].update(replicas=6)))
    assert d.muted_fields == ["workerGroupSpecs[0].replicas"] and not d.cluster_fields


def test_serve_config_change_carries_serves_plan():
    d = kd.diff(LLM, edit(LLM, serve_change))
    text = "\n".join(d.lines())
    assert "route_prefix: / -> /v2" in text and "in place" in text


def test_cli_manifest_against_serve_file(tmp_path):
    old = tmp_path / "rs.yaml"
    old.write_text(yaml.safe_dump(LLM))
    serve = yaml.safe_load(LLM["spec"]["serveConfigV2"])
    serve["applications"][0]["route_prefix"] = "/v2"
    new = tmp_path / "serve.yaml"
    new.write_text(yaml.safe_dump(serve))
    r = llmctl("diff", old, new, "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["kind"] == kd.SERVE_ONLY and data["surge_gpus"] == 0
    r = llmctl("diff", old, tmp_path / "missing.yaml")
    assert r.code == 2 and r.err.count("\n") == 1 and "missing.yaml: no such file" in r.err
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Deployment\n")
    r = llmctl("diff", old, bad)
    assert r.code == 2 and "neither a RayService manifest nor a serve config" in r.err
