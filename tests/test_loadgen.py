"""`llmctl bench`'s arithmetic and flags (no cluster: the load itself is in
tests/test_scale_e2e.py)."""

from __future__ import annotations

from llmctl.loadgen import BenchResult, BenchSettings, RequestResult, percentiles

from helpers import run_cli


def test_percentiles_by_hand():
    # 1..4: p50 between 2 and 3 = 2.5; p90 at rank 2.7 = 3 + 0.7 = 3.7; p99 at 2.97 = 3.97
    assert percentiles([4, 1, 3, 2]) == {"p50": 2.5, "p90": 3.7, "p99": 3.97}
    assert percentiles([7]) == {"p50": 7, "p90": 7, "p99": 7}
    assert percentiles([]) == {"p50": None, "p90": None, "p99": None}


def test_summary_by_hand():
    s = BenchSettings("http://x/v1", "m", 2, 4, None, 16, 10, True)
    res = BenchResult(s, [
        RequestResult(True, 1.0, 0.2, [0.1, 0.1], 10, 20),
        RequestResult(True, 2.0, 0.4, [0.3], 10, 22),
        RequestResult(False, 0.5, error="HTTP 404", detail="x" * 5000, start=1.25),
        RequestResult(False, 0.5, error="HTTP 404", start=3.0),
    ], seconds=4.0)
    out = res.summary()
    # 2 done in 4 s = 0.5 req/s; 20 output tokens / 4 s = 5 tok/s; failures only counted
    assert (out["done"], out["failed"], out["errors"]) == (2, 2, {"HTTP 404": 2})
    assert (out["req_per_s"], out["output_tokens_per_s"], out["prompt_tokens_mean"]) == (0.5, 5.0, 21.0)
    assert abs(out["ttft_s"]["p50"] - 0.3) < 1e-12
    assert abs(out["itl_s"]["p50"] - 0.1) < 1e-12 and out["latency_s"]["p50"] == 1.5
    # -o FILE: each failed request as it failed, the server's answer cut short
    fails = res.to_json()["failures"]
    assert [(f["start"], f["error"], len(f["detail"])) for f in fails] == [(1.25, "HTTP 404", 1000), (3.0, "HTTP 404", 0)]


def test_bench_bad_flags(capsys):
    for args, line in [
        (["--requests", "5", "--duration", "3"], "error: --requests: give --requests or --duration, not both"),
        (["--concurrency", "0"], "error: --concurrency: must be a positive integer (got 0)"),
        (["--duration", "-1"], "error: --duration: must be a positive number of seconds (got -1)"),
    ]:
        r = run_cli(capsys, "bench", *args)
        assert r.code == 2 and r.err.strip() == line, r.err


def test_prompts_are_distinct_within_a_run_and_across_runs():
    from llmctl.loadgen import prompt_of

    run = [prompt_of(6, k, "run-a") for k in range(1, 3000)]
    assert len(set(run)) == len(run) and all(len(p.split()) == 6 for p in run)  # the number, spelled
    # another run's prompt of the same number: the same first words, then its own (no shared 16-token block)
    a, b = prompt_of(64, 7, "run-a").split(), prompt_of(64, 7, "run-b").split()
    assert a[:5] == b[:5] and a[5:16] != b[5:16]
