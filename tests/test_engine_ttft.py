"""vLLM's own TTFT from its histogram between two scrapes (what a sweep step
records as ``engine_ttft_s`` and ``plan --slo-at engine`` fits): the growth
of each replica's buckets, pooled across replicas and holds, read as the
latency policy reads it."""

from __future__ import annotations

import pytest

from llmctl.perf.metrics import add_ttft_counts, samples_of, ttft_counts, ttft_summary

# vLLM 0.32's TTFT buckets (vllm/v1/metrics/loggers.py), the first few and +Inf
BOUNDS = ["0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1.0", "+Inf"]


def _exposition(per_replica: dict[str, list[int]], model: str = "tiny") -> str:
    """Ray's export of the histogram: per replica, a count per bound (cumulative), _sum and _count."""
    lines = []
    for rid, counts in per_replica.items():
        labels = f'ReplicaId="{rid}",model_name="{model}"'
        for le, c in zip(BOUNDS, counts):
            lines.append(f'ray_vllm_time_to_first_token_seconds_bucket{{{labels},le="{le}"}} {c}')
        lines.append(f"ray_vllm_time_to_first_token_seconds_sum{{{labels}}} {0.09 * counts[-1]}")
        lines.append(f"ray_vllm_time_to_first_token_seconds_count{{{labels}}} {counts[-1]}")
        lines.append(f"ray_vllm_num_requests_running{{{labels}}} 0")
    return "\n".join(lines) + "\n"


def test_growth_of_the_buckets_between_scrapes():
    before = samples_of(_exposition({"a": [0, 0, 0, 0, 1, 2, 3, 4, 4, 4, 4, 4, 4]}))
    # a: 10 more requests, 8 of them in (0.08, 0.1]; b: a replica started in between, 10 requests in (0.1, 0.25]
    after = samples_of(_exposition({"a": [0, 0, 0, 0, 1, 2, 3, 4 + 8, 14, 14, 14, 14, 14],
                                    "b": [0] * 8 + [10] * 5}))
    c = ttft_counts(before, after, "tiny")
    assert c["count"] == 20 and c["buckets"][float("inf")] == 20 and c["buckets"][0.1] == 8
    s = ttft_summary(c)
    assert s["requests"] == 20 and s["mean"] == pytest.approx(c["sum"] / 20)
    assert 0.08 < s["p50"] <= 0.25 and 0.1 < s["p95"] <= 0.25 and s["p50"] <= s["p95"]
    # another model's replicas are not counted
    assert ttft_counts(before, after, "other")["count"] == 0 and ttft_summary(ttft_counts(before, after, "other")) is None


def test_holds_of_a_step_pool():
    zero = samples_of(_exposition({"a": [0] * 13}))
    fast = ttft_counts(zero, samples_of(_exposition({"a": [0, 0, 0, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10]})))
    slow = ttft_counts(zero, samples_of(_exposition({"a": [0] * 9 + [10] * 4})))
    both = add_ttft_counts(fast, slow)
    assert both["count"] == 20 and both["sum"] == pytest.approx(fast["sum"] + slow["sum"])
    p = {k: ttft_summary(v)["p50"] for k, v in (("fast", fast), ("slow", slow), ("both", both))}
    assert p["fast"] <= p["both"] <= p["slow"] and p["fast"] <= 0.02 < 0.25 < p["slow"]


def test_by_deployment_keeps_a_prefill_decode_apps_pools_apart():
    """Both pools of a prefill/decode app count every request: per deployment
    each has the run's 10 requests; pooled, 20 of two distributions."""
    before = samples_of(_exposition({"p1": [0] * 13, "d1": [0] * 13, "x": [0] * 13}, "tiny"))
    after = samples_of(_exposition({"p1": [0] * 7 + [10] * 6, "d1": [0] * 4 + [10] * 9, "x": [0] * 13}, "tiny")
                       + _exposition({"o": [0] * 12 + [3]}, "other"))
    from llmctl.perf.metrics import ttft_counts_by_deployment

    groups = {"Prefill": ["p1"], "Decode": ["d1"], "Ingress": [], "Other": ["o"]}
    by = ttft_counts_by_deployment(before, after, "tiny", groups)
    assert set(by) == {"Prefill", "Decode"}  # no engines of the model: not a deployment of it
    assert by["Prefill"]["count"] == 10 and by["Decode"]["count"] == 10
    assert ttft_summary(by["Decode"])["p95"] <= 0.04 < ttft_summary(by["Prefill"])["p50"]
    assert ttft_counts(before, after, "tiny")["count"] == 20
