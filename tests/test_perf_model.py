"""The performance model (llmctl.perf): targets, the roofline's relations,
calibration on a synthetic sweep, the capacity plan and its CLI (issue 24).
No cluster: relations measured within one run of the model, no timings."""

from __future__ import annotations

import json
import math

import pytest

from helpers import run_cli
from llmctl.errors import UsageError
from llmctl.perf.calibrate import Calibration, fit, nnls
from llmctl.perf.roofline import Device, Efficiency, Engine, ModelShape, step_time
from llmctl.perf.steady import predict
from llmctl.perf.slo import parse_prices, parse_slo, parse_sweep
from llmctl.perf.sweep import goodput, max_rate_within


def test_slo_parsing():
    slo = parse_slo("ttft_p95=500ms,itl_p95=40ms")
    assert [(t.metric, t.percentile, t.seconds) for t in slo.targets] == [("ttft", 95, 0.5), ("itl", 95, 0.04)]
    assert slo.text() == "ttft_p95=500ms,itl_p95=40ms"
    assert parse_slo("tpot_p99=0.05s,e2e_p50=3s").to_json() == {"itl_p99": 0.05, "latency_p50": 3.0}
    for bad, words in [("ttft=500ms", "METRIC_pNN=DURATION"), ("ttft_p97=1s", "percentile p97"),
                       ("ttft_p95=fast", "not a duration"), ("", "no target"), ("foo_p95=1s", "METRIC_pNN")]:
        with pytest.raises(UsageError, match=words):
            parse_slo(bad)


def test_prices_and_sweeps():
    assert parse_prices("l4=0.70,H100=2.99", ["L4", "H100"]) == {"L4": 0.7, "H100": 2.99}
    with pytest.raises(UsageError, match="unknown GPU type 'X9'"):
        parse_prices("X9=1", ["L4"])
    assert parse_sweep("1,2,4").values == (1, 2, 4) and parse_sweep("1,2,4").mode == "concurrency"
    assert parse_sweep("rate=0.5,2").mode == "rate" and parse_sweep("rate=0.5,2").values == (0.5, 2.0)
    with pytest.raises(UsageError, match="positive integer"):
        parse_sweep("1.5")


def test_slo_met_reads_tpot_as_itl():
    slo = parse_slo("ttft_p95=500ms,itl_p95=40ms")
    ok = {"ttft_s": {"p95": 0.4}, "tpot_s": {"p95": 0.03}, "itl_s": {"p95": 9.0}}
    assert slo.met(ok)  # chunk gaps (itl_s) do not count: Ray Serve batches stream chunks
    assert not slo.met({**ok, "tpot_s": {"p95": 0.05}})


SHAPE = ModelShape("m", 1, 8e9, 16e9, 0.0, 0, 0, 131072.0, 4096, 32, 4096)
H100 = Device("H100", 3350e9, 989e12, 450e9)


def test_roofline_relations():
    eff, eng = Efficiency(), Engine(256, 8192, 400_000)
    preds = [predict(SHAPE, H100, eff, eng, concurrency=c, isl=1000, osl=200) for c in (1, 4, 16, 64)]
    rates = [p.rate for p in preds]
    assert rates == sorted(rates)  # more concurrency, more throughput ...
    assert [p.itl_s for p in preds] == sorted(p.itl_s for p in preds)  # ... at a longer inter-token time
    assert preds[0].decode_bound == "memory_bandwidth"  # one sequence: the weights' read dominates
    # Little's law holds in the steady state
    for p in preds:
        assert math.isclose(p.rate, p.concurrency / p.latency_s, rel_tol=1e-6)
    # a faster memory, a faster decode; fp8 weights (half the bytes) too
    fast = predict(SHAPE, Device("x", 2 * 3350e9, 989e12), eff, eng, concurrency=1, isl=1000, osl=200)
    assert fast.itl_s < preds[0].itl_s
    half = ModelShape("m", 1, 8e9, 8e9, 0.0, 0, 0, 131072.0, 4096, 32, 4096)
    assert predict(half, H100, eff, eng, concurrency=1, isl=1000, osl=200).itl_s < preds[0].itl_s
    # beyond max_num_seqs requests queue: TTFT grows, the rate does not
    capped = predict(SHAPE, H100, eff, Engine(8, 8192, 400_000), concurrency=32, isl=1000, osl=200)
    at_cap = predict(SHAPE, H100, eff, Engine(8, 8192, 400_000), concurrency=8, isl=1000, osl=200)
    assert capped.capped_by == "max_num_seqs" and capped.ttft_s > at_cap.ttft_s
    assert math.isclose(capped.rate, at_cap.rate, rel_tol=0.02)


def test_tensor_parallel_splits_the_weights_read():
    tp2 = ModelShape("m", 2, 8e9, 8e9, 0.0, 0, 0, 65536.0, 4096, 32, 4096)
    s1 = step_time(SHAPE, H100, Efficiency(), decode=1, prompt_tokens=0, context=1000)
    s2 = step_time(tp2, H100, Efficiency(), decode=1, prompt_tokens=0, context=1000)
    assert s2.mem_s < s1.mem_s and s2.comm_s > 0 and s1.comm_s == 0


def test_requests_sent_apart_are_a_transient_between_alone_and_a_burst():
    from llmctl.perf.burst import simulate

    eff, eng = Efficiency(), Engine(256, 8192, 400_000)
    isl, osl, n = 1000, 200, 64
    burst = simulate(SHAPE, H100, eff, eng, requests=n, isl=isl, osl=osl)
    assert simulate(SHAPE, H100, eff, eng, requests=n, isl=isl, osl=osl, interval=0.0) == burst
    # far apart, each request runs alone: its TTFT is its own prefill, its TPOT one sequence's decode step
    alone = simulate(SHAPE, H100, eff, eng, requests=n, isl=isl, osl=osl, interval=1e4)
    prefill = step_time(SHAPE, H100, eff, decode=0, prompt_tokens=isl, context=isl + osl / 2, prompt_context=isl / 2)
    decode = step_time(SHAPE, H100, eff, decode=1, prompt_tokens=0, context=isl + osl / 2)
    assert math.isclose(alone.mean_ttft_s, eff.request_s + prefill.seconds, rel_tol=1e-6)
    assert math.isclose(alone.mean_tpot_s, decode.seconds, rel_tol=1e-6)
    # in between: the closer the requests, the more they share steps and wait for each other
    ttfts = [simulate(SHAPE, H100, eff, eng, requests=n, isl=isl, osl=osl, interval=i).mean_ttft_s
             for i in (1.0, 0.1, 0.01, 0.0)]
    tpots = [simulate(SHAPE, H100, eff, eng, requests=n, isl=isl, osl=osl, interval=i).mean_tpot_s
             for i in (1.0, 0.1, 0.01, 0.0)]
    assert ttfts == sorted(ttfts) and tpots == sorted(tpots) and burst.mean_tpot_s > alone.mean_tpot_s


def test_a_burst_beyond_the_kv_cache_is_preempted_and_recomputed():
    """vLLM V1 admits a request when its prompt fits and preempts the last admitted when a running one has
    no room for its next token; with prefix caching the readmitted request finds part of its KV cached."""
    from llmctl.perf.burst import simulate

    eff, isl, osl, n = Efficiency(), 1000, 400, 64
    roomy = simulate(SHAPE, H100, eff, Engine(256, 8192, 10**7), requests=n, isl=isl, osl=osl)
    tight = Engine(256, 8192, 16 * (isl + osl))  # 16 whole sequences; 22 prompts
    cached = simulate(SHAPE, H100, eff, tight, requests=n, isl=isl, osl=osl)
    recompute = simulate(SHAPE, H100, eff, tight, requests=n, isl=isl, osl=osl, prefix_caching=False)
    assert all(math.isfinite(b.makespan_s) and math.isfinite(b.mean_tpot_s) for b in (roomy, cached, recompute))
    assert roomy.makespan_s < cached.makespan_s < recompute.makespan_s
    assert roomy.mean_ttft_s < cached.mean_ttft_s
    # a chunk no KV cache can hold never runs: said, not looped on
    assert math.isinf(simulate(SHAPE, H100, eff, Engine(256, 8192, 100), requests=2, isl=isl, osl=osl).makespan_s)


def test_the_counted_and_the_followed_burst_agree_where_the_cache_holds_everything():
    """burst._roomy counts the decoding requests; burst._full_cache follows each through V1's admission and
    preemption. Where the KV cache holds every request whole they take the same steps."""
    import random

    from llmctl.perf import burst

    rng = random.Random(7)
    for _ in range(40):
        n, isl, osl = rng.randint(1, 120), rng.choice([16, 1000, 9000]), rng.choice([1, 2, 50, 300])
        eng = Engine(rng.choice([8, 256]), rng.choice([512, 8192]), 10**9)
        kw = dict(n=n, isl=isl, osl=osl, first_tokens_only=rng.random() < 0.3, interval=rng.choice([0.0, 0.05]))
        a = burst._roomy(SHAPE, H100, Efficiency(), eng, **kw)
        b = burst._full_cache(SHAPE, H100, Efficiency(), eng, prefix_caching=True, **kw)
        for x, y in ((a.mean_ttft_s, b.mean_ttft_s), (a.makespan_s, b.makespan_s), (a.mean_tpot_s, b.mean_tpot_s)):
            assert (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-9), (kw, eng)


def test_front_end_queue_between_its_two_limits():
    """One client waits one service time; many approach the front end's rate
    1/s, and the wait grows smoothly with the clients before that (Schweitzer's
    MVA: within a few per cent of exact MVA for one queue and a delay)."""
    from llmctl.perf.steady import frontend_wait

    s, z = 0.1, 0.3
    assert frontend_wait(s, 1, z) == pytest.approx(s)
    assert frontend_wait(0.0, 50, z) == 0.0

    def exact(n: int) -> float:  # exact mean value analysis, integer clients
        q = 0.0
        for k in range(1, n + 1):
            r = s * (1 + q)
            q = k / (r + z) * r
        return r

    rates = []
    for n in (1, 2, 4, 8, 16, 64):
        r = frontend_wait(s, n, z)
        rates.append(n / (z + r))
        assert abs(r / exact(n) - 1) < 0.15, (n, r, exact(n))
    assert all(a < b for a, b in zip(rates, rates[1:]))  # more clients, more throughput ...
    assert rates[-1] < 1 / s and rates[-1] > 0.95 / s  # ... up to the front end's rate
    assert rates[2] < 0.97 * min(4 / z, 1 / s)  # a hard cap would put 4 clients at full speed


def test_nnls_recovers_non_negative_coefficients():
    rows = [[1.0, x, x * x] for x in (1, 2, 3, 5, 8)]
    y = [0.5 + 0.2 * x + 0.01 * x * x for x in (1, 2, 3, 5, 8)]
    a, b, c = nnls(rows, y)
    assert abs(a - 0.5) < 1e-3 and abs(b - 0.2) < 1e-3 and abs(c - 0.01) < 1e-4
    assert min(nnls([[1.0, 1.0], [1.0, 2.0]], [1.0, 0.5])) >= 0


def _synthetic_sweep(eff: Efficiency, replicas: int = 1, stretch: float = 1.0) -> dict:
    """A sweep as bench --sweep writes it, measured on a 'CPU' that follows ``eff`` exactly."""
    from llmctl.perf.calibrate import stretched

    steps = []
    dev = Device("cpu", math.inf, math.inf)
    for i, c in enumerate((1, 2, 4, 8, 16)):
        p = predict(SHAPE, dev, stretched(eff, stretch), Engine(256, 4096, 0), concurrency=c, isl=100, osl=64)
        tot = c * replicas
        summ = {"done": 100, "req_per_s": p.rate * replicas, "prompt_tokens_mean": 100,
                "tpot_s": {"mean": p.itl_s, "p95": p.itl_p95_s}, "ttft_s": {"mean": p.ttft_s, "p95": p.ttft_p95_s}}
        steps.append({"index": i, "mode": "concurrency", "value": tot, "concurrency": tot, "summary": summ})
    return {"kind": "llmctl-bench-sweep", "settings": {"prompt_tokens": 100, "max_tokens": 64}, "steps": steps,
            "replicas": {"LLMServer:m": [{"t": 0, "running": replicas, "target": replicas}]}}


def test_calibration_recovers_the_overheads_it_was_made_with():
    truth = Efficiency(step_s=0.002, seq_s=0.0004, token_s=2e-5, request_s=0.05, ttft_steps=20, ttft_p95_ratio=2.0,
                       itl_p95_ratio=1.4, frontend_s=0)
    dev = Device("cpu", math.inf, math.inf)
    cal = fit([_synthetic_sweep(truth), _synthetic_sweep(truth, 2, 1.6)], SHAPE, dev, Engine(256, 4096, 0),
              base=Efficiency(frontend_s=0))
    e = cal.efficiency
    assert e.source == "fitted" and cal.shared_host
    assert abs(e.step_s - 0.002) / 0.002 < 0.1 and abs(e.seq_s - 0.0004) / 0.0004 < 0.1
    assert abs(e.ttft_p95_ratio - 2.0) < 1e-6 and abs(e.itl_p95_ratio - 1.4) < 1e-6
    assert abs(cal.replica_stretch[2] - 1.6) < 0.05 and cal.replica_stretch[1] == 1.0
    # the 2-replica sweep also has its own fit: the same overheads, 1.6 x slower
    e2 = cal.for_replicas(2)
    assert cal.per_replicas[2] is e2
    assert abs(e2.step_s / (0.002 * 1.6) - 1) < 0.1 and abs(e2.seq_s / (0.0004 * 1.6) - 1) < 0.1
    assert cal.for_replicas(3).step_s > e.step_s  # unmeasured: the 1-replica fit, stretched
    for f in cal.fit:  # the fitted model reproduces what it was fitted to
        assert abs(f["rate_fit"] / f["rate"] - 1) < 0.05


def test_plan_stays_within_what_its_own_sweep_measured():
    """A calibrated plan never puts its rate above a step of its own sweep that failed the targets, nor below one
    that met them (at the sweep's lengths). Here the model is fitted on a sweep it follows exactly, and the
    calibration's record of what was measured then says the 8- and 16-client steps took twice the TTFT (a model
    that misses near the target, as a CPU fit on three steps once did): the plan follows the measurement there,
    as bench --slo reads such a sweep."""
    import copy

    from llmctl.perf.capacity import max_rate

    truth = Efficiency(step_s=0.002, seq_s=0.0004, token_s=2e-5, request_s=0.05, ttft_steps=20, ttft_p95_ratio=2.0,
                       itl_p95_ratio=1.4, frontend_s=0)
    dev, engine = Device("cpu", math.inf, math.inf), Engine(256, 4096, 0)
    sweep = _synthetic_sweep(truth)
    cal = fit([sweep], SHAPE, dev, engine, base=Efficiency(frontend_s=0))
    missed = copy.deepcopy(sweep["steps"])
    for st, m in zip(missed[3:], cal.measured[3:]):
        st["summary"]["ttft_s"] = m["stats"]["ttft_s"] = {k: 2 * v for k, v in m["stats"]["ttft_s"].items()}
    t4, t8 = (missed[i]["summary"]["ttft_s"]["p95"] for i in (2, 3))
    slo = parse_slo(f"ttft_p95={(t4 + t8) / 2 * 1000:.3f}ms")  # between the 4-client step and the 8-client one
    model_only = Calibration(**{**cal.__dict__, "measured": []})
    free = max_rate(SHAPE, dev, cal.efficiency, engine, slo, isl=100, osl=64, cal=model_only)
    got = max_rate(SHAPE, dev, cal.efficiency, engine, slo, isl=100, osl=64, cal=cal)
    r8 = missed[3]["summary"]["req_per_s"]
    assert free[0] > r8  # the model alone plans above the rate the sweep failed at ...
    assert got[0] == pytest.approx(max_rate_within(missed, slo)["req_per_s"]) and got[0] < r8  # ... the plan does not
    assert got[3] == "measured_fail" and got[2].rate == pytest.approx(got[0], rel=1e-3)
    # at other lengths the sweep's steps say nothing: the model's answer
    assert max_rate(SHAPE, dev, cal.efficiency, engine, slo, isl=300, osl=64, cal=cal)[3] != "measured_fail"
    # prompts the engine counted 1.5 x longer than the sweep asked for (bench sends about N words) still are the
    # plan's requests of the asked length
    for m in cal.measured:
        m["isl"] = 1.5 * m["isl_asked"]
    assert max_rate(SHAPE, dev, cal.efficiency, engine, slo, isl=100, osl=64, cal=cal)[0] == pytest.approx(got[0])
    # a model more cautious than its sweep (every step met the target): at least the fastest step's rate
    tight = parse_slo(f"ttft_p95={t4 * 1000:.3f}ms")
    for m in cal.measured:
        m["stats"]["ttft_s"] = {k: v / 100 for k, v in m["stats"]["ttft_s"].items()}
    fastest = max(m["rate"] for m in cal.measured)
    got = max_rate(SHAPE, dev, cal.efficiency, engine, tight, isl=100, osl=64, cal=cal)
    assert max_rate(SHAPE, dev, cal.efficiency, engine, tight, isl=100, osl=64, cal=model_only)[0] < fastest
    assert got[0] == pytest.approx(fastest) and got[3] == "measured_pass"


def test_a_trace_window_reads_the_replicas_the_peak_was_sized_with():
    """On a shared host (a CPU calibration) the replica counts come from a search; plan --trace's windows read the
    same counts, so a window as busy as the peak gets the peak's replicas (it once got None: only 1 and 2 were
    kept for the windows while the peak's search went on to 3)."""
    from llmctl.perf.capacity import plan_capacity
    from llmctl.workload import TracePlan

    truth = Efficiency(step_s=0.002, seq_s=0.0004, token_s=2e-5, request_s=0.05, ttft_steps=20, ttft_p95_ratio=2.0,
                       itl_p95_ratio=1.4, frontend_s=0)
    dev, engine = Device("cpu", math.inf, math.inf), Engine(256, 4096, 0)
    cal = fit([_synthetic_sweep(truth)], SHAPE, dev, engine, base=Efficiency(frontend_s=0))
    slo = parse_slo("ttft_p95=2s")
    one = plan_capacity([("cpu", 1, SHAPE, dev, engine)], slo, isl=100, osl=64, rate=None, prices={}, cal=cal)[0]
    peak = 2.5 * one.max_rate
    row = plan_capacity([("cpu", 1, SHAPE, dev, engine)], slo, isl=100, osl=64, rate=peak, prices={}, cal=cal)[0]
    assert row.replicas == 3 and row.by_replicas[3] >= peak > row.by_replicas[2]
    tp = TracePlan({}, None)
    assert [tp.replicas_for(row, r) for r in (0.0, 0.5 * one.max_rate, 1.5 * one.max_rate, peak)] == [1, 1, 2, 3]


def test_max_rate_within_interpolates_between_steps():
    def step(i, rate, ttft95, itl95):
        return {"index": i, "summary": {"done": 10, "req_per_s": rate, "ttft_s": {"p95": ttft95}, "tpot_s": {"p95": itl95},
                                        "latency_s": {"p95": 1.0}}}
    steps = [step(0, 1.0, 0.2, 0.01), step(1, 2.0, 0.4, 0.02), step(2, 3.0, 0.8, 0.03)]
    got = max_rate_within(steps, parse_slo("ttft_p95=500ms,itl_p95=40ms"))
    # between 2.0 (ttft 0.4) and 3.0 (ttft 0.8): 0.5 is a quarter of the way
    assert got["req_per_s"] == pytest.approx(2.25) and got["interpolated"] and got["best_step"] == 1
    assert max_rate_within(steps, parse_slo("ttft_p95=100ms"))["req_per_s"] is None
    assert max_rate_within(steps, parse_slo("ttft_p95=2s"))["req_per_s"] == 3.0


def test_goodput_counts_requests_meeting_every_target():
    reqs = [{"ok": True, "ttft": 0.1, "tpot": 0.01, "latency": 1, "output_tokens": 10},
            {"ok": True, "ttft": 0.9, "tpot": 0.01, "latency": 1, "output_tokens": 10},
            {"ok": False, "ttft": None, "tpot": None, "latency": 1, "output_tokens": 0}]
    assert goodput(reqs, parse_slo("ttft_p95=500ms,itl_p95=20ms"), 2.0) == {"requests": 1, "req_per_s": 0.5,
                                                                              "output_tokens_per_s": 5.0}


def test_plan_slo_json_marks_the_cheapest(capsys):
    r = run_cli(capsys, "plan", "--model", "llama-3.1-8b-instruct", "--slo", "ttft_p95=500ms,itl_p95=40ms", "--rate", "20",
                "--isl", "1000", "--osl", "200", "--price", "L4=0.70,H100=2.99", "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["estimate"] is True and d["slo"] == {"ttft_p95": 0.5, "itl_p95": 0.04}
    rows = d["rows"]
    assert {"L4", "H100", "A100-80G"} <= {x["gpu"] for x in rows}
    meets = [x for x in rows if x["meets"] and x["usd_per_hour"] is not None]
    cheapest = [x for x in rows if x["cheapest"]]
    assert len(cheapest) == 1 and cheapest[0]["usd_per_hour"] == min(x["usd_per_hour"] for x in meets)
    for x in rows:
        if x["max_rate"] > 0 and x["replicas"]:
            assert x["replicas"] == math.ceil(20 / x["max_rate"] - 1e-9)
            assert x["ttft_p95_s"] <= 0.5 + 1e-9 and x["itl_p95_s"] <= 0.04 + 1e-9
            assert x["target_ongoing_requests"] <= x["max_ongoing_requests"]
            assert x["bound_text"]
            price = 0.70 if x["gpu"] == "L4" else 2.99 if x["gpu"] == "H100" else None
            if price:
                assert x["usd_per_hour"] == pytest.approx(price * x["tp"] * x["replicas"])
    assert d["prices"]["H100"]["source"].startswith("given")
    assert "date" in d["prices"]["A100-80G"]  # the dated default table


def test_plan_slo_text_says_estimate(capsys):
    r = run_cli(capsys, "plan", "--model", "qwen2.5-7b-instruct", "--gpu", "H100", "--slo", "ttft_p95=300ms,itl_p95=30ms",
                "--rate", "5")
    assert r.code == 0, r.err
    assert "estimates" in r.out and "← cheapest" in r.out and "docs/capacity.md" in r.out
    assert "Next: llmctl gen-config --model qwen2.5-7b-instruct --slo ttft_p95=300ms,itl_p95=30ms --rate 5" in r.out


def test_plan_slo_errors(capsys):
    r = run_cli(capsys, "plan", "--model", "qwen2.5-7b-instruct", "--gpu", "cpu", "--slo", "ttft_p95=1s")
    assert r.code == 2 and "calibrate it with `llmctl bench --sweep" in r.err
    r = run_cli(capsys, "plan", "--model", "qwen2.5-7b-instruct", "--price", "L4=1")
    assert r.code == 2 and "add --slo" in r.err
    r = run_cli(capsys, "plan", "--model", "qwen2.5-7b-instruct", "--slo", "ttft_p95=1s", "--rate", "-1")
    assert r.code == 2 and "--rate: must be a positive number" in r.err


def test_gen_config_slo_writes_the_chosen_setup(tmp_path, capsys):
    r = run_cli(capsys, "gen-config", "--model", "llama-3.1-8b-instruct", "--slo", "ttft_p95=500ms,itl_p95=40ms", "--rate", "20",
                "--isl", "1000", "--osl", "200", "--price", "H100=2.99", "--yes", "-o", tmp_path)
    assert r.code == 0, r.err
    p = run_cli(capsys, "plan", "--model", "llama-3.1-8b-instruct", "--slo", "ttft_p95=500ms,itl_p95=40ms", "--rate", "20",
                "--isl", "1000", "--osl", "200", "--price", "H100=2.99", "--json").json()
    best = next(x for x in p["rows"] if x["cheapest"])
    import yaml

    cfg = yaml.safe_load(next((tmp_path / "model_config").glob("*.yaml")).read_text())
    assert cfg["accelerator_type"] == best["gpu"] and cfg["engine_kwargs"]["tensor_parallel_size"] == best["tp"]
    dep = cfg["deployment_config"]
    assert dep["max_ongoing_requests"] == best["max_ongoing_requests"]
    assert dep["autoscaling_config"]["target_ongoing_requests"] == best["target_ongoing_requests"]
    assert dep["autoscaling_config"]["max_replicas"] == best["replicas"]
    assert "capacity (estimate)" in r.err


def test_gen_config_slo_plans_the_engine_it_writes(tmp_path, capsys):
    """gen-config --slo sizes the quantization and max_num_seqs it writes: the
    setup it picks is plan --slo's with the same engine settings, not the
    unquantized default's."""
    import yaml

    slo = ["--slo", "ttft_p95=500ms,itl_p95=40ms", "--rate", "20", "--gpu", "H100"]
    engine = ["--quantization", "fp8", "--max-num-seqs", "64"]
    r = run_cli(capsys, "gen-config", "--model", "llama-3.1-8b-instruct", *slo, *engine, "--yes", "-o", tmp_path)
    assert r.code == 0, r.err
    with_settings = run_cli(capsys, "plan", "--model", "llama-3.1-8b-instruct", *slo, *engine, "--json").json()
    default = run_cli(capsys, "plan", "--model", "llama-3.1-8b-instruct", *slo, "--json").json()
    best = next(x for x in with_settings["rows"] if x["cheapest"])
    plain = next(x for x in default["rows"] if x["cheapest"])
    assert (best["max_rate"], best["max_ongoing_requests"]) != (plain["max_rate"], plain["max_ongoing_requests"])
    cfg = yaml.safe_load(next((tmp_path / "model_config").glob("*.yaml")).read_text())
    assert cfg["engine_kwargs"]["quantization"] == "fp8" and cfg["engine_kwargs"]["max_num_seqs"] == 64
    assert cfg["deployment_config"]["max_ongoing_requests"] == best["max_ongoing_requests"]
    assert f"{best['max_rate']:.2f} req/s per replica" in r.err


def test_cpu_plan_from_a_profile(tmp_path, config_model, capsys):
    truth = Efficiency(step_s=0.002, seq_s=0.0004, token_s=2e-5, request_s=0.05, ttft_steps=20, frontend_s=0)
    prof = tmp_path / "bench.json"
    prof.write_text(json.dumps(_synthetic_sweep(truth)))
    r = run_cli(capsys, "plan", "--model", config_model, "--gpu", "cpu", "--profile", prof, "--slo",
                "ttft_p95=2s,itl_p95=50ms", "--isl", "100", "--osl", "64", "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["calibration"]["device"] == "cpu" and d["calibration"]["efficiency"]["source"] == "fitted"
    row = d["rows"][0]
    assert row["gpu"] == "cpu" and row["max_rate"] > 0 and row["by_replicas"]["1"] == pytest.approx(row["max_rate"])


def test_slo_at_engine_needs_a_sweep_that_read_the_engines(tmp_path, config_model, capsys):
    """--slo-at engine fits vLLM's own TTFT, which only a sweep that scraped the engines has: a sweep without it, no
    sweep, an unknown side or no --slo each get one line naming the flag, the file or the step."""
    truth = Efficiency(step_s=0.002, seq_s=0.0004, token_s=2e-5, request_s=0.05, ttft_steps=20, frontend_s=0)
    prof = tmp_path / "bench.json"
    prof.write_text(json.dumps(_synthetic_sweep(truth)))
    plan = ["plan", "--model", config_model, "--gpu", "cpu", "--slo", "ttft_p95=2s,itl_p95=50ms", "--isl", "100", "--osl", "64"]
    r = run_cli(capsys, *plan, "--profile", prof, "--slo-at", "engine")
    assert r.code == 2 and f"profile: {prof}: step" in r.err and "no engine-side TTFT" in r.err, r.err
    r = run_cli(capsys, *plan, "--slo-at", "engine")
    assert r.code == 2 and "--slo-at" in r.err and "--profile" in r.err, r.err
    r = run_cli(capsys, *plan, "--profile", prof, "--slo-at", "server")
    assert r.code == 2 and "--slo-at" in r.err and "client" in r.err and "engine" in r.err, r.err
    r = run_cli(capsys, "plan", "--model", config_model, "--slo-at", "engine")
    assert r.code == 2 and "add --slo" in r.err, r.err
