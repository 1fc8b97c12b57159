"""What ``llmctl bench`` watches beside its requests: each deployment's
replicas over time, its request router and autoscaling policy (Serve's REST
status), and the CPU the local head keeps busy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional


@dataclass
class ReplicaSample:
    t: float
    deployment: str
    running: int
    target: Optional[int]
    message: str = ""


def cpu_probe(dashboard: Optional[str]):
    """Busy-core accounting when the app runs on the local head llmctl started (llmctl.launch.metrics)."""
    from llmctl.launch.metrics import local_cpu_seconds

    return local_cpu_seconds(dashboard) if dashboard else None


def replica_sampler(dashboard_url: str, app: str, ray_token_env: Optional[str] = None) -> Callable[[], list[ReplicaSample]]:
    """Each LLM deployment's RUNNING / target replicas of ``app``, from Serve's REST API."""
    from llmctl.launch.address import ray_token_for
    from llmctl.launch.serve_api import ServeClient, summarize

    token = ray_token_for(dashboard_url, ray_token_env)

    def sample() -> list[ReplicaSample]:
        out = []
        with ServeClient(dashboard_url, timeout=10, token=token) as client:
            st = client.status()
        for a in summarize(st, client.url):
            if a.name != app:
                continue
            for d in a.deployments:
                out.append(ReplicaSample(0.0, d.name, d.running_replicas, d.target_replicas, d.autoscaling))
        return out

    return sample


def routing_of(dashboard_url: str, app: str, ray_token_env: Optional[str] = None) -> dict[str, dict]:
    """Each deployment of ``app``: the request router class and the autoscaling
    policy Serve runs it with, and its replicas' ids now (Serve's REST
    status); {} when unreadable."""
    from llmctl.launch.address import ray_token_for
    from llmctl.launch.serve_api import ServeClient

    try:
        with ServeClient(dashboard_url, timeout=10, token=ray_token_for(dashboard_url, ray_token_env)) as client:
            st = client.status()
    except Exception:  # noqa: BLE001 - what a run reports beside its figures, never its end
        return {}
    out = {}
    for name, dep in (((st.get("applications") or {}).get(app) or {}).get("deployments") or {}).items():
        dc = dep.get("deployment_config") or {}
        router = (dc.get("request_router_config") or {}).get("request_router_class")
        policy = ((dc.get("autoscaling_config") or {}).get("policy") or {}).get("policy_function")
        out[name] = {"router": router, "autoscaling_policy": policy,
                     "replicas": sorted(r["replica_id"] for r in dep.get("replicas") or [] if r.get("replica_id"))}
    return out
