"""The update plan (issue 23, llmctl/rollout.py) against Ray Serve's
own rules, read from the installed Ray: DeploymentConfig's update types, the
app code version (deploy_utils.get_app_code_version), the rolling-update
constants. No cluster: the cluster behaviour is tests/test_scale_e2e.py."""

from __future__ import annotations

import copy
import json
import math
import stat

import pytest

from llmctl import rollout
from llmctl import serve_facts as sf
from llmctl.launch import update

LLM = {
    "model_loading_config": {"model_id": "tiny", "model_source": "/models/tiny"},
    "placement_group_config": {"bundles": [{"CPU": 1}]},
    "engine_kwargs": {"tensor_parallel_size": 1, "max_model_len": 512},
    "deployment_config": {"max_ongoing_requests": 3,
                          "autoscaling_config": {"min_replicas": 2, "max_replicas": 2, "target_ongoing_requests": 2}},
}
GPU_LLM = {
    "model_loading_config": {"model_id": "qwen/q-0.5b", "model_source": "Qwen/Qwen2.5-0.5B-Instruct"},
    "accelerator_type": "L4",
    "engine_kwargs": {"tensor_parallel_size": 2},
    "deployment_config": {"autoscaling_config": {"min_replicas": 4, "max_replicas": 4}},
}


def app(llm=LLM, **extra) -> dict:
    return {"name": "a", "route_prefix": "/", "import_path": "ray.serve.llm:build_openai_app",
            "args": {"llm_configs": [copy.deepcopy(llm)]}, **extra}


def deployed(a: dict, targets: dict | None = None) -> dict:
    """A GET /api/serve/applications/ answer with ``a`` deployed (in llmctl's canonical form)."""
    deps = {d: {"target_num_replicas": n} for d, n in (targets or {}).items()}
    return {"applications": {a["name"]: {"deployed_app_config": a, "deployments": deps}}}


def with_llm(fn, base=LLM) -> dict:
    llm = copy.deepcopy(base)
    fn(llm)
    return app(llm)


def put(status: dict, new: dict):
    return update.lift_and_plan(status, {"applications": [new]}, [new["name"]])


# --------------------------------------------------------------------------
# the tables are Ray's


def test_option_classes_are_rays_update_types():
    from ray.serve._private.config import DeploymentConfig
    from ray.serve._private.utils import DeploymentOptionUpdateType as T

    for name, f in DeploymentConfig.model_fields.items():
        ut = (f.json_schema_extra or {}).get("update_type")
        if ut is None:
            continue
        if ut == T.HeavyWeight:
            assert name in rollout.RESTART_FIELDS and rollout._option_kind(name)[0] == rollout.ROLLING, name
        else:
            assert rollout.LIGHTWEIGHT_FIELDS.get(name) == ut.value, name
            assert rollout._option_kind(name)[0] == rollout.IN_PLACE, name


def test_rolling_update_default_is_rays():
    from ray.serve._private.constants import DEFAULT_ROLLING_UPDATE_PERCENTAGE

    assert rollout.DEFAULT_ROLLING_UPDATE_PERCENTAGE == DEFAULT_ROLLING_UPDATE_PERCENTAGE


PAIRS = [
    (app(), with_llm(lambda l: l["engine_kwargs"].update(max_num_seqs=8))),
    (app(), with_llm(lambda l: l["deployment_config"]["autoscaling_config"].update(max_replicas=3))),
    (app(), app(runtime_env={"env_vars": {"A": "1"}})),
    (app(), app(route_prefix="/x")),
    (app(), app(deployments=[{"name": "LLMServer:tiny", "max_ongoing_requests": 5}])),
    (app(deployments=[{"name": "LLMServer:tiny", "autoscaling_config": {"min_replicas": 1}}]),
     app(deployments=[{"name": "LLMServer:tiny", "autoscaling_config": {"min_replicas": 2}}])),
    (app(), app(deployments=[{"name": "LLMServer:tiny", "autoscaling_config": {"min_replicas": 2}}])),
    (app(), app(deployments=[{"name": "LLMServer:tiny", "request_router_config": {"request_router_class": "ray.serve._private.request_router:PowerOfTwoChoicesRequestRouter"}}])),
]


@pytest.mark.parametrize("old,new", PAIRS)
def test_code_key_changes_exactly_when_rays_code_version_does(old, new):
    from ray.serve._private.deploy_utils import get_app_code_version
    from ray.serve.schema import ServeApplicationSchema

    ray_same = get_app_code_version(ServeApplicationSchema(**old)) == get_app_code_version(ServeApplicationSchema(**new))
    assert (rollout.code_key(old) == rollout.code_key(new)) == ray_same


# --------------------------------------------------------------------------
# plans


def test_new_app_and_unchanged():
    a = rollout.canonical(app(), update._llm_defaults())
    _, p = put({"applications": {}}, app())
    assert p.kinds() == {"a": rollout.NEW_APP}
    payload, p = put(deployed(a), app())
    assert p.empty and payload["applications"][0] == a and p.lines() == ["plan: no change to the deployed applications"]


@pytest.mark.parametrize("status", ["RUNNING", "DEPLOYING"])
def test_unchanged_config_is_not_sent_again(status):
    """`up` of the config already deployed sends nothing (a PUT would restart a
    build in progress); anything it would change, or a failed app, is sent."""
    a = rollout.canonical(app(), update._llm_defaults())
    cur = deployed(a)
    cur["applications"]["a"]["status"] = status
    payload, p = put(cur, app())
    assert update.unchanged(p, payload, cur, ["a"])
    changed, p2 = put(cur, with_llm(lambda l: l["engine_kwargs"].update(max_num_seqs=8)))
    assert not update.unchanged(p2, changed, cur, ["a"])
    for gone in ("DEPLOY_FAILED", "UNHEALTHY", "DELETING", "NOT_STARTED"):
        other = copy.deepcopy(cur)
        other["applications"]["a"]["status"] = gone
        assert not update.unchanged(p, payload, other, ["a"]), gone
    assert not update.unchanged(p, dict(payload, target_capacity=50), cur, ["a"])
    assert update.unchanged(p, dict(payload, target_capacity=50), dict(cur, target_capacity=50), ["a"])
    assert not update.unchanged(p, dict(payload, logging_config={"log_level": "DEBUG"}), cur, ["a"])


def test_every_global_option_of_a_serve_config_is_judged():
    """Each top-level field of Ray's serve config schema is either fixed once
    Serve runs, compared, or makes `up` send the config (update.unchanged);
    each application state is either kept or sent again."""
    from ray.serve.schema import ApplicationStatus, ServeDeploySchema

    assert set(sf.KEPT_STATES) < set(ApplicationStatus.__members__)

    judged = set(sf.FIXED_GLOBALS) | {"applications", "target_capacity"} | set(sf.APPLIED_GLOBALS)
    assert set(ServeDeploySchema.model_fields) == judged == {"applications", *sf.GLOBAL_OPTIONS}


def test_engine_argument_is_a_rolling_restart_of_every_deployment():
    a = rollout.canonical(app(), update._llm_defaults())
    _, p = put(deployed(a, {"LLMServer:tiny": 2, "OpenAiIngress": 1}),
               with_llm(lambda l: l["engine_kwargs"].update(max_num_seqs=8)))
    assert p.kinds() == {"a": rollout.ROLLING}
    c = next(c for c in p.changes if c.field == "engine_kwargs.max_num_seqs")
    assert (c.old, c.new, c.deployment, c.kind) == (None, 8, "LLMServer:tiny", rollout.ROLLING)
    assert "get_app_code_version" in c.why
    by = {r.deployment: r for r in p.rollouts}
    assert set(by) == {"LLMServer:tiny", "OpenAiIngress"}
    r = by["LLMServer:tiny"]
    wave = max(int(rollout.DEFAULT_ROLLING_UPDATE_PERCENTAGE * 2), 1)
    assert (r.replicas, r.wave, r.waves, r.serving_min, r.extra) == (2, wave, math.ceil(2 / wave), 2 - wave, {})
    assert r.replica_resources == {"CPU": 2.0}  # the bundle's CPU and the replica actor's, merged
    assert by["OpenAiIngress"].serving_min == 0 and any("OpenAiIngress has no replica serving" in x for x in p.lines())


def test_autoscaling_bounds_are_in_place_as_overrides_on_the_deployed_args():
    a = rollout.canonical(app(), update._llm_defaults())
    new = with_llm(lambda l: l["deployment_config"]["autoscaling_config"].update(max_replicas=3))
    payload, p = put(deployed(a), new)
    sent = payload["applications"][0]
    assert sent["args"] == a["args"]  # the code version stays
    assert rollout.code_key(sent) == rollout.code_key(a)
    assert sent["deployments"][0]["autoscaling_config"]["max_replicas"] == 3
    assert p.kinds() == {"a": rollout.IN_PLACE} and not p.rollouts and p.lifted == ["a"]
    c = p.changes[0]
    assert (c.field, c.old, c.new, c.kind) == ("deployments.autoscaling_config.max_replicas", 2, 3, rollout.IN_PLACE)
    text = "\n".join(p.lines())
    assert "a: in place" in text and "NeedsActorReconfigure" in text and "extra GPUs during the rollout: 0" in text


def _lower_min(llm):
    llm["deployment_config"]["autoscaling_config"]["min_replicas"] = 1


def _lower_min_and_seqs(llm):
    _lower_min(llm)
    llm["engine_kwargs"]["max_num_seqs"] = 8


def test_a_rolling_change_after_an_in_place_one_names_only_what_changes():
    """An in-place update keeps the deployed args and sends the new bound as
    an override; a later rolling change brings args with that bound: it is in
    effect already, so the plan names only the engine argument (the plan named
    min_replicas a rolling change too, seen on the CPU engine in
    tests/test_scale_e2e.py)."""
    a = rollout.canonical(app(), update._llm_defaults())
    payload, p = put(deployed(a), with_llm(_lower_min))
    assert p.kinds() == {"a": rollout.IN_PLACE}
    now = payload["applications"][0]  # min_replicas 2 in the deployed args, 1 in the override
    assert now["args"] == a["args"]
    _, p = put(deployed(now, {"LLMServer:tiny": 1, "OpenAiIngress": 1}), with_llm(_lower_min_and_seqs))
    assert p.kinds() == {"a": rollout.ROLLING}
    assert [(c.deployment, c.field) for c in p.changes] == [("LLMServer:tiny", "engine_kwargs.max_num_seqs")]
    assert {r.deployment for r in p.rollouts} == {"LLMServer:tiny", "OpenAiIngress"}

    def more(llm):  # a bound the override does not hold yet is a change of its own
        _lower_min_and_seqs(llm)
        llm["deployment_config"]["autoscaling_config"]["max_replicas"] = 3

    _, p = put(deployed(now), with_llm(more))
    fields = [c.field for c in p.changes]
    assert "engine_kwargs.max_num_seqs" in fields and "deployment_config.autoscaling_config.max_replicas" in fields
    assert not [f for f in fields if f.endswith("min_replicas")], fields


def test_deployment_names_are_rays():
    """The LLMServer's name is Ray Serve LLM's own rule (run from its source:
    importing it imports vLLM); the ingress is named after its class, so an
    app with llmctl's API-key ingress rolls ApiKeyIngress, not an
    OpenAiIngress it does not have (the plan listed both, seen on the CPU
    engine); preflight's demands use the same names."""
    import ast
    import importlib.util
    from pathlib import Path
    from types import SimpleNamespace

    from llmctl import builders, placement

    src = Path(importlib.util.find_spec("ray.llm").submodule_search_locations[0]) / "_internal/serve/core/server/builder.py"
    fn = next(n for n in ast.parse(src.read_text()).body if isinstance(n, ast.FunctionDef) and n.name == "_get_deployment_name")
    fn.args.args[0].annotation, fn.returns, scope = None, None, {}
    exec(compile(ast.Module([fn], []), str(src), "exec"), scope)
    for mid in ("tiny", "Qwen/Qwen2.5-0.5B-Instruct", "meta-llama/Llama-3.1-8B", "a.b/c.d"):
        assert sf.llm_deployment_name(mid) == "LLMServer:" + scope["_get_deployment_name"](SimpleNamespace(model_id=mid))

    keyed = app(GPU_LLM)
    keyed["args"]["ingress_cls_config"] = builders.ingress_cls_config(api_key_env="MY_KEY")
    assert builders.ingress_deployment_name(keyed) == "ApiKeyIngress" == builders.INGRESS_CLS.split(":")[1]
    assert builders.ingress_deployment_name(app()) == "OpenAiIngress"
    assert builders.ingress_deployment_name({"args": {"ingress_cls_config": {"ingress_cls": "my.mod.Gate"}}}) == "Gate"
    a = rollout.canonical(keyed, update._llm_defaults())
    new = copy.deepcopy(keyed)
    new["args"]["llm_configs"][0]["engine_kwargs"]["max_num_seqs"] = 8
    _, p = put(deployed(a, {"LLMServer:qwen--q-0_5b": 4, "ApiKeyIngress": 1}), new)
    assert {r.deployment for r in p.rollouts} == {"LLMServer:qwen--q-0_5b", "ApiKeyIngress"}
    assert [(d.deployment, d.min_replicas) for d in placement.demands({"applications": [keyed]})] == \
        [("LLMServer:qwen--q-0_5b", 4), ("ApiKeyIngress", 1)]


def test_an_app_deployed_without_overrides_restarts_once():
    """Serve hashes an override's autoscaling policy into the code version: the first canonical deploy restarts."""
    _, p = put(deployed(app(), {"LLMServer:tiny": 2}), with_llm(lambda l: l["deployment_config"]["autoscaling_config"].update(max_replicas=3)))
    assert p.kinds() == {"a": rollout.ROLLING}


@pytest.mark.parametrize("field,value", [("max_ongoing_requests", 5), ("health_check_period_s", 3.0)])
def test_other_in_place_options(field, value):
    a = rollout.canonical(app(), update._llm_defaults())
    _, p = put(deployed(a), with_llm(lambda l: l["deployment_config"].update({field: value})))
    assert p.kinds() == {"a": rollout.IN_PLACE}, p.lines()


def test_ray_actor_options_override_restarts_that_deployment_only():
    a = rollout.canonical(app(), update._llm_defaults())
    new = copy.deepcopy(a)
    new["deployments"].append({"name": "OpenAiIngress", "ray_actor_options": {"num_cpus": 2}})
    _, p = put(deployed(a, {"OpenAiIngress": 1}), new)
    assert p.kinds() == {"a": rollout.ROLLING}
    assert [r.deployment for r in p.rollouts] == ["OpenAiIngress"]


def test_surge_costs_extra_gpus_and_keeps_capacity():
    base = copy.deepcopy(GPU_LLM)
    base["deployment_config"]["max_surge_percent"] = 50
    a = rollout.canonical(app(base), update._llm_defaults())
    new = with_llm(lambda l: l["engine_kwargs"].update(max_model_len=4096), base)
    _, p = put(deployed(a, {"LLMServer:qwen--q-0_5b": 4}), new)
    r = next(r for r in p.rollouts if r.deployment == "LLMServer:qwen--q-0_5b")
    surge = (50 * 4 + 99) // 100
    assert (r.surge, r.serving_min, r.extra["GPU"]) == (surge, 4, surge * 2.0)  # TP 2: 2 GPUs a replica
    assert p.extra_resources()["GPU"] == surge * 2.0
    assert "extra GPUs during the rollout: 4" in p.lines()[-1]
    # preflight: the surge must fit in what is free
    assert rollout.surge_problem(p, [{"GPU": 4.0, "CPU": 8.0, "accelerator_type:L4": 1.0}]) is None
    msg = rollout.surge_problem(p, [{"GPU": 2.0, "CPU": 8.0, "accelerator_type:L4": 1.0}])
    assert msg and "max_surge_percent" in msg and "GPU 4" in msg


def test_the_wave_follows_rolling_update_percentage():
    base = copy.deepcopy(GPU_LLM)
    base["deployment_config"]["rolling_update_percentage"] = 0.5
    a = rollout.canonical(app(base), update._llm_defaults())
    _, p = put(deployed(a, {"LLMServer:qwen--q-0_5b": 4}), with_llm(lambda l: l["engine_kwargs"].update(max_model_len=4096), base))
    r = next(r for r in p.rollouts if r.deployment == "LLMServer:qwen--q-0_5b")
    assert (r.wave, r.waves, r.serving_min, r.extra) == (2, 2, 2, {})


def test_plan_json_is_json():
    a = rollout.canonical(app(), update._llm_defaults())
    _, p = put(deployed(a), with_llm(lambda l: l["engine_kwargs"].update(max_num_seqs=8)))
    data = json.loads(json.dumps(p.to_json()))
    assert data["apps"] == {"a": rollout.ROLLING} and data["rollouts"] and data["extra_resources"] == {}


# --------------------------------------------------------------------------
# history


def test_history_is_private_token_free_and_deduplicated(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMCTL_HOME", str(tmp_path))
    url = "http://127.0.0.1:8265"
    secret = "hf_abcdefghijklmnopqrstuvwxyz012345"
    a = app(runtime_env={"env_vars": {"HF_TOKEN": secret}})
    update.record(url, [a], "serve.yaml", {secret: "HF_TOKEN"})
    update.record(url, [a], "serve.yaml", {secret: "HF_TOKEN"})
    b = with_llm(lambda l: l["engine_kwargs"].update(max_num_seqs=8))
    update.record(url, [b], "serve2.yaml")
    files = list(update.history_dir(url).glob("*.jsonl"))
    assert len(files) == 1 and stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(update.history_dir(url).stat().st_mode) == 0o700
    assert secret not in files[0].read_text()
    entries = update.read(url, "a")
    assert [e.n for e in entries] == [1, 2]
    assert entries[0].config["runtime_env"]["env_vars"]["HF_TOKEN"] == "${HF_TOKEN}"
    rows = list(update.iter_history(url, "a"))
    assert rows[0][1] == "first deployment" and "max_num_seqs" in rows[1][1]
    assert update.pick(entries, b, None, "a").n == 1
    assert update.pick(entries, b, 2, "a").n == 2
    with pytest.raises(Exception, match="between 1 and 2"):
        update.pick(entries, b, 3, "a")


def test_llm_defaults_mirror_ray_serve_llms_builder():
    """update._llm_defaults is builder.DEFAULT_DEPLOYMENT_OPTIONS, read from its source (importing it imports vLLM)."""
    import ast
    import importlib.util
    from pathlib import Path

    from ray.llm._internal.serve import constants

    src = Path(importlib.util.find_spec("ray.llm").submodule_search_locations[0]) / "_internal/serve/core/server/builder.py"
    tree = ast.parse(src.read_text())
    node = next(n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                and any(getattr(t, "id", None) == "DEFAULT_DEPLOYMENT_OPTIONS" for t in n.targets))

    def ev(n):
        if isinstance(n, ast.Dict):
            return {ast.literal_eval(k): ev(v) for k, v in zip(n.keys, n.values)}
        return getattr(constants, n.id)

    assert update._llm_defaults() == ev(node)


def test_status_shows_a_rollout_in_progress():
    from llmctl.launch.serve_api import rollout_text, summarize

    t0 = 1000.0
    dep = {"status": "UPDATING", "target_num_replicas": 2, "deployment_config": {"rolling_update_percentage": 0.2},
           "replicas": [{"replica_id": "a", "state": "RUNNING", "start_time_s": t0 - 50},
                        {"replica_id": "b", "state": "STOPPING", "start_time_s": t0 - 50},
                        {"replica_id": "c", "state": "STARTING", "start_time_s": t0 + 3}]}
    assert rollout_text(dep, t0) == "rolling: 1 old, 1 new (0 RUNNING), 1 old stopping (wave 1 of 2)"
    dep["replicas"] = [dep["replicas"][0], dict(dep["replicas"][2], state="RUNNING"),
                       {"replica_id": "d", "state": "STARTING", "start_time_s": t0 + 40}]
    assert rollout_text(dep, t0) == "rolling: 1 old, 2 new (1 RUNNING) (wave 2 of 2)"
    assert rollout_text(dict(dep, status="HEALTHY"), t0) == ""
    st = {"applications": {"a": {"status": "DEPLOYING", "last_deployed_time_s": t0, "deployments": {"LLMServer:x": dep}}}}
    assert summarize(st, "http://127.0.0.1:8265")[0].deployments[0].rollout.startswith("rolling: 1 old, 2 new")


# --------------------------------------------------------------------------
# the commands without a cluster


def test_dry_run_starts_no_head_and_bad_input_is_one_line(config_model, tmp_path, llmctl_home):
    from helpers import llmctl

    r = llmctl("gen-config", "--model", config_model, "--model-id", "tiny", "--gpu", "cpu", "--yes", "-o", tmp_path)
    assert r.code == 0, r.err
    serve = next(tmp_path.glob("serve_*.yaml"))
    r = llmctl("up", serve, "--dry-run")
    assert r.code == 0, r.err
    assert "llm_app: new application" in r.out and "dry run: nothing was changed" in r.out
    assert "no local Ray head runs" in r.err and not (llmctl_home / "cluster.json").exists()
    j = llmctl("up", serve, "--dry-run", "--json")
    assert j.code == 0 and j.json()["apps"] == {"llm_app": rollout.NEW_APP}
    for args in (["history"], ["rollback", "llm_app", "--yes"]):
        r = llmctl(*args)
        assert r.code == 3 and r.err.count("\n") == 1 and "Traceback" not in r.err, (args, r.err)
    r = llmctl("rollback", "llm_app")  # no terminal and no --yes: refused before anything else
    assert r.code == 2 and "--yes" in r.err and r.err.count("\n") == 1, r.err


def test_confirmation_only_on_a_terminal_and_only_for_a_running_app(monkeypatch):
    import sys

    from llmctl.cli import ask
    from llmctl.cli import up as up_cli

    a = rollout.canonical(app(), update._llm_defaults())
    _, change = put(deployed(a), with_llm(lambda l: l["engine_kwargs"].update(max_num_seqs=8)))
    _, new = put({"applications": {}}, app())
    asked = []
    monkeypatch.setattr(ask, "confirm", lambda msg, default: asked.append((msg, default)) or False)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False, raising=False)
    assert up_cli._confirm_on_terminal(change) and not asked  # no terminal: applies (the plan is printed first)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    assert up_cli._confirm_on_terminal(new) and not asked  # new apps only: nothing running changes
    assert up_cli._confirm_on_terminal(change) is False and asked == [("Apply this plan?", False)]


def test_the_plan_shows_no_token():
    secret = "hf_abcdefghijklmnopqrstuvwxyz012345"
    a = rollout.canonical(app(), update._llm_defaults())
    new = app(runtime_env={"env_vars": {"HF_TOKEN": secret}})
    _, p = put(deployed(a), new)
    assert secret in json.dumps(p.to_json())  # the raw plan has it …
    p = update.scrub_plan(p, [secret])
    assert secret not in json.dumps(p.to_json()) and secret not in "\n".join(p.lines()) and "***" in "\n".join(p.lines())


def test_cluster_wide_options_come_from_the_file_else_the_cluster_else_what_llmctl_sent():
    """One rule for the cluster-wide part of every PUT (up, the failed-app
    replacement, down APP): the file's value (an explicit null too), else
    what Serve's GET shows in effect, else what llmctl last sent (the options
    GET does not show); a PUT without them resets the other apps."""
    current = {"target_capacity": 50.0, "proxy_location": "EveryNode",
               "http_options": {"host": "0.0.0.0", "port": 8000, "request_timeout_s": None}, "applications": {}}
    recorded = {"logging_config": {"log_level": "DEBUG"}, "controller_options": None}
    out = update.cluster_wide(current, {}, recorded)
    assert out == {"target_capacity": 50.0, "proxy_location": "EveryNode", "http_options": {"host": "0.0.0.0", "port": 8000},
                   "logging_config": {"log_level": "DEBUG"}}
    given = {"target_capacity": None, "logging_config": {"log_level": "INFO"}, "http_options": {"port": 9000},
             "applications": [app()]}
    out = update.cluster_wide(current, given, recorded)
    assert out["target_capacity"] is None and out["logging_config"] == {"log_level": "INFO"}
    assert out["http_options"] == {"port": 9000} and "applications" not in out
    assert update.cluster_wide({"applications": {}}, {}, {}) == {}


def test_recorded_globals_round_trip_and_make_an_unchanged_put(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMCTL_HOME", str(tmp_path))
    payload = {"logging_config": {"log_level": "DEBUG"}, "applications": [app()]}
    update.record_globals("local", payload)
    f = update.history_dir("local") / "serve-globals.json"
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    rec = update.recorded_globals("local")
    assert rec["logging_config"] == {"log_level": "DEBUG"}
    a = rollout.canonical(app(), update._llm_defaults())
    current = {"applications": {"a": {"status": "RUNNING", "deployed_app_config": a}}}
    same = {"logging_config": {"log_level": "DEBUG"}, "applications": [a]}
    p = rollout.plan({"applications": {"a": {"deployed_app_config": a}}}, same, ["a"])
    assert update.unchanged(p, same, current, ["a"], rec)  # what llmctl last sent: nothing to send
    other = {**same, "logging_config": {"log_level": "INFO"}}
    assert not update.unchanged(p, other, current, ["a"], rec)
    assert not update.unchanged(p, same, current, ["a"], {})  # never sent: GET cannot tell, so send


def test_a_custom_autoscaling_policy_is_not_sent_as_an_override():
    """Serve's REST handler parses `deployments:` overrides in the dashboard, which imports an override's policy
    there, and Ray 2.60's controller rebuilds an overridden deployment's config from model_dump(), dropping the pickled
    policy and importing its path (ModuleNotFoundError for llmctl's latency policy, which only the app's py_modules
    hold, measured): no override for such a deployment; the LLMConfig carries the policy to the build task."""
    policy = {"policy_function": "llmctl_latency:LatencyPolicy", "policy_kwargs": {"targets": {"ttft_p95": 0.5}, "model_id": "tiny"}}
    a = rollout.canonical(with_llm(lambda d: d["deployment_config"]["autoscaling_config"].update(policy=policy)),
                          update._llm_defaults())
    assert "deployments" not in a  # none for that deployment: Ray's override path re-imports the policy in the controller
    assert a["args"]["llm_configs"][0]["deployment_config"]["autoscaling_config"]["policy"] == policy


@pytest.mark.parametrize("change", [
    lambda asc: asc["policy"]["policy_kwargs"]["targets"].update(ttft_p95=60.0),  # the target raised
    lambda asc: asc.update(max_replicas=3),  # a bound
])
def test_a_change_to_a_custom_policys_deployment_is_sent_and_restarts_it(change):
    """Such a deployment has no override to carry a change in place, so the new LLMConfig goes as it is: a rolling
    restart that the plan shows. (llmctl used to keep the deployed args, which dropped the change: a latency target
    raised on a running app kept the old one, issue 41.)"""
    policy = {"policy_function": "llmctl_latency:LatencyPolicy", "policy_kwargs": {"targets": {"ttft_p95": 0.1}, "model_id": "tiny"}}
    with_policy = with_llm(lambda d: d["deployment_config"]["autoscaling_config"].update(policy=policy))
    a = rollout.canonical(with_policy, update._llm_defaults())
    new = copy.deepcopy(with_policy)
    change(new["args"]["llm_configs"][0]["deployment_config"]["autoscaling_config"])
    payload, p = put(deployed(a), new)
    sent = payload["applications"][0]
    assert sent["args"]["llm_configs"][0]["deployment_config"] == new["args"]["llm_configs"][0]["deployment_config"]
    assert p.lifted == [] and p.kinds() == {"a": rollout.ROLLING} and p.rollouts
