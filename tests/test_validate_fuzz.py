"""Fuzz of validate (issue 14): random mutations of valid configs, in process.

Every mutated document must come back as diagnostics: no exception out of
validation, and no check that failed inside (a ``check-failed`` warning is
the safety net of ``_Sink.guard``; the fuzz counts it as a crash, so a check
that breaks on odd input is fixed rather than hidden).

The mutations are drawn by Hypothesis (``st.randoms``: each edit's choices
are recorded, so a failing document shrinks to a small one and Hypothesis
prints how to reproduce it). How many documents: the Hypothesis profile
(``HYPOTHESIS_PROFILE``, tests/conftest.py) — ``FUZZ_FACTOR`` times its
``max_examples`` serve/model configs and a fifth of that many RayService
manifests: ``ci`` (the default, new inputs each run) 1,000 + 200; ``nightly``
25,000 + 5,000; ``dev`` (make test-fast) 500 + 100.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmctl.validate import validate_rendered

FUZZ_FACTOR = 10
CASES = max(1, settings.default.max_examples * FUZZ_FACTOR)
FUZZ_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

MODEL = {
    "model_loading_config": {"model_id": "qwen", "model_source": "Qwen/Qwen2.5-7B-Instruct"},
    "accelerator_type": "L4",
    "engine_kwargs": {"tensor_parallel_size": 1, "max_model_len": 8192, "enable_auto_tool_choice": True,
                      "tool_call_parser": "hermes", "gpu_memory_utilization": 0.9},
    "deployment_config": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 8},
                          "max_ongoing_requests": 16},
    "runtime_env": {"env_vars": {"HF_TOKEN": "${HF_TOKEN}"}},
    "lora_config": {"dynamic_lora_loading_path": "s3://bucket/loras", "max_num_adapters_per_replica": 4},
}
CPU_MODEL = {
    "model_loading_config": {"model_id": "tiny", "model_source": "/models/tiny"},
    "placement_group_config": {"bundles": [{"CPU": 1}], "strategy": "PACK"},
    "engine_kwargs": {"max_model_len": 512, "dtype": "float32"},
    "deployment_config": {"num_replicas": 1, "ray_actor_options": {"num_cpus": 1}},
    "server_cls": "my_plugin.server:MyServer",
}


def _serve(builder: str, args: dict) -> dict:
    return {"http_options": {"host": "127.0.0.1", "port": 8000},
            "applications": [{"name": "llm", "route_prefix": "/", "import_path": builder, "args": args}]}


SEEDS = [
    ("model", MODEL),
    ("model", CPU_MODEL),
    ("serve", _serve("ray.serve.llm:build_openai_app", {"llm_configs": [MODEL, CPU_MODEL],
                                                        "ingress_deployment_config": {"num_replicas": 1}})),
    ("serve", _serve("ray.serve.llm:build_dp_openai_app", {"llm_config": CPU_MODEL})),
    ("serve", _serve("ray.serve.llm:build_pd_openai_app", {"prefill_config": MODEL, "decode_config": MODEL,
                                                           "ingress_cls_config": {"ingress_cls": "my.mod:Ingress"}})),
]

ODD_VALUES = [None, 0, -1, 1, 2**70, 3.5, -0.0, float("inf"), float("nan"), True, False, "", " ", "x" * 300, "8",
              "${HF_TOKEN}", "<YOUR-HF-TOKEN>", "hf_" + "a" * 34, "s3://b/p", "/models/x", "./rel", "ray.serve.llm:nope",
              [], [None], [1, "a"], {}, {"": None}, {"a": {"b": [1, {"c": None}]}}, {1: 2}, "L4", "cpu", "A100", "\u00e9\u4e2d"]
ODD_KEYS = ["tensor_parallel_size", "pipeline_parallel_size", "max_model_len", "accelerator_type", "num_gpus", "num_cpus",
            "bundles", "bundle_per_worker", "strategy", "model_source", "model_id", "min_replicas", "max_replicas",
            "target_ongoing_requests", "hf_token", "server_cls", "llm_configs", "llm_config", "import_path", "args",
            "quantization", "kv_cache_dtype", "dtype", "placement_group_config", "ray_actor_options", "unknown_field", 7, None]


def _paths(data, here=()):
    yield here
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _paths(v, here + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _paths(v, here + (i,))


def _get(data, path):
    for p in path:
        data = data[p]
    return data


def mutate(rng, data, keys=ODD_KEYS, values=ODD_VALUES):
    """One to three random edits: replace a value, delete or add a key, change a container's type."""
    data = copy.deepcopy(data)
    for _ in range(rng.randint(1, 3)):
        paths = list(_paths(data))
        path = rng.choice(paths)
        op = rng.random()
        if not path:
            if isinstance(data, dict):
                data[rng.choice(keys)] = copy.deepcopy(rng.choice(values))  # a later edit may change it in place
            continue
        parent, key = _get(data, path[:-1]), path[-1]
        if op < 0.5:
            parent[key] = copy.deepcopy(rng.choice(values))
        elif op < 0.7 and isinstance(parent, dict):
            del parent[key]
        elif op < 0.85:
            target = parent[key]
            if isinstance(target, dict):
                target[rng.choice(keys)] = copy.deepcopy(rng.choice(values))
            elif isinstance(target, list):
                target.append(copy.deepcopy(rng.choice(values + [MODEL])))
            else:
                parent[key] = [target] if rng.random() < 0.5 else {"value": target}
        else:
            parent[key] = copy.deepcopy(rng.choice([MODEL, CPU_MODEL, {"model_loading_config": None}, [MODEL]]))
    return data


def check_case(text: str | None, validate, codes: dict[str, int]) -> None:
    """Validate one mutated document (``None``: it could not be dumped as
    YAML, nothing to check): no exception may leave validation and no check
    may fail inside. Counts the diagnostic codes reached."""
    if text is None:
        codes["(not YAML-dumpable)"] = codes.get("(not YAML-dumpable)", 0) + 1
        return
    diags = validate(text)  # an exception here is what the fuzz looks for: Hypothesis shrinks and reports it
    failed = [str(d) for d in diags if d.code == "check-failed"]
    assert not failed, f"a check failed inside on:\n{text}\n{failed[0]}"
    for d in diags:
        codes[d.code] = codes.get(d.code, 0) + 1


def dump(doc) -> str | None:
    try:
        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError:
        return None


def report(label: str, cases: int, codes: dict[str, int]) -> None:
    skipped = codes.get("(not YAML-dumpable)", 0)
    reached = sorted(c for c in codes if not c.startswith("("))
    print(f"\n{label}: {cases} cases ({skipped} not YAML-dumpable), none raised, no check failed inside, "
          f"{len(reached)} diagnostic codes reached: {reached}")


def test_validate_never_raises_on_mutated_configs(tmp_path):
    codes: dict[str, int] = {}

    @settings(max_examples=CASES, **FUZZ_SETTINGS)
    @given(seed=st.sampled_from(SEEDS), rng=st.randoms(use_true_random=False))
    def case(seed, rng):
        kind, doc = seed
        check_case(dump(mutate(rng, doc)), lambda text: validate_rendered([(str(tmp_path / "case.yaml"), text, kind)]), codes)

    case()
    report("fuzz", CASES, codes)
    # The mutations reach the checks, not only the YAML parser.
    assert len(codes) >= 15, codes


SAMPLES = sorted((Path(__file__).parent / "data" / "kuberay_samples").glob("*.yaml"))
K8S_KEYS = ["rayStartParams", "num-gpus", "num-cpus", "resources", "limits", "requests", "nvidia.com/gpu", "cpu", "memory",
            "replicas", "minReplicas", "maxReplicas", "workerGroupSpecs", "headGroupSpec", "groupName", "containers", "env",
            "valueFrom", "secretKeyRef", "key", "upgradeStrategy", "type", "serveConfigV2", "rayClusterConfig",
            "enableInTreeAutoscaling", "nodeSelector", "volumes", "volumeMounts", "emptyDir", "medium", "sizeLimit",
            "metadata", "name", "apiVersion", "kind", "spec", "template", "image", "ports", "rayVersion"]
K8S_VALUES = ["4", "1Gi", "four", "500m", "-1", "ray.io/v1alpha1", "RayService", "NewCluster", "None", "Bogus", "Memory",
              "HF_TOKEN", {"secretKeyRef": {"name": "hf"}}, {"nvidia.com/gpu": "x"}, [{"name": "HF_TOKEN", "value": "hf_" + "b" * 34}]]


def mutate_manifest(rng, manifest: dict) -> dict:
    """Half the time an edit of the Kubernetes object, half the time one of
    the serve config inside its serveConfigV2 string (dumped back as text)."""
    if rng.random() < 0.5 or not isinstance((manifest.get("spec") or {}).get("serveConfigV2"), str):
        return mutate(rng, manifest, ODD_KEYS + K8S_KEYS, ODD_VALUES + K8S_VALUES)
    out = copy.deepcopy(manifest)
    inner = mutate(rng, yaml.safe_load(out["spec"]["serveConfigV2"]))
    try:
        out["spec"]["serveConfigV2"] = yaml.safe_dump(inner, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError:
        pass  # an undumpable value (a dict key YAML cannot hold): the manifest stays as it was
    return out


@pytest.mark.skipif(not SAMPLES, reason="tests/data/kuberay_samples holds no sample")
def test_validate_never_raises_on_mutated_rayservices(tmp_path):
    """The same fuzz over KubeRay's LLM samples: the RayService checks
    (strict schema, operator rules, GPU arithmetic, secrets) and the serve
    checks on the serveConfigV2 inside it return diagnostics, never raise."""
    from llmctl.validate.files import validate_text

    seeds = [d for p in SAMPLES for d in yaml.safe_load_all(p.read_text(encoding="utf-8"))
             if isinstance(d, dict) and d.get("kind") == "RayService"]
    assert len(seeds) >= len(SAMPLES)
    cases = max(1, CASES // 5)
    codes: dict[str, int] = {}

    @settings(max_examples=cases, **FUZZ_SETTINGS)
    @given(seed=st.sampled_from(seeds), rng=st.randoms(use_true_random=False))
    def case(seed, rng):
        check_case(dump(mutate_manifest(rng, seed)), lambda text: validate_text(tmp_path / "rs.yaml", text), codes)

    case()
    report("RayService fuzz", cases, codes)
    # Both layers are reached: Kubernetes-level codes and serve-config codes.
    assert any(c.startswith("k8s-") for c in codes) and any(not c.startswith(("k8s-", "(")) and c != "yaml" for c in codes), codes


@pytest.mark.timeout(60)
@pytest.mark.parametrize("key", ["tensor_parallel_size", "pipeline_parallel_size"])
def test_huge_parallel_sizes_are_one_error_not_a_hang(tmp_path, key):
    """Case 6,5xx of the fuzz once enumerated TP sizes up to 2**70 (a hang
    that ate CI's 90 minutes): a worker count no cluster places is an error."""
    from llmctl.placement import MAX_WORKERS, replica_bundles

    doc = copy.deepcopy(MODEL)
    doc["engine_kwargs"][key] = 2**70
    diags = validate_rendered([(str(tmp_path / "m.yaml"), yaml.safe_dump(doc), "model")])
    errors = [d for d in diags if d.severity == "error" and d.code == "tp"]
    assert len(errors) == 1, [str(d) for d in diags]
    assert f"at most {MAX_WORKERS}" in str(errors[0])
    bundles, _ = replica_bundles(doc)
    assert len(bundles) == MAX_WORKERS
