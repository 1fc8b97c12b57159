"""Model config files a RayService's serveConfigV2 names, resolved as Ray
will resolve them on the pod.

Ray opens an ``llm_configs`` path in the process that builds the app
(``LLMServingArgs._validate_llm_configs``: ``os.path.exists``), whose working
directory is the Ray container's: ``workingDir`` when the pod spec sets one,
else the image's — ``/home/ray`` for the rayproject images. The file is there
when a volume is mounted over the path: a ConfigMap in the same manifest is
read and the file validated like any model config (line numbers pointing into
the manifest); a PersistentVolumeClaim, a hostPath or a ConfigMap not in the
file cannot be read here (a note); no mount means the pods do not have the
file (an error).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Optional

import yaml

RAY_IMAGE_HOME = "/home/ray"  # WORKDIR of rayproject/ray and rayproject/ray-llm images


@dataclass(frozen=True)
class Resolved:
    path: str  # where Ray opens the file on the pod
    mount: Optional[dict]  # the volumeMount covering it
    volume: Optional[dict]  # the pod volume of that mount
    key: Optional[str]  # the ConfigMap key the file is (configMap volumes)


def _head_container(obj: dict) -> dict:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    rc = spec.get("rayClusterConfig") if isinstance(spec.get("rayClusterConfig"), dict) else {}
    head = rc.get("headGroupSpec") if isinstance(rc.get("headGroupSpec"), dict) else {}
    pod = ((head.get("template") or {}).get("spec") or {}) if isinstance(head.get("template"), dict) else {}
    cs = pod.get("containers") if isinstance(pod.get("containers"), list) else []
    c = cs[0] if cs and isinstance(cs[0], dict) else {}
    return {"container": c, "volumes": pod.get("volumes") if isinstance(pod.get("volumes"), list) else []}


def working_dir(container: dict) -> Optional[str]:
    """The Ray container's working directory, when it can be known."""
    wd = container.get("workingDir")
    if isinstance(wd, str) and wd.startswith("/"):
        return wd
    image = str(container.get("image") or "")
    if image.startswith(("rayproject/", "docker.io/rayproject/", "anyscale/ray")):
        return RAY_IMAGE_HOME
    return None


def resolve(entry: str, obj: dict) -> Optional[Resolved]:
    """Where the head's Ray opens ``entry`` and which volume covers it; None
    when the working directory of a relative path cannot be known."""
    head = _head_container(obj)
    c = head["container"]
    if entry.startswith("/"):
        path = posixpath.normpath(entry)
    else:
        wd = working_dir(c)
        if wd is None:
            return None
        path = posixpath.normpath(posixpath.join(wd, entry))
    mounts = [m for m in (c.get("volumeMounts") or []) if isinstance(m, dict) and isinstance(m.get("mountPath"), str)]
    best = None
    for m in mounts:
        mp = m["mountPath"].rstrip("/") or "/"
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best["mountPath"].rstrip("/")):
                best = m
    if best is None:
        return Resolved(path, None, None, None)
    vol = next((v for v in head["volumes"] if isinstance(v, dict) and v.get("name") == best.get("name")), None)
    mp = best["mountPath"].rstrip("/")
    rest = path[len(mp):].lstrip("/")
    if isinstance(best.get("subPath"), str) and best["subPath"]:
        rest = best["subPath"] if not rest else posixpath.join(best["subPath"], rest)
    key = rest
    cm = (vol or {}).get("configMap")
    if isinstance(cm, dict) and isinstance(cm.get("items"), list):
        key = next((i.get("key") for i in cm["items"] if isinstance(i, dict) and i.get("path") == rest), None)
    return Resolved(path, best, vol, key)


def config_maps(nodes: list[Any]) -> dict[str, Any]:
    """ConfigMaps of the manifest by name: their ``data`` mapping nodes (for line numbers)."""
    out: dict[str, Any] = {}
    for n in nodes:
        if not isinstance(n, yaml.MappingNode):
            continue
        top = {k.value: v for k, v in n.value if isinstance(k, yaml.ScalarNode)}
        if getattr(top.get("kind"), "value", None) != "ConfigMap":
            continue
        meta = top.get("metadata")
        name = next((v.value for k, v in meta.value if getattr(k, "value", None) == "name"), None) \
            if isinstance(meta, yaml.MappingNode) else None
        if isinstance(name, str) and isinstance(top.get("data"), yaml.MappingNode):
            out[name] = top["data"]
    return out


def data_node(cm: Any, key: str) -> Optional[Any]:
    return next((v for k, v in cm.value if getattr(k, "value", None) == key), None) if cm is not None else None
