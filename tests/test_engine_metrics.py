"""vLLM's metrics as Ray exports them (a scrape of the local head's metrics
endpoint while two replicas served, stored in tests/data): per replica, the
gauges as they are, rates between two scrapes, stopped replicas left out."""

from __future__ import annotations

from pathlib import Path

from llmctl.perf.metrics import parse_prometheus, samples_of, stats_of

DATA = Path(__file__).parent / "data" / "ray_vllm_metrics.prom"


def test_parse_and_group_by_replica():
    text = DATA.read_text()
    names = {n for n, _, _ in parse_prometheus(text)}
    assert {"ray_vllm_kv_cache_usage_perc", "ray_vllm_num_requests_running", "ray_vllm_generation_tokens_total"} <= names
    now = samples_of(text, t=10.0)
    live = [s for s in now.values() if s.live]
    assert len(now) == 3 and len(live) == 2  # a replica of the replaced deployment kept only its counters
    stats = stats_of(now)
    assert [s.replica for s in stats] == sorted(s.replica for s in live)
    assert all(s.model == "tiny-cap" and s.kv_usage > 0 and s.running >= 1 for s in stats)
    assert all(s.generation_tokens_per_s is None for s in stats)  # one scrape: no rate yet
    assert all(0 < s.ttft_mean_s < 10 for s in stats)


def test_rates_between_two_scrapes():
    text = DATA.read_text()
    before = samples_of(text, t=0.0)
    later = text.replace("ray_vllm_generation_tokens_total{", "XX{", 0)
    now = samples_of(later, t=2.0)
    for s in now.values():
        s.generation_tokens += 100.0
        s.ttft_sum += 0.5
        s.ttft_count += 5
    stats = stats_of(now, before)
    assert all(abs(s.generation_tokens_per_s - 50.0) < 1e-9 for s in stats)
    assert all(abs(s.ttft_mean_s - 0.1) < 1e-9 for s in stats)


def test_status_metrics_needs_a_cluster(capsys):
    from helpers import run_cli

    r = run_cli(capsys, "status", "--metrics")
    assert r.code == 3  # no cluster in this test's LLMCTL_HOME
    r = run_cli(capsys, "top", "--interval", "0")
    assert r.code == 2 and "--interval: must be a positive number" in r.err


def test_engines_per_deployment_between_two_scrapes():
    """A deployment's engines: the growth of its replicas' counters, only
    theirs (a replica of another deployment, or one Serve does not list, is
    not counted), with means over the requests in between."""
    from llmctl.perf.metrics import engines_of, first_tokens

    text = DATA.read_text()
    before = samples_of(text, t=0.0)
    now = samples_of(text, t=2.0)
    live = sorted(r for r, s in now.items() if s.live)
    for i, rid in enumerate(live):
        s = now[rid]
        s.ttft_count += 4 + i
        s.ttft_sum += 0.1 * (4 + i)
        s.generation_tokens += 32
        s.prompt_tokens += 400
    got = engines_of(before, now, {"Prefill:m": live[:1], "Decode:m": live[1:], "Gone:m": ["not-a-replica"]})
    assert set(got) == {"Prefill:m", "Decode:m"}
    p, d = got["Prefill:m"], got["Decode:m"]
    assert (p["replicas"], p["requests"], d["requests"]) == (1, 4, 5)
    assert p["prompt_tokens"] == 400 and p["generation_tokens"] == 32
    assert abs(p["ttft_mean_s"] - 0.1) < 1e-9 and abs(d["ttft_mean_s"] - 0.1) < 1e-9
    assert p["itl_mean_s"] is None  # no inter-token latencies between the scrapes
    # what bench waits for before it reads them: a first token for each request (of the model)
    assert first_tokens(before, now) == 9 and first_tokens(before, now, "tiny-cap") == 9
    assert first_tokens(before, now, "another-model") == 0
    # ... per deployment when bench knows them: each pool of a prefill/decode app counts every request
    from llmctl.perf.metrics import all_counted

    pools = {"Prefill:m": live[:1], "Decode:m": live[1:], "OpenAiIngress": ["ingress-replica"]}
    assert all_counted(before, now, 4, "tiny-cap", pools) and not all_counted(before, now, 5, "tiny-cap", pools)
    assert all_counted(before, now, 9, "tiny-cap")  # all engines together: 4 + 5
    assert not all_counted(before, now, 1, "another-model", pools)  # no engine of that model: nothing counted
