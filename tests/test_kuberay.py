"""KubeRay RayService manifests (issue 10): generated from the same config,
validated offline — by llmctl and by an independent strict schema check
written here — with the operator's rules and the GPU arithmetic."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import REPO, run_cli, run_subprocess
from llmctl.hardware import by_ray_type
from llmctl.errors import UsageError
from llmctl.genconfig import generate
from llmctl.kuberay import manifest as M
from llmctl.validate.files import validate_text

SAMPLES = REPO / "tests" / "data" / "kuberay_samples"
SCHEMA = json.loads((REPO / "llmctl" / "validate" / "rayservice" / "crd" / "rayservice-v1.7.0.schema.json").read_text())
TOKEN_SHAPE = re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")


# --------------------------------------------------------------------------
# An independent strict check: the API server's steps written from the
# Kubernetes docs, not llmctl's code — every object schema with properties is
# closed (additionalProperties: false), nulls dropped, defaults filled.


def _closed(schema):
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed(x) for x in schema]
    return schema


def _defaulted(obj, schema):
    if isinstance(obj, dict):
        props = schema.get("properties", {})
        obj = {k: v for k, v in obj.items() if v is not None}
        for k, sub in props.items():
            if k not in obj and "default" in sub:
                obj[k] = copy.deepcopy(sub["default"])
        return {k: _defaulted(v, props.get(k) or (schema.get("additionalProperties") if isinstance(schema.get("additionalProperties"), dict) else {}))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [_defaulted(x, schema.get("items", {})) for x in obj]
    return obj


STRICT = _closed(SCHEMA)
STRICT["properties"]["metadata"] = {"type": "object", "additionalProperties": False, "properties": {
    "name": {"type": "string"}, "namespace": {"type": "string"},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}}


def strict_errors(obj) -> list[str]:
    v = jsonschema.Draft7Validator(STRICT)
    return [f"{list(e.absolute_path)}: {e.message}" for e in v.iter_errors(_defaulted(obj, SCHEMA))]


def _errors(text: str, path: str = "rayservice.yaml"):
    return [d for d in validate_text(path, text) if d.is_error]


# --------------------------------------------------------------------------
# generated manifests


def _arith_holds(rs: dict) -> None:
    """Each worker group holds its models' replicas, TP inside a pod."""
    serve = yaml.safe_load(rs["spec"]["serveConfigV2"])
    llms = [c for app in serve["applications"] for c in app["args"]["llm_configs"]]
    groups = rs["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    auto = rs["spec"]["rayClusterConfig"].get("enableInTreeAutoscaling", False)
    assert {g["groupName"] for g in groups} == {f"gpu-{c['accelerator_type'].lower()}" for c in llms}
    for g in groups:
        c0 = g["template"]["spec"]["containers"][0]
        G = int(c0["resources"]["limits"]["nvidia.com/gpu"])
        assert c0["resources"]["requests"]["nvidia.com/gpu"] == c0["resources"]["limits"]["nvidia.com/gpu"]
        mine = [c for c in llms if f"gpu-{c['accelerator_type'].lower()}" == g["groupName"]]
        need_max = need_min = 0
        for c in mine:
            tp = c["engine_kwargs"].get("tensor_parallel_size", 1)
            pp = c["engine_kwargs"].get("pipeline_parallel_size", 1)
            asc = c["deployment_config"]["autoscaling_config"]
            assert G >= tp and G % tp == 0
            need_max += asc["max_replicas"] * tp * pp
            need_min += asc["min_replicas"] * tp * pp
            if tp * pp > 1:
                assert any(m["mountPath"] == "/dev/shm" for m in c0.get("volumeMounts", []))
        assert g["maxReplicas"] * G >= need_max and (g["maxReplicas"] - 1) * G < need_max
        assert g["minReplicas"] * G >= need_min
        assert g["minReplicas"] <= g["replicas"] <= g["maxReplicas"]
    # the Ray autoscaler is on exactly when some group's pod count can change
    assert auto == any(g["maxReplicas"] > g["minReplicas"] for g in groups)


def _no_token_values(text: str, rs: dict, secret: str | None) -> None:
    assert not TOKEN_SHAPE.search(text)
    serve = yaml.safe_load(rs["spec"]["serveConfigV2"])
    for app in serve["applications"]:
        for c in app["args"]["llm_configs"]:
            assert "HF_TOKEN" not in json.dumps(c.get("runtime_env", {}))
    rc = rs["spec"]["rayClusterConfig"]
    for grp in [rc["headGroupSpec"], *rc["workerGroupSpecs"]]:
        spec = grp["template"]["spec"]
        env = {e["name"]: e for e in spec["containers"][0].get("env", [])}
        # Never HF_TOKEN in a pod's environment: Ray Serve LLM would copy it into runtime_envs (ENV_VARS_TO_PROPAGATE).
        assert not {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} & set(env)
        if secret is None:
            assert "HF_TOKEN_PATH" not in env and not any("secret" in v for v in spec.get("volumes", []))
            continue
        # The Secret's key as a read-only file in every container, named by HF_TOKEN_PATH.
        token_path = Path(env["HF_TOKEN_PATH"]["value"])
        mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["mountPath"] == str(token_path.parent))
        assert mount["readOnly"] is True
        volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
        name, key = secret.split(":")
        assert volume["secret"] == {"secretName": name, "items": [{"key": key, "path": token_path.name}]}


CASES = {
    "1 model TP 1 static, no selector": dict(model=["qwen2.5-7b-instruct"], gpu="L4", tp=1, min_replicas=2, max_replicas=2),
    "gated TP 2 autoscaling gke": dict(model=["llama-3.1-8b-instruct"], gpu="L4", tp=2, min_replicas=1, max_replicas=4,
                                       kube=dict(hf_secret="hf-token:hf_token", node_selector="gke")),
    "TP 8 nvidia": dict(model=["llama-3.1-70b-instruct"], gpu="H100", tp=8, min_replicas=1, max_replicas=2,
                        kube=dict(hf_secret="hf:token", node_selector="nvidia")),
    "PP 2 on 4-GPU pods": dict(model=["qwen2.5-7b-instruct"], gpu="L4", tp=2, pp=2, min_replicas=1, max_replicas=3,
                               kube=dict(gpus_per_node=["4"], node_selector="gke")),
    "3 models, 3 GPU types": dict(model=["qwen2.5-7b-instruct", "llama-3.1-8b-instruct", "mistral-7b-instruct-v0.3"],
                                  gpu=["L4", "H100", "A100-80G"], tp=[2, 1, 1], min_replicas=[1, 0, 1], max_replicas=[3, 2, 1],
                                  kube=dict(hf_secret="hf-token:hf_token", node_selector="gke", gpus_per_node=["H100=8"])),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_generated_manifest_is_valid_by_both_checks(case, tmp_path):
    args = dict(CASES[case])
    kube = M.KubeOptions(**args.pop("kube", {}))
    gen = generate(**args, output_dir=tmp_path, kuberay=kube)
    path = gen.manifest.path
    assert path.exists() and path.name.startswith("rayservice_") and path.parent == gen.serve_file.parent
    text = path.read_text()
    rs = yaml.safe_load(text)
    assert rs["apiVersion"] == "ray.io/v1" and rs["kind"] == "RayService"
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", rs["metadata"]["name"]) and len(rs["metadata"]["name"]) <= 47
    assert _errors(text, str(path)) == []
    assert strict_errors(rs) == []
    _arith_holds(rs)
    _no_token_values(text, rs, kube.hf_secret)
    serve = yaml.safe_load(rs["spec"]["serveConfigV2"])
    assert "http_options" not in serve  # the proxy on 0.0.0.0:8000, Ray's default
    assert all(isinstance(c, dict) for app in serve["applications"] for c in app["args"]["llm_configs"])
    # every comment line of the manifest is a comment, and the numbers have sources
    assert "Pods = ceil(" in text and text.count("\n#") + text.count("\n  #") > 5
    head = rs["spec"]["rayClusterConfig"]["headGroupSpec"]["rayStartParams"]
    assert head["num-cpus"] == "0" and head["num-gpus"] == "0"
    import ray

    assert rs["spec"]["rayClusterConfig"]["rayVersion"] == ray.__version__
    assert rs["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] \
        == f"rayproject/ray-llm:{ray.__version__}-py311-cu128"


def test_a100_80g_and_scale_from_zero_declare_the_accelerator(tmp_path):
    gen = generate(["qwen2.5-7b-instruct", "llama-3.1-8b-instruct"], gpu=["A100-80G", "L4"], tp=1, min_replicas=[1, 0],
                   max_replicas=2, output_dir=tmp_path, write_files=False,
                   kuberay=M.KubeOptions(hf_secret="s:k", node_selector="gke"))
    groups = {g["groupName"]: g for g in gen.manifest.data["spec"]["rayClusterConfig"]["workerGroupSpecs"]}
    for name, acc in (("gpu-a100-80g", "A100-80G"), ("gpu-l4", "L4")):
        declared = json.loads(json.loads(groups[name]["rayStartParams"]["resources"]))
        assert declared == {f"accelerator_type:{acc}": 1}
    assert groups["gpu-l4"]["minReplicas"] == 0
    assert _errors(gen.manifest.text) == [] and not gen.manifest.path.exists()


# --------------------------------------------------------------------------
# KubeRay's own samples: no false positives


def test_kuberay_samples_validate_without_errors():
    """Except two true positives in the llm-serve sample (written for Ray
    2.52): it sets engine_kwargs.device, a field of no vLLM Ray 2.60 works
    with (the tables of 0.29-0.33; Ray 2.60 refuses it, "Unknown engine
    argument"), and its Secret holds the text <your-hf-access-token-value>,
    which the pods would send to the Hub as a token (401, even for an
    ungated model) unless the user fills it in."""
    from llmctl.engine_args import engine_args, shipped_table, shipped_versions

    assert all("device" not in shipped_table(v.label) for v in shipped_versions())
    files = sorted(SAMPLES.glob("*.yaml"))
    assert len(files) == 4
    for f in files:
        errors = [(d.field, d.message) for d in _errors(f.read_text(), str(f))]
        if f.name == "ray-service.llm-serve.yaml":
            assert errors[0] == ("applications[0].args.llm_configs[0].engine_kwargs.device",
                                 f"not an engine argument of {engine_args()[1]} (did you mean 'device_ids'?)")
            assert [e[0] for e in errors[1:]] == ["stringData.hf_token"] and "placeholder" in errors[1][1]
        else:
            assert errors == [], f.name
        docs = [d for d in yaml.safe_load_all(f.read_text()) if d and d.get("kind") == "RayService"]
        assert docs and all(strict_errors(d) == [] for d in docs)


def test_token_in_pod_env_is_one_warning(base):
    """KubeRay's samples set HF_TOKEN from a Secret in the pods' environment,
    from where Ray Serve LLM copies it into its engine workers' runtime_env
    (Ray's dashboard shows it): one warning per manifest, at the first such
    entry, never an error; llmctl's own manifests mount the Secret as a file."""
    with_env = 0
    for f in sorted(SAMPLES.glob("*.yaml")):
        text = f.read_text()
        envs = [e for d in yaml.safe_load_all(text) if d and d.get("kind") == "RayService"
                for g in [d["spec"]["rayClusterConfig"]["headGroupSpec"], *d["spec"]["rayClusterConfig"]["workerGroupSpecs"]]
                for c in g["template"]["spec"]["containers"] for e in c.get("env", [])
                if e["name"] in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN") and "valueFrom" in e]
        warned = [d for d in validate_text(f, text) if d.code == "k8s-token-env"]
        assert len(warned) == (1 if envs else 0), (f.name, [str(d) for d in warned])
        if envs:
            with_env += 1
            d = warned[0]
            assert d.severity == "warning" and "HF_TOKEN_PATH" in d.message and f"({len(envs)} entr" in d.message
            assert re.search(r"HF_TOKEN|HUGGING_FACE_HUB_TOKEN", text.splitlines()[d.line - 1]), d
    assert with_env >= 2  # the samples do it; the check is not vacuous
    ours = yaml.dump(base, Dumper=_Dumper, sort_keys=False)  # a gated model's manifest with --hf-secret
    assert "HF_TOKEN_PATH" in ours and not [d for d in validate_text("rs.yaml", ours) if d.code == "k8s-token-env"]


# --------------------------------------------------------------------------
# broken manifests: one line each, file:line: path: message


def _block_str(dumper, s):
    return dumper.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(str, _block_str)


@pytest.fixture(scope="module")
def base() -> dict:
    serve = {"applications": [{"name": "chat", "route_prefix": "/", "import_path": "ray.serve.llm:build_openai_app",
                               "args": {"llm_configs": [{
                                   "model_loading_config": {"model_id": "m", "model_source": "Qwen/Qwen2.5-7B-Instruct"},
                                   "accelerator_type": "L4", "engine_kwargs": {"tensor_parallel_size": 2},
                                   "deployment_config": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 2,
                                                                                      "target_ongoing_requests": 16}}}]}}]}
    m = M.build(serve, "serve.yaml", M.KubeOptions(hf_secret="hf-token:hf_token", node_selector="gke"))
    assert _errors(m.text) == []
    return m.data


def _serve_edit(fn):
    def edit(rs):
        serve = yaml.safe_load(rs["spec"]["serveConfigV2"])
        fn(serve)
        rs["spec"]["serveConfigV2"] = yaml.safe_dump(serve, sort_keys=False)
    return edit


W = ("spec", "rayClusterConfig", "workerGroupSpecs", 0)
LLM0 = lambda s: s["applications"][0]["args"]["llm_configs"][0]  # noqa: E731


def _worker(rs):
    return rs["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]


def _wc(rs):
    return _worker(rs)["template"]["spec"]["containers"][0]


def _set_gpus(rs, n):
    for k in ("limits", "requests"):
        _wc(rs)["resources"][k]["nvidia.com/gpu"] = n


BROKEN = [
    # (id, edit, expected field (suffix), code, message fragment)
    ("num-gpus an int", lambda rs: _worker(rs)["rayStartParams"].__setitem__("num-gpus", 2),
     "rayStartParams.num-gpus", "k8s-schema", 'quote it ("2")'),
    ("GPU quantity four", lambda rs: _wc(rs)["resources"]["limits"].__setitem__("nvidia.com/gpu", "four"),
     "limits.nvidia.com/gpu", "k8s-schema", "not a Kubernetes quantity"),
    ("rayStartParam typo", lambda rs: _worker(rs).__setitem__("rayStartParam", _worker(rs).pop("rayStartParams")),
     "workerGroupSpecs[0].rayStartParam", "k8s-schema", "did you mean 'rayStartParams'"),
    ("no headGroupSpec", lambda rs: rs["spec"]["rayClusterConfig"].pop("headGroupSpec"),
     "rayClusterConfig.headGroupSpec", "k8s-schema", "missing required field 'headGroupSpec'"),
    ("secretKeyRef without key", lambda rs: _wc(rs)["env"].append({"name": "WANDB_API_KEY",
                                                                     "valueFrom": {"secretKeyRef": {"name": "wandb"}}}),
     "secretKeyRef.key", "k8s-schema", "missing required field 'key'"),
    ("secret volume item without key", lambda rs: _worker(rs)["template"]["spec"]["volumes"][0]["secret"]["items"][0].pop("key"),
     "items[0].key", "k8s-schema", "missing required field 'key'"),
    ("60-character name", lambda rs: rs["metadata"].__setitem__("name", "a" * 60),
     "metadata.name", "k8s-name", "60 characters; at most 47"),
    ("minReplicas > maxReplicas", lambda rs: _worker(rs).update(minReplicas=3, replicas=3),
     "workerGroupSpecs[0].minReplicas", "k8s-replicas", "3 is more than maxReplicas 2"),
    ("GPUs per pod < TP", lambda rs: _set_gpus(rs, "1"),
     "resources.limits", "k8s-gpus", "runs tensor parallel over 2 GPUs"),
    ("GPUs per pod not a multiple of TP", lambda rs: _set_gpus(rs, "3"),
     "resources.limits", "k8s-gpus", "not a multiple of m's TP 2"),
    ("too few worker GPUs for min_replicas", lambda rs: (_worker(rs).update(maxReplicas=0, replicas=0, minReplicas=0)),
     "autoscaling_config.min_replicas", "k8s-capacity", "min_replicas 1 of m need 2 GPUs"),
    ("num-gpus != nvidia.com/gpu", lambda rs: _worker(rs)["rayStartParams"].__setitem__("num-gpus", "4"),
     "rayStartParams.num-gpus", "k8s-gpus", "says 4 GPUs but the container's nvidia.com/gpu limit is 2"),
    ("HF token literal in serveConfigV2",
     _serve_edit(lambda s: LLM0(s).__setitem__("runtime_env", {"env_vars": {"HF_TOKEN": "hf_" + "a1B2" * 9}})),
     "runtime_env.env_vars.HF_TOKEN", "literal-token", "Hugging Face token"),
    ("invalid LLMConfig: min > max replicas",
     _serve_edit(lambda s: LLM0(s)["deployment_config"]["autoscaling_config"].update(min_replicas=3)),
     "autoscaling_config.min_replicas", "replicas", "max_replicas"),
    ("127.0.0.1 http host", _serve_edit(lambda s: s.__setitem__("http_options", {"host": "127.0.0.1"})),
     "http_options.host", "k8s-http-host", "0.0.0.0"),
    ("unknown upgradeStrategy", lambda rs: rs["spec"]["upgradeStrategy"].__setitem__("type", "BlueGreen"),
     "upgradeStrategy.type", "k8s-upgrade", "'BlueGreen' is not a RayService upgrade strategy"),
    ("llm_configs file path", _serve_edit(lambda s: s["applications"][0]["args"].__setitem__("llm_configs", ["model_config/m.yaml"])),
     "llm_configs[0]", "k8s-file-path", "is a file path"),
    ("accelerator vs node selector",
     lambda rs: _worker(rs)["template"]["spec"]["nodeSelector"].__setitem__("cloud.google.com/gke-accelerator", "nvidia-h100-80gb"),
     "accelerator_type", "k8s-accelerator", "no worker group runs on L4 nodes"),
    ("A100-80G not declared", lambda rs: (
        _serve_edit(lambda s: LLM0(s).__setitem__("accelerator_type", "A100-80G"))(rs),
        _worker(rs)["template"]["spec"]["nodeSelector"].__setitem__("cloud.google.com/gke-accelerator", "nvidia-a100-80gb")),
     "workerGroupSpecs[0].rayStartParams", "k8s-accelerator", "which Ray never detects"),
    ("literal HF_TOKEN env", lambda rs: _wc(rs)["env"].__setitem__(0, {"name": "HF_TOKEN", "value": "secret-value"}),
     "env[0].value", "literal-token", "use valueFrom.secretKeyRef"),
    ("bad initializing-timeout", lambda rs: rs["metadata"]["annotations"].__setitem__("ray.io/initializing-timeout", "soon"),
     "annotations.ray.io/initializing-timeout", "k8s-timeout", "not a positive duration"),
    ("old apiVersion", lambda rs: rs.__setitem__("apiVersion", "ray.io/v1alpha1"),
     "apiVersion", "k8s-api-version", "RayService is ray.io/v1"),
    ("rayStartParams mixed with group resources", lambda rs: (
        _worker(rs).__setitem__("resources", {"accelerator_type:L4": "1"}),
        _worker(rs)["rayStartParams"].__setitem__("num-cpus", "8")),
     "rayStartParams.num-cpus", "k8s-resources", "KubeRay rejects both"),
]


@pytest.mark.parametrize("case", BROKEN, ids=[c[0] for c in BROKEN])
def test_broken_manifest_gets_one_line(case, base, tmp_path):
    _, edit, field, code, fragment = case
    rs = copy.deepcopy(base)
    edit(rs)
    text = yaml.dump(rs, Dumper=_Dumper, sort_keys=False)
    path = tmp_path / "rs.yaml"
    path.write_text(text)
    errs = _errors(text, str(path))
    assert len(errs) == 1, "\n".join(map(str, errs))
    d = errs[0]
    assert d.code == code and d.field.endswith(field) and fragment in d.message, str(d)
    line = str(d)
    assert line.startswith(f"{path}:{d.line}: {d.field}: ") and "\n" not in line
    key = field.rsplit(".", 1)[-1].split("[")[0]
    if "missing required" not in d.message and not d.field.endswith("]"):
        assert key in text.splitlines()[d.line - 1], (d.line, text.splitlines()[d.line - 1])


def test_max_replicas_beyond_the_worker_groups_is_a_warning(base, tmp_path):
    """Extra replicas stay pending; the app runs (issue 20): a warning, exit 0."""
    from llmctl.validate.files import validate_text

    rs = copy.deepcopy(base)
    _worker(rs).update(maxReplicas=1)
    diags = validate_text(tmp_path / "rs.yaml", yaml.dump(rs, Dumper=_Dumper, sort_keys=False))
    assert not [d for d in diags if d.is_error], "\n".join(map(str, diags))
    (w,) = [d for d in diags if d.code == "k8s-max-replicas"]
    assert w.severity == "warning" and "max_replicas 2 of m need 4 GPUs" in w.message and "stay pending" in w.message


def test_schema_alone_misses_what_the_validator_catches(base):
    """The table above against the strict schema check alone: the rules that
    exist only in llmctl (printed for the closing note)."""
    missed = []
    for name, edit, *_ in BROKEN:
        rs = copy.deepcopy(base)
        edit(rs)
        if not strict_errors(rs):
            missed.append(name)
    print(f"\nschema alone catches {len(BROKEN) - len(missed)}/{len(BROKEN)}; llmctl {len(BROKEN)}/{len(BROKEN)}; "
          f"schema misses: {missed}")
    assert "GPUs per pod < TP" in missed and "num-gpus an int" not in missed


ODD = [  # wrong types where the checks expect lists and mappings: diagnostics, never a failed check
    ("workerGroupSpecs a number", lambda rs: rs["spec"]["rayClusterConfig"].__setitem__("workerGroupSpecs", 1.5)),
    ("env a number", lambda rs: _wc(rs).__setitem__("env", 3)),
    ("head resources a string", lambda rs: (
        rs["spec"]["rayClusterConfig"].__setitem__("enableInTreeAutoscaling", True),
        rs["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0].__setitem__("resources", "x"))),
    ("serveConfigV2 applications a number", lambda rs: rs["spec"].__setitem__("serveConfigV2", "applications: 1.5\n")),
]


@pytest.mark.parametrize("case", ODD, ids=[c[0] for c in ODD])
def test_odd_types_are_errors_not_failed_checks(case, base):
    rs = copy.deepcopy(base)
    case[1](rs)
    diags = validate_text("rs.yaml", yaml.dump(rs, Dumper=_Dumper, sort_keys=False))
    assert [d for d in diags if d.is_error] and not [d for d in diags if d.code == "check-failed"], [str(d) for d in diags]


def test_odd_files_never_crash_validate(capsys, tmp_path):
    for name, text, code in (("complex-key.yaml", "? [a, b]\n: c\n", 2),
                             ("secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata: oops\n", 0)):
        (tmp_path / name).write_text(text)
        r = run_cli(capsys, "validate", tmp_path / name)
        assert r.code == code and "internal error" not in r.err, (name, r.err)


# --------------------------------------------------------------------------
# property: random valid specs -> manifest -> valid, arithmetic holds


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["L4", "H100", "A100-80G", "A10G", "B200"]), st.sampled_from([1, 2, 4, 8]),
                          st.sampled_from([1, 1, 2]), st.integers(0, 3), st.integers(0, 5)), min_size=1, max_size=3),
       st.sampled_from(["gke", "nvidia", "none"]), st.booleans())
def test_random_specs_give_valid_manifests(models, style, pod8):
    llms = []
    for i, (acc, tp, pp, mn, extra) in enumerate(models):
        mx = max(1, mn + extra)
        llms.append({"model_loading_config": {"model_id": f"m{i}", "model_source": f"org/model-{i}"}, "accelerator_type": acc,
                     "engine_kwargs": {"tensor_parallel_size": tp, "pipeline_parallel_size": pp},
                     "deployment_config": {"autoscaling_config": {"min_replicas": mn, "max_replicas": mx,
                                                                    "target_ongoing_requests": 8}}})
    serve = {"applications": [{"name": "App_1", "route_prefix": "/", "import_path": "ray.serve.llm:build_openai_app",
                               "args": {"llm_configs": llms}}]}
    per_type = ["8"] if pod8 and all(tp * pp <= 8 for _, tp, pp, _, _ in models) else []
    m = M.build(serve, "serve.yaml", M.KubeOptions(node_selector=style, gpus_per_node=per_type))
    assert _errors(m.text) == [] and strict_errors(m.data) == []
    _arith_holds(m.data)
    for g in m.data["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
        G = int(g["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
        mine = [c for c in llms if f"gpu-{c['accelerator_type'].lower()}" == g["groupName"]]
        sizes = [c["engine_kwargs"]["tensor_parallel_size"] * c["engine_kwargs"]["pipeline_parallel_size"] for c in mine]
        tps = [c["engine_kwargs"]["tensor_parallel_size"] for c in mine]
        node = by_ray_type(mine[0]["accelerator_type"]).gpus_per_node
        lcm = math.lcm(*sizes)
        # a replica larger than a node: one node per pod, when whole TP groups and stages fit in it
        capped = lcm > node and all(node % t == 0 and (n % node == 0 or node % n == 0) for t, n in zip(tps, sizes))
        assert G == (8 if per_type else node if capped else lcm)


# --------------------------------------------------------------------------
# bad input: one line, exit 2, nothing written


def test_bad_options_are_one_line_errors():
    serve = {"applications": [{"name": "a", "import_path": "ray.serve.llm:build_openai_app", "args": {"llm_configs": [
        {"model_loading_config": {"model_id": "m", "model_source": "org/m"}, "accelerator_type": "L4",
         "engine_kwargs": {"tensor_parallel_size": 2}}]}}]}
    for opts, flag in ((dict(hf_secret="hf_" + "x" * 34), "--hf-secret"), (dict(gpus_per_node=["3"]), "--gpus-per-node"),
                       (dict(gpus_per_node=["H100=8"]), "--gpus-per-node"), (dict(name="Bad_Name"), "--name"),
                       (dict(node_selector="aws"), "--node-selector"), (dict(upgrade_strategy="Blue"), "--upgrade-strategy")):
        with pytest.raises(UsageError) as e:
            M.build(copy.deepcopy(serve), "serve.yaml", M.KubeOptions(**opts))
        assert str(e.value).startswith(flag) and "\n" not in str(e.value)
    local = copy.deepcopy(serve)
    local["applications"][0]["args"]["llm_configs"][0]["model_loading_config"]["model_source"] = "/models/m"
    with pytest.raises(UsageError, match="local path"):
        M.build(local, "serve.yaml", M.KubeOptions())


def test_cli_writes_validates_and_never_overwrites(capsys, tmp_path):
    """The console script once (a real process, no terminal); the rest in process through the same entry point."""
    gen = run_subprocess("gen-config", "-m", "llama-3.1-8b-instruct", "--gpu", "L4", "--tp", "2", "--min-replicas", "1",
                         "--max-replicas", "2", "--yes", "-o", tmp_path)
    assert gen.code == 0, gen.err
    serve = next(tmp_path.glob("serve_*.yaml"))
    r = run_cli(capsys, "kuberay", serve)
    assert r.code == 2 and r.err.count("\n") == 1 and r.err.startswith("error: --hf-secret"), r.err  # gated, no Secret named
    r = run_cli(capsys, "kuberay", serve, "--hf-secret", "hf-token:hf_token", "--node-selector", "gke")
    assert r.code == 0, r.err
    out = M.default_output(serve)
    assert out.exists() and f"kubectl apply -f {out}" in r.out
    before = out.read_text()
    again = run_cli(capsys, "kuberay", serve, "--hf-secret", "hf-token:hf_token", "--upgrade-strategy", "None")
    assert again.code == 2 and "already exists" in again.err and out.read_text() == before
    stdout = run_cli(capsys, "kuberay", serve, "--hf-secret", "hf-token:hf_token", "--output", "-")
    assert stdout.code == 0 and yaml.safe_load(stdout.out)["kind"] == "RayService"
    v = run_cli(capsys, "validate", out)
    assert v.code == 0, v.err
    broken = tmp_path / "broken.yaml"
    broken.write_text(before.replace("nvidia.com/gpu: '2'", "nvidia.com/gpu: '1'"))
    v = run_cli(capsys, "validate", broken, "--json")
    assert v.code == 2
    errs = [d for d in v.json()["diagnostics"] if d["severity"] == "error"]
    assert [d["code"] for d in errs] == ["k8s-gpus"] and errs[0]["line"] > 1
    both = run_cli(capsys, "gen-config", "-m", "qwen2.5-7b-instruct", "--gpu", "H100", "--yes", "--kuberay",
                          "-o", tmp_path / "k")
    assert both.code == 0, both.err
    written = sorted(p.name.split("_")[0] for p in (tmp_path / "k").glob("*.yaml"))
    assert written == ["rayservice", "serve"]
    flag_alone = run_cli(capsys, "gen-config", "-m", "qwen2.5-7b-instruct", "--gpu", "H100", "--yes", "--hf-secret", "a:b",
                                "-o", tmp_path / "n")
    assert flag_alone.code == 2 and "--kuberay" in flag_alone.err and not (tmp_path / "n").exists()


def _with_model_file(base, volume: dict, mount_path: str = "/home/ray/models", entry: str = "models/m.yaml"):
    """The base RayService with its LLMConfig moved to a file the head mounts."""
    rs = copy.deepcopy(base)
    serve = yaml.safe_load(rs["spec"]["serveConfigV2"])
    llm = serve["applications"][0]["args"]["llm_configs"][0]
    serve["applications"][0]["args"]["llm_configs"] = [entry]
    rs["spec"]["serveConfigV2"] = yaml.safe_dump(serve, sort_keys=False)
    pod = rs["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
    pod.setdefault("volumes", []).append({"name": "models", **volume})
    pod["containers"][0].setdefault("volumeMounts", []).append({"name": "models", "mountPath": mount_path})
    return rs, llm


def _manifest_text(*objs) -> str:
    return "---\n".join(yaml.dump(o, Dumper=_Dumper, sort_keys=False) for o in objs)


def test_a_model_file_from_a_configmap_of_the_manifest_is_validated(base, tmp_path):
    """Issue 20: Ray opens models/m.yaml against the container's working
    directory (/home/ray for rayproject images); a ConfigMap of the same file
    mounted there is read and its model config checked, with the line number
    of the bad field inside the manifest."""
    from llmctl.validate.files import validate_text

    rs, llm = _with_model_file(base, {"configMap": {"name": "llm-models"}})
    good = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "llm-models"},
            "data": {"m.yaml": yaml.safe_dump(llm, sort_keys=False)}}
    text = _manifest_text(rs, good)
    assert not [d for d in validate_text(tmp_path / "rs.yaml", text) if d.is_error]
    bad_llm = copy.deepcopy(llm)
    bad_llm["engine_kwargs"]["max_num_seqs"] = "lots"
    bad = {**good, "data": {"m.yaml": yaml.safe_dump(bad_llm, sort_keys=False)}}
    text = _manifest_text(rs, bad)
    errs = [d for d in validate_text(tmp_path / "rs.yaml", text) if d.is_error]
    assert [d.code for d in errs] == ["bad-engine-arg"], "\n".join(map(str, errs))
    assert "max_num_seqs: lots" in text.splitlines()[errs[0].line - 1]
    # a key the ConfigMap lacks: Ray will not find the file
    missing = {**good, "data": {"other.yaml": good["data"]["m.yaml"]}}
    errs = [d for d in validate_text(tmp_path / "rs.yaml", _manifest_text(rs, missing)) if d.is_error]
    assert [d.code for d in errs] == ["k8s-file-path"] and "no key 'm.yaml'" in errs[0].message


@pytest.mark.parametrize("volume,what", [
    ({"persistentVolumeClaim": {"claimName": "models"}}, "persistentVolumeClaim"),
    ({"configMap": {"name": "elsewhere"}}, "not in this file"),
])
def test_a_model_file_llmctl_cannot_read_is_a_note(base, tmp_path, volume, what):
    from llmctl.validate.files import validate_text

    rs, _ = _with_model_file(base, volume)
    diags = validate_text(tmp_path / "rs.yaml", _manifest_text(rs))
    assert not [d for d in diags if d.is_error], "\n".join(map(str, diags))
    (note,) = [d for d in diags if d.code == "k8s-file-path"]
    assert note.severity == "note" and what in note.message and "cannot be read here" in note.message


def test_a_model_file_no_volume_holds_is_an_error(base, tmp_path):
    from llmctl.validate.files import validate_text

    rs, _ = _with_model_file(base, {"configMap": {"name": "llm-models"}}, mount_path="/opt/other")
    errs = [d for d in validate_text(tmp_path / "rs.yaml", _manifest_text(rs)) if d.is_error]
    assert [d.code for d in errs] == ["k8s-file-path"] and "/home/ray/models/m.yaml" in errs[0].message


def test_num_replicas_auto_sizes_the_group_for_serves_default():
    """num_replicas: auto is Serve's default autoscaling, 1 to 100 replicas
    (llmctl.placement.replica_counts); the worker group must reach them."""
    from llmctl.placement import AUTO_MAX_REPLICAS

    serve = {"applications": [{"name": "a", "import_path": "ray.serve.llm:build_openai_app", "args": {"llm_configs": [
        {"model_loading_config": {"model_id": "m", "model_source": "org/m"}, "accelerator_type": "L4",
         "engine_kwargs": {"tensor_parallel_size": 2}, "deployment_config": {"num_replicas": "auto"}}]}}]}
    man = M.build(serve, "serve.yaml", M.KubeOptions(gpus_per_node=["4"]))
    rs = man.data
    (g,) = rs["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    comments = " ".join(ln.strip().lstrip("# ") for ln in man.text.splitlines() if ln.strip().startswith("#"))
    assert f"replicas 1-{AUTO_MAX_REPLICAS} (num_replicas: auto" in comments, comments  # where the 100 comes from
    assert g["maxReplicas"] == math.ceil(AUTO_MAX_REPLICAS * 2 / 4) and g["minReplicas"] == 1
    assert rs["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] is True
