"""`llmctl diff OLD NEW` for RayService manifests: how KubeRay applies the
change (issue 23). Offline; the rules are KubeRay's, read in its source
(ray-project/kuberay, ray-operator/controllers/ray/):

- ``rayservice_controller.go`` ``shouldPrepareNewCluster``: a new RayCluster
  is prepared only when the cluster spec's hash differs
  (``isClusterSpecHashEqual``) and not only by worker groups appended at the
  end (``partial``: then the running cluster is updated in place,
  ``shouldUpdateCluster``/``modifyRayCluster``), and only when zero-downtime
  upgrade is on (``isZeroDowntimeUpgradeEnabled``: ``upgradeStrategy.type``
  ``NewCluster``, or unset and the operator's ``ENABLE_ZERO_DOWNTIME`` not
  "false"; ``NewClusterWithIncrementalUpgrade`` only with the
  ``RayServiceIncrementalUpgrade`` feature gate, else it counts as off).
  Off (``None``): the cluster change is not applied at all.
- ``utils/util.go`` ``GenerateHashWithoutReplicasAndWorkersToDelete``: the
  hash leaves out each worker group's ``replicas``, ``minReplicas``,
  ``maxReplicas``, ``scaleStrategy.workersToDelete``, pod tolerations and
  scheduling gates (and the RayClusterSpec's own ``upgradeStrategy``,
  ``suspend``): changing them updates the running cluster.
- ``serveConfigV2`` is not in the cluster hash: the operator PUTs it to the
  running cluster's Serve (docs: "rayservice.md", in-place update), where
  Serve's own rules apply (:mod:`llmctl.rollout`).

GPU surge of a new cluster: ``NewCluster`` starts a whole second cluster
(every worker group at its current ``replicas``, times ``numOfHosts``, plus
the head) before the old one goes (kuberay#4239: "twice the GPUs").
``NewClusterWithIncrementalUpgrade`` scales the new cluster up by
``clusterUpgradeOptions.maxSurgePercent`` (default 100) of the capacity per
step while traffic moves (``apis/ray/v1/rayservice_types.go``
``ClusterUpgradeOptions``): llmctl counts ceil(maxSurgePercent % of the
cluster's GPUs).
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

from llmctl.errors import UsageError

NONE = "none"
SERVE_ONLY = "serveConfigV2 only"
CLUSTER_IN_PLACE = "rayClusterConfig in place"
NEW_CLUSTER = "new cluster"
INCREMENTAL = "incremental upgrade"
NOT_APPLIED = "cluster change not applied"

_MUTED_GROUP = ("replicas", "minReplicas", "maxReplicas")


@dataclass
class ManifestDiff:
    kind: str
    strategy: str  # NewCluster / NewClusterWithIncrementalUpgrade / None (as the new manifest says; "" unset)
    cluster_fields: list[str] = field(default_factory=list)  # changed rayClusterConfig paths
    muted_fields: list[str] = field(default_factory=list)  # changed but applied to the running cluster
    serve_changed: bool = False
    cluster_gpus: float = 0.0  # GPUs of the new cluster spec
    surge_gpus: float = 0.0  # extra GPUs while the upgrade runs
    serve_plan: list[str] = field(default_factory=list)  # Serve's plan for the serveConfigV2 change
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)

    def lines(self) -> list[str]:
        out = [f"class: {self.kind}" + (f" (upgradeStrategy {self.strategy or 'unset: NewCluster'})"
                                        if self.kind in (NEW_CLUSTER, INCREMENTAL, NOT_APPLIED) else "")]
        for f in self.cluster_fields:
            out.append(f"  rayClusterConfig.{f}: changed (in KubeRay's cluster hash)")
        for f in self.muted_fields:
            out.append(f"  rayClusterConfig.{f}: changed (left out of the hash: the running cluster is updated)")
        if self.serve_changed:
            out.append("  serveConfigV2: changed (the operator sends it to the running cluster's Serve)")
            out.extend("    " + line for line in self.serve_plan)
        out.append(f"GPU surge during the upgrade: {self.surge_gpus:g} (the cluster has {self.cluster_gpus:g})")
        out.extend(f"note: {n}" for n in self.notes)
        return out


def load_side(path: str) -> dict:
    """A RayService manifest, or a serve file (as the serveConfigV2 of an unknown cluster)."""
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{path}: no such file", param="file")
    try:
        docs = [d for d in yaml.safe_load_all(p.read_text(encoding="utf-8")) if isinstance(d, dict)]
    except yaml.YAMLError as e:
        raise UsageError(f"{path}: not YAML ({str(e).splitlines()[0]})", param="file") from None
    for d in docs:
        if d.get("kind") == "RayService":
            return d
    for d in docs:
        if "applications" in d:
            return {"kind": "serve", "serve": d}
    raise UsageError(f"{path}: neither a RayService manifest nor a serve config (no kind: RayService, no applications)",
                     param="file")


def _serve(obj: dict) -> dict | None:
    if obj.get("kind") == "serve":
        return obj["serve"]
    text = ((obj.get("spec") or {}).get("serveConfigV2"))
    if not isinstance(text, str):
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def _strategy(obj: dict) -> str:
    us = (obj.get("spec") or {}).get("upgradeStrategy")
    return str((us or {}).get("type") or "") if isinstance(us, dict) else ""


def _hash_view(rc: dict) -> tuple[dict, list[str]]:
    """rayClusterConfig as KubeRay hashes it, and the group fields it leaves out."""
    v = copy.deepcopy(rc)
    v.pop("upgradeStrategy", None)
    v.pop("suspend", None)
    for part in [v.get("headGroupSpec")] + list(v.get("workerGroupSpecs") or []):
        if isinstance(part, dict):
            spec = (part.get("template") or {}).get("spec") if isinstance(part.get("template"), dict) else None
            if isinstance(spec, dict):
                spec.pop("tolerations", None)
                spec.pop("schedulingGates", None)
    for g in v.get("workerGroupSpecs") or []:
        if isinstance(g, dict):
            for k in _MUTED_GROUP:
                g.pop(k, None)
            if isinstance(g.get("scaleStrategy"), dict):
                g["scaleStrategy"].pop("workersToDelete", None)
    return v, []


def _paths(old: Any, new: Any, path: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            if old.get(k) != new.get(k):
                out += _paths(old.get(k), new.get(k), f"{path}.{k}" if path else str(k))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new)):
            if a != b:
                out += _paths(a, b, f"{path}[{i}]")
        return out
    return [path] if old != new else []


def cluster_gpus(obj: dict) -> float:
    """GPUs of every pod the cluster runs now: worker groups at ``replicas`` × ``numOfHosts``, plus the head."""
    from llmctl.validate.rayservice.checks import groups
    from llmctl.validate.rayservice.nodes import read_group

    total = sum((g.gpus or 0.0) * g.pods_now * g.hosts for g in groups(obj))
    head = ((obj.get("spec") or {}).get("rayClusterConfig") or {}).get("headGroupSpec")
    if isinstance(head, dict):
        total += read_group(head, -1, False).gpus or 0.0
    return total


def diff(old: dict, new: dict) -> ManifestDiff:
    """How KubeRay applies the change from manifest ``old`` to ``new`` (a serve
    file on either side stands for a serveConfigV2 alone)."""
    strategy = _strategy(new)
    serve_old, serve_new = _serve(old), _serve(new)
    res = ManifestDiff(NONE, strategy, serve_changed=serve_old != serve_new)
    if res.serve_changed and serve_old is not None and serve_new is not None:
        from llmctl import rollout

        names = [a.get("name", "default") for a in serve_new.get("applications") or []]
        status = {"applications": {a.get("name", "default"): {"deployed_app_config": a}
                                   for a in serve_old.get("applications") or []}}
        res.serve_plan = rollout.plan(status, {"applications": serve_new.get("applications") or []}, names).lines()
    both_manifests = old.get("kind") == "RayService" and new.get("kind") == "RayService"
    if both_manifests:
        res.cluster_gpus = cluster_gpus(new)
        rc_old = (old.get("spec") or {}).get("rayClusterConfig") or {}
        rc_new = (new.get("spec") or {}).get("rayClusterConfig") or {}
        h_old, _ = _hash_view(rc_old)
        h_new, _ = _hash_view(rc_new)
        all_paths = _paths(rc_old, rc_new)
        hashed = _paths(h_old, h_new)
        res.muted_fields = [p for p in all_paths if not any(p == h or p.startswith(h + ".") or p.startswith(h + "[")
                                                            or h.startswith(p) for h in hashed)]
        res.cluster_fields = hashed
        if hashed:
            n_old = len(h_old.get("workerGroupSpecs") or [])
            appended = (len(h_new.get("workerGroupSpecs") or []) > n_old
                        and dict(h_new, workerGroupSpecs=(h_new.get("workerGroupSpecs") or [])[:n_old]) == h_old)
            if appended:
                res.kind = CLUSTER_IN_PLACE
                res.notes.append("only worker groups appended at the end: KubeRay updates the running cluster "
                                 "(rayservice_controller.go isClusterSpecHashEqual, partial)")
            elif strategy in ("", "NewCluster"):
                res.kind, res.surge_gpus = NEW_CLUSTER, res.cluster_gpus
                res.notes.append("a second RayCluster with all its GPUs must schedule before traffic moves "
                                 "(kuberay#4239); upgradeStrategy.type None avoids it (the change is then not applied)")
                if not strategy:
                    res.notes.append("upgradeStrategy unset: NewCluster unless the operator runs with "
                                     "ENABLE_ZERO_DOWNTIME=false (then the change is not applied)")
            elif strategy == "NewClusterWithIncrementalUpgrade":
                opts = ((new.get("spec") or {}).get("upgradeStrategy") or {}).get("clusterUpgradeOptions") or {}
                surge = opts.get("maxSurgePercent", 100)
                surge = surge if isinstance(surge, int) else 100
                res.kind, res.surge_gpus = INCREMENTAL, float(math.ceil(res.cluster_gpus * surge / 100))
                res.notes.append(f"the new cluster grows by maxSurgePercent {surge} % of the capacity per step while "
                                 "traffic moves (needs the RayServiceIncrementalUpgrade feature gate, else it counts "
                                 "as None: not applied)")
            else:
                res.kind = NOT_APPLIED
                res.notes.append(f"upgradeStrategy {strategy}: KubeRay does not prepare a new cluster and leaves the "
                                 "running one as it is (rayservice_controller.go isZeroDowntimeUpgradeEnabled); "
                                 "delete and recreate the RayService to apply it")
        elif res.muted_fields:
            res.kind = CLUSTER_IN_PLACE
    elif old.get("kind") != new.get("kind"):
        res.notes.append("a serve file stands for serveConfigV2 only: the cluster is not compared")
    if res.kind == NONE and res.serve_changed:
        res.kind = SERVE_ONLY
    if res.kind in (SERVE_ONLY, CLUSTER_IN_PLACE) and res.serve_changed and serve_new is None:
        res.notes.append("the new serveConfigV2 is not readable YAML")
    if _strategy(old) != strategy and both_manifests:
        res.notes.append(f"upgradeStrategy.type: {_strategy(old) or 'unset'} -> {strategy or 'unset'} (not part of "
                         "the cluster; it decides how later cluster changes are applied)")
    return res


def dumps(d: ManifestDiff) -> str:
    return json.dumps(d.to_json(), indent=2)
