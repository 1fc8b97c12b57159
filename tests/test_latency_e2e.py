"""Serving for latency (issue 41), end to end on the session's Ray head with the
tiny model (real vLLM CPU engines, gen-config → up → bench, no hand edits):

- the prefix router: two replicas behind `--router prefix` and behind Serve's
  default (`--router pow2`), the same prefix-heavy load from `bench
  --prefixes`: vLLM's prefix-cache hit rate (its own counters, as bench reports
  them) is higher with the prefix router in every run, by a margin;
- latency autoscaling: an app with `--autoscale-on ttft_p95=...` scales 1 → 2
  under a load that pushes TTFT over the target and back to 1 after it;
- trace replay: `bench --trace` of a 2-minute trace with a burst on that app;
  the replica timeline follows the burst;
- the same load with the target far above (changed in place) does not scale;
- `plan --trace` on the replayed trace, with the policy's target on the
  engines' side and a sweep of the app at one replica, asks for the replicas
  the burst took.

One app at a time (each `down` before the next): two CPU replicas already
share this machine's cores. Generated text is never asserted."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from helpers import llmctl, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.engine, pytest.mark.long]  # make test-long: about an hour of engines and load here

# 24 prefixes, 72 requests: about 3 per prefix, where one miss per prefix (the prefix router) and about two (one on
# each replica, Serve's default) differ most. The prefixes are about 300 tokens of the tiny model's tokenizer: two of
# vLLM's 128-token CPU blocks.
BENCH = ["--prefixes", "24", "--prefix-tokens", "200", "--prompt-tokens", "12", "--max-tokens", "4",
         "--requests", "72", "--concurrency", "3", "--json"]


def _gen(tiny_model, out: Path, name: str, *extra: str) -> Path:
    r = llmctl("gen-config", "--model", str(tiny_model), "--model-id", f"tiny-{name}", "--gpu", "cpu",
               "--app-name", f"lat_{name}", "--route-prefix", f"/{name}", "--enable-prefix-caching", *extra,
               "--yes", "-o", str(out / name))
    assert r.code == 0, r.err
    return next((out / name).glob("serve_*.yaml"))


def _up(serve: Path, env: dict | None = None) -> None:
    t0 = time.monotonic()
    for _ in range(3):  # the machine is shared: a dashboard too busy to answer in 10 s is retried (up is idempotent)
        r = llmctl("up", str(serve), "--timeout", "900", timeout=1000, env=env)
        if r.code == 0 or "did not answer" not in r.err:
            break
    if r.code != 0:  # the whole of Serve's message (up prints its first line)
        st = llmctl("status", "--json", env=env)
        r.err += "\n" + "\n".join(f"{a['name']}: {a.get('message')}" for a in (st.json() or {}).get("applications", [])
                                   if st.code == 0)
    assert r.code == 0, r.out + r.err
    print(f"\nup {serve.parent.name}: RUNNING after {time.monotonic() - t0:.0f}s")


def _down(app: str, env: dict | None = None) -> None:
    r = llmctl("down", app, "--timeout", "300", env=env)
    assert r.code == 0, r.err


@pytest.mark.timeout(3600)  # four vLLM CPU engine starts on a shared 2-core machine (measured 3-13 min each)
def test_prefix_router_raises_the_prefix_cache_hit_rate(cluster_home, tiny_model, tmp_path):
    rates: dict[str, list[float]] = {}
    for name in ("pow2", "prefix"):
        serve = _gen(tiny_model, tmp_path, name, "--router", name, "--min-replicas", "2", "--max-replicas", "2")
        doc = (serve.parent / "model_config" / f"tiny-{name}.yaml").read_text()
        assert "request_router_config" in doc
        v = llmctl("validate", str(serve))
        assert v.code == 0, v.out + v.err
        _up(serve)
        try:
            for _ in range(2):  # each run draws new prefixes: a cold cache every run
                r = llmctl("bench", f"lat_{name}", *BENCH, timeout=900)
                assert r.code == 0, r.err
                s = r.json()["summary"]
                assert s["failed"] == 0 and s["done"] == 72, s
                pc = s["prefix_cache"]
                assert pc["queries"] > 0 and len(pc["replicas"]) == 2, pc  # both replicas served
                router = s["routing"][f"LLMServer:tiny-{name}"]["router"]
                assert ("PrefixCacheAffinityRouter" in router) == (name == "prefix"), router
                rates.setdefault(name, []).append(pc["hit_rate"])
                per = {k: round(v["hit_rate"], 3) for k, v in pc["replicas"].items()}
                print(f"\n{name}: prefix-cache hit rate {pc['hit_rate']:.3f} of {pc['queries']:.0f} prompt tokens "
                      f"(per replica {per}); TTFT p50 {s['ttft_s']['p50'] * 1000:.0f} ms")
                out = llmctl("bench", f"lat_{name}", *[a for a in BENCH if a != "--json"][:8], "--requests", "6")
                assert out.code == 0 and "prefix cache (vLLM):" in out.out and "request router:" in out.out, out.out
        finally:
            _down(f"lat_{name}")
    print(f"\nhit rates: pow2 {rates['pow2']}, prefix {rates['prefix']}")
    assert min(rates["prefix"]) > max(rates["pow2"]) + 0.05, rates


# --------------------------------------------------------------------------
# latency autoscaling and trace replay, on one app (in file order)

TTFT_APP, TTFT_MODEL = "lat_ttft", "tiny-ttft"
TTFT_LLM = f"LLMServer:{TTFT_MODEL}"
# vLLM's own TTFT (arrival in the engine to first token) of the tiny model on this machine: 20-40 ms for a lone
# request, 60-90 ms p95 at 8 streams of 200-word prompts (measured): the target sits between a lone request and the load.
TARGET_S = 0.1
LOAD = ["--concurrency", "16", "--prompt-tokens", "300", "--max-tokens", "16"]


def _rest_replicas(dashboard: str) -> tuple[int, int | None]:
    import httpx

    from llmctl.launch.address import ray_token_for

    try:
        st = httpx.get(dashboard + "/api/serve/applications/", timeout=15,
                       headers={"Authorization": f"Bearer {ray_token_for(dashboard)}"}).json()
        dep = st["applications"][TTFT_APP]["deployments"].get(TTFT_LLM) or {}
    except (httpx.HTTPError, KeyError, ValueError):
        return 0, None
    return sum(r["state"] == "RUNNING" for r in dep.get("replicas", [])), dep.get("target_num_replicas")


def _wait(cond, what: str, timeout: float) -> float:
    return wait_for(cond, what, timeout, interval=3)


def _timeline(data: dict) -> list[dict]:
    return data["replicas"][TTFT_LLM]


@pytest.fixture(scope="module")
def ttft_app(ray_head, tiny_model, tmp_path_factory) -> dict:
    env = {"LLMCTL_HOME": str(ray_head.home)}
    out = tmp_path_factory.mktemp("ttft")
    r = llmctl("gen-config", "--model", str(tiny_model), "--model-id", TTFT_MODEL, "--gpu", "cpu", "--app-name", TTFT_APP,
               "--route-prefix", "/ttft", "--min-replicas", "1", "--max-replicas", "2", "--upscale-delay", "5",
               "--downscale-delay", "15", "--autoscale-on", f"ttft_p95={TARGET_S * 1000:g}ms", "--autoscale-window", "15",
               "--yes", "-o", str(out), env=env)
    assert r.code == 0, r.err
    serve = next(out.glob("serve_*.yaml"))
    v = llmctl("validate", str(serve))
    assert v.code == 0, v.out + v.err
    _up(serve, env)
    yield {"serve": serve, "model_config": out / "model_config" / f"{TTFT_MODEL}.yaml", "model": tiny_model}
    _down(TTFT_APP, env)


@pytest.mark.timeout(2400)
def test_ttft_target_scales_out_under_load_and_back(ttft_app, cluster_home, tmp_path):
    from helpers import Proc

    dash = cluster_home.dashboard_url
    _wait(lambda: _rest_replicas(dash) == (1, 1), "1 replica before the load", 120)
    out = tmp_path / "load.json"
    load = Proc([sys.executable, "-m", "llmctl", "bench", TTFT_APP, "--duration", "600", *LOAD, "--output", str(out)])
    try:
        up = _wait(lambda: _rest_replicas(dash)[1] == 2, "target 2 replicas under load (TTFT over target)", 240)
        running = _wait(lambda: _rest_replicas(dash)[0] == 2, "2 RUNNING replicas", 400)
    finally:
        r = load.interrupt(timeout=120)
    assert r.code == 0, r.err
    data = json.loads(out.read_text())
    s = data["summary"]
    assert s["ttft_s"]["p95"] > TARGET_S, s["ttft_s"]  # the load did push TTFT over the target
    assert data["summary"]["routing"][TTFT_LLM]["autoscaling_policy"] == "llmctl_latency:LatencyPolicy"
    tl = _timeline(data)
    assert tl[0]["target"] == 1 and max(p["target"] or 0 for p in tl) == 2 and max(p["running"] for p in tl) == 2, tl
    down = _wait(lambda: _rest_replicas(dash) == (1, 1), "back to 1 replica after the load", 240)
    print(f"\nTTFT p95 {s['ttft_s']['p95'] * 1000:.0f} ms under load (target {TARGET_S * 1000:.0f} ms): target 2 after "
          f"{up:.0f}s, 2 RUNNING {running:.0f}s later; back to 1 replica {down:.0f}s after the load")


# The burst must load the engine, not only Serve: the latency policy reads vLLM's own TTFT, which does not see the
# time a request spends in Serve's proxy and ingress. A burst of 16 req/s of 300-token prompts and 16 output tokens
# was served by one engine at a TTFT p95 of 49 ms (its log, 2026-11-29) while clients waited 423 ms in Serve: the
# policy rightly kept one replica, since another would not have helped. Long outputs keep each request in the
# engine for about a second, so the engine's own batch, and its TTFT, grow through the burst.
BURST_PER_S, BURST_OUTPUT = 12, 96


def _trace(path: Path) -> tuple[Path, int]:
    """Two minutes: 30 s quiet (0.2 req/s), a 40 s burst (BURST_PER_S), 50 s quiet; (file, requests)."""
    rows = [(i * 5.0, 150, 24) for i in range(6)]
    rows += [(30 + i / BURST_PER_S, 300, BURST_OUTPUT) for i in range(40 * BURST_PER_S)]
    rows += [(70 + i * 5.0, 150, 24) for i in range(11)]
    path.write_text("timestamp,input_tokens,output_tokens\n" + "".join(f"{t:.3f},{a},{b}\n" for t, a, b in rows))
    return path, len(rows)


def _policy_log(cluster_home, lines: int = 20) -> str:
    """The policy's last decisions (it logs each change it asks for) and Serve's scaling lines, from the Serve
    controller's logs in time order (each line starts with its level and timestamp)."""
    logs = Path(cluster_home.state.temp_dir) / "session_latest" / "logs" / "serve"
    found = [ln for p in logs.glob("controller_*.log") for ln in p.read_text(errors="replace").splitlines()
             if "llmctl_latency" in ln or "scaling" in ln.lower()]
    found.sort(key=lambda ln: ln.split(" ", 1)[-1][:23])  # "INFO 2026-11-29 01:35:44,285 controller ..."
    return "\n".join(found[-lines:]) or "(no llmctl_latency or scaling line in the controller's logs)"


# One retry (pytest-rerunfailures) for this test and plan --trace's below, each of which failed once in the
# fresh-clone runs of 2026-11-29 for a cause not found yet: here one request of 497 ended in a stream line that
# is not JSON ('bad stream event', during the quiet after the burst); below, the plan calibrated on that run's
# sweep gave one replica at 13.0 req/s within the 100 ms target while the sweep's own 12-client step had measured
# engine TTFT p95 105 ms at 9.7 req/s (the same plan with the code of the day before). A retry runs the test
# whole again; failing twice fails. Since then, a likely cause of the first was found and fixed (bench read a chunk
# whose text held U+2028 / U+0085 as two lines: tests/test_loadgen_sweep.py), and plan --profile keeps to what its own
# sweep measured (tests/test_perf_model.py). A run after those fixes showed the test below asserted more than the
# policy can show: the policy stops at the app's max_replicas (2), while the plan, from a sweep whose one replica
# levelled off at 5.1 req/s, rightly asked 3 for the 12 req/s burst; it now asserts at least 2 (and windows that
# agree with the peak). The retry stays while the two have not passed a week of CI runs.
@pytest.mark.flaky(reruns=1)
@pytest.mark.timeout(2400)
def test_trace_replay_follows_the_burst(ttft_app, cluster_home, tmp_path):
    dash = cluster_home.dashboard_url
    _wait(lambda: _rest_replicas(dash) == (1, 1), "1 replica before the trace", 240)
    trace, n = _trace(tmp_path / "burst.csv")
    r = llmctl("bench", TTFT_APP, "--trace", str(trace), "--json", timeout=900)
    assert r.code == 0, r.err
    data = r.json()
    s = data["summary"]
    # Every request answered, but for a few connect timeouts at most (1 %): the burst, the second engine's start
    # (CPU-bound) and bench itself share this machine's two cores, and bench's client has once waited over its 10 s
    # connect timeout (2 of 497, 2026-11-29); an error of any other kind fails here.
    late = (s.get("errors") or {}).get("ConnectTimeout", 0)
    assert s["done"] + late == n and s["failed"] == late <= 0.01 * n, (s, data.get("failures"), data.get("replicas"))
    tl = _timeline(data)
    before = [p for p in tl if p["t"] < 30]
    burst = [p for p in tl if 30 <= p["t"] < 70 + 30]  # the burst, and the delays after it
    seen = (f"TTFT p95 {s['ttft_s']['p95'] * 1000:.0f} ms; timeline {[(p['t'], p['running'], p['target']) for p in tl]}; "
            f"policy:\n{_policy_log(cluster_home)}")
    assert all(p["target"] == 1 for p in before), seen
    up_at = next((p["t"] for p in burst if p["target"] == 2), None)
    assert up_at is not None and 30 < up_at < 100, seen
    peak = max(p["running"] for p in tl)
    print(f"\ntrace: {s['done']} requests; target 2 at {up_at:.0f}s (burst 30-70 s); most RUNNING {peak}; "
          f"TTFT p95 {s['ttft_s']['p95'] * 1000:.0f} ms; timeline {[(p['t'], p['running'], p['target']) for p in tl][::3]}")
    back = _wait(lambda: _rest_replicas(dash) == (1, 1), "back to 1 replica after the burst", 240)
    print(f"back to 1 replica {back:.0f}s after the replay ended")
    ttft_app["replayed"] = (trace, tl)


@pytest.mark.timeout(2400)
def test_far_target_does_not_scale_under_the_same_load(ttft_app, cluster_home, tmp_path):
    """The target raised in place (the model file edited, `up` again): a rolling restart that takes the new target
    (llmctl used to keep the deployed LLMConfig for this in-place option, which dropped the change: the policy kept
    its 100 ms target and scaled, seen in its log lines), then the same load does not scale."""
    import yaml

    dash = cluster_home.dashboard_url
    cfg = ttft_app["model_config"]
    doc = yaml.safe_load(cfg.read_text())
    doc["deployment_config"]["autoscaling_config"]["policy"]["policy_kwargs"]["targets"]["ttft_p95"] = 60.0
    cfg.write_text(yaml.safe_dump(doc, sort_keys=False))
    v = llmctl("validate", str(ttft_app["serve"]))
    assert v.code == 0, v.out + v.err
    _up(ttft_app["serve"])
    ttft_app["far"] = True
    _wait(lambda: _rest_replicas(dash) == (1, 1), "1 replica before the load", 240)
    r = llmctl("bench", TTFT_APP, "--duration", "90", *LOAD, "--json", timeout=900)
    assert r.code == 0, r.err
    data = r.json()
    tl = _timeline(data)
    # not scaled: Serve's target stays 1 and never a second replica runs (a sample may miss the one replica's RUNNING
    # state on a busy machine: once, 2026-11-28, one sample was not 1/1; what it was is not known)
    assert all(p["target"] == 1 and p["running"] <= 1 for p in tl), (
        f"{tl}\nrouting: {data['summary'].get('routing', {}).get(TTFT_LLM)}\npolicy:\n{_policy_log(cluster_home)}")
    assert data["summary"]["ttft_s"]["p95"] > TARGET_S  # the same load: over the first target, far under this one
    log = _policy_log(cluster_home, 40)
    assert 'targets {"ttft_p95": 60.0}' in log, log  # the policy Serve runs holds the new target
    print(f"\ntarget 60 s: TTFT p95 {data['summary']['ttft_s']['p95'] * 1000:.0f} ms, 1 replica throughout "
          f"({len(tl)} samples over {data['summary']['seconds']:.0f}s)")


@pytest.mark.flaky(reruns=1)  # see test_trace_replay_follows_the_burst
@pytest.mark.timeout(2400)
def test_plan_trace_asks_for_the_replicas_the_burst_took(ttft_app, cluster_home, tmp_path):
    """plan --trace with the policy's target on the policy's side (--slo-at engine: vLLM's own TTFT), calibrated on
    this app with one replica (bench --sweep of the burst's requests, whose steps record the engines' TTFT). It runs
    after the far-target test: with that target the app stays at one replica through the sweep, as a calibration
    needs (with the 100 ms target the sweep's last step would start a second engine on the same cores)."""
    if "replayed" not in ttft_app or "far" not in ttft_app:
        pytest.skip("needs test_trace_replay_follows_the_burst's replay and the far-target app (run the module)")
    trace, tl = ttft_app["replayed"]
    sweep = tmp_path / "sweep.json"
    cal = llmctl("bench", TTFT_APP, "--sweep", "1,4,12", "--duration", "20", "--prompt-tokens", "300",
                 "--max-tokens", str(BURST_OUTPUT), "--output", str(sweep), "--json", timeout=900)
    assert cal.code == 0, cal.err
    steps = json.loads(sweep.read_text())["steps"]
    seen = [(st["value"], st["summary"]["req_per_s"], st["summary"]["ttft_s"]["p95"], st["summary"]["engine_ttft_s"])
            for st in steps]
    assert all(st["summary"]["engine_ttft_s"] for st in steps), seen
    p = llmctl("plan", "--model", str(ttft_app["model"]), "--gpu", "cpu", "--slo-at", "engine",
               "--slo", f"ttft_p95={TARGET_S * 1000:g}ms", "--trace", str(trace), "--window", "20",
               "--profile", str(sweep), "--json")
    assert p.code == 0, p.err
    plan = p.json()
    row = plan["capacity"]["rows"][0]
    quiet = [n for (start, _), n in zip(plan["windows"], row["replicas_by_window"]) if start + 20 <= 30 or start >= 80]
    why = (f"sweep (concurrency, req/s, client TTFT p95, engine TTFT): {seen}; plan: {row['replicas_at_peak']} at the "
           f"peak, {row.get('max_rate')} req/s per replica, per window {row['replicas_by_window']}; policy's targets "
           f"{[p['target'] for p in tl]}")
    print("\n" + why)
    # The burst needed more than one replica: the policy scaled out, to the app's max_replicas (2), and the plan
    # asks for at least that many (more when one replica's measured rate says 2 cannot carry the burst's 12 req/s:
    # 2026-11-29, a sweep whose one replica levelled off at 5.1 req/s, the plan 3). The windows agree with the peak;
    # the quiet ones need one, as the policy kept.
    assert max(p["target"] for p in tl if p["target"]) == 2, why
    assert None not in row["replicas_by_window"], why
    assert row["replicas_at_peak"] >= 2 and max(row["replicas_by_window"]) == row["replicas_at_peak"], why
    assert set(quiet) == {1}, why
