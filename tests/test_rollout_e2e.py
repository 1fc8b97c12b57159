"""Changing a running app (issue 23) on the private Ray head with the tiny
model, two replicas and `llmctl bench` running through each update:

- a rolling change (an engine argument): the plan says "rolling restart" and
  names the field; 0 failed requests; an LLMServer replica serves throughout;
  every LLMServer replica replaced;
- an in-place change (autoscaling bounds): the plan says "in place"; 0 failed
  requests; the same replica ids before and after;
- `rollback`: the plan names the change back, the deployed config is the
  earlier one again, in place.

Real vLLM CPU engines; waits poll with deadlines; generated text unasserted."""

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

from helpers import Proc
from llmctl.launch.serve_api import summarize
from test_launch import llmctl

pytestmark = [pytest.mark.cluster, pytest.mark.engine]

APP = "roll_app"


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


@pytest.fixture(scope="module")
def roll_app(ray_head, tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("roll")
    env = {"LLMCTL_HOME": str(ray_head.home)}
    r = llmctl("gen-config", "--model", tiny_model, "--model-id", "tiny-roll", "--gpu", "cpu", "--min-replicas", "2",
               "--max-replicas", "2", "--app-name", APP, "--route-prefix", "/roll", "--yes", "-o", out, env=env)
    assert r.code == 0, r.err
    serve = next(out.glob("serve_*.yaml"))
    r = llmctl("up", serve, "--timeout", "600", env=env)
    assert r.code == 0, (r.out, r.err)
    yield serve, out / "model_config" / "tiny-roll.yaml"
    llmctl("down", APP, env=env)


def _edit(model_cfg, fn) -> None:
    data = yaml.safe_load(model_cfg.read_text())
    fn(data)
    model_cfg.write_text(yaml.safe_dump(data, sort_keys=False))


class Watch:
    """Polls the LLMServer's RUNNING replicas while an update runs."""

    def __init__(self, dashboard: str):
        self.dashboard, self.samples, self._stop = dashboard, [], threading.Event()
        self.rollouts: list[str] = []  # what `status` shows mid-rollout
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ids = _replica_ids(self.dashboard)
                # While the controller rebuilds the app (a new code version) the REST
                # answer lists no deployments for a few seconds: unknown, not zero.
                if "LLMServer:tiny-roll" in ids:
                    self.samples.append(len(ids["LLMServer:tiny-roll"]))
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
                 "--max-tokens", "8", "--prompt-tokens", "16", "-o", out])
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
    r = load.interrupt(timeout=60)
    assert r.code == 0, r.err
    return json.loads(out.read_text())["summary"]


def test_rolling_then_in_place_then_rollback(roll_app, cluster_home, tmp_path):
    serve, model_cfg = roll_app
    dash = cluster_home.dashboard_url
    before = _replica_ids(dash)
    assert len(before["LLMServer:tiny-roll"]) == 2

    # 1. rolling: an engine argument
    _edit(model_cfg, lambda d: d["engine_kwargs"].update(max_num_seqs=8))
    dry = llmctl("up", serve, "--dry-run")
    assert dry.code == 0, dry.err
    print("\n$ llmctl up --dry-run (rolling)\n" + dry.out)
    assert f"{APP}: rolling restart" in dry.out and "engine_kwargs.max_num_seqs: (unset) -> 8" in dry.out, dry.out
    assert "rollout LLMServer:tiny-roll: 2 replica(s)" in dry.out and "1 of 2 serving during a wave" in dry.out, dry.out
    assert _replica_ids(dash) == before  # the dry run changed nothing
    load, watch = _bench(tmp_path / "rolling.json"), Watch(dash)
    r = llmctl("up", serve, "--timeout", "600")  # no terminal, no --yes: applies (printing the plan first)
    running = watch.stop()
    s = _finish(load, tmp_path / "rolling.json")
    assert r.code == 0, (r.out, r.err)
    assert f"{APP}: rolling restart" in r.err
    assert s["failed"] == 0 and s["done"] > 0, s
    assert len(running) > 20 and min(running) >= 1, running  # a replica served throughout
    assert any(r.startswith("LLMServer:tiny-roll: rolling: ") and "(wave " in r for r in watch.rollouts), watch.rollouts
    print(f"\nstatus mid-rollout: {sorted(set(watch.rollouts))[:6]}")
    print(f"\nrolling: {s['done']} requests, 0 failed; RUNNING LLMServer replicas seen: {sorted(set(running))}")
    after_rolling = _replica_ids(dash)
    assert not (after_rolling["LLMServer:tiny-roll"] & before["LLMServer:tiny-roll"])  # every replica replaced
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
    asc = _app(dash)["deployments"]["LLMServer:tiny-roll"]["deployment_config"]["autoscaling_config"]
    assert asc["max_replicas"] == 3

    # 3. history and rollback
    h = llmctl("history", APP, "--json")
    assert h.code == 0, h.err
    rows = h.json()[APP]
    assert len(rows) == 3 and rows[-1]["current"] and "max_replicas" in rows[-1]["diff"]
    dry = llmctl("rollback", APP, "--dry-run")
    assert dry.code == 0, dry.err
    print("\n$ llmctl rollback --dry-run\n" + dry.out + "\n$ llmctl history\n" + llmctl("history", APP).out)
    assert f"{APP}: in place" in dry.out and "autoscaling_config.max_replicas: 3 -> 2" in dry.out, dry.out
    r = llmctl("rollback", APP, "--timeout", "300")
    assert r.code == 0, (r.out, r.err)
    assert f"{APP}: in place" in r.err and "rolling roll_app back to entry 2" in r.err
    assert _app(dash)["deployed_app_config"] == config_rolled  # back to the config before the in-place change
    assert _replica_ids(dash) == after_rolling
    rows = llmctl("history", APP, "--json").json()[APP]
    assert len(rows) == 4 and rows[-1]["current"] and rows[-1]["source"] == "rollback to 2", rows
