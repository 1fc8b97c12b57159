"""An autoscaled app's life on the private Ray head with the tiny model (real
vLLM CPU engines), on the session's shared app (conftest.day2_app: gen-config
with 1–2 replicas, a short --downscale-delay and an API key, no hand edits):

- autoscaling that scales, proven under load (issue 8), and `llmctl bench`:
  `bench` above the target makes `status` show 2 RUNNING replicas; at the
  end, with min_replicas 1 again and no load, the app is back to 1;
- changing the running app (issue 23) with `llmctl bench` running through
  each update, on two replicas (min_replicas 2, in place):
  - a rolling change (an engine argument): the plan says "rolling restart"
    and names the field; 0 failed requests; an LLMServer replica serves
    throughout; every LLMServer replica replaced;
  - an in-place change (autoscaling bounds): the plan says "in place"; 0
    failed requests; the same replica ids before and after;
  - `rollback`: the plan names the change back, the deployed config is the
    earlier one again, in place.

The scaling and the changes under load are marked ``long`` (minutes of load
and three engine starts: `make test-long`, which CI runs after `make test`);
the bench tests run in `make test`. The tests run in file order on the one
app: the rollout raises min_replicas to 2 right after the load, while the
load's second replica still runs (no vLLM start of its own; run alone, it
starts the second replica). Waits poll with deadlines; generated text
unasserted."""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from conftest import DAY2_APP as APP, DAY2_MODEL as MODEL, DAY2_ROUTE, TEST_API_KEY
from helpers import Proc
from llmctl.launch.serve_api import summarize
from helpers import llmctl, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.engine]

LLM = f"LLMServer:{MODEL}"
INGRESS = "ApiKeyIngress"  # the day-2 app's ingress (llmctl's API-key ingress)


def _llm_replicas(app: str) -> tuple[int, int | None]:
    """(RUNNING, target) of the app's LLMServer, as `llmctl status --json` shows them."""
    st = llmctl("status", "--json").json()
    for a in st["applications"]:
        if a["name"] == app:
            for d in a["deployments"]:
                if d["name"].startswith("LLMServer:"):
                    return d["replicas"].get("RUNNING", 0), d["target_replicas"]
    return 0, None


def _rest_replicas(dashboard: str) -> tuple[int, int | None]:
    """The same from Serve's REST answer, in this process: what the waits poll
    (a `status` process every 2 s cost about a core-second each beside the load)."""
    try:
        dep = _app(dashboard)["deployments"].get(LLM) or {}
    except (httpx.HTTPError, KeyError):
        return 0, None
    return sum(r["state"] == "RUNNING" for r in dep.get("replicas", [])), dep.get("target_num_replicas")


def _wait(cond, what: str, timeout: float) -> float:
    return wait_for(cond, what, timeout)


def _serve(dashboard: str) -> dict:
    """Serve's REST status, with the head's Ray token (token authentication is on)."""
    from llmctl.launch.address import ray_token_for

    return httpx.get(dashboard + "/api/serve/applications/", timeout=10,
                     headers={"Authorization": f"Bearer {ray_token_for(dashboard)}"}).json()


def _app(dashboard: str) -> dict:
    return _serve(dashboard)["applications"][APP]


def _replica_ids(dashboard: str) -> dict[str, set[str]]:
    return {d: {r["replica_id"] for r in v["replicas"] if r["state"] == "RUNNING"}
            for d, v in _app(dashboard)["deployments"].items()}


def _edit(model_cfg, fn) -> None:
    data = yaml.safe_load(model_cfg.read_text())
    fn(data)
    model_cfg.write_text(yaml.safe_dump(data, sort_keys=False))


def _set_min_replicas(day2_app, n: int, timeout: float = 300) -> str:
    """min_replicas n (max_replicas 2) by `up`: in place, or nothing to send; returns `up`'s stderr (the plan)."""
    def edit(d):
        d["deployment_config"]["autoscaling_config"].update(min_replicas=n, max_replicas=2)

    _edit(day2_app["model_config"], edit)
    r = llmctl("up", day2_app["serve"], "--timeout", str(int(timeout)))
    assert r.code == 0, (r.out, r.err)
    assert "rolling restart" not in r.err and "rollout " not in r.err, r.err
    return r.err


# --------------------------------------------------------------------------
# bench, and scaling under load (1 replica at the start)


def test_bench_json_counts(day2_app, cluster_home):
    r = llmctl("bench", APP, "--requests", "6", "--concurrency", "2", "--max-tokens", "8", "--json")
    assert r.code == 0, r.err
    data = r.json()
    s = data["summary"]
    assert s["requests"] == 6 and s["done"] == 6 and s["failed"] == 0 and s["errors"] == {}
    assert s["output_tokens"] == 6 * 8  # ignore_eos: exactly max_tokens each, counted from the server's usage
    assert s["prompt_tokens_mean"] > 0 and s["req_per_s"] > 0 and s["output_tokens_per_s"] > 0
    ttft = s["ttft_s"]
    assert set(ttft) == {"mean", "p50", "p90", "p95", "p99"} and 0 < ttft["p50"] <= ttft["p90"] <= ttft["p95"] <= ttft["p99"]
    assert data["settings"]["model"] == MODEL and data["settings"]["url"].endswith(f"{DAY2_ROUTE}/v1")
    timeline = data["replicas"]
    assert set(timeline) == {LLM, "ApiKeyIngress"}  # the API-key ingress, named after its class
    assert all(p["running"] >= 1 for p in timeline[LLM])
    plain = llmctl("bench", APP, "--requests", "2", "--concurrency", "1", "--max-tokens", "4", "--no-stream", "--json")
    assert plain.code == 0 and plain.json()["summary"]["output_tokens"] == 8


def test_bench_counts_errors_without_crashing(day2_app, cluster_home):
    r = llmctl("bench", "--url", day2_app["endpoint"], "--model-id", "no-such-model", "--requests", "3",
               "--concurrency", "1", "--api-key-env", "BENCH_KEY", "--json", env={"BENCH_KEY": TEST_API_KEY})
    assert r.code == 1, r.err  # every request failed
    s = r.json()["summary"]
    assert s["failed"] == 3 and s["done"] == 0 and list(s["errors"]) == [next(iter(s["errors"]))]
    assert next(iter(s["errors"])).startswith("HTTP 4")


def test_bench_ctrl_c_prints_the_summary_so_far(day2_app, cluster_home):
    p = Proc([sys.executable, "-m", "llmctl", "bench", APP, "--duration", "120", "--concurrency", "2", "--max-tokens", "16"])
    # A progress line with a finished request (the first line comes before any).
    deadline = time.monotonic() + 120
    while not re.search(r"done [1-9]", p.text("err")) and time.monotonic() < deadline:
        assert p.p.poll() is None, p.text("err")
        time.sleep(0.2)
    r = p.interrupt()
    assert r.code == 0, r.err
    assert "interrupted" in r.out and "requests done / failed" in r.out


@pytest.mark.long
def test_load_scales_up(day2_app, cluster_home):
    assert _llm_replicas(APP) == (1, 1)
    # The load outlasts every wait below (it is interrupted once they pass), so
    # Serve never sees it stop while the test still expects 2 replicas.
    load = Proc([sys.executable, "-m", "llmctl", "bench", APP, "--duration", "600", "--concurrency", "8",
                 "--max-tokens", "200", "--json"])
    try:
        dash = cluster_home.dashboard_url
        up = _wait(lambda: _rest_replicas(dash)[1] == 2, "Serve's target 2 replicas under load", 120)
        running = _wait(lambda: _rest_replicas(dash)[0] == 2, "2 RUNNING replicas under load", 240)
        table = llmctl("status")
        assert "2 RUNNING (target 2)" in table.out or _llm_replicas(APP) != (2, 2), table.out
    finally:
        r = load.interrupt(timeout=60)
    assert r.code == 0, r.err
    print(f"\nscaling: target 2 after {up:.0f}s of load, 2 RUNNING {running:.0f}s later")


# --------------------------------------------------------------------------
# changing the running app (2 replicas)


class Watch:
    """Polls the LLMServer's RUNNING replicas while an update runs."""

    def __init__(self, dashboard: str):
        self.dashboard, self.samples, self.ingress, self._stop = dashboard, [], [], threading.Event()
        self.rollouts: list[str] = []  # what `status` shows mid-rollout
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ids = _replica_ids(self.dashboard)
                # While the controller rebuilds the app (a new code version) the REST
                # answer lists no deployments for a few seconds: unknown, not zero.
                if LLM in ids:
                    self.samples.append(len(ids[LLM]))
                if INGRESS in ids:
                    self.ingress.append(len(ids[INGRESS]))
                st = _serve(self.dashboard)
                for a in summarize(st, self.dashboard):
                    self.rollouts += [f"{d.name}: {d.rollout}" for d in a.deployments if a.name == APP and d.rollout]
            except (httpx.HTTPError, KeyError):
                pass
            time.sleep(0.5)

    def stop(self) -> list[int]:
        self._stop.set()
        self.t.join(10)
        return self.samples


def _bench(out: Path) -> Proc:
    """`llmctl bench` running, once it has finished a request (its progress
    line on stderr, every 5 s, says how many are done)."""
    load = Proc([sys.executable, "-m", "llmctl", "bench", APP, "--duration", "900", "--concurrency", "2",
                 "--max-tokens", "8", "--prompt-tokens", "16", "--output", out])
    deadline = time.monotonic() + 120
    while not re.search(r"\bdone [1-9]", load.text("err")):
        assert load.p.poll() is None and time.monotonic() < deadline, (load.text("out"), load.text("err"))
        time.sleep(0.2)
    return load


def _done_counts(load: Proc) -> list[int]:
    """bench's progress lines so far (stderr, every 5 s): requests finished."""
    return [int(n) for n in re.findall(r"\bdone (\d+)", load.text("err"))]


def _served_more(load: Proc, timeout: float = 120) -> None:
    """Until bench has finished requests after this call: the first progress
    line after it may count some finished before; a rise after that line cannot."""
    seen, deadline = len(_done_counts(load)), time.monotonic() + timeout
    while True:
        new = _done_counts(load)[seen:]
        if len(new) >= 2 and new[-1] > new[0]:
            return
        assert load.p.poll() is None and time.monotonic() < deadline, (load.text("out"), load.text("err"))
        time.sleep(0.2)


def _finish(load: Proc, out: Path) -> dict:
    """bench's summary, with its first failed requests (when, what the server
    said) under "failures": what a failed-request assertion prints."""
    r = load.interrupt(timeout=60)
    assert r.code == 0, r.err
    report = json.loads(out.read_text())
    return {**report["summary"], "failures": report["failures"]}


def _history(app: str) -> list[dict]:
    h = llmctl("history", app, "--json")
    assert h.code == 0, h.err
    return h.json()[app]


@pytest.mark.long
def test_rolling_then_in_place_then_rollback(day2_app, cluster_home, tmp_path):
    serve, model_cfg = day2_app["serve"], day2_app["model_config"]
    dash = cluster_home.dashboard_url

    # 0. two replicas: min_replicas 2, in place (the load's second replica still runs; alone, one starts)
    plan = _set_min_replicas(day2_app, 2, timeout=600)
    assert f"{APP}: in place" in plan and "autoscaling_config.min_replicas: 1 -> 2" in plan, plan
    _wait(lambda: len(_replica_ids(dash)[LLM]) == 2, "2 RUNNING replicas with min_replicas 2", 300)
    before = _replica_ids(dash)
    n0 = len(_history(APP))

    # 1. rolling: an engine argument
    _edit(model_cfg, lambda d: d["engine_kwargs"].update(max_num_seqs=8))
    dry = llmctl("up", serve, "--dry-run")
    assert dry.code == 0, dry.err
    print("\n$ llmctl up --dry-run (rolling)\n" + dry.out)
    assert f"{APP}: rolling restart" in dry.out and "engine_kwargs.max_num_seqs: (unset) -> 8" in dry.out, dry.out
    assert f"rollout {LLM}: 2 replica(s)" in dry.out and "1 of 2 serving during a wave" in dry.out, dry.out
    # the ingress restarts too (it holds the LLMConfigs): gen-config's full surge starts its replacement first
    assert f"rollout {INGRESS}: 1 replica(s)" in dry.out and "no replica serving" not in dry.out, dry.out
    assert _replica_ids(dash) == before  # the dry run changed nothing
    load, watch = _bench(tmp_path / "rolling.json"), Watch(dash)
    r = llmctl("up", serve, "--timeout", "600")  # no terminal, no --yes: applies (printing the plan first)
    running = watch.stop()
    s = _finish(load, tmp_path / "rolling.json")
    assert r.code == 0, (r.out, r.err)
    assert f"{APP}: rolling restart" in r.err
    assert s["failed"] == 0 and s["done"] > 0, s
    assert len(running) > 20 and min(running) >= 1, running  # a replica served throughout
    assert watch.ingress and min(watch.ingress) >= 1, watch.ingress  # and an ingress: no request waits for one
    assert any(r.startswith(f"{LLM}: rolling: ") and "(wave " in r for r in watch.rollouts), watch.rollouts
    print(f"\nstatus mid-rollout: {sorted(set(watch.rollouts))[:6]}")
    print(f"\nrolling: {s['done']} requests, 0 failed; RUNNING LLMServer replicas seen: {sorted(set(running))}")
    after_rolling = _replica_ids(dash)
    assert not (after_rolling[LLM] & before[LLM])  # every replica replaced
    config_rolled = _app(dash)["deployed_app_config"]

    # 2. in place: the autoscaling bounds
    _edit(model_cfg, lambda d: d["deployment_config"]["autoscaling_config"].update(max_replicas=3))
    dry = llmctl("up", serve, "--dry-run")
    print("\n$ llmctl up --dry-run (in place)\n" + dry.out)
    assert f"{APP}: in place" in dry.out and "autoscaling_config.max_replicas: 2 -> 3" in dry.out, dry.out
    assert "rollout " not in dry.out, dry.out
    load = _bench(tmp_path / "in_place.json")
    r = llmctl("up", serve, "--timeout", "300")
    _served_more(load)  # requests after the change too
    s = _finish(load, tmp_path / "in_place.json")
    assert r.code == 0, (r.out, r.err)
    assert f"{APP}: in place" in r.err  # the plan, printed before the PUT
    assert s["failed"] == 0 and s["done"] > 0, s
    assert _replica_ids(dash) == after_rolling  # no replica restarted
    asc = _app(dash)["deployments"][LLM]["deployment_config"]["autoscaling_config"]
    assert asc["max_replicas"] == 3

    # 3. history and rollback
    rows = _history(APP)
    assert len(rows) == n0 + 2 and rows[-1]["current"] and "max_replicas" in rows[-1]["diff"]
    refused = llmctl("rollback", APP, "--timeout", "300")  # no terminal, no --yes: refused, nothing changes
    assert refused.code == 2 and "--yes" in refused.err, (refused.out, refused.err)
    assert _app(dash)["deployments"][LLM]["deployment_config"]["autoscaling_config"]["max_replicas"] == 3
    dry = llmctl("rollback", APP, "--dry-run")
    assert dry.code == 0, dry.err
    print("\n$ llmctl rollback --dry-run\n" + dry.out + "\n$ llmctl history\n" + llmctl("history", APP).out)
    assert f"{APP}: in place" in dry.out and "autoscaling_config.max_replicas: 3 -> 2" in dry.out, dry.out
    r = llmctl("rollback", APP, "--yes", "--timeout", "300")
    assert r.code == 0, (r.out, r.err)
    assert f"{APP}: in place" in r.err and f"rolling {APP} back to entry {n0 + 1}" in r.err
    assert _app(dash)["deployed_app_config"] == config_rolled  # back to the config before the in-place change
    assert _replica_ids(dash) == after_rolling
    rows = _history(APP)
    assert len(rows) == n0 + 3 and rows[-1]["current"] and rows[-1]["source"] == f"rollback to {n0 + 1}", rows


@pytest.mark.long
def test_back_to_one_replica_without_load(day2_app, cluster_home):
    """The way back down: min_replicas 1 again (in place), no load: Serve
    stops the second replica after the downscale delay."""
    plan = _set_min_replicas(day2_app, 1)
    assert f"{APP}: in place" in plan and "autoscaling_config.min_replicas: 2 -> 1" in plan, plan
    down = _wait(lambda: _rest_replicas(cluster_home.dashboard_url) == (1, 1), "back to 1 replica with min_replicas 1 and no load", 240)
    assert _llm_replicas(APP) == (1, 1)  # and `status` says so
    print(f"\nscaling: back to 1 replica {down:.0f}s after min_replicas 1")
