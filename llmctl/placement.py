"""What one LLMServer replica asks Ray for, as Ray Serve LLM 2.60 builds it,
and the placement mistakes a config can make with it. Used by preflight (to
place replicas on a real cluster's nodes) and by validate (offline).

Ray 2.60 (``ray/llm/_internal/serve/core/server/llm_server.py``
``get_deployment_options`` and ``engines/vllm/vllm_models.py``
``placement_bundles``): a placement group of one bundle per engine worker —
TP × PP bundles of ``{GPU: 1, accelerator_type:<T>: 0.001}`` by default, or
``placement_group_config.bundles`` / ``bundle_per_worker`` with the
accelerator hint added — and the replica actor's own resources
(``ray_actor_options``: ``num_cpus`` default 1, ``num_gpus`` default 0)
ADDED to the first bundle (``_merge_replica_actor_and_child_actor_bundles``).
Strategy ``PACK`` unless placement_group_config says otherwise.

Measured on Ray 2.60 here: a bundle of ``{GPU: 1.95}`` is placed on a node
with 2 GPUs, so ``num_gpus: 0.95`` is not rejected by Ray — it needs a node
with one GPU more than the engine uses, and a node with a single GPU never
holds the replica.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

from llmctl.builders import app_llm_configs, ingress_deployment_name, is_llm_app, llm_deployments
from llmctl.scalars import lax_int

ACC_PREFIX = "accelerator_type:"
EPS = 1e-6

# The most engine workers (TP x PP) llmctl treats as a replica: no Ray cluster
# places a larger placement group, and every loop over workers stops here, so
# a typo such as ``tensor_parallel_size: 80000000`` is an error, never a hang.
MAX_WORKERS = 4096


def workers_problem(tp: int, pp: int = 1) -> Optional[str]:
    """Why TP x PP is not a real worker count, or None."""
    if tp * pp > MAX_WORKERS:
        return f"TP {tp} x PP {pp} = {tp * pp} engine workers in one replica; llmctl checks replicas of at most {MAX_WORKERS}"
    return None


def _num(v: Any, default: float) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def _int(v: Any) -> int:
    x = _num(v, 1.0)
    return int(x) if math.isfinite(x) and abs(x) <= MAX_WORKERS * MAX_WORKERS else MAX_WORKERS + 1


def replica_bundles(llm: dict) -> tuple[list[dict[str, float]], str]:
    """(bundles of one LLMServer replica, placement strategy) for an LLMConfig mapping."""
    ek = llm.get("engine_kwargs") if isinstance(llm.get("engine_kwargs"), dict) else {}
    n = max(1, _int(ek.get("tensor_parallel_size"))) * max(1, _int(ek.get("pipeline_parallel_size")))
    n = min(n, MAX_WORKERS)  # beyond it validate reports workers_problem
    acc = llm.get("accelerator_type")
    hint = {f"{ACC_PREFIX}{acc}": 0.001} if isinstance(acc, str) and acc else {}
    pgc = llm.get("placement_group_config") if isinstance(llm.get("placement_group_config"), dict) else {}
    acc_cfg = llm.get("accelerator_config") if isinstance(llm.get("accelerator_config"), dict) else {}
    per_worker = pgc.get("bundle_per_worker")
    explicit = pgc.get("bundles")
    if isinstance(per_worker, dict) and per_worker:
        bundles = [{**{str(k): _num(v, 0.0) for k, v in per_worker.items()}, **hint} for _ in range(n)]
    elif isinstance(explicit, list) and explicit:
        bundles = [{**hint, **{str(k): _num(v, 0.0) for k, v in b.items()}} for b in explicit if isinstance(b, dict)]
    elif acc_cfg.get("kind") == "cpu":
        bundles = [{"CPU": 1.0} for _ in range(n)]
    else:
        bundles = [{"GPU": 1.0, **hint} for _ in range(n)]
    strategy = str(pgc.get("strategy", "PACK"))
    dc = llm.get("deployment_config") if isinstance(llm.get("deployment_config"), dict) else {}
    actor = dc.get("ray_actor_options") if isinstance(dc.get("ray_actor_options"), dict) else {}
    first = dict(bundles[0]) if bundles else {}
    first["CPU"] = first.get("CPU", 0.0) + _num(actor.get("num_cpus"), 1.0)
    if _num(actor.get("num_gpus"), 0.0):
        first["GPU"] = first.get("GPU", 0.0) + _num(actor.get("num_gpus"), 0.0)
    return [first] + bundles[1:], strategy


def bundles_total(bundles: list[dict[str, float]], resource: str) -> float:
    """How much of one resource (``"GPU"``, ``"CPU"``) a replica's bundles ask for."""
    return sum(b.get(resource, 0.0) for b in bundles)


def actor_gpu_problem(llm: dict, gpus_per_node: int) -> Optional[tuple[str, str]]:
    """(severity, message) when ``ray_actor_options.num_gpus`` is merged into
    the engine's first bundle; an error when no node of ``gpus_per_node``
    GPUs can hold the merged bundle."""
    dc = llm.get("deployment_config") if isinstance(llm.get("deployment_config"), dict) else {}
    actor = dc.get("ray_actor_options") if isinstance(dc.get("ray_actor_options"), dict) else {}
    extra = _num(actor.get("num_gpus"), 0.0)
    if extra <= 0:
        return None
    if not math.isfinite(extra):
        return "error", f"ray_actor_options.num_gpus is {extra:g}: a number of GPUs must be finite; delete num_gpus"
    bundles, _ = replica_bundles(llm)
    engine_gpu = bundles[0].get("GPU", 0.0) - extra
    total = bundles[0].get("GPU", 0.0)
    cpus = f" and num_cpus ({_num(actor.get('num_cpus'), 1.0):g})" if "num_cpus" in actor else ""
    head = (f"Ray Serve LLM adds ray_actor_options.num_gpus ({extra:g}){cpus} to the engine's first placement bundle "
            f"({engine_gpu:g} GPU), so one node must hold {total:g} GPUs for it")
    fix = "delete num_gpus: the engine's bundles already reserve its GPUs (accelerator_type and TP x PP decide them)"
    if math.ceil(total - 1e-9) > gpus_per_node:
        return "error", f"{head}, more than a node of {gpus_per_node} GPUs has; {fix}"
    if engine_gpu <= 0:
        return "warning", f"{head} although the engine itself uses none; {fix}"
    return "warning", f"{head}: a single-GPU node can never hold the replica and {math.ceil(total) - engine_gpu:g} GPU sits idle; {fix}"


# --------------------------------------------------------------------------
# What a serve config asks for, and first-fit placement of it on pools of
# resources (preflight places on a live cluster's nodes, kuberay on worker groups).


@dataclass
class Demand:
    """One Serve deployment of an application."""

    app: str
    deployment: str
    bundles: list[dict[str, float]]  # one replica
    strategy: str
    min_replicas: int
    max_replicas: int


# Serve's bounds for ``num_replicas: auto`` (``AutoscalingConfig.default()``,
# ray/serve/config.py; ray/serve/_private/config.py handle_num_replicas_auto).
AUTO_MIN_REPLICAS, AUTO_MAX_REPLICAS = 1, 100


def replica_counts(dc: Any) -> tuple[int, int]:
    """The fewest and most replicas Serve runs for a ``deployment_config`` (an
    LLM deployment's or the ingress's), as Ray Serve LLM 2.60 hands it to Serve:

    - ``num_replicas: auto``: ``AutoscalingConfig.default()`` (1 to 100) with
      the config's own ``autoscaling_config`` fields over it;
    - an ``autoscaling_config`` without ``num_replicas``: its bounds, each 1
      when not given (Serve's field defaults; Ray Serve LLM merges only
      ``target_ongoing_requests`` into it, ``server/builder.py``);
    - else ``num_replicas`` (1 when not given) for both.

    A count Serve would refuse to read counts as its default: this sizes and
    warns; validate's own checks report the bad value."""
    dc = dc if isinstance(dc, dict) else {}
    asc = dc.get("autoscaling_config")
    asc = asc if isinstance(asc, dict) else None
    if dc.get("num_replicas") == "auto":
        lo, hi = AUTO_MIN_REPLICAS, AUTO_MAX_REPLICAS
    elif asc is not None:
        lo, hi = 1, 1
    else:
        n = _count(dc.get("num_replicas"), 1)
        return n, n
    mn = _count((asc or {}).get("min_replicas"), lo)
    return mn, max(mn, _count((asc or {}).get("max_replicas"), hi))


def _count(v: Any, default: int) -> int:
    n = lax_int(v)
    return n if n is not None and n >= 0 else default


def demands(config: dict) -> list[Demand]:
    """Every Serve LLM deployment of a serve config with its llm_configs inlined
    (what ``llmctl.validate.load_deployable`` returns)."""
    out: list[Demand] = []
    for app in config.get("applications") or []:
        if not is_llm_app(app):
            continue
        name = app.get("name", "default")
        args = app.get("args") or {}
        llms = [c for _, c in app_llm_configs(app) if isinstance(c, dict)]
        for dep, llm, dp in llm_deployments(app):
            bundles, strategy = replica_bundles(llm)
            mn, mx = replica_counts(llm.get("deployment_config") or {})
            # a DP deployment's replica is one rank; its counts are in DP groups (dp_server.py)
            out.append(Demand(name, dep, bundles, strategy, mn * dp, mx * dp))
        imn, imx = replica_counts(args.get("ingress_deployment_config") or {})
        if all(d.min_replicas == 0 for d in out if d.app == name) and llms:
            imn = 0
        out.append(Demand(name, ingress_deployment_name(app), [{"CPU": 1.0}], "PACK", imn, max(imn, imx)))
    return out


def _fits(bundle: dict[str, float], avail: dict[str, float]) -> bool:
    return all(avail.get(k, 0.0) + EPS >= v for k, v in bundle.items() if v > 0)


def _take(bundle: dict[str, float], avail: dict[str, float]) -> None:
    for k, v in bundle.items():
        avail[k] = avail.get(k, 0.0) - v


def place_replica(bundles: list[dict[str, float]], strategy: str, pools: list[dict[str, float]]) -> bool:
    """Place one replica's bundles on the pools (mutated only on success)."""
    trial = copy.deepcopy(pools)
    if strategy.startswith("STRICT"):
        need: dict[str, float] = {}
        for b in bundles:
            for k, v in b.items():
                need[k] = need.get(k, 0.0) + v
        for i, pool in enumerate(trial):
            if _fits(need, pool):
                _take(need, pool)
                pools[i] = pool
                return True
        return False
    for b in bundles:
        spot = next((p for p in trial if _fits(b, p)), None)
        if spot is None:
            return False
        _take(b, spot)
    pools[:] = trial
    return True


def place(demands_: list[Demand], pools: list[dict[str, float]], count: Callable[[Demand], int]) -> Optional[tuple[Demand, int]]:
    """Place ``count(d)`` replicas of every demand; the first that does not fit and how many did."""
    for d in sorted(demands_, key=lambda d: -sum(sum(b.values()) for b in d.bundles)):
        for i in range(count(d)):
            if not place_replica(d.bundles, d.strategy, pools):
                return d, i
    return None
