"""Autoscaling that scales, proven under load (issue 8), and `llmctl bench`.

gen-config of the tiny model for the CPU build with 1–2 replicas and no hand
edits (only a short --downscale-delay so the test can see the way back down),
`up`, then `llmctl bench` above the target: `status` shows 2 RUNNING
replicas during the load and 1 again after it. Real private Ray head, real
vLLM CPU engines; waits poll with deadlines."""

from __future__ import annotations

import re
import sys
import time

import pytest

from helpers import Proc
from test_launch import llmctl

pytestmark = [pytest.mark.cluster, pytest.mark.engine]


def _llm_replicas(app: str) -> tuple[int, int | None]:
    st = llmctl("status", "--json").json()
    for a in st["applications"]:
        if a["name"] == app:
            for d in a["deployments"]:
                if d["name"].startswith("LLMServer:"):
                    return d["replicas"].get("RUNNING", 0), d["target_replicas"]
    return 0, None


def _wait(cond, what: str, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return time.monotonic() - t0
        time.sleep(2)
    raise AssertionError(f"{what}: not within {timeout:.0f}s")


@pytest.fixture(scope="module")
def scale_app(ray_head, tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("scale")
    env = {"LLMCTL_HOME": str(ray_head.home)}
    r = llmctl("gen-config", "--model", tiny_model, "--model-id", "tiny-scale", "--gpu", "cpu", "--min-replicas", "1",
               "--max-replicas", "2", "--downscale-delay", "10", "--app-name", "scale_app", "--route-prefix", "/scale",
               "--yes", "-o", out, env=env)
    assert r.code == 0, r.err
    serve = next(out.glob("serve_*.yaml"))
    r = llmctl("up", serve, "--timeout", "600", env=env)
    assert r.code == 0, (r.out, r.err)
    yield serve
    llmctl("down", "scale_app", env=env)


def test_bench_json_counts(scale_app, cluster_home):
    r = llmctl("bench", "scale_app", "--requests", "6", "--concurrency", "2", "--max-tokens", "8", "--json")
    assert r.code == 0, r.err
    data = r.json()
    s = data["summary"]
    assert s["requests"] == 6 and s["done"] == 6 and s["failed"] == 0 and s["errors"] == {}
    assert s["output_tokens"] == 6 * 8  # ignore_eos: exactly max_tokens each, counted from the server's usage
    assert s["prompt_tokens_mean"] > 0 and s["req_per_s"] > 0 and s["output_tokens_per_s"] > 0
    ttft = s["ttft_s"]
    assert set(ttft) == {"mean", "p50", "p90", "p95", "p99"} and 0 < ttft["p50"] <= ttft["p90"] <= ttft["p95"] <= ttft["p99"]
    assert data["settings"]["model"] == "tiny-scale" and data["settings"]["url"].endswith("/scale/v1")
    timeline = data["replicas"]
    assert set(timeline) == {"LLMServer:tiny-scale", "OpenAiIngress"}
    assert all(p["running"] >= 1 for p in timeline["LLMServer:tiny-scale"])
    plain = llmctl("bench", "scale_app", "--requests", "2", "--concurrency", "1", "--max-tokens", "4", "--no-stream", "--json")
    assert plain.code == 0 and plain.json()["summary"]["output_tokens"] == 8


def test_bench_counts_errors_without_crashing(scale_app, cluster_home):
    r = llmctl("bench", "--url", f"{cluster_home.http}/scale/v1", "--model", "no-such-model", "--requests", "3",
               "--concurrency", "1", "--json")
    assert r.code == 1, r.err  # every request failed
    s = r.json()["summary"]
    assert s["failed"] == 3 and s["done"] == 0 and list(s["errors"]) == [next(iter(s["errors"]))]
    assert next(iter(s["errors"])).startswith("HTTP 4")


def test_bench_ctrl_c_prints_the_summary_so_far(scale_app, cluster_home):
    p = Proc([sys.executable, "-m", "llmctl", "bench", "scale_app", "--duration", "120", "--concurrency", "2", "--max-tokens", "16"])
    # A progress line with a finished request (the first line comes before any).
    deadline = time.monotonic() + 120
    while not re.search(r"done [1-9]", p.text("err")) and time.monotonic() < deadline:
        assert p.p.poll() is None, p.text("err")
        time.sleep(0.2)
    r = p.interrupt()
    assert r.code == 0, r.err
    assert "interrupted" in r.out and "requests done / failed" in r.out


def test_load_scales_up_and_back_down(scale_app, cluster_home):
    assert _llm_replicas("scale_app") == (1, 1)
    # The load outlasts every wait below (it is interrupted once they pass), so
    # Serve never sees it stop while the test still expects 2 replicas.
    load = Proc([sys.executable, "-m", "llmctl", "bench", "scale_app", "--duration", "600", "--concurrency", "8",
                 "--max-tokens", "200", "--json"])
    try:
        up = _wait(lambda: _llm_replicas("scale_app")[1] == 2, "Serve's target 2 replicas under load", 120)
        running = _wait(lambda: _llm_replicas("scale_app")[0] == 2, "2 RUNNING replicas under load", 240)
        table = llmctl("status")
        assert "2 RUNNING (target 2)" in table.out or _llm_replicas("scale_app") != (2, 2), table.out
    finally:
        r = load.interrupt(timeout=60)
    assert r.code == 0, r.err
    down = _wait(lambda: _llm_replicas("scale_app") == (1, 1), "back to 1 replica after the load", 240)
    print(f"\nscaling: target 2 after {up:.0f}s of load, 2 RUNNING {running:.0f}s later, back to 1 {down:.0f}s after it stopped")
