"""`bench --report`: PNG plots, a self-contained index.html that headless
Chromium opens offline with every plot, and the llm-d benchmark report JSON
valid against its published schema (issue 24). The sweep is synthetic (the
report's input), so no cluster is needed; test_capacity_e2e.py writes one from
a real run."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from llmctl.perf import report

CHROMIUM = "/usr/bin/chromium"


def synthetic_sweep(steps=(1, 2, 4), seed: int = 7) -> dict:
    rng = random.Random(seed)
    out, t = [], 0.0
    for i, c in enumerate(steps):
        reqs = []
        for k in range(20 * c):
            ttft = 0.05 * c * (1 + rng.random())
            tpot = 0.004 * c * (1 + 0.3 * rng.random())
            reqs.append({"start": t + k * 0.1, "ok": True, "ttft": ttft, "tpot": tpot, "latency": ttft + 63 * tpot,
                         "output_tokens": 64, "prompt_tokens": 100})
        reqs.append({"start": t, "ok": False, "ttft": None, "tpot": None, "latency": 0.1, "output_tokens": 0, "prompt_tokens": 0})
        q = lambda key: sorted(r[key] for r in reqs if r["ok"])  # noqa: E731
        pct = lambda v, p: v[int((len(v) - 1) * p / 100)]  # noqa: E731
        summ = {"done": 20 * c, "failed": 1, "req_per_s": 2.0 * c, "output_tokens_per_s": 128.0 * c, "seconds": 10.0,
                **{k: {f"p{p}": pct(q(src), p) for p in (50, 90, 95, 99)} for k, src in
                   (("ttft_s", "ttft"), ("tpot_s", "tpot"), ("latency_s", "latency"))}}
        out.append({"index": i, "mode": "concurrency", "value": c, "concurrency": c, "rate": None, "t0": t, "summary": summ,
                    "requests": reqs, "goodput": {"requests": 10, "req_per_s": 1.0, "output_tokens_per_s": 64.0},
                    "slo_met": c < 4})
        t += 10.0
    return {"kind": "llmctl-bench-sweep", "version": 1,
            "settings": {"url": "http://127.0.0.1:9/v1", "model": "tiny", "app": "app", "mode": "concurrency",
                         "values": list(steps), "duration_s": 10, "prompt_tokens": 100, "max_tokens": 64},
            "started": 1795600000.0, "ended": 1795600030.0, "interrupted": False,
            "slo": {"ttft_p95": 0.5, "itl_p95": 0.02}, "steps": out,
            "replicas": {"LLMServer:tiny": [{"t": 0, "running": 1, "target": 1}, {"t": 15, "running": 2, "target": 2}],
                         "OpenAiIngress": [{"t": 0, "running": 1, "target": 1}]},
            "inflight": [[0, 1], [10, 2], [20, 4], [30, 0]],
            "provenance": {"versions": {"ray": "2.60.0", "vllm": "0.32.0", "llmctl": "0.1.0", "python": "3.11"},
                           "serve_config": {"name": "app", "args": {"llm_configs": [
                               {"model_loading_config": {"model_id": "tiny"}, "engine_kwargs": {"tensor_parallel_size": 1},
                                "deployment_config": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 2}}}]}}},
            "max_rate_within_slo": {"req_per_s": 4.0, "best_step": 1, "interpolated": False,
                                    "slo": {"ttft_p95": 0.5, "itl_p95": 0.02}}}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    pytest.importorskip("matplotlib", reason="the report's plots need matplotlib (the dev extra)")
    out = tmp_path_factory.mktemp("report")
    return out, report.write_report(synthetic_sweep(), out)


def test_files_and_schema(written):
    out, files = written
    for name, _ in report.PLOTS:
        png = files[name]
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    doc = json.loads((out / "benchmark_report.json").read_text())
    assert report.validate(doc) == []
    assert doc["version"] == "0.2"
    engine = doc["scenario"]["stack"][0]
    assert engine["standardized"]["kind"] == "inference_engine"
    cfg = engine["native"]["config"]
    assert cfg["versions"]["ray"] == "2.60.0" and cfg["serve_config"]["name"] == "app"
    assert cfg["replica_timeline"]["LLMServer:tiny"][-1]["running"] == 2
    agg = doc["results"]["request_performance"]["aggregate"]
    assert agg["requests"]["total"] == 20 + 40 + 80 + 3 and agg["requests"]["failures"] == 3
    lat = agg["latency"]["time_to_first_token"]
    assert lat["units"] == "s" and lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]


def test_schema_rejects_a_broken_report(written):
    out, _ = written
    doc = json.loads((out / "benchmark_report.json").read_text())
    doc["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]["units"] = "fortnights"
    del doc["run"]["uid"]
    errors = report.validate(doc)
    assert any("uid" in e for e in errors) and any("fortnights" in e for e in errors)


def test_index_is_self_contained(written):
    out, files = written
    html = files["index"].read_text()
    for name, _ in report.PLOTS:
        assert f'<figure id="{name}"><img' in html
    assert html.count('src="data:image/png;base64,') == len(report.PLOTS)
    assert not re.search(r'(src|href)="https?://', html)  # nothing to fetch
    assert "<script" not in html


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="headless Chromium missing: install Debian's `chromium` "
                                                        "(apt-get install chromium; .ci/run does)")
def test_chromium_opens_the_report_offline(written, tmp_path):
    out, files = written
    # a copy alone in its directory: whatever it would load from beside itself is not there
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(files["index"], lone / "index.html")
    shot = tmp_path / "shot.png"
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1200,2200", "--hide-scrollbars"]
    env = dict(os.environ, HOME=str(tmp_path))
    subprocess.run([*args, f"--screenshot={shot}", f"file://{lone / 'index.html'}"], env=env, capture_output=True,
                   timeout=180, check=False)
    deadline = time.monotonic() + 10
    while not shot.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert shot.exists() and shot.stat().st_size > 10_000, "no screenshot"
    from PIL import Image

    img = Image.open(shot).convert("L")
    lo, hi = img.getextrema()
    assert hi - lo > 100, "the screenshot is blank"
    # every plot decoded: the DOM after load has each image with its natural size
    dom = subprocess.run([*args, "--virtual-time-budget=5000", "--dump-dom", f"file://{lone / 'index.html'}"], env=env,
                         capture_output=True, text=True, timeout=180).stdout
    for name, _ in report.PLOTS:
        assert f'id="{name}"' in dom
    assert dom.count("data:image/png;base64,") == len(report.PLOTS)
