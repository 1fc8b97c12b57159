"""Routers and latency autoscaling (issue 41) without a cluster: what gen-config
writes, Ray's own schema on it, validate on configs others write, the
policy's arithmetic and decisions, and `plan --trace`. The engines' side is in
tests/test_latency_e2e.py."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]
MODULES = ROOT / "llmctl" / "cluster_modules"


def _gen(capsys, config_model, tmp_path, *extra) -> dict:
    r = run_cli(capsys, "gen-config", "--model", str(config_model), "--gpu", "cpu", "--min-replicas", "1",
                "--max-replicas", "2", "--yes", "-o", str(tmp_path), *extra)
    assert r.code == 0, r.err
    return yaml.safe_load(next((tmp_path / "model_config").glob("*.yaml")).read_text())


def test_gen_config_router_and_policy(capsys, config_model, tmp_path):
    doc = _gen(capsys, config_model, tmp_path, "--router", "prefix", "--autoscale-on", "ttft_p95=400ms,itl_p95=60ms",
               "--autoscale-window", "20")
    dc = doc["deployment_config"]
    rrc = dc["request_router_config"]
    assert rrc["request_router_class"] == "ray.serve.llm.request_router:PrefixCacheAffinityRouter"
    assert rrc["request_router_kwargs"]["do_eviction"] is True
    pol = dc["autoscaling_config"]["policy"]
    assert pol["policy_function"] == "llmctl_latency:LatencyPolicy"
    kw = pol["policy_kwargs"]
    assert kw["targets"] == {"ttft_p95": 0.4, "itl_p95": 0.06} and kw["window_s"] == 20
    assert kw["model_id"] == doc["model_loading_config"]["model_id"]
    assert "target_ongoing_requests" not in dc["autoscaling_config"]  # the policy decides, not the target
    assert "max_ongoing_requests" not in dc  # requests wait inside vLLM, where its TTFT histogram sees the wait
    v = run_cli(capsys, "validate", str(next(tmp_path.glob("serve_*.yaml"))))
    assert v.code == 0, v.out + v.err
    assert "never scales" not in v.err


@pytest.mark.parametrize("args,line", [
    (["--router", "kv"], "error: --router kv: Ray 2.60's KVAwareRouter scores replicas only under direct streaming"),
    (["--router", "random"], "error: --router: 'random' is not a router llmctl writes; choose pow2 (Serve's default), prefix (PrefixCacheAffinityRouter)"),
    (["--autoscale-on", "latency_p95=2s"], "error: --autoscale-on: latency_p95: the policy scales on ttft or itl (vLLM's histograms), e.g. ttft_p95=500ms"),
    (["--autoscale-on", "ttft=2s"], "error: --autoscale-on: 'ttft=2s' is not METRIC_pNN=DURATION"),
    (["--autoscale-on", "ttft_p95=1s", "--kuberay"], "error: --autoscale-on with --kuberay: llmctl's latency policy (llmctl_latency) reaches a cluster through `llmctl up`"),
    (["--autoscale-window", "10"], "error: --autoscale-window: the window of --autoscale-on's percentiles; add --autoscale-on (e.g. ttft_p95=500ms)"),
])
def test_gen_config_refuses(capsys, config_model, tmp_path, args, line):
    r = run_cli(capsys, "gen-config", "--model", str(config_model), "--gpu", "cpu", "--yes", "-o", str(tmp_path), *args)
    assert r.code == 2 and r.err.startswith(line) and len(r.err.strip().splitlines()) == 1, r.err
    assert not list(tmp_path.glob("*.yaml"))


def test_what_gen_config_writes_passes_rays_own_schema(capsys, config_model, tmp_path):
    """Ray's DeploymentConfig (RequestRouterConfig imports and pickles the
    router class; AutoscalingPolicy imports and pickles the policy, by value)
    takes the written deployment_config, in a process with llmctl's cluster
    modules on the path as `up` puts them on the cluster; the pickled policy
    then loads and decides in a process WITHOUT them (Serve's controller)."""
    doc = _gen(capsys, config_model, tmp_path, "--router", "prefix", "--autoscale-on", "ttft_p95=400ms")
    dc = json.dumps(doc["deployment_config"])
    code = textwrap.dedent(f"""
        import json, sys, base64
        sys.path.insert(0, {str(MODULES)!r})
        from ray.serve._private.config import DeploymentConfig
        cfg = DeploymentConfig(**json.loads({dc!r}))
        assert cfg.request_router_config.get_request_router_class().__name__ == "PrefixCacheAffinityRouter"
        print(base64.b64encode(cfg.autoscaling_config.policy.get_serialized_policy_def()).decode())
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    blob = p.stdout.strip().splitlines()[-1]
    load = textwrap.dedent(f"""
        import base64, sys, types
        import cloudpickle
        assert not any("cluster_modules" in s for s in sys.path)
        cls = cloudpickle.loads(base64.b64decode({blob!r}))
        pol = cls(targets={{"ttft_p95": 0.4}}, model_id="m", scrape_interval_s=3600)
        pol._scraper.history.extend([(0.0, {{}}), (1.0, {{"ttft": {{0.1: 0, 0.5: 10, 1.0: 20, float("inf"): 20}}}})])
        ctx = types.SimpleNamespace(current_num_replicas=1, target_num_replicas=1)
        n, state = pol(ctx)
        print(n, state["llmctl_latency"]["decision"])
    """)
    q = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={"PATH": "/usr/bin:/bin", "RAY_USAGE_STATS_ENABLED": "0"})
    assert q.returncode == 0, q.stderr[-3000:]
    assert q.stdout.strip().splitlines()[-1] == "2 above target"  # p95 of 20 requests: in (0.5, 1.0] > 0.4


def test_the_policy_module_imports_only_the_standard_library_and_ray():
    tree = ast.parse((MODULES / "llmctl_latency" / "__init__.py").read_text())
    tops = {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    tops |= {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert tops - {"__future__", "ray"} <= set(sys.stdlib_module_names), tops


def _policy():
    sys.path.insert(0, str(MODULES))
    try:
        import llmctl_latency
    finally:
        sys.path.remove(str(MODULES))
    return llmctl_latency


def test_histogram_quantile_and_buckets_by_hand():
    lat = _policy()
    text = "\n".join([
        '# TYPE ray_vllm_time_to_first_token_seconds histogram',
        'ray_vllm_time_to_first_token_seconds_bucket{ReplicaId="a",le="0.1",model_name="m"} 2.0',
        'ray_vllm_time_to_first_token_seconds_bucket{ReplicaId="a",le="0.5",model_name="m"} 6.0',
        'ray_vllm_time_to_first_token_seconds_bucket{ReplicaId="a",le="+Inf",model_name="m"} 10.0',
        'ray_vllm_time_to_first_token_seconds_bucket{ReplicaId="b",le="0.1",model_name="m"} 0.0',
        'ray_vllm_time_to_first_token_seconds_bucket{ReplicaId="b",le="0.5",model_name="m"} 4.0',
        'ray_vllm_time_to_first_token_seconds_bucket{ReplicaId="b",le="+Inf",model_name="m"} 10.0',
        'ray_vllm_time_to_first_token_seconds_bucket{ReplicaId="c",le="0.1",model_name="other"} 99.0',
    ])
    h = lat.parse_buckets(text, "m")["ttft"]
    assert h == {0.1: 2.0, 0.5: 10.0, float("inf"): 20.0}  # summed over replicas a and b, not the other model's
    # median: rank 10 of 20 falls at the top of (0.1, 0.5]; p25: rank 5: 0.1 + 0.4 * (5 - 2) / (10 - 2)
    assert lat.histogram_quantile(0.5, h) == pytest.approx(0.5)
    assert lat.histogram_quantile(0.25, h) == pytest.approx(0.1 + 0.4 * 3 / 8)
    assert lat.histogram_quantile(0.95, h) == pytest.approx(0.5)  # in +Inf: the last finite bound, as Prometheus does
    assert lat.histogram_quantile(0.5, {}) is None


@pytest.mark.parametrize("hist,current,target,want,why", [
    (None, 1, 1, 1, "no metrics yet"),
    ({}, 2, 2, 1, "no requests in the window"),
    ({0.1: 0, 0.5: 2, 1.0: 20, float("inf"): 20}, 1, 1, 2, "above target"),
    ({0.1: 0, 0.5: 2, 1.0: 20, float("inf"): 20}, 1, 2, 2, "above target"),  # a replica starting: not cancelled, not doubled
    ({0.05: 19, 0.1: 20, float("inf"): 20}, 2, 2, 1, "below 0.5 x target"),
    ({0.1: 0, 0.3: 20, float("inf"): 20}, 2, 2, 2, "within target"),
])
def test_policy_decisions(hist, current, target, want, why):
    import types

    lat = _policy()
    pol = lat.LatencyPolicy(targets={"ttft_p95": 0.4}, model_id="m", scrape_interval_s=3600)
    pol._scraper.stop.set()
    pol._scraper.history.clear()
    if hist is not None:
        pol._scraper.history.extend([(0.0, {}), (1.0, {"ttft": hist} if hist else {})])
    n, state = pol(types.SimpleNamespace(current_num_replicas=current, target_num_replicas=target))
    assert (n, state["llmctl_latency"]["decision"]) == (want, why)


def test_policy_logs_each_change_of_reason_with_its_targets():
    """The controller's log says why the policy keeps the replicas it has, not only when it asks for a change: one
    line per change of reason (and per change asked for, at most every 5 s), each naming the targets it holds."""
    import logging
    import types

    lat = _policy()
    pol = lat.LatencyPolicy(targets={"ttft_p95": 0.4}, model_id="m", scrape_interval_s=3600)
    pol._scraper.stop.set()
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda rec: lines.append(rec.getMessage())
    logging.getLogger("ray.serve").addHandler(handler)
    try:
        ctx = types.SimpleNamespace(current_num_replicas=1, target_num_replicas=1)
        pol._scraper.history.clear()
        for _ in range(3):
            pol(ctx)  # no metrics yet: one line, not three
        pol._scraper.history.extend([(0.0, {}), (1.0, {"ttft": {0.1: 0, 0.3: 20, float("inf"): 20}})])
        pol(ctx)  # within target: a new reason
        pol._scraper.history.append((2.0, {"ttft": {0.1: 0, 0.5: 2, 1.0: 20, float("inf"): 20}}))
        pol(ctx), pol(ctx)  # above target, 1 -> 2 wanted: once within 5 s
    finally:
        logging.getLogger("ray.serve").removeHandler(handler)
    mine = [ln for ln in lines if ln.startswith("llmctl_latency m:")]
    assert [ln.split(": ", 1)[1].split(" (")[0] for ln in mine] == ["no metrics yet", "within target", "above target"], mine
    assert all('targets {"ttft_p95": 0.4}' in ln for ln in mine) and mine[-1].endswith("1 -> 2 replicas wanted"), mine


def _model_config(tmp_path, dc: str) -> Path:
    p = tmp_path / "m.yaml"
    p.write_text("model_loading_config: {model_id: m, model_source: Qwen/Qwen2.5-0.5B-Instruct}\n"
                 "accelerator_type: L4\nengine_kwargs: {tensor_parallel_size: 1}\n" + dc)
    return p


@pytest.mark.parametrize("dc,line", [
    ("deployment_config: {request_router_config: {request_router_class: ray.serve.llm:LLMConfig}}",
     "deployment_config.request_router_config.request_router_class: 'ray.serve.llm:LLMConfig' is not a request router "
     "(not a subclass of Ray Serve's RequestRouter)"),
    ("deployment_config: {request_router_config: {request_router_class: ray.serve.llm.request_router.PrefixCacheAffinityRouter, "
     "request_router_kwargs: {imbalance: 3}}}",
     "deployment_config.request_router_config.request_router_kwargs.imbalance: PrefixCacheAffinityRouter takes no setting "
     "'imbalance' (its initialize_state takes: imbalanced_threshold, match_rate_threshold"),
    ("deployment_config: {request_router_config: {request_router_class: ray.serve.llm.request_router:NoSuchRouter}}",
     "deployment_config.request_router_config.request_router_class: module 'ray.serve.llm.request_router' defines no 'NoSuchRouter'"),
    ("deployment_config: {autoscaling_config: {min_replicas: 1, max_replicas: 2, policy: {policy_function: "
     "'llmctl_latency:LatencyPolicy', policy_kwargs: {targets: {ttft_p95: 0.5}, model_id: m, window: 30}}}}",
     "deployment_config.autoscaling_config.policy.policy_kwargs.window: llmctl_latency:LatencyPolicy takes no setting 'window'"),
    ("deployment_config: {autoscaling_config: {min_replicas: 1, max_replicas: 2, policy: {policy_function: "
     "'llmctl_latency:LatencyPolicy', policy_kwargs: {targets: {p95: 0.5}, model_id: m}}}}",
     "deployment_config.autoscaling_config.policy.policy_kwargs.targets.p95: not ttft_pNN or itl_pNN"),
    ("deployment_config: {autoscaling_config: {min_replicas: 1, max_replicas: 2, policy: {policy_function: "
     "'llmctl_latency:TtftPolicy'}}}",
     "deployment_config.autoscaling_config.policy.policy_function: llmctl's latency policy is llmctl_latency:LatencyPolicy"),
    ("deployment_config: {autoscaling_config: {min_replicas: 1, max_replicas: 2, policy: {policy_function: "
     "'ray.serve.autoscaling_policy:no_such_policy'}}}",
     "deployment_config.autoscaling_config.policy.policy_function: module 'ray.serve.autoscaling_policy' defines no 'no_such_policy'"),
])
def test_validate_refuses_wrong_router_or_policy(capsys, tmp_path, dc, line):
    p = _model_config(tmp_path, dc)
    r = run_cli(capsys, "validate", str(p))
    assert r.code == 2, r.out + r.err
    assert any(ln.startswith(f"{p}:") and line in ln for ln in r.err.splitlines()), r.err


def test_validate_warns_of_the_kv_router(capsys, tmp_path):
    p = _model_config(tmp_path, "deployment_config: {request_router_config: {request_router_class: "
                                "ray.serve.llm.request_router:KVAwareRouter}}")
    r = run_cli(capsys, "validate", str(p))
    assert r.code == 0 and "note: Ray 2.60's KVAwareRouter scores replicas only under direct streaming" in r.err, r.err


def _burst_trace(path: Path) -> Path:
    rows = [(i * 4.0, 100, 50) for i in range(15)]  # 0.25 req/s for a minute
    rows += [(60 + i * 0.2, 100, 50) for i in range(150)]  # 5 req/s for 30 s
    rows += [(90 + i * 4.0, 100, 50) for i in range(8)]
    path.write_text("timestamp,input_tokens,output_tokens\n" + "".join(f"{t},{a},{b}\n" for t, a, b in rows))
    return path


def test_plan_trace_sizes_for_the_peak_not_the_mean(capsys, tmp_path):
    trace = _burst_trace(tmp_path / "t.csv")
    r = run_cli(capsys, "plan", "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "L4", "--tp", "1",
                "--slo", "ttft_p95=500ms,itl_p95=80ms", "--trace", str(trace), "--window", "30", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    tr = data["trace"]
    assert tr["peak"]["rate"] == pytest.approx(5.0, rel=0.05) and 50 <= tr["peak"]["start_s"] <= 62
    assert tr["mean_rate"] < 2 and data["capacity"]["rate"] == tr["peak"]["rate"]
    row = data["capacity"]["rows"][0]
    per_replica = row["max_rate"]
    assert per_replica > 0
    import math

    assert row["replicas_at_peak"] == max(1, math.ceil(tr["peak"]["rate"] / per_replica - 1e-9))
    assert row["replicas_at_mean"] == max(1, math.ceil(tr["mean_rate"] / per_replica - 1e-9))
    assert max(row["replicas_by_window"]) == row["replicas_at_peak"] >= row["replicas_at_mean"]
    # the table as text too
    t = run_cli(capsys, "plan", "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "L4", "--tp", "1",
                "--slo", "ttft_p95=500ms,itl_p95=80ms", "--trace", str(trace), "--window", "30")
    assert t.code == 0 and "(sized for the peak, not the mean)" in t.out and "per 30 s window:" in t.out, t.out


@pytest.mark.parametrize("args,line", [
    (["--trace", "T"], "error: --trace: sizes for latency targets; add --slo (e.g. --slo ttft_p95=500ms,itl_p95=40ms)"),
    (["--slo", "ttft_p95=1s", "--trace", "T", "--rate", "2"], "error: --trace: the trace sets the rate; leave out --rate and --concurrency"),
    (["--window", "10"], "error: --window and --speedup: apply to a trace; add --trace FILE"),
    (["--slo", "ttft_p95=1s", "--trace", "T", "--window", "0"], "error: --window: must be a positive number of seconds (got 0.0)"),
])
def test_plan_trace_flag_errors(capsys, tmp_path, args, line):
    trace = str(_burst_trace(tmp_path / "t.csv"))
    r = run_cli(capsys, "plan", "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "L4", *[trace if a == "T" else a for a in args])
    assert r.code == 2 and r.err.strip() == line, r.err
