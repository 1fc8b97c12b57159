"""Preflight: can this cluster hold what a serve config asks for, before
anything is deployed (issue 11).

What one replica of an LLM deployment asks Ray for, as Ray Serve LLM 2.60
builds it (``ray/llm/_internal/serve/core/server/llm_server.py``
``get_deployment_options`` and ``engines/vllm/vllm_models.py``
``placement_bundles``): a placement group of one bundle per engine worker
(TP × PP bundles of ``{GPU: 1, accelerator_type:<T>: 0.001}`` by default, or
``placement_group_config.bundles`` / ``bundle_per_worker`` with the
accelerator hint added), the replica actor's own ``{CPU: 1}`` merged into the
first bundle (``_merge_replica_actor_and_child_actor_bundles``), strategy
``PACK`` unless placement_group_config says otherwise. The OpenAiIngress
replica takes ``{CPU: 1}``.

What the cluster has: each alive node's total resources (state API
``/api/v0/nodes``) and what is free on it (``/nodes?view=summary``, the
dashboard's per-node "used/total" usage).

Verdicts: min_replicas of every deployment placed (first fit, bundle by
bundle; STRICT_PACK bundles on one node) on the nodes' TOTAL resources — if
that fails, nothing can start: an error naming the resource, the amount one
replica needs and what each node has. Placed on the FREE resources — if that
fails, a warning (other applications hold them; the replicas wait). The same
for max_replicas on the totals — a warning with the reachable maximum, and a
note that an autoscaler may add nodes, which llmctl cannot know.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from llmctl.launch.serve_api import ServeClient
from llmctl.placement import (  # noqa: F401  (re-exported)
    ACC_PREFIX, EPS, Demand, demands, place, place_replica, replica_bundles, replica_counts,
)

_USAGE = re.compile(r"([\d.]+)\s*/\s*([\d.]+)\s+(\S+)")
# Resources Ray adds on its own that say nothing about what a user asked for.
_INTERNAL = re.compile(r"^(node:|bundle_group_|.*_group_[0-9a-f]+$|memory$|object_store_memory$)")


@dataclass
class Node:
    node_id: str
    ip: str
    total: dict[str, float]
    free: dict[str, float]

    def describe(self, keys: list[str]) -> str:
        parts = [f"{k} {self.free.get(k, 0.0):g} free of {self.total.get(k, 0.0):g}" for k in keys]
        return f"{self.ip}: " + ", ".join(parts)


@dataclass
class Preflight:
    ok: bool
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    demands: list[Demand] = field(default_factory=list)
    seconds: float = 0.0  # from the cluster's answer to the verdict

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "errors": self.errors, "warnings": self.warnings, "seconds": round(self.seconds, 4),
            "nodes": [{"node_id": n.node_id, "ip": n.ip, "total": n.total, "free": n.free} for n in self.nodes],
            "deployments": [{"app": d.app, "deployment": d.deployment, "replica_bundles": d.bundles, "strategy": d.strategy,
                             "min_replicas": d.min_replicas, "max_replicas": d.max_replicas} for d in self.demands],
        }


# --------------------------------------------------------------------------
# supply


def _user(res: dict) -> dict[str, float]:
    return {k: float(v) for k, v in (res or {}).items() if not _INTERNAL.match(k)}


def parse_usage(text: str) -> dict[str, tuple[float, float]]:
    """The dashboard's per-node usage strings (``"3.0/8.0 CPU"``) as {resource: (used, total)}."""
    out: dict[str, tuple[float, float]] = {}
    for used, total, name in _USAGE.findall(text or ""):
        out[name] = (float(used), float(total))
    return out


def cluster_nodes(client: ServeClient) -> list[Node]:
    nodes = []
    usage = client.node_usage()
    for n in client.nodes():
        if n.get("state") != "ALIVE":
            continue
        total = _user(n.get("resources_total") or {})
        used = parse_usage(usage.get(n["node_id"], ""))
        free = {k: max(0.0, v - used.get(k, (0.0, 0.0))[0]) for k, v in total.items()}
        nodes.append(Node(n["node_id"], n.get("node_ip", "?"), total, free))
    return nodes


def _short(d: Demand, nodes: list[Node], attr: str) -> list[str]:
    """The resources one replica of ``d`` needs that no node has enough of."""
    need: dict[str, float] = {}
    for b in d.bundles:
        for k, v in b.items():
            need[k] = need.get(k, 0.0) + v
    keys = [k for k, v in need.items() if v > 0 and not any(getattr(n, attr).get(k, 0.0) + EPS >= v for n in nodes)]
    return keys or [k for k, v in need.items() if v > 0]


def _need_text(d: Demand, keys: list[str], replicas: int) -> str:
    need: dict[str, float] = {}
    for b in d.bundles:
        for k, v in b.items():
            need[k] = need.get(k, 0.0) + v
    parts = [f"{k} {need[k] * replicas:g}" for k in keys]
    return ", ".join(parts)


def check(config: dict, client: ServeClient, *, nodes: Optional[list[Node]] = None) -> Preflight:
    """The verdict for a serve config (llm_configs inlined) on the cluster behind ``client``."""
    t0 = time.monotonic()
    nodes = cluster_nodes(client) if nodes is None else nodes
    ds = demands(config)
    res = Preflight(True, nodes=nodes, demands=ds)
    if not nodes:
        res.ok = False
        res.errors.append("the cluster has no alive nodes")
        return res
    total_fail = place(ds, [dict(n.total) for n in nodes], lambda d: d.min_replicas)
    if total_fail is not None:
        d, placed = total_fail
        keys = _short(d, nodes, "total")
        acc = [k for k in keys if k.startswith(ACC_PREFIX)]
        what = (f"no node has {', '.join(a[len(ACC_PREFIX):] for a in acc)} GPUs (accelerator_type)" if acc else
                f"needs {_need_text(d, keys, 1)} per replica")
        res.ok = False
        res.errors.append(
            f"{d.app}/{d.deployment}: min_replicas {d.min_replicas} cannot start on this cluster: {what}; "
            f"{placed} of {d.min_replicas} replicas fit. Nodes: " + "; ".join(n.describe(keys) for n in nodes))
    else:
        free_fail = place(ds, [dict(n.free) for n in nodes], lambda d: d.min_replicas)
        if free_fail is not None:
            d, placed = free_fail
            keys = _short(d, nodes, "free")
            res.warnings.append(
                f"{d.app}/{d.deployment}: only {placed} of min_replicas {d.min_replicas} fit in what is free now "
                f"(one replica needs {_need_text(d, keys, 1)}; other applications hold the rest): the others wait. "
                "Nodes: " + "; ".join(n.describe(keys) for n in nodes))
        for d in ds:
            if d.max_replicas <= d.min_replicas:
                continue
            others = [o for o in ds if o is not d]
            pools = [dict(n.total) for n in nodes]
            place(others, pools, lambda o: o.min_replicas)
            reachable = 0
            while reachable < d.max_replicas and place_replica(d.bundles, d.strategy, pools):
                reachable += 1
            if reachable < d.max_replicas:
                keys = _short(d, nodes, "total")
                res.warnings.append(
                    f"{d.app}/{d.deployment}: max_replicas {d.max_replicas} is out of reach: the cluster holds {reachable} "
                    f"replicas of {_need_text(d, keys, 1)} next to the other deployments' minimum; an autoscaler may "
                    "add nodes (llmctl cannot know)")
    res.seconds = time.monotonic() - t0
    return res
