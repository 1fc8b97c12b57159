"""The RayService as YAML text with comments that say where each number came
from. Values go through ``yaml.safe_dump`` (never pasted); the text is parsed
back and compared with the data before it is returned."""

from __future__ import annotations

import copy
from typing import Any, Optional

import yaml

from llmctl._version import __version__
from llmctl.errors import LlmctlError
from llmctl.validate.rayservice import nodes
from llmctl.validate.rayservice.checks import TIMEOUT_ANNOTATION
from llmctl.validate.rayservice.schema import KUBERAY_VERSION
from llmctl.render import _yaml_block, _yaml_inline, comment_lines

HEAD_CPU, HEAD_MEMORY = "4", "16Gi"  # the samples use 2-4 CPUs and 5-16Gi: Ray's control plane, no replica


# The HF token reaches the pods as a file from the Secret, not as HF_TOKEN in their environment: Ray Serve LLM copies
# HF_TOKEN / HUGGING_FACE_HUB_TOKEN from a replica's environment into the runtime_env of its engine workers
# (ray/llm/_internal/serve/engines/vllm/vllm_models.py, ENV_VARS_TO_PROPAGATE), which Ray's dashboard and state API
# show. huggingface_hub reads the file named by HF_TOKEN_PATH, and Ray has nothing to copy.
TOKEN_DIR, TOKEN_FILE, TOKEN_VOLUME = "/var/run/secrets/huggingface", "token", "hf-token"


def _token_mount(secret: Optional[tuple[str, str]]) -> tuple[list[dict], list[dict], list[dict]]:
    """``(env, volumeMounts, volumes)`` of a container that reads the HF token
    from the Secret's key as a read-only file (none without a Secret)."""
    if secret is None:
        return [], [], []
    name, key = secret
    return ([{"name": "HF_TOKEN_PATH", "value": f"{TOKEN_DIR}/{TOKEN_FILE}"}],
            [{"name": TOKEN_VOLUME, "mountPath": TOKEN_DIR, "readOnly": True}],
            [{"name": TOKEN_VOLUME, "secret": {"secretName": name, "items": [{"key": key, "path": TOKEN_FILE}]}}])


def _worker_memory(acc: str, gpus: int) -> str:
    from llmctl.hardware import by_ray_type

    gpu = by_ray_type(acc)
    mem = gpu.memory_gib if gpu is not None else 24.0
    return f"{max(16, int(0.8 * mem * gpus))}Gi"


def _group(gr: dict, image: str, token: tuple[list[dict], list[dict], list[dict]], autoscaling: bool) -> tuple[dict, list[str]]:
    acc, g = gr["acc"], gr["gpus"]
    ms = gr["models"]
    replicas = gr["pods_min"] if autoscaling else gr["pods_max"]
    params: dict[str, str] = {}
    if gr["declare"]:
        params["resources"] = nodes.resources_param({f"accelerator_type:{acc}": 1})
    container: dict[str, Any] = {"name": "ray-worker", "image": image}
    env, mounts, volumes = copy.deepcopy(token)
    if env:
        container["env"] = env
    cpu, memory = str(max(4, 4 * g)), _worker_memory(acc, g)
    container["resources"] = {"limits": {"cpu": cpu, "memory": memory, nodes.GPU_RESOURCE: str(g)},
                              "requests": {"cpu": cpu, "memory": memory, nodes.GPU_RESOURCE: str(g)}}
    spec: dict[str, Any] = {"containers": [container]}
    if gr["shm"]:
        mounts.append({"mountPath": "/dev/shm", "name": "dshm"})
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory"}})
    if mounts:
        container["volumeMounts"] = mounts
        spec["volumes"] = volumes
    if gr["label"]:
        spec["nodeSelector"] = {gr["label"][0]: gr["label"][1]}
    spec["tolerations"] = [{"key": nodes.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    group = {"groupName": f"gpu-{nodes_name(acc)}", "replicas": replicas,
             "minReplicas": gr["pods_min"] if autoscaling else gr["pods_max"], "maxReplicas": gr["pods_max"],
             "numOfHosts": 1, "rayStartParams": params, "template": {"spec": spec}}
    each = "; ".join(f"{m.model_id}: TP {m.tp} x PP {m.pp} = {m.gpus} GPU(s), replicas {m.min_r}-{m.max_r}"
                     + (" (num_replicas: auto: Serve's default autoscaling)" if m.auto else "") for m in ms)
    why = [
        f"{acc} worker pods: {g} {acc} GPU(s) each ({gr['gpus_from']}). {each}.",
        f"Pods = ceil(sum of replicas x GPUs per replica / {g}): "
        f"{gr['pods_min']} at min_replicas, {gr['pods_max']} at max_replicas"
        + (" (the Ray autoscaler adds and removes pods between them)." if autoscaling else " (fixed: no model autoscales)."),
        f"CPU {cpu} (4 per GPU: replica actors and the ingress run here, the head takes none) and memory {memory} "
        "(0.8 x the GPUs' memory, for loading weights) are starting points: fit them to your node size.",
    ]
    if gr["declare"]:
        why.append(f"rayStartParams.resources declares accelerator_type:{acc}: "
                   + ("Ray never detects A100-40G/A100-80G on its own (a node only gets A100)." if nodes.undetected(acc)
                      else "with 0 pods at rest the autoscaler learns the type only from here (kuberay#863)."))
    if gr["shm"]:
        why.append("/dev/shm as memory: Kubernetes' 64 MB default breaks NCCL for tensor/pipeline parallelism and a "
                   "DP group's expert-parallel all-to-all.")
    return group, why


def nodes_name(acc: str) -> str:
    return acc.lower().replace("_", "-")


def render(*, name: str, serve: dict, serve_path: str, groups: list[dict], autoscaling: bool, version: str, image: str,
           secret: Optional[tuple[str, str]], upgrade: str, timeout: str, selector_style: str,
           extra: Optional[tuple[list[dict], list[dict], list[dict]]] = None) -> tuple[str, dict]:
    """``extra``: ``(env, volumeMounts, volumes)`` every Ray container also gets (the API key's Secret and module)."""
    from llmctl.compat import ray_vllm_pin

    serve_text = yaml.safe_dump(serve, sort_keys=False, allow_unicode=True, width=100)
    token = _token_mount(secret)
    if extra is not None:
        token = tuple(a + copy.deepcopy(b) for a, b in zip(token, extra))
    head_container: dict[str, Any] = {
        "name": "ray-head", "image": image,
        "ports": [{"containerPort": 6379, "name": "gcs-server"}, {"containerPort": 8265, "name": "dashboard"},
                  {"containerPort": 10001, "name": "client"}, {"containerPort": 8000, "name": "serve"}],
        "resources": {"limits": {"cpu": HEAD_CPU, "memory": HEAD_MEMORY}, "requests": {"cpu": HEAD_CPU, "memory": HEAD_MEMORY}},
    }
    head_spec: dict[str, Any] = {"containers": [head_container]}
    if secret is not None or extra is not None:
        env, mounts, volumes = copy.deepcopy(token)
        head_container.update(env=env, volumeMounts=mounts)
        head_spec["volumes"] = volumes
    head = {"rayStartParams": {"num-cpus": "0", "num-gpus": "0", "dashboard-host": "0.0.0.0"},
            "template": {"spec": head_spec}}
    workers = [_group(gr, image, token, autoscaling) for gr in groups]
    cluster: dict[str, Any] = {"rayVersion": version}
    if autoscaling:
        cluster["enableInTreeAutoscaling"] = True
    cluster["headGroupSpec"] = head
    cluster["workerGroupSpecs"] = [w for w, _ in workers]
    data = {
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": name, "annotations": {TIMEOUT_ANNOTATION: timeout}},
        "spec": {"upgradeStrategy": {"type": upgrade}, "serveConfigV2": serve_text, "rayClusterConfig": cluster},
    }
    pin = ray_vllm_pin()
    lines = [
        f"# KubeRay RayService for {serve_path}, written by llmctl {__version__} (RayService CRD of KubeRay {KUBERAY_VERSION}).",
        "#   llmctl validate THIS_FILE      # offline: CRD schema, operator rules, GPU arithmetic, the Serve config",
        "#   kubectl apply -f THIS_FILE",
        "apiVersion: ray.io/v1",
        "kind: RayService",
        "metadata:",
        "  # From the app name (or --name): a DNS-1035 label of at most 47 characters (kuberay#4045).",
        f"  name: {_yaml_inline(name)}",
        "  annotations:",
        "    # A pod that never starts (bad image, no GPU node) fails the RayService instead of Initializing forever.",
        f"    {TIMEOUT_ANNOTATION}: {_yaml_inline(timeout)}",
        "spec:",
    ]
    lines += ["  # " + c for c in (
        ["NewCluster: a zero-downtime upgrade starts a second RayCluster with as many GPUs as this one (kuberay#4239);",
         "llmctl kuberay --upgrade-strategy None upgrades in place when GPUs are scarce."] if upgrade == "NewCluster" else
        ["None: changes to rayClusterConfig do not start a second cluster (no zero-downtime upgrade, no spare GPUs needed)."])]
    lines += ["  upgradeStrategy:", _yaml_block(data["spec"]["upgradeStrategy"], 4)]
    lines += ["  " + ln for ln in comment_lines(
        "The Serve config with every llm_config inlined (the pods have no local files), the proxy on 0.0.0.0:8000 "
        "(Ray's default) for KubeRay's serve Service and readiness probe"
        + (f", and the HF token as a file from the Secret ({TOKEN_DIR}/{TOKEN_FILE}, named by HF_TOKEN_PATH; never "
           "here, and never in the pods' environment, from where Ray Serve LLM would copy it into runtime_envs that "
           "Ray's dashboard shows)." if secret else "."), 94)]
    lines += ["  serveConfigV2: |"]
    lines += ["    " + ln if ln else "" for ln in serve_text.rstrip("\n").split("\n")]
    vllm = f", whose vLLM is Ray's pin (vllm{pin.specifier})" if pin is not None else ""
    lines += ["  rayClusterConfig:"]
    lines += ["    " + ln for ln in comment_lines(
        f"The Ray llmctl validates against; the image is Ray's LLM image of that version{vllm}. --image overrides it "
        "(check that the tag exists and suits your nodes' CUDA driver).", 92)]
    lines += [f"    rayVersion: {_yaml_inline(version)}"]
    if autoscaling:
        lines += ["    # A model autoscales (max_replicas > min_replicas): the Ray autoscaler adds GPU pods for Serve's replicas.",
                  "    enableInTreeAutoscaling: true"]
    lines += ["    # The head runs Ray's control plane and no replica: num-cpus and num-gpus \"0\".",
              "    headGroupSpec:", _yaml_block(head, 6), "    workerGroupSpecs:"]
    for (w, why) in workers:
        lines += ["    " + ln for c in why for ln in comment_lines(c, 92)]
        lines += [_yaml_block([w], 4)]
    if selector_style == "none":
        lines += ["# No nodeSelector (--node-selector gke|nvidia adds one): pods go to any node with nvidia.com/gpu,",
                  "# and Ray places each model only on its accelerator_type."]
    text = "\n".join(lines) + "\n"
    if yaml.safe_load(text) != data:
        raise LlmctlError("internal error: the RayService text did not round-trip its data; please report this")
    return text, data
