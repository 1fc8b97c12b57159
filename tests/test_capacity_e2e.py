"""Issue 24 end to end, on the session's private Ray head with the tiny model
on vLLM's CPU build: `status --metrics` shows each engine's KV usage and
running requests while `bench` loads it; `bench --sweep --slo --output --report`
writes a sweep that `plan --gpu cpu --profile` calibrates on and a report
whose JSON validates; and a SHORT run of bench/capacity.py (1 replica, 4 s
steps) produces its rows. Structure and relations only: no timing is asserted
(speed goals live in bench/)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from helpers import Proc
from helpers import llmctl

pytestmark = [pytest.mark.cluster, pytest.mark.engine, pytest.mark.long]  # minutes of load: make test-long
ROOT = Path(__file__).resolve().parents[1]


def _capacity_module():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import capacity
    finally:
        sys.path.pop(0)
    return capacity


capacity = _capacity_module()
APP = capacity.APP


@pytest.fixture(scope="module")
def cap_app(ray_head, tiny_model, tmp_path_factory):
    """The 1-replica deployment bench/capacity.py measures, generated the same
    way, so that the short run (the last test) finds it deployed."""
    out = tmp_path_factory.mktemp("cap")
    env = {"LLMCTL_HOME": str(ray_head.home)}
    r = llmctl(*capacity.gen_config_args(tiny_model, 1, out), env=env)
    assert r.code == 0, r.err
    r = llmctl("up", next(out.glob("serve_*.yaml")), "--timeout", "600", env=env)
    assert r.code == 0, (r.out, r.err)
    yield out
    llmctl("down", APP, env=env)


def _json_stream(text: str) -> list[dict]:
    """The JSON documents `top --json` prints one after another."""
    dec, docs, i = json.JSONDecoder(), [], 0
    while (j := text.find("{", i)) >= 0:
        doc, end = dec.raw_decode(text[j:])
        docs.append(doc)
        i = j + end
    return docs


def _engines() -> list[dict]:
    r = llmctl("status", "--metrics", "--json")
    assert r.code in (0, 1), r.err
    return r.json()["engines"]


def test_status_metrics_while_bench_runs(cap_app, cluster_home):
    load = Proc([sys.executable, "-m", "llmctl", "bench", APP, "--duration", "240", "--concurrency", "6",
                 "--max-tokens", "96", "--json"])
    seen = None
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert load.p.poll() is None, load.text("err")
            engines = [e for e in _engines() if e["model"] == "tiny-cap"]
            busy = [e for e in engines if e["kv_usage"] > 0 and e["running"] > 0]
            if busy:
                seen = busy[0]
                break
            time.sleep(2)
        assert seen is not None, "no engine reported KV usage and running requests under load"
        table = llmctl("status", "--metrics")
        assert "engines (vLLM metrics from http://127.0.0.1:" in table.out and seen["replica"] in table.out
        # `top`'s rates come from two scrapes --interval apart: every refresh under load
        # shows tokens generated, as the local head exports metrics each second (with
        # Ray's 10 s default most 2 s refreshes showed 0; llmctl.launch.cluster).
        top = llmctl("top", "--iterations", "3", "--interval", "2", "--json")
        assert top.code == 0, top.err
        refreshes = _json_stream(top.out)
        assert len(refreshes) == 3, top.out
        for r in refreshes:
            (mine,) = [e for e in r["engines"] if e["replica"] == seen["replica"]]
            assert mine["generation_tokens_per_s"] > 0, refreshes
    finally:
        r = load.interrupt(timeout=60)
    assert r.code == 0, r.err
    print(f"\nengine under load: {seen}")


def test_vllm_ipc_sockets_live_in_the_heads_temp_dir(cap_app, cluster_home):
    """The engine's ZeroMQ IPC sockets (one uuid-named file each) are in the head's private temp dir, removed with
    it, not in /tmp, where a killed replica's would stay."""
    import re
    import stat

    temp = Path(cluster_home.state.temp_dir)
    uuid = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    socks = [p.name for p in temp.iterdir() if uuid.fullmatch(p.name) and stat.S_ISSOCK(p.lstat().st_mode)]
    assert socks, sorted(p.name for p in temp.iterdir())


def test_sweep_profile_plan_and_report(cap_app, cluster_home, tmp_path):
    prof, rep = tmp_path / "bench.json", tmp_path / "report"
    r = llmctl("bench", APP, "--sweep", "1,3", "--duration", "4", "--max-tokens", "32", "--prompt-tokens", "32",
               "--slo", "ttft_p95=5s,itl_p95=200ms", "--output", prof, "--report", rep, timeout=600)
    assert r.code == 0, r.err
    assert "highest rate within ttft_p95=5000ms,itl_p95=200ms" in r.out
    sweep = json.loads(prof.read_text())
    assert [s["value"] for s in sweep["steps"]] == [1, 3]
    for s in sweep["steps"]:
        m = s["summary"]
        assert m["done"] > 0 and m["failed"] == 0 and set(m["tpot_s"]) >= {"p50", "p95", "mean"}
        assert s["goodput"]["requests"] <= m["done"] and len(s["requests"]) == m["requests"]
        # vLLM's own TTFT (its histogram between scrapes around the step): every request of the step that got a
        # first token, and less time than its clients waited (the engine's clock starts when Serve hands it over)
        e = m["engine_ttft_s"]
        assert e is not None and e["requests"] >= m["done"], (e, m["done"])
        assert 0 < e["mean"] < m["ttft_s"]["mean"] and 0 < e["p50"] <= e["p95"], (e, m["ttft_s"])
    assert sweep["provenance"]["versions"]["ray"] and sweep["provenance"]["serve_config"]["name"] == APP
    assert sweep["replicas"]["LLMServer:tiny-cap"] and sweep["inflight"]
    from llmctl.perf.report import PLOTS, validate

    doc = json.loads((rep / "benchmark_report.json").read_text())
    assert validate(doc) == []
    assert doc["scenario"]["stack"][0]["native"]["config"]["replica_timeline"]["LLMServer:tiny-cap"]
    html = (rep / "index.html").read_text()
    assert all(f'id="{n}"' in html for n, _ in PLOTS)
    p = llmctl("plan", "--model", _model_dir(cap_app), "--gpu", "cpu",
               "--profile", prof, "--slo", "ttft_p95=5s,itl_p95=200ms", "--isl", "40", "--osl", "32", "--json")
    assert p.code == 0, p.err
    plan = p.json()
    assert plan["calibration"]["efficiency"]["source"] == "fitted" and plan["rows"][0]["gpu"] == "cpu"
    assert len(plan["calibration"]["fit"]) == 2
    # the same goal on the engines' TTFT (what --autoscale-on reads): the fit is of the steps' engine-side figures
    pe = llmctl("plan", "--model", _model_dir(cap_app), "--gpu", "cpu", "--profile", prof, "--slo-at", "engine",
                "--slo", "ttft_p95=5s,itl_p95=200ms", "--isl", "40", "--osl", "32", "--json")
    assert pe.code == 0, pe.err
    eng = pe.json()
    assert eng["calibration"]["ttft_at"] == "engine" and plan["calibration"]["ttft_at"] == "client"
    assert [f["ttft_p95"] for f in eng["calibration"]["fit"]] == [s["summary"]["engine_ttft_s"]["p95"] for s in sweep["steps"]]


def _model_dir(gen_out: Path) -> str:
    import yaml

    cfg = yaml.safe_load(next((gen_out / "model_config").glob("*.yaml")).read_text())
    return cfg["model_loading_config"]["model_source"]


def test_short_capacity_bench(cap_app, ray_head, tiny_model, cluster_home, tmp_path):
    """bench/capacity.py in its short form against the session's head: the
    experiment's structure (its full run and figures: docs/capacity.md). Its
    deployment is cap_app's: `up` finds nothing to change, starts no engine."""
    import os

    before = _replica_ids(cluster_home)
    env = dict(os.environ, LLMCTL_HOME=str(ray_head.home), PYTHONPATH=str(ROOT))
    result = capacity.run(tmp_path / "work", env, replicas=(1,), calib=(1, 3), measure=(1, 2, 4), calib_s=4, measure_s=4, warmup_s=1, rounds=1,
                          prompt_words=16, osl=16, model=tiny_model, keep_cluster=True, log=lambda *_: None)
    assert _replica_ids(cluster_home) == before  # the same replica served the whole run
    rows = result["rows"]
    assert [(r["replicas"], r["target"]) for r in rows] == [(1, "A"), (1, "B")]
    for r in rows:
        assert r["predicted_req_per_s"] >= 0 and r["bound"]
        assert (r["error"] is None) == (not r["measured_req_per_s"])
        (alone,), (pred_alone,) = r["measured_per_round"], r["predicted_per_round"]  # one round: the pooled run is that round
        assert (alone or 0) == pytest.approx(r["measured_req_per_s"] or 0, rel=0.02)
        assert pred_alone == pytest.approx(r["predicted_req_per_s"], rel=0.02)
    assert Path(result["files"]["calib_1"]).exists() and Path(result["files"]["measure_1"]).exists()
    assert (tmp_path / "work" / "report_1.1" / "index.html").exists()
    assert "| replicas | target |" in capacity.markdown(result)


def _replica_ids(home) -> set[str]:
    """The app's replicas as Ray's Serve API lists them (ids change when a replica is replaced)."""
    from llmctl.launch.serve_api import ServeClient

    with ServeClient(home.dashboard_url) as c:  # the local head's token: its own
        raw = c.status()
    deps = raw["applications"][APP]["deployments"]
    return {rep["replica_id"] for d in deps.values() for rep in d["replicas"]}
