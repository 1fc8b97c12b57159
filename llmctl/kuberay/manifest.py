"""A serve config -> one KubeRay RayService manifest (``llmctl kuberay``,
``gen-config --kuberay``).

The mapping (docs/clusters.md, "How a serve config maps to a RayService", with sources):
every llm_config inlined into ``serveConfigV2`` (pods cannot read local
files), the proxy on 0.0.0.0:8000, the HF token from an existing Secret
mounted as a file on head and workers (``HF_TOKEN_PATH``; never a value, never
in the pods' environment); a head that runs no replica (``num-cpus``
and ``num-gpus`` "0"); one worker group per accelerator type with G GPUs per
pod (default the least common multiple of its models' TP × PP) and
``ceil(Σ replicas × TP × PP / G)`` pods at min and max replicas; the Ray
autoscaler on when any model autoscales. The result is validated by
:mod:`llmctl.validate.rayservice` before anything is written; nothing here
prints.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from llmctl.errors import UsageError, ValidationFailed
from llmctl.validate.rayservice import nodes
from llmctl.validate.rayservice.checks import NAME_MAX, UPGRADE_TYPES
from llmctl.sources import looks_local_path
from llmctl.serve_facts import model_id_of

TOKEN_ENVS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


@dataclass
class KubeOptions:
    """What ``llmctl kuberay`` asks for beyond the serve config (flag names in the errors)."""

    name: Optional[str] = None
    gpus_per_node: list[str] = field(default_factory=list)  # "8" or "L4=4" items
    node_selector: str = "none"
    hf_secret: Optional[str] = None  # "NAME:KEY"
    api_key_secret: Optional[str] = None  # "NAME:KEY": the endpoint's API key (issue 22)
    image: Optional[str] = None
    upgrade_strategy: str = "NewCluster"
    initializing_timeout: str = "30m"


@dataclass
class Manifest:
    text: str
    data: dict
    notes: list[str]  # what the user should know (printed by the CLI)


def ray_version() -> str:
    from importlib import metadata

    return metadata.version("ray")


def default_image(version: str) -> str:
    return f"rayproject/ray-llm:{version}-py311-cu128"


def resource_name(text: str) -> str:
    """A DNS-1035 label of at most 47 characters from an app name."""
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    s = re.sub(r"-{2,}", "-", s)
    if not s or not s[0].isalpha():
        s = "llm-" + s
    return s[:NAME_MAX].rstrip("-") or "llm-app"


def _secret(text: Optional[str], flag: str = "--hf-secret", what: str = "the token", eg: str = "hf-token:hf_token") -> Optional[tuple[str, str]]:
    if text is None:
        return None
    name, sep, key = text.partition(":")
    if not sep or not name or not key:
        raise UsageError(f"{flag}: '{text}' must be NAME:KEY, the Kubernetes Secret and its key holding {what} "
                         f"(e.g. {eg}); never {what} itself")
    if nodes.quantity(name) is None and not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", name):
        raise UsageError(f"{flag}: '{name}' is not a Secret name (lower-case letters, digits, '-' and '.')")
    if not re.match(r"^[-._a-zA-Z0-9]+$", key):
        raise UsageError(f"{flag}: '{key}' is not a Secret key (letters, digits, '-', '_' and '.')")
    return name, key


@dataclass
class _Model:
    loc: str
    model_id: str
    acc: str
    tp: int
    pp: int
    min_r: int  # replicas: ranks, for a DP deployment (groups x data_parallel_size)
    max_r: int
    auto: bool = False  # num_replicas: auto (Serve's default bounds, unless autoscaling_config gives them)
    dp: int = 1  # data_parallel_size: ranks of one DP group

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    def pod_unit(self, node: Optional[int]) -> int:
        """The GPUs a pod is sized to hold for this model: one replica's TP x
        PP; for a DP group whose ranks fit a node, the group's ranks up to a
        node. Ray Serve LLM places a DP group as one gang placement group of
        every rank's bundles, PACK (dp_server.py: gang_size
        data_parallel_size, GangPlacementStrategy.PACK), so its ranks go to
        as few nodes as hold them: pods of whole ranks, a node's worth at most."""
        if self.dp > 1 and node and node % self.gpus == 0:
            return min(node, self.dp * self.gpus)
        return self.gpus


def _models(serve: dict, serve_path: str) -> list[_Model]:
    from llmctl.placement import replica_counts
    from llmctl.builders import llm_deployments

    out = []
    for i, app in enumerate(serve.get("applications") or []):
        for _, llm, dp in llm_deployments(app):  # a DP deployment's replica is one rank: its counts are groups
            ek = llm.get("engine_kwargs") or {}
            mlc = llm.get("model_loading_config") or {}
            mid = mlc.get("model_id", "?")
            where = f"{serve_path}: applications[{i}] model {mid}"
            src = mlc.get("model_source")
            if isinstance(src, str) and looks_local_path(src):
                raise UsageError(f"{where}: model_source '{src}' is a local path; the pods cannot read it: use a Hugging "
                                 "Face repo id or an s3:// / gs:// URI")
            acc = llm.get("accelerator_type")
            if not isinstance(acc, str) or not acc:
                raise UsageError(f"{where}: no accelerator_type (a CPU config?); a RayService needs one per model to size "
                                 "its GPU worker groups (gen-config --gpu L4|H100|…)")
            dc = llm.get("deployment_config") or {}
            mn, mx = replica_counts(dc)
            mn, mx = mn * dp, mx * dp
            out.append(_Model(where, str(mid), acc, int(ek.get("tensor_parallel_size", 1)),
                              int(ek.get("pipeline_parallel_size", 1)), mn, mx,
                              isinstance(dc, dict) and dc.get("num_replicas") == "auto", dp))
    if not out:
        raise UsageError(f"{serve_path}: no Ray Serve LLM application to convert")
    return out


def _group_gpus(ms: list[_Model], acc: str, default: Optional[int], per_type: dict[str, int]) -> tuple[int, str]:
    given = per_type.get(acc, default)
    if given is None:
        from llmctl.hardware import by_ray_type

        row = by_ray_type(acc)
        node = row.gpus_per_node if row is not None and not row.is_cpu else None
        g = math.lcm(*[m.pod_unit(node) for m in ms])
        if node and g > node and all(node % m.tp == 0 and (m.gpus % node == 0 or node % m.gpus == 0) for m in ms):
            # a replica (or DP group) larger than a node: one pod per node, its stages / ranks over several pods
            return node, f"one {acc} node; a replica or DP group larger than that spans several pods"
        dp = [m for m in ms if m.pod_unit(node) != m.gpus]
        if len(ms) == 1 and dp:
            m = dp[0]
            return g, (f"{m.model_id}'s DP group: {m.dp} ranks x TP {m.tp} x PP {m.pp}, whole ranks per pod, "
                       f"at most one {acc} node ({node} GPUs)")
        return g, (f"{ms[0].model_id}'s TP x PP" if len(ms) == 1
                   else "the least common multiple of the models' TP x PP" + (" (a DP group's: its ranks up to a node)"
                                                                              if dp else ""))
    for m in ms:
        if given < m.tp or given % m.tp:
            raise UsageError(f"--gpus-per-node: {given} GPUs per {acc} pod cannot hold {m.model_id}'s TP {m.tp} inside one pod "
                             f"(use a multiple of {m.tp})")
        if m.pp == 1 and given % m.gpus:
            raise UsageError(f"--gpus-per-node: {given} is not a multiple of {m.model_id}'s {m.gpus} GPUs per replica")
        if m.pp > 1 and given % m.gpus and m.gpus % given:
            raise UsageError(f"--gpus-per-node: {given} GPUs per pod vs {m.model_id}'s TP {m.tp} x PP {m.pp} = {m.gpus}: "
                             f"use a multiple or a divisor of {m.gpus} (a multiple of {m.tp})")
    return given, "--gpus-per-node"


def _serve_for_pods(serve: dict, drop_token_refs: bool) -> tuple[dict, list[str]]:
    """The serve config as the pods get it: no http host/port (0.0.0.0:8000),
    the token references dropped when the Secret provides them."""
    from llmctl.builders import app_llm_configs

    s = copy.deepcopy(serve)
    s.pop("http_options", None)
    notes = []
    for app in s.get("applications") or []:
        for _, llm in app_llm_configs(app):
            env = ((llm.get("runtime_env") or {}).get("env_vars")) or {}
            for k in list(env):
                if k in TOKEN_ENVS and drop_token_refs:
                    del env[k]
                elif isinstance(env[k], str) and "${" in env[k]:
                    notes.append(f"runtime_env.env_vars.{k} is {env[k]}: Ray fills it from the pod's environment, which "
                                 "this manifest does not set; add it to the containers' env")
            if "runtime_env" in llm and not llm["runtime_env"].get("env_vars"):
                llm["runtime_env"].pop("env_vars", None)
                if not llm["runtime_env"]:
                    del llm["runtime_env"]
    return s, notes


def _gated(serve: dict) -> list[str]:
    from llmctl.builders import app_llm_configs

    return [str(model_id_of(llm)) for app in serve.get("applications") or []
            for _, llm in app_llm_configs(app) if set(((llm.get("runtime_env") or {}).get("env_vars") or {})) & set(TOKEN_ENVS)]


def build(serve: dict, serve_path: str, opts: KubeOptions) -> Manifest:
    """The RayService for a serve config with llm_configs inlined
    (:func:`llmctl.validate.load_deployable`). Raises UsageError for what
    cannot become a manifest and ValidationFailed if the result is invalid."""
    from llmctl.kuberay.render import render

    if opts.node_selector not in nodes.SELECTOR_STYLES:
        raise UsageError(f"--node-selector: '{opts.node_selector}'; choose one of: {', '.join(nodes.SELECTOR_STYLES)}")
    if opts.upgrade_strategy not in ("NewCluster", "None"):
        raise UsageError(f"--upgrade-strategy: '{opts.upgrade_strategy}'; choose NewCluster or None "
                         f"(RayService also knows {UPGRADE_TYPES[1]}, which needs a Gateway; write it by hand)")
    secret = _secret(opts.hf_secret)
    gated = _gated(serve)
    if gated and secret is None:
        raise UsageError(f"--hf-secret: {', '.join(gated)} needs a Hugging Face token; name the Kubernetes Secret holding "
                         "it as NAME:KEY (kubectl create secret generic hf-token --from-literal=hf_token=…)")
    apps = serve.get("applications") or []
    name = opts.name if opts.name is not None else resource_name(str((apps[0] or {}).get("name") or "llm-app"))
    from llmctl.validate.rayservice.schema import dns1035_problem

    if problem := dns1035_problem(name, NAME_MAX):
        raise UsageError(f"--name: '{name}': {problem}")
    from llmctl.hardware import parse_gpus_per_node

    default, per_type = parse_gpus_per_node(opts.gpus_per_node)
    models = _models(serve, serve_path)
    version = ray_version()
    pod_serve, notes = _serve_for_pods(serve, drop_token_refs=secret is not None)
    from llmctl.kuberay import apikey

    key_secret = _secret(opts.api_key_secret, "--api-key-secret", "the API key", "llm-api-key:key")
    pod_serve, keyed = apikey.apply(pod_serve, key_secret)
    if keyed and key_secret is None:
        raise UsageError(f"--api-key-secret: {', '.join(keyed)} requires an API key on its endpoint; name the Kubernetes "
                         "Secret holding it as NAME:KEY (kubectl create secret generic llm-api-key --from-literal=key=…)")
    extra = apikey.pod_parts(name, key_secret) if key_secret else None
    by_acc: dict[str, list[_Model]] = {}
    for m in models:
        by_acc.setdefault(m.acc, []).append(m)
    unused = set(per_type) - set(by_acc)
    if unused:
        raise UsageError(f"--gpus-per-node: no model runs on {', '.join(sorted(unused))} (models: {', '.join(sorted(by_acc))})")
    groups = []
    for acc, ms in by_acc.items():
        g, g_from = _group_gpus(ms, acc, default, per_type)
        pods_min = nodes.pods_for(1, sum(m.min_r * m.gpus for m in ms), g)
        pods_max = max(pods_min, nodes.pods_for(1, sum(m.max_r * m.gpus for m in ms), g))
        groups.append(dict(acc=acc, models=ms, gpus=g, gpus_from=g_from, pods_min=pods_min, pods_max=pods_max,
                           label=nodes.label_for(opts.node_selector, acc),
                           declare=nodes.undetected(acc) or pods_min == 0,
                           shm=any(m.tp > 1 or m.pp > 1 or m.dp > 1 for m in ms)))
    autoscaling = any(gr["pods_max"] > gr["pods_min"] for gr in groups)
    if opts.node_selector != "none":
        for gr in groups:
            if gr["label"] is None:
                notes.append(f"--node-selector {opts.node_selector}: no known node label for {gr['acc']}; the {gr['acc']} "
                             "group has no nodeSelector (add yours)")
    text, data = render(name=name, serve=pod_serve, serve_path=serve_path, groups=groups, autoscaling=autoscaling,
                        version=version, image=opts.image or default_image(version), secret=secret,
                        upgrade=opts.upgrade_strategy, timeout=opts.initializing_timeout, selector_style=opts.node_selector,
                        extra=extra)
    from llmctl.validate.files import validate_text

    errors = [d for d in validate_text("<rayservice>", text) if d.is_error]
    if errors:
        raise ValidationFailed(errors, "internal error: the generated RayService would not be valid; please report this:\n"
                               + "\n".join(str(d) for d in errors))
    if key_secret is not None:
        text = apikey.configmap_text(name) + text
        notes.append(f"the API key of {', '.join(keyed)} is read from the Secret {key_secret[0]} (key {key_secret[1]}), "
                     f"mounted at {apikey.KEY_DIR}; llmctl's ingress module comes from the ConfigMap "
                     f"{apikey.configmap_name(name)} written ahead of the RayService in the same file")
    return Manifest(text, data, notes)


def from_serve_file(serve_path: Path | str, opts: KubeOptions, *, working_dir: Path | str | None = None) -> Manifest:
    from llmctl.validate import load_deployable

    serve = load_deployable(serve_path, local_node=False, working_dir=working_dir)
    return build(serve, str(serve_path), opts)


def default_output(serve_path: Path) -> Path:
    """rayservice_<ts>.yaml next to serve_<ts>.yaml (rayservice_<stem>.yaml otherwise)."""
    stem = serve_path.stem
    suffix = stem[len("serve_"):] if stem.startswith("serve_") else stem
    return serve_path.with_name(f"rayservice_{suffix}.yaml")


def dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
