"""Autoscaling targets from the sizing plan: the one rule for
``target_ongoing_requests`` / ``max_ongoing_requests`` of an LLM deployment
and for the ingress's autoscaling.

Why llmctl writes them at all: Ray Serve LLM 2.60 merges
``max_ongoing_requests: 1e9`` and ``autoscaling_config.target_ongoing_requests:
1e9`` UNDER the user's deployment_config
(``ray/llm/_internal/serve/core/server/builder.py`` DEFAULT_DEPLOYMENT_OPTIONS,
``core/ingress/ingress.py`` DEFAULT_INGRESS_OPTIONS, merged by
``common/dict_utils.py`` maybe_apply_llm_deployment_config_defaults). With
those, the average ongoing requests per replica never reaches the target, so a
deployment with ``min_replicas: 1, max_replicas: 4`` alone never scales.

The rule (per replica of one model):

- capacity = what one replica runs at once without queueing inside vLLM:
  KV-cache tokens ÷ expected tokens per request (prompt + output, at most
  max_model_len), capped by vLLM's max_num_seqs;
- ``max_ongoing_requests`` = capacity: Serve never hands a replica more than
  its KV cache holds (the rest waits in Serve's queue, where it counts towards
  scaling, instead of being preempted inside vLLM);
- ``target_ongoing_requests`` = capacity ÷ 1.25, rounded down: Serve adds a
  replica before requests queue. Ray's advanced autoscaling guide recommends
  max_ongoing_requests about 20–50 % above the target; 1.25 is in that band.

vLLM's CPU build is compute-bound on a few cores long before its KV cache
fills: llmctl gives CPU deployments a target of 2 and at most 3 ongoing
requests per replica (the target measured to make the tiny model scale under
load on a 2-core machine: issue 8) and a 5 s upscale delay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

from llmctl.sizing.replica import Plan
from llmctl.sizing.profile import default_max_num_seqs

# A chat turn of ~1.5k prompt + ~0.5k output tokens.
DEFAULT_EXPECTED_TOKENS = 2048
HEADROOM = 1.25  # max_ongoing_requests / target_ongoing_requests

CPU_TARGET_ONGOING = 2
CPU_MAX_ONGOING = 3
CPU_UPSCALE_DELAY_S = 5.0

# Apps whose LLM replicas can add up to more than this get ingress autoscaling:
# one OpenAiIngress replica per this many LLM replicas at most.
INGRESS_REPLICAS_PER = 4


@dataclass(frozen=True)
class Targets:
    """Autoscaling numbers of one LLM deployment and the reasoning behind them."""

    target_ongoing_requests: int
    max_ongoing_requests: int
    capacity: int  # requests one replica runs at once
    basis: str  # the numbers, for a YAML comment and summaries
    upscale_delay_s: Optional[float] = None  # None: Serve's default (30 s)


def derive_targets(plan: Optional[Plan], *, max_model_len: Optional[int], expected_tokens: Optional[int] = None,
                   max_num_seqs: Optional[int] = None, gpu_memory_bytes: Optional[int] = None,
                   cpu: bool = False) -> Optional[Targets]:
    """Targets for one replica, or None when nothing can be derived (a model
    llmctl cannot size: weights in a bucket)."""
    if cpu:
        return Targets(
            CPU_TARGET_ONGOING, CPU_MAX_ONGOING, CPU_MAX_ONGOING,
            f"vLLM's CPU build is compute-bound: target {CPU_TARGET_ONGOING} ongoing requests per replica, "
            f"at most {CPU_MAX_ONGOING}; scale up after {CPU_UPSCALE_DELAY_S:g} s",
            CPU_UPSCALE_DELAY_S,
        )
    if plan is None or plan.verdict == "does_not_fit":
        return None
    per_request = min(expected_tokens or DEFAULT_EXPECTED_TOKENS, max_model_len or plan.max_model_len)
    seqs = max_num_seqs or default_max_num_seqs(gpu_memory_bytes or int(plan.gpu_memory_gib * 1024**3))
    by_kv = plan.kv_cache_tokens // per_request
    capacity = max(1, min(by_kv, seqs))
    target = max(1, math.floor(capacity / HEADROOM))
    limit = "vLLM max_num_seqs" if seqs < by_kv else "KV cache"
    basis = (f"one replica holds {capacity} requests at once ({plan.kv_cache_tokens:,} KV-cache tokens / "
             f"{per_request:,} tokens per request = {by_kv}, max_num_seqs {seqs}: {limit} bound); "
             f"Serve adds a replica above {target} ongoing requests per replica")
    return Targets(target, capacity, capacity, basis)


@dataclass(frozen=True)
class IngressScaling:
    min_replicas: int
    max_replicas: int
    target_ongoing_requests: int
    basis: str


def ingress_autoscaling(max_replicas: Sequence[int], min_replicas: Sequence[int],
                        max_ongoing: Sequence[int]) -> Optional[IngressScaling]:
    """Ingress autoscaling for an app whose LLM replicas can add up to many
    (one OpenAiIngress replica is a known bottleneck at high concurrency), or
    None for small apps. Each ingress replica is meant to front about
    INGRESS_REPLICAS_PER LLM replicas: its target is that many replicas' worth
    of ongoing requests; its max_ongoing_requests stays Ray's (1e9) so the
    ingress never rejects."""
    total = sum(max_replicas)
    if total <= INGRESS_REPLICAS_PER:
        return None
    mx = max(2, math.ceil(total / INGRESS_REPLICAS_PER))
    mn = 0 if all(m == 0 for m in min_replicas) else 1  # Ray scales the ingress to zero with the models
    target = INGRESS_REPLICAS_PER * max(max_ongoing or [1])
    basis = (f"the app's LLM deployments can grow to {total} replicas: one ingress replica per "
             f"{INGRESS_REPLICAS_PER} of them, target {target} ongoing requests per ingress replica "
             f"({INGRESS_REPLICAS_PER} x {max(max_ongoing or [1])})")
    return IngressScaling(mn, mx, target, basis)
