"""The endpoint's API key on Kubernetes (``--api-key-secret NAME:KEY``, issue 22).

- The key comes from an existing Secret, mounted read-only as a file on the
  head and the workers (:data:`KEY_DIR`); the app's ingress reads it there
  (``ingress_extra_kwargs.api_key_file``). It is never in the manifest, the
  Serve config or the pods' environment.
- llmctl's ingress module (``llmctl/cluster_modules/llmctl_apikey``) reaches
  the pods without an image change: a ConfigMap holding its source (written
  ahead of the RayService in the same file), mounted at :data:`MODULE_ROOT`,
  which ``PYTHONPATH`` names, so Ray's app-build task and the ingress replica
  import it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Optional

from llmctl.builders import APIKEY_MODULE, ingress_cls_config, key_settings

KEY_DIR, KEY_FILE, KEY_VOLUME = "/var/run/secrets/llmctl-api-key", "api-key", "llmctl-api-key"
MODULE_ROOT, MODULE_VOLUME = "/opt/llmctl/py", "llmctl-apikey-module"
SOURCE = Path(__file__).resolve().parents[1] / "cluster_modules" / APIKEY_MODULE / "__init__.py"


def configmap_name(name: str) -> str:
    return f"{name}-llmctl-apikey"[:63].rstrip("-")


def apply(serve: dict, secret: Optional[tuple[str, str]]) -> tuple[dict, list[str]]:
    """The pods' serve config: with a Secret, every app behind llmctl's
    API-key ingress reading the mounted file. Returns (config, names of the apps)."""
    s = copy.deepcopy(serve)
    keyed = []
    for app in s.get("applications") or []:
        if not isinstance(app, dict):
            continue
        kw = key_settings(app)
        if kw is None and secret is None:
            continue
        if secret is not None:
            args = app.setdefault("args", {})
            env = (kw or {}).get("api_key_env")
            args["ingress_cls_config"] = ingress_cls_config(env, f"{KEY_DIR}/{KEY_FILE}")
        keyed.append(str(app.get("name")))
    return s, keyed


def pod_parts(name: str, secret: tuple[str, str]) -> tuple[list[dict], list[dict], list[dict]]:
    """``(env, volumeMounts, volumes)`` every Ray container gets: the key file and the module."""
    secret_name, key = secret
    env = [{"name": "PYTHONPATH", "value": MODULE_ROOT}]
    mounts = [{"name": KEY_VOLUME, "mountPath": KEY_DIR, "readOnly": True},
              {"name": MODULE_VOLUME, "mountPath": f"{MODULE_ROOT}/{APIKEY_MODULE}", "readOnly": True}]
    volumes = [{"name": KEY_VOLUME, "secret": {"secretName": secret_name, "items": [{"key": key, "path": KEY_FILE}]}},
               {"name": MODULE_VOLUME, "configMap": {"name": configmap_name(name),
                                                     "items": [{"key": "__init__.py", "path": "__init__.py"}]}}]
    return env, mounts, volumes


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": configmap_name(name), "labels": {"app.kubernetes.io/managed-by": "llmctl"}},
            "data": {"__init__.py": SOURCE.read_text(encoding="utf-8")}}


def configmap_text(name: str) -> str:
    import yaml

    head = ["# llmctl's API-key ingress (llmctl_apikey:ApiKeyIngress), mounted into the Ray pods below and put on",
            "# their PYTHONPATH: no image change. The key itself stays in your Secret.",
            ]
    class _Literal(str):
        pass

    class _Dumper(yaml.SafeDumper):
        pass

    _Dumper.add_representer(_Literal, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", v, style="|"))
    data = configmap(name)
    data["data"] = {k: _Literal(v) for k, v in data["data"].items()}
    text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    assert yaml.safe_load(text) == configmap(name)
    return "\n".join(head) + "\n" + text + "---\n"
