"""The capacity model against measured GPU serving series (issue 37):
tests/data/gpu_serving_measurements.yaml, every point counted; plan
--concurrency / --rate through the real entry point."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import run_cli
from llmctl.hardware import TABLE
from llmctl.perf.measured import RANGES, evaluate, held_out, load_series, setup_of, summarize

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "gpu_serving_measurements.yaml"
SERIES = load_series(DATA)


@pytest.fixture(scope="module")
def results():
    return evaluate(SERIES)


def test_the_file_is_complete_and_every_series_is_known():
    assert DATA.read_text().startswith("# Measured vLLM serving performance")
    assert len(SERIES) == 144 and sum(len(s["points"]) for s in SERIES) == 751
    names = {g.name for g in TABLE}
    for s in SERIES:  # llmctl knows every model and GPU of the file: none is left out
        st = setup_of(s)
        assert st.gpu in names and st.shape is not None and st.engine.max_num_seqs > 0, s["id"]
    assert {setup_of(s).gpu for s in SERIES} == {"H100", "H200", "B200", "B300"}
    assert sum(held_out(s["id"]) for s in SERIES) == 32


def test_output_throughput_within_30_percent(results):
    points, _ = results
    assert len(points) == 751  # every point counts
    s = summarize(points, None)["all"]
    assert s["within"] >= 0.85 * s["n"], s
    by_range = summarize(points, "range")
    assert set(by_range) == {name for name, _, _ in RANGES}
    for name, r in by_range.items():
        assert r["within"] >= 0.75 * r["n"], (name, r)
    held = [p for p in points if p.tags["split"] == "held-out"]
    assert sum(p.within() for p in held) >= 0.85 * len(held)


def test_slo_rates_within_30_percent(results):
    _, slos = results
    assert len(slos) >= 40
    assert sum(abs(s.error) <= 0.30 for s in slos) >= 0.80 * len(slos)


# The SLO-rate cases the model misses by more than ±30 % (docs/capacity.md lists them with their figures and causes).
# Each case is its own test: a miss fixed here is an XPASS (strict: fails until it leaves this list), a new miss fails.
SLO_MISSES = {
    ("MiniMax-M2.5|b200_sxm|fp4|tp2|1024/1024|vnightly-5b8c30d62b754b57", "ttft_p50=1s,itl_p50=30ms"),
    ("MiniMax-M2.5|b200_sxm|fp8|tp2|1024/1024|v0.19.0", "ttft_p50=1s,itl_p50=30ms"),
    ("MiniMax-M2.5|b200_sxm|fp8|tp2|8192/1024|v0.17.0", "ttft_p50=2s,itl_p50=50ms"),
    ("MiniMax-M2.5|b200_sxm|fp8|tp2|ep2|1024/1024|v0.19.0", "ttft_p50=1s,itl_p50=30ms"),
    ("MiniMax-M2.5|b300_sxm|fp8|tp2|1024/1024|v0.19.0", "ttft_p50=1s,itl_p50=30ms"),
    ("MiniMax-M2.5|b300_sxm|fp8|tp2|8192/1024|v0.19.0", "ttft_p50=1s,itl_p50=30ms"),
    ("Llama-3.1-70B|h100_sxm|fp8|tp2|8192/1024|v?", "ttft_p50=1s,itl_p50=30ms"),
    ("Llama-3.1-70B|h100_sxm|fp8|tp2|8192/1024|v?", "ttft_p50=2s,itl_p50=50ms"),
    ("Llama-3.1-70B|h200_sxm|fp8|tp1|1024/8192|v?", "ttft_p50=1s,itl_p50=30ms"),
    ("Llama-3.1-70B|h200_sxm|fp8|tp2|8192/1024|v?", "ttft_p50=1s,itl_p50=30ms"),
    ("gpt-oss-120b|h200_sxm|fp4|tp1|8192/1024|v0.18.0", "ttft_p50=1s,itl_p50=30ms"),
}


def _slo_cases():
    """Every (series, target) whose measured points cross the target: read off the data alone."""
    from llmctl.perf.measured import SLO_TARGETS, measured_slo_rate

    return [(s["id"], text) for s in SERIES for text, a, b in SLO_TARGETS
            if measured_slo_rate(s["points"], int(s["osl"]), a, b) is not None]


def test_the_miss_list_names_real_cases():
    assert SLO_MISSES <= set(_slo_cases()) and len(_slo_cases()) == 63


@pytest.mark.parametrize("case", [pytest.param(c, id=f"{c[0]} {c[1]}", marks=pytest.mark.xfail(strict=True, reason="a listed miss"))
                                  if c in SLO_MISSES else pytest.param(c, id=f"{c[0]} {c[1]}") for c in _slo_cases()])
def test_slo_rate_case(results, case):
    _, slos = results
    r = next(s for s in slos if (s.series, s.target) == case)
    assert abs(r.error) <= 0.30, f"{case}: {r.predicted:.2f} vs {r.measured:.2f} req/s ({r.error:+.0%})"


def test_docs_and_bands_are_current():
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "published.py"), "--check"], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 0, "docs/capacity.md or llmctl/perf/accuracy.json is stale: run bench/published.py"


def test_a_gpu_the_calibration_lacks_takes_its_band_from_the_runs_on_it():
    from llmctl.perf import bands

    acc = bands.accuracy()
    calibrated = acc["domain"]["gpu"][0]
    tags = {"gpu": "A100-80G", "kind": "dense", "quant": "bf16", "tp": "1"}
    checks = [(tags, "tok_s", r) for r in (0.6, 0.8, 1.0, 1.2, 1.4)] + [(dict(tags, gpu=calibrated), "tok_s", 9.0)] * 5
    out = bands.with_checks({"bands": {k: dict(v) for k, v in acc["bands"].items() if k != "gpu"} | {
        "gpu": {g: e for g, e in acc["bands"]["gpu"].items() if g == calibrated}}, "domain": acc["domain"]}, checks, "test")
    got = out["bands"]["gpu"]["A100-80G"]["tok_s"]
    assert got["from"] == "checks" and got["points"] == 5 and 0.6 < got["low"] < got["high"] < 1.4
    assert out["bands"]["gpu"][calibrated] == acc["bands"]["gpu"][calibrated]  # a calibrated GPU keeps its own
    assert "bf16" not in out["bands"]["quant"] and out["domain"] == acc["domain"]
    # what plan shows for such a GPU: the widest of its kinds, its GPU's from the runs on it
    shipped = acc["bands"]["gpu"].get("A100-80G", {}).get("tok_s")
    assert shipped and shipped["from"] == "checks"
    b = bands.band("tok_s", {"gpu": "A100-80G", "kind": "dense", "quant": "bf16", "tp": "1"})
    assert b.lo <= shipped["low"] and b.hi >= shipped["high"]


def test_the_fit_never_reads_the_held_out_series():
    src = (ROOT / "bench" / "fit_gpu.py").read_text()
    assert "if not held_out(s[\"id\"])" in src


# ---------------------------------------------------------------- plan --concurrency / --rate


def _rows(capsys, *args):
    r = run_cli(capsys, "plan", *args, "--json")
    assert r.code == 0, r.err
    return r.json()


def test_plan_concurrency_json_per_gpu_and_tp(capsys):
    d = _rows(capsys, "--model", "llama-3.1-70b-instruct-fp8", "--concurrency", "1,8,64")
    assert d["mode"] == "concurrency" and d["values"] == [1, 8, 64] and d["per"] == "replica" and d["estimate"]
    setups = sorted({(x["gpu"], x["tp"]) for x in d["rows"]})
    assert {"H100", "H200", "B200", "B300"} <= {g for g, _ in setups} and len(setups) >= 6
    for gpu, tp in setups:
        rows = sorted((x for x in d["rows"] if (x["gpu"], x["tp"]) == (gpu, tp)), key=lambda x: x["load"])
        assert [x["load"] for x in rows] == [1, 8, 64]
        for x in rows:
            assert x["ttft_s"] > 0 and x["itl_s"] > 0 and x["requests_per_s"] > 0
            # Little's law per replica: N clients cycle at the predicted rate
            assert x["requests_per_s"] == pytest.approx(x["load"] / x["latency_s"], rel=1e-4)
            assert x["output_tokens_per_s"] == pytest.approx(x["requests_per_s"] * d["osl"], rel=1e-4)
            assert x["band"]["tok_s"]["low"] < 1 < x["band"]["tok_s"]["high"]
        tput = [x["output_tokens_per_s"] for x in rows]
        assert tput == sorted(tput) and [x["itl_s"] for x in rows] == sorted(x["itl_s"] for x in rows)
    # beyond the calibration data's GPUs and concurrencies the rows say so
    inside = [x for x in d["rows"] if x["gpu"] == "H100" and x["load"] == 8]
    assert inside and all(not x["extrapolates"] for x in inside)
    l4 = [x for x in d["rows"] if x["gpu"] == "L4"]
    assert all(any("GPU L4" in w for w in x["extrapolates"]) for x in l4)
    one = [x for x in d["rows"] if x["load"] == 1]
    assert all(any("concurrency 1" in w for w in x["extrapolates"]) for x in one)
    # TP over PCIe is outside the calibration data (all NVLink); on one GPU, or over NVLink, no such note
    pcie = [x for x in d["rows"] if x["gpu"] == "L4"]
    assert all(any("TP over PCIe" in w for w in x["extrapolates"]) == (x["tp"] > 1) for x in pcie), pcie
    assert not any("TP over PCIe" in w for x in d["rows"] if x["gpu"] == "H100" for w in x["extrapolates"])


def test_plan_rate_json_open_loop(capsys):
    d = _rows(capsys, "--model", "gpt-oss-120b", "--rate", "5", "--isl", "1024", "--osl", "1024")
    assert d["mode"] == "rate" and d["values"] == [5.0]
    assert {"H100", "H200", "B200", "B300"} <= {x["gpu"] for x in d["rows"]}
    ok = [x for x in d["rows"] if not x["saturated"]]
    assert ok
    for x in ok:
        assert x["requests_per_s"] == pytest.approx(5.0) and x["output_tokens_per_s"] == pytest.approx(5 * 1024)
        assert x["concurrency"] == pytest.approx(5.0 * x["latency_s"], rel=1e-4)  # Little's law
        assert x["ttft_s"] > 0 and x["itl_s"] > 0
    # the same replica is saturated by a rate past what its closed loop sustains at full capacity
    sat = _rows(capsys, "--model", "gpt-oss-120b", "--gpu", "H100", "--tp", "2", "--rate", "500")["rows"]
    assert sat and all(x["saturated"] and x["ttft_s"] is None for x in sat)


def test_open_and_closed_loop_agree_on_the_rate(capsys):
    """The load point --slo searches over is the one --concurrency shows; the open loop at the rate a
    closed loop of N reaches holds about N in flight."""
    closed = _rows(capsys, "--model", "gpt-oss-120b", "--gpu", "H200", "--tp", "2", "--concurrency", "32",
                   "--isl", "1024", "--osl", "1024")["rows"][0]
    opened = _rows(capsys, "--model", "gpt-oss-120b", "--gpu", "H200", "--tp", "2", "--rate",
                   f"{closed['requests_per_s']:.6f}", "--isl", "1024", "--osl", "1024")["rows"][0]
    assert not opened["saturated"]
    assert opened["concurrency"] == pytest.approx(32, rel=0.15)
    assert opened["itl_s"] == pytest.approx(closed["itl_s"], rel=0.15)


def test_plan_load_text(capsys):
    r = run_cli(capsys, "plan", "--model", "minimax-m2.5", "--gpu", "B300", "--concurrency", "4,4096")
    assert r.code == 0, r.err
    assert "minimax-m2.5: one replica at 4, 4096 concurrent clients" in r.out
    assert "extrapolates: concurrency 4096 is outside the calibration data's 4-512" in r.out
    assert "docs/capacity.md" in r.out


@pytest.mark.parametrize("args, needle", [
    (("--concurrency", "0"), "--concurrency: '0' is not a positive whole number"),
    (("--concurrency", "abc"), "--concurrency: 'abc' is not a positive whole number"),
    (("--concurrency", "1,,2"), "--concurrency: '' is not a positive whole number"),
    (("--concurrency", "2.5"), "--concurrency: '2.5' is not a positive whole number"),
    (("--concurrency", "4", "--rate", "2"), "--concurrency and --rate: pass one"),
    (("--concurrency", "4", "--slo", "ttft_p95=1s"), "--concurrency: not with --slo"),
    (("--rate", "0"), "--rate: must be a positive number"),
    (("--concurrency", "4", "--isl", "0"), "--isl: must be a positive number of tokens"),
])
def test_plan_load_bad_input(capsys, args, needle):
    r = run_cli(capsys, "plan", "--model", "qwen3-8b", "--gpu", "H100", *args)
    assert r.code == 2 and needle in r.err, r.err
    assert "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1


def test_moe_and_tp_physics():
    """The step follows the engine: a bigger batch touches more experts; TP adds an all-reduce per layer."""
    from llmctl.perf.roofline import Efficiency, step_time

    s = next(x for x in SERIES if x["model_path"].endswith("MiniMax-M2.5") and x["tp"] == 4)
    st = setup_of(s)
    assert st.shape.moe and st.shape.moe_kind in ("fp8", "nvfp4") and st.shape.moe_layers == 62
    assert st.shape.touched(1) < st.shape.touched(64) < st.shape.touched(4096) <= 1
    a = step_time(st.shape, st.device, Efficiency(), decode=4, prompt_tokens=0, context=1500)
    b = step_time(st.shape, st.device, Efficiency(), decode=256, prompt_tokens=0, context=1500)
    assert b.mem_s > a.mem_s and a.comm_s > 0
    data = yaml.safe_load(DATA.read_text())
    assert data["series"][0]["points"]
    assert math.isfinite(b.seconds)


def test_a_burst_queues_its_prompts_for_the_token_budget():
    """vLLM V1 gives each step max_num_batched_tokens: prompts sent together get their first tokens
    one budget after another, and a closed-loop run's first round adds that wait, less the more rounds."""
    from dataclasses import replace

    from llmctl.perf.burst import simulate
    from llmctl.perf.roofline import Efficiency, step_time
    from llmctl.perf.steady import predict

    s = next(x for x in SERIES if x["model_path"].endswith("MiniMax-M2.5") and x["tp"] == 4 and x["isl"] == 8192)
    st = setup_of(s)
    eff = Efficiency()
    one = simulate(st.shape, st.device, eff, st.engine, requests=1, isl=8192, osl=1024)
    many = simulate(st.shape, st.device, eff, st.engine, requests=64, isl=8192, osl=1024)
    assert st.engine.max_num_batched_tokens <= 8192  # one 8k prompt per step: the 64th waits for 63
    assert many.mean_ttft_s > 20 * one.mean_ttft_s
    assert many.makespan_s > one.makespan_s > 1023 * one.mean_ttft_s / 1000
    together = replace(eff, frontend_s=0.0)  # handed to the engine at once (no serial API-server work)
    small = simulate(st.shape, st.device, together, st.engine, requests=4, isl=1024, osl=16, first_tokens_only=True)
    alone = simulate(st.shape, st.device, together, st.engine, requests=1, isl=1024, osl=16, first_tokens_only=True)
    one_step = step_time(st.shape, st.device, together, decode=0, prompt_tokens=4096, context=1024 + 8,
                         prompt_context=512).seconds
    assert small.mean_ttft_s == pytest.approx(together.request_s + one_step)  # 4 × 1024 tokens fit one step's budget
    assert small.mean_ttft_s < 4 * alone.mean_ttft_s  # not one step after another
    serial = replace(eff, frontend_s=0.1)  # a slow API server: 100 ms of serial work per request
    spread = simulate(st.shape, st.device, serial, st.engine, requests=4, isl=1024, osl=16, first_tokens_only=True)
    assert spread.mean_ttft_s > small.mean_ttft_s  # the API server hands them over one after another
    steady = predict(st.shape, st.device, eff, st.engine, concurrency=128, isl=8192, osl=1024)
    r10 = predict(st.shape, st.device, eff, st.engine, concurrency=128, isl=8192, osl=1024, rounds=10)
    r50 = predict(st.shape, st.device, eff, st.engine, concurrency=128, isl=8192, osl=1024, rounds=50)
    assert r10.ttft_s > r50.ttft_s > steady.ttft_s and r10.itl_s == steady.itl_s
