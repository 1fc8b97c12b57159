"""Big MoE models served as their authors serve them (issue 40): data-parallel
attention with expert parallelism (Ray's build_dp_openai_app) and
prefill/decode disaggregation (build_pd_openai_app), written by gen-config,
sized by plan, checked by validate, and accepted by Ray's own builders: their
argument parsing and the app construction Serve's controller runs
(``ray.serve._private.build_app.build_app``), without a cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import load_yaml, run_cli, serve_file
from llmctl import builders, patterns, sizing
from llmctl.catalog import load_catalog
from llmctl.hardware import GPUS

# Ray Serve LLM's builders import vLLM (4 s a process): in `make test`, not in the quick loop (as
# tests/test_gen_config.py's LLMServingArgs test); skipped without vLLM (conftest).
RAY_BUILDERS = pytest.mark.engine

BIG = ("deepseek-v3.1", "kimi-k2-instruct", "qwen3-235b-a22b", "gpt-oss-120b")
CATALOG = load_catalog()


# Ray's builders on a serve file, then Serve's own app construction, in a fresh interpreter (one for the
# module: it imports Ray Serve LLM and vLLM once, then builds each file it is handed on stdin).
# LLMServer.get_deployment_options reads the running driver's runtime_env
# (ray.get_runtime_context().runtime_env), which would start a Ray instance on Ray's default ports
# here (ray.init through auto-init); the script answers that one call with an empty runtime_env, what a
# driver without one has. Everything else (args parsing, LLMConfig, DPServer's options, gang
# scheduling, build_app) is Ray's code as Serve's controller runs it.
_BUILD = """
import json, sys, types, logging, traceback
import yaml, ray
ray.get_runtime_context = lambda: types.SimpleNamespace(runtime_env={})
logging.disable(logging.WARNING)
from ray._common.utils import import_attr
from ray.serve._private.build_app import build_app
print("READY", flush=True)
for line in sys.stdin:
    try:
        app = yaml.safe_load(open(line.strip()))["applications"][0]
        built = build_app(import_attr(app["import_path"].replace(":", "."))(app["args"]), name=app["name"])
        out = {}
        for d in built.deployments:
            c = d._deployment_config
            asc = c.autoscaling_config
            out[d.name] = {"min": asc.min_replicas if asc else None, "max": asc.max_replicas if asc else None,
                           "gang": c.gang_scheduling_config.gang_size if c.gang_scheduling_config else None}
        print("BUILT " + json.dumps(out), flush=True)
    except Exception:
        print("ERROR " + json.dumps(traceback.format_exc()[-3000:]), flush=True)
"""


@pytest.fixture(scope="module")
def ray_builder():
    """The builder interpreter: ``build(path)`` -> {deployment name: {min, max, gang}}."""
    import os
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", _BUILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, env={**os.environ, "RAY_ENABLE_AUTO_CONNECT": "0"})

    def build(path) -> dict[str, dict]:
        p.stdin.write(f"{path}\n")
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            assert line, f"the builder interpreter exited ({p.poll()})"
            if line.startswith(("BUILT ", "ERROR ")):
                break
        kind, data = line.split(" ", 1)
        assert kind == "BUILT", json.loads(data)
        return json.loads(data)

    try:
        yield build
    finally:
        p.stdin.close()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()


def _names(app: dict) -> list[str]:
    """The engine deployments llmctl names for an app (builders.llm_deployments), its files inlined."""
    args = {k: load_yaml(Path(v)) if isinstance(v, str) else v for k, v in app["args"].items()}
    if "llm_configs" in args:
        args["llm_configs"] = [load_yaml(Path(p)) for p in app["args"]["llm_configs"]]
    return [n for n, _, _ in builders.llm_deployments({**app, "args": args})]


def _gen(capsys, tmp_path, *args) -> tuple[dict, dict[str, dict]]:
    out = tmp_path / "out"
    r = run_cli(capsys, "gen-config", *args, "--yes", "-o", out)
    assert r.code == 0, r.err
    serve = load_yaml(serve_file(out))
    serve["path"] = serve_file(out)
    models = {p.stem: load_yaml(p) for p in sorted((out / "model_config").glob("*.yaml"))}
    assert run_cli(capsys, "validate", serve_file(out)).code == 0
    return serve, models


@RAY_BUILDERS
@pytest.mark.parametrize("gpu", ["H100", "H200"])
@pytest.mark.parametrize("model", BIG)
def test_default_layout_is_written_as_ray_builds_it_and_plan_sizes_it(capsys, tmp_path, model, gpu, ray_builder):
    """gen-config --yes writes the catalog's default layout; Ray's builder parses the args and builds
    the app; plan's advised row is that layout, with per-rank memory and KV."""
    serve, models = _gen(capsys, tmp_path, "-m", model, "--gpu", gpu)
    lay = CATALOG[model].layouts[gpu]
    (llm,) = models.values()
    ek = llm["engine_kwargs"]
    assert ek["tensor_parallel_size"] == lay.tp and ek.get("pipeline_parallel_size", 1) == lay.pp
    assert ek.get("data_parallel_size", 1) == lay.dp
    deployments = ray_builder(serve["path"])
    app = serve["applications"][0]
    if lay.kind == "DP+EP":
        assert app["import_path"] == patterns.DP_BUILDER and ek["enable_expert_parallel"] is True
        dep = deployments[f"DPServer:{model.replace('.', '_')}"]
        assert dep["gang"] == lay.dp
        asc = llm["deployment_config"]["autoscaling_config"]  # groups in the file, ranks in Ray's deployment
        assert (dep["min"], dep["max"]) == (asc["min_replicas"] * lay.dp, asc["max_replicas"] * lay.dp)
    else:
        assert app["import_path"] == "ray.serve.llm:build_openai_app"
    assert sorted(deployments) == sorted(_names(app) + ["OpenAiIngress"])

    r = run_cli(capsys, "plan", "-m", model, "--gpu", gpu, "--json")
    assert r.code == 0, r.err
    rows = [row for row in json.loads(r.out)["rows"] if row["advised"]]
    assert len(rows) == 1
    row = rows[0]
    assert (row["tp"], row["pp"], row["dp"]) == (lay.tp, lay.pp, lay.dp)
    assert row["verdict"] in ("fits", "tight") and row["kv_cache_tokens"] > 0 and 0 < row["weights_gib_per_gpu"] < row["budget_gib"]
    assert row["ep_size"] == (lay.dp * lay.tp if lay.kind == "DP+EP" else 1)


@RAY_BUILDERS
@pytest.mark.parametrize("gpu", ["H100", "H200"])
@pytest.mark.parametrize("model", BIG)
def test_dp_ep_and_pd_apps_are_what_ray_builds(capsys, tmp_path, model, gpu, ray_builder):
    """--dp 16 (or the layout's) --enable-expert-parallel and --pd 1:2 for every big model on H100 and H200: the files
    validate, Ray's builders accept them and build the deployments llmctl names."""
    lay = CATALOG[model].layouts[gpu]
    dp = max(16, lay.dp)  # Kimi-K2 needs 32 H100s
    serve, models = _gen(capsys, tmp_path / "dp", "-m", model, "--gpu", gpu, "--dp", str(dp), "--enable-expert-parallel",
                         "--tp", "1")
    (llm,) = models.values()
    assert llm["engine_kwargs"]["data_parallel_size"] == dp and llm["engine_kwargs"]["enable_expert_parallel"] is True
    assert set(ray_builder(serve["path"])) == {f"DPServer:{model.replace('.', '_')}", "OpenAiIngress"} == \
        set(_names(serve["applications"][0]) + ["OpenAiIngress"])

    # each pool in the model's default layout: DP+EP pools where one node is too small
    layout = ("--dp", str(lay.dp), "--tp", "1") if lay.kind == "DP+EP" else ("--tp", str(lay.tp), "--pp", str(lay.pp))
    serve, models = _gen(capsys, tmp_path / "pd", "-m", model, "--gpu", gpu, "--pd", "1:2", *layout)
    app = serve["applications"][0]
    assert app["import_path"] == patterns.PD_BUILDER
    prefill, decode = models[f"{model}-prefill"], models[f"{model}-decode"]
    for m in (prefill, decode):
        assert m["engine_kwargs"]["kv_transfer_config"] == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    assert decode["deployment_config"]["autoscaling_config"]["min_replicas"] == \
        2 * prefill["deployment_config"]["autoscaling_config"]["min_replicas"]
    for m in (prefill, decode):
        assert m["engine_kwargs"].get("data_parallel_size", 1) == lay.dp
    built = ray_builder(serve["path"])
    base = model.replace(".", "_")
    if lay.dp > 1:  # Ray's DP+PD servers: each pool's replicas are ranks of gang-scheduled groups
        assert built[f"Prefill:{base}"]["gang"] == lay.dp
    assert set(built) == {f"Prefill:{base}", f"Decode:{base}", "OpenAiIngress"} == set(_names(app) + ["OpenAiIngress"])
    assert built[f"Decode:{base}"]["min"] == 2 * lay.dp


def test_experts_are_dealt_over_every_rank_of_a_dp_group():
    """Per rank: the same attention (TP 1) at every DP size, experts divided by DP x TP, the KV cache
    its own; the default all2all backend gathers every rank's batch into the MoE layers, and DeepEP's
    buffers come out of the KV cache."""
    arch = CATALOG["deepseek-v3"].architecture
    h200 = GPUS["H200"]
    plans = {dp: sizing.plan_for_gpu(arch, h200, tp=1, max_model_len=32768, enable_expert_parallel=True,
                                     data_parallel_size=dp, max_num_batched_tokens=2048) for dp in (8, 16, 32)}
    w = {dp: p.weights_gib_per_gpu for dp, p in plans.items()}
    assert w[8] > w[16] > w[32]
    # the experts' share halves each time; what is left (attention, embeddings, dense layers) is the same
    assert (w[8] - w[16]) == pytest.approx(2 * (w[16] - w[32]), rel=0.05)
    assert plans[16].ep_size == 16 and plans[16].dp == 16
    act = {dp: p.activation_gib for dp, p in plans.items()}
    assert act[8] < act[16] < act[32]
    deepep = sizing.plan_for_gpu(arch, h200, tp=1, max_model_len=32768, enable_expert_parallel=True, data_parallel_size=16,
                                 max_num_batched_tokens=2048, all2all_backend="deepep_high_throughput")
    # 16 ranks on 8-GPU nodes: DeepEP's NVLink and RDMA buffers, 1 GiB each; its dispatch sends a rank only
    # the tokens routed to its experts, so the all-gathered batch is gone from the activation
    assert deepep.non_torch_gib - plans[16].non_torch_gib == pytest.approx(2.0, abs=0.01)
    assert deepep.activation_gib < plans[16].activation_gib
    assert any("all2all backend deepep_high_throughput" in w for w in deepep.warnings)


def test_pd_flags_and_errors(capsys, tmp_path):
    for args, flag in ((("--pd", "2"), "--pd"), (("--pd", "0:1"), "--pd"), (("--kv-connector", "NixlConnector"), "--kv-connector"),
                       (("--pd", "1:1", "--kv-connector", "nope"), "--kv-connector"), (("--dp", "two"), "--dp"),
                       (("--pd", "1:1", "-m", "qwen3-8b"), "--pd")):
        r = run_cli(capsys, "gen-config", "-m", "qwen3-30b-a3b", "--gpu", "H100", *args, "--yes", "-o", tmp_path / "x")
        assert r.code == 2, (args, r.err)
        assert r.err.startswith(f"error: {flag}:"), (args, r.err)
        assert "Traceback" not in r.err and not (tmp_path / "x").exists()


def _pd_serve(prefill_kv, decode_kv, **decode_extra) -> dict:
    def cfg(kv, **extra):
        ek = {"tensor_parallel_size": 1, **extra}
        if kv is not None:
            ek["kv_transfer_config"] = kv
        return {"model_loading_config": {"model_id": "q", "model_source": "Qwen/Qwen3-30B-A3B"}, "accelerator_type": "H100",
                "engine_kwargs": ek}
    return {"applications": [{"name": "pd", "route_prefix": "/", "import_path": patterns.PD_BUILDER,
                              "args": {"prefill_config": cfg(prefill_kv), "decode_config": cfg(decode_kv, **decode_extra)}}]}


NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


@pytest.mark.parametrize("serve,expect", [
    (_pd_serve(None, NIXL), [("error", "applications[0].args.prefill_config.engine_kwargs", "pd-connector")]),
    (_pd_serve(NIXL, {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}),
     [("error", "applications[0].args.decode_config.engine_kwargs.kv_transfer_config.kv_connector", "pd-connector")]),
    (_pd_serve({"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}, NIXL),
     [("error", "applications[0].args.prefill_config.engine_kwargs.kv_transfer_config.kv_role", "pd-connector")]),
    (_pd_serve(NIXL, {"kv_connector": "NixlConnector", "kv_role": "both"}),
     [("error", "applications[0].args.decode_config.engine_kwargs.kv_transfer_config.kv_role", "pd-connector")]),
    (_pd_serve(NIXL, NIXL, kv_cache_dtype="fp8"),
     [("warning", "applications[0].args.decode_config.engine_kwargs.kv_cache_dtype", "pd-kv-layout")]),
    (_pd_serve(NIXL, NIXL), []),
])
def test_validate_pd_connectors(capsys, tmp_path, serve, expect):
    f = tmp_path / "serve.yaml"
    f.write_text(yaml.safe_dump(serve, sort_keys=False))
    r = run_cli(capsys, "validate", f, "--json")
    found = [(d["severity"], d["field"], d["code"]) for d in json.loads(r.out)["diagnostics"]
             if d["code"] in ("pd-connector", "pd-kv-layout")]
    assert found == expect, r.out
    assert r.code == (2 if any(s == "error" for s, _, _ in expect) else 0)


def _llm(source: str, **ek) -> dict:
    return {"model_loading_config": {"model_id": "m", "model_source": source}, "accelerator_type": "H100",
            "engine_kwargs": {"tensor_parallel_size": 1, **ek}}


@pytest.mark.parametrize("import_path,args,expect", [
    # data_parallel_size under the plain builder: its replica starts no DP ranks
    ("ray.serve.llm:build_openai_app", {"llm_configs": [_llm("Qwen/Qwen3-30B-A3B", data_parallel_size=2)]},
     [("error", "applications[0].args.llm_configs[0].engine_kwargs.data_parallel_size", "dp-builder")]),
    # the DP builder without DP
    (patterns.DP_BUILDER, {"llm_config": _llm("Qwen/Qwen3-30B-A3B")},
     [("warning", "applications[0].args.llm_config.engine_kwargs", "dp-builder")]),
    (patterns.DP_BUILDER, {"llm_config": _llm("Qwen/Qwen3-30B-A3B", data_parallel_size=0)},
     [("error", "applications[0].args.llm_config.engine_kwargs.data_parallel_size", "dp-builder")]),
    # EP without MoE, DP on a dense model
    (patterns.DP_BUILDER, {"llm_config": _llm("meta-llama/Llama-3.1-8B-Instruct", data_parallel_size=2,
                                              enable_expert_parallel=True)},
     [("warning", "applications[0].args.llm_config.engine_kwargs.enable_expert_parallel", "dp-layout"),
      ("warning", "applications[0].args.llm_config.engine_kwargs.data_parallel_size", "dp-layout"),
      ("note", "applications[0].args.llm_config.engine_kwargs.data_parallel_size", "dp-layout")]),
    (patterns.DP_BUILDER, {"llm_config": _llm("Qwen/Qwen3-30B-A3B", data_parallel_size=16, enable_expert_parallel=True)},
     [("note", "applications[0].args.llm_config.engine_kwargs.data_parallel_size", "dp-layout")]),
])
def test_validate_dp_apps(capsys, tmp_path, import_path, args, expect):
    f = tmp_path / "serve.yaml"
    f.write_text(yaml.safe_dump({"applications": [{"name": "a", "route_prefix": "/", "import_path": import_path, "args": args}]},
                                sort_keys=False))
    r = run_cli(capsys, "validate", f, "--json")
    found = [(d["severity"], d["field"], d["code"]) for d in json.loads(r.out)["diagnostics"]
             if d["code"] in ("dp-builder", "dp-layout")]
    assert sorted(found) == sorted(expect), r.out
    assert r.code == (2 if any(s == "error" for s, _, _ in expect) else 0)


def test_a_dp_group_is_deployed_without_overrides_and_counted_in_ranks():
    """llmctl up gives in-place options as `deployments:` overrides of each engine deployment, named as
    Ray names them; a DP deployment gets none (Ray multiplies its counts by the DP size when it builds
    it: an override, applied after, would count ranks), and preflight counts its ranks."""
    from llmctl.placement import demands
    from llmctl.rollout import canonical

    llm = _llm("Qwen/Qwen3-30B-A3B", data_parallel_size=4)
    llm["deployment_config"] = {"autoscaling_config": {"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 8}}
    dp_app = {"name": "a", "route_prefix": "/", "import_path": patterns.DP_BUILDER, "args": {"llm_config": llm}}
    assert "deployments" not in canonical(dp_app)
    (d, ingress) = demands({"applications": [dp_app]})
    assert (d.deployment, d.min_replicas, d.max_replicas) == ("DPServer:m", 4, 8)
    pd = {"name": "p", "route_prefix": "/", "import_path": patterns.PD_BUILDER,
          "args": {"prefill_config": {**llm, "engine_kwargs": {}}, "decode_config": {**llm, "engine_kwargs": {}}}}
    assert [o["name"] for o in canonical(pd)["deployments"]] == ["Prefill:m", "Decode:m"]
