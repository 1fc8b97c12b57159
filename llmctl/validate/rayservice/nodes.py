"""What a RayService worker pod gives Ray, and which GPU nodes it selects.

One place for the rules both the manifest generator and the validator use
(docs/clusters.md, "How a serve config maps to a RayService", with sources):

- GPUs per pod: ``rayStartParams.num-gpus`` if set, else the container
  LIMIT whose key ends in ``gpu`` (KubeRay ``common/pod.go``
  ``addWellKnownAcceleratorResources``; ``utils/resources.go`` ``IsGPUResourceKey``);
  the Ray autoscaler reads the CR the same way (``_get_num_gpus``).
- CPUs per pod: ``rayStartParams.num-cpus``, else the container's cpu limit,
  else its request (KubeRay ``generateRayStartCommand``).
- accelerator_type: Ray detects the GPU's short name from NVML
  (``nvidia_gpu.py`` ``NVIDIA_GPU_NAME_PATTERN``: "NVIDIA L4" → L4, "NVIDIA
  H100 80GB HBM3" → H100) and adds ``accelerator_type:<T>: 1``. ``A100-40G``
  and ``A100-80G`` are never detected (a node only gets ``A100``): they must
  be declared in ``rayStartParams.resources``, as must any type the
  autoscaler has to scale a group up from zero for (kuberay#863).
- Node labels: GKE ``cloud.google.com/gke-accelerator`` and NVIDIA GPU
  feature discovery ``nvidia.com/gpu.product``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from llmctl.placement import ACC_PREFIX
from llmctl.scalars import is_int

GKE_LABEL = "cloud.google.com/gke-accelerator"
GFD_LABEL = "nvidia.com/gpu.product"
SELECTOR_STYLES = {"gke": GKE_LABEL, "nvidia": GFD_LABEL, "none": None}
GPU_RESOURCE = "nvidia.com/gpu"

def label_for(style: str, ray_type: str) -> Optional[tuple[str, str]]:
    """(label key, value) selecting nodes with this GPU (the GPU table's
    ``gke_label`` / ``gfd_label``, llmctl.hardware), or None (style none / no
    known label)."""
    from llmctl.hardware import TABLE

    key = SELECTOR_STYLES.get(style)
    value = next((g.node_label(style) for g in TABLE if g.ray_type == ray_type), None)
    return (key, value) if key and value else None


def undetected(ray_type: str) -> bool:
    """A type Ray never adds to a node on its own (A100-40G/A100-80G: nodes get
    A100; the GPU table's ``detected_as``): it must be declared."""
    from llmctl.hardware import row_of_ray_type

    row = row_of_ray_type(ray_type)
    return row is not None and row.node_type != ray_type


def family(ray_type: str) -> str:
    """The name Ray detects on the node: A100-80G -> A100 (the GPU table's
    ``node_type``; a type llmctl does not list: its first word)."""
    from llmctl.hardware import row_of_ray_type

    row = row_of_ray_type(ray_type)
    return row.node_type if row is not None and row.node_type else ray_type.split("-")[0].upper()


def type_from_label(key: str, value: str) -> Optional[str]:
    """The GPU family a node label selects (L4, H100, A100, …), or None."""
    if not isinstance(value, str):
        return None
    from llmctl.hardware import TABLE

    style = {GKE_LABEL: "gke", GFD_LABEL: "nvidia"}.get(key)
    row = next((g for g in TABLE if style and (g.node_label(style) or "").lower() == value.strip().lower()), None)
    if row is not None and row.node_type:
        return row.node_type
    v = value.strip()
    if key == GKE_LABEL:
        v = re.sub(r"^nvidia-(tesla-)?", "", v, flags=re.I)
    elif key == GFD_LABEL:
        v = re.sub(r"^(nvidia|tesla)[-_ ]", "", v, flags=re.I)
    else:
        return None
    m = re.match(r"[A-Za-z]*[0-9]+[A-Za-z]?", v)
    return m.group(0).upper() if m else None


def parse_resources_param(text: Any) -> Optional[dict[str, float]]:
    """``rayStartParams.resources`` ('"{\\"accelerator_type:L4\\": 1}"') as a dict;
    None when it cannot be read the way the Ray autoscaler reads it (outer
    quotes and backslashes stripped, JSON)."""
    if not isinstance(text, str):
        return None
    s = text.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        s = s[1:-1]
    s = s.replace("\\", "")
    try:
        data = json.loads(s)
    except ValueError:
        return None
    if not isinstance(data, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in data.values()):
        return None
    return {str(k): float(v) for k, v in data.items()}


def resources_param(resources: dict[str, int]) -> str:
    """The rayStartParams.resources string for ``resources`` (the sample form)."""
    return json.dumps(json.dumps(resources))


_QTY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SCALE = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(v: Any) -> Optional[float]:
    """A Kubernetes quantity ("2", "500m", 4) as a number, or None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    m = _QTY.match(str(v).strip())
    if not m or m.group(2) not in _SCALE:
        return None
    try:
        return float(m.group(1)) * _SCALE[m.group(2)]
    except ValueError:
        return None


def _is_gpu_key(key: str) -> bool:
    return key.endswith("gpu") or key.startswith("nvidia.com/mig-")


@dataclass
class Group:
    """One worker group as Ray will see each of its pods."""

    name: str
    index: int
    gpus: Optional[float]  # per pod, None when unreadable
    gpu_from: str  # where the count came from, for messages
    cpus: Optional[float]
    declared: dict[str, float]  # rayStartParams.resources / group resources
    selected: Optional[str]  # GPU family the node selector picks
    selector: str  # "key: value" text
    pods_min: int
    pods_max: int
    pods_now: int
    hosts: int
    autoscaling: bool
    problems: list[tuple[tuple, str]] = field(default_factory=list)

    def pool(self, wanted: set[str]) -> dict[str, float]:
        """One pod's Ray resources. A pod with no selector may be any GPU Ray can
        detect, so it offers every wanted accelerator type but A100-40G/80G."""
        res: dict[str, float] = {"GPU": self.gpus or 0.0, "CPU": self.cpus if self.cpus is not None else 1e9}
        if self.selected is not None:
            res[ACC_PREFIX + self.selected] = 1.0
        else:
            res.update({ACC_PREFIX + t: 1.0 for t in wanted if not undetected(t)})
        for k, v in self.declared.items():
            res[k] = res.get(k, 0.0) + v
        return res

    @property
    def pods(self) -> int:
        """Pods the group can reach: maxReplicas with the autoscaler, else replicas."""
        return (self.pods_max if self.autoscaling else self.pods_now) * self.hosts


def _int(v: Any, default: int) -> int:
    return v if is_int(v) else default


def read_group(g: dict, index: int, autoscaling: bool) -> Group:
    """A worker group spec (after the API server's defaults) as a :class:`Group`."""
    loc = ("spec", "rayClusterConfig", "workerGroupSpecs", index)
    params = g.get("rayStartParams") if isinstance(g.get("rayStartParams"), dict) else {}
    spec = ((g.get("template") or {}).get("spec") or {}) if isinstance(g.get("template"), dict) else {}
    containers = spec.get("containers") if isinstance(spec.get("containers"), list) else []
    c0 = containers[0] if containers and isinstance(containers[0], dict) else {}
    res = c0.get("resources") if isinstance(c0.get("resources"), dict) else {}
    limits = res.get("limits") if isinstance(res.get("limits"), dict) else {}
    requests = res.get("requests") if isinstance(res.get("requests"), dict) else {}
    problems: list[tuple[tuple, str]] = []
    cloc = loc + ("template", "spec", "containers", 0, "resources")

    gpu_keys = [k for k in limits if _is_gpu_key(str(k))]
    limit_gpus = quantity(limits[gpu_keys[0]]) if gpu_keys else None
    for k in (k for k in requests if _is_gpu_key(str(k))):
        if k not in limits:
            problems.append((cloc + ("requests", k), f"a {k} request without a limit: Kubernetes requires a limit for GPUs "
                                                     "(and KubeRay reads only the limit)"))
        elif quantity(requests[k]) != quantity(limits[k]):
            problems.append((cloc + ("requests", k), f"{requests[k]} requested but {limits[k]} as the limit: GPU requests must "
                                                     "equal limits"))
    gpus, gpu_from = limit_gpus, f"limits.{gpu_keys[0]}" if gpu_keys else "no GPU limit"
    if "num-gpus" in params:
        n = quantity(params["num-gpus"]) if isinstance(params["num-gpus"], str) else None
        if n is None or n != int(n):
            problems.append((loc + ("rayStartParams", "num-gpus"), f"{params['num-gpus']!r} is not a whole number of GPUs"))
        elif limit_gpus is not None and n != limit_gpus:
            problems.append((loc + ("rayStartParams", "num-gpus"),
                             f"says {n:g} GPUs but the container's {gpu_keys[0]} limit is {limit_gpus:g}: Ray uses "
                             f"{n:g}, Kubernetes gives the pod {limit_gpus:g}; make them equal"))
        else:
            gpus, gpu_from = n, "rayStartParams.num-gpus"
    if gpus is None and not gpu_keys and "num-gpus" not in params:
        gpus = 0.0
    cpus = None
    if isinstance(params.get("num-cpus"), str):
        cpus = quantity(params["num-cpus"])
    elif quantity(limits.get("cpu")) is not None:
        cpus = quantity(limits.get("cpu"))
    elif quantity(requests.get("cpu")) is not None:
        cpus = quantity(requests.get("cpu"))

    declared: dict[str, float] = {}
    if "resources" in params:
        parsed = parse_resources_param(params["resources"])
        if parsed is None:
            problems.append((loc + ("rayStartParams", "resources"),
                             "cannot be read as Ray resources; write it as '\"{\\\"accelerator_type:L4\\\": 1}\"' "
                             "(a JSON object of whole numbers inside quotes)"))
        else:
            declared.update(parsed)
    group_res = g.get("resources") if isinstance(g.get("resources"), dict) else {}
    for k, v in group_res.items():
        q = quantity(v)
        if q is not None and k not in ("CPU", "GPU", "memory"):
            declared[str(k)] = declared.get(str(k), 0.0) + q
    if group_res.get("GPU") is not None and quantity(group_res.get("GPU")) is not None:
        gpus, gpu_from = quantity(group_res["GPU"]), "resources.GPU"

    selector = spec.get("nodeSelector") if isinstance(spec.get("nodeSelector"), dict) else {}
    selected, sel_text = None, ""
    for key in (GKE_LABEL, GFD_LABEL):
        if key in selector:
            selected, sel_text = type_from_label(key, selector[key]), f"{key}: {selector[key]}"
            break
    labels = g.get("labels") if isinstance(g.get("labels"), dict) else {}
    if selected is None and isinstance(labels.get("ray.io/accelerator-type"), str):
        selected, sel_text = labels["ray.io/accelerator-type"].upper(), f"labels.ray.io/accelerator-type: {labels['ray.io/accelerator-type']}"
    mn, mx = _int(g.get("minReplicas"), 0), _int(g.get("maxReplicas"), 2**31 - 1)
    now = _int(g.get("replicas"), mn)
    return Group(str(g.get("groupName", f"group {index}")), index, gpus, gpu_from, cpus, declared, selected, sel_text,
                 mn, mx, min(max(now, mn), mx), max(1, _int(g.get("numOfHosts"), 1)), autoscaling, problems)


def pods_for(replicas: int, gpus_per_replica: int, gpus_per_pod: int) -> int:
    """Pods that hold ``replicas`` replicas of ``gpus_per_replica`` GPUs each."""
    return math.ceil(replicas * gpus_per_replica / gpus_per_pod) if replicas > 0 else 0
