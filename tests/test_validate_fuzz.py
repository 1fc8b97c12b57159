"""Fuzz of validate (issue 14): random mutations of valid configs, in process.

Every mutated document must come back as diagnostics: no exception out of
validation, and no check that failed inside (a ``check-failed`` warning is
the safety net of ``_Sink.guard``; the fuzz counts it as a crash, so a check
that breaks on odd input is fixed rather than hidden).

``LLMCTL_FUZZ_CASES`` sets the number of cases (default 10,000; the seed is
fixed, so a failure reproduces). 10,000 cases take 3–6 minutes on 2 cores;
`make test-fast` runs 1,000.
"""

from __future__ import annotations

import copy
import os
import random
from pathlib import Path

import pytest
import yaml

from llmctl.validate import validate_rendered

CASES = int(os.environ.get("LLMCTL_FUZZ_CASES", "10000"))

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


def mutate(rng: random.Random, data, keys=ODD_KEYS, values=ODD_VALUES):
    """One to three random edits: replace a value, delete or add a key, change a container's type."""
    data = copy.deepcopy(data)
    for _ in range(rng.randint(1, 3)):
        paths = list(_paths(data))
        path = rng.choice(paths)
        op = rng.random()
        if not path:
            if isinstance(data, dict):
                data[rng.choice(keys)] = rng.choice(values)
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


def fuzz(label: str, cases: int, make_doc, check) -> dict[str, int]:
    """Dump ``make_doc(n)`` for ``n`` in ``range(cases)`` and validate it with
    ``check(n, text)``: no case may raise and no check may fail inside. Prints
    the figures for the closing note; returns the diagnostic codes reached."""
    crashes: list[str] = []
    failed_checks: list[str] = []
    codes: dict[str, int] = {}
    skipped = 0
    for n in range(cases):
        try:
            text = yaml.safe_dump(make_doc(n), sort_keys=False, allow_unicode=True)
        except yaml.YAMLError:
            skipped += 1
            continue
        try:
            diags = check(n, text)
        except Exception as e:  # noqa: BLE001 - what the fuzz looks for
            crashes.append(f"case {n}: {type(e).__name__}: {e}\n{text}")
            continue
        for d in diags:
            codes[d.code] = codes.get(d.code, 0) + 1
            if d.code == "check-failed":
                failed_checks.append(f"case {n}: {d}\n{text}")
    print(f"\n{label}: {cases} cases ({skipped} not YAML-dumpable), {len(crashes)} raised, {len(failed_checks)} checks "
          f"failed inside, {len(codes)} diagnostic codes reached: {sorted(codes)}")
    assert not crashes, f"{len(crashes)} of {cases} cases raised; first:\n{crashes[0]}"
    assert not failed_checks, f"{len(failed_checks)} checks failed inside; first:\n{failed_checks[0]}"
    return codes


def test_validate_never_raises_on_mutated_configs(tmp_path):
    rng = random.Random(20261124)
    codes = fuzz("fuzz", CASES, lambda n: mutate(rng, SEEDS[n % len(SEEDS)][1]),
                 lambda n, text: validate_rendered([(str(tmp_path / f"case{n}.yaml"), text, SEEDS[n % len(SEEDS)][0])]))
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


def mutate_manifest(rng: random.Random, manifest: dict) -> dict:
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

    rng = random.Random(20261125)
    seeds = [d for p in SAMPLES for d in yaml.safe_load_all(p.read_text(encoding="utf-8"))
             if isinstance(d, dict) and d.get("kind") == "RayService"]
    assert len(seeds) >= len(SAMPLES)
    cases = max(1, CASES // 10)  # a case costs ~5x a serve-config case (the strict schema check)
    codes = fuzz("RayService fuzz", cases, lambda n: mutate_manifest(rng, seeds[n % len(seeds)]),
                 lambda n, text: validate_text(tmp_path / f"rs{n}.yaml", text))
    # Both layers are reached: Kubernetes-level codes and serve-config codes.
    assert any(c.startswith("k8s-") for c in codes) and any(not c.startswith("k8s-") and c != "yaml" for c in codes), codes


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
