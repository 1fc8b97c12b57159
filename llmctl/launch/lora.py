"""LoRA adapters of a running app (issue 25): ``llmctl lora ls``, ``lora push``,
and the store check of ``llmctl check``. A core with no UI.

The app's LoRA path and AWS settings come from the cluster itself (Serve's
``deployed_app_config``, the model configs inlined by ``llmctl up``), and a
``${VAR}`` in its runtime_env is read from the local head's environment (the
values Ray filled in), or from this shell for a cluster llmctl did not start.

Ray Serve LLM keeps no list of loaded adapters in its API: a replica's vLLM
logs ``Loaded new LoRA adapter: name 'base:name'`` when it first loads one,
and keeps it until the replica stops (Serve's multiplexer may drop it from its
routing table, vLLM keeps the registration and reloads the weights from the
replica's disk cache). ``ls`` reads those lines from each live replica's logs,
and the load failures next to them, diagnosed (launch/failures.py).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from llmctl import lorastore
from llmctl.builders import app_llm_configs
from llmctl.serve_facts import llm_deployment_name
from llmctl.errors import UsageError
from llmctl import serve_facts as sf
from llmctl.launch.address import Target
from llmctl.launch.serve_api import ServeClient

_LOADED = re.compile(r"Loaded new LoRA adapter: name '(?P<name>[^']+)'")


@dataclass
class LoraApp:
    app: str
    model_id: str
    uri: str
    app_config: dict
    llm: dict
    env: lorastore.StoreEnv


@dataclass
class Listing:
    app: str
    model_id: str
    uri: str
    settings: str
    store_error: Optional[str] = None
    available: list[str] = field(default_factory=list)
    problems: dict[str, list[str]] = field(default_factory=dict)  # adapter -> llmctl check's messages
    loaded: dict[str, list[str]] = field(default_factory=dict)  # replica id -> adapters loaded there
    failures: list = field(default_factory=list)  # launch.failures.Diagnosis seen in the replicas' logs

    def to_json(self) -> dict:
        return {"app": self.app, "model_id": self.model_id, "path": self.uri, "settings": self.settings,
                "store_error": self.store_error, "available": self.available, "problems": self.problems,
                "loaded": self.loaded, "failures": [{"code": d.code, "cause": d.cause, "fix": d.fix} for d in self.failures]}


def node_environ(target: Target) -> Optional[dict[str, str]]:
    """The environment Ray fills ``${VAR}`` from: the local head's, or None (unknown)."""
    if target.local is None:
        return None
    from llmctl.launch.cluster import head_environ

    return head_environ(target.local)


def lora_apps(client: ServeClient, target: Target, app: Optional[str] = None, model: Optional[str] = None) -> list[LoraApp]:
    """The deployed models with a LoRA path (of ``app``, and ``model`` if given)."""
    st = client.status()
    apps = st.get("applications") or {}
    if app is not None and app not in apps:
        raise UsageError(f"no application named {app!r} on {client.url} (apps: {', '.join(apps) or 'none'})")
    node = node_environ(target)
    out = []
    for name, a in apps.items():
        if app is not None and name != app:
            continue
        cfg = a.get("deployed_app_config") or {}
        for _, llm in app_llm_configs(cfg):
            if not isinstance(llm, dict):
                continue
            mid = str(sf.model_id_of(llm))
            uri = (llm.get("lora_config") or {}).get("dynamic_lora_loading_path")
            if not uri or (model is not None and mid != model):
                continue
            env = lorastore.effective_env(lorastore.merged_env_vars(cfg.get("runtime_env"), llm.get("runtime_env")),
                                          node, dict(os.environ))
            out.append(LoraApp(name, mid, str(uri).rstrip("/"), cfg, llm, env))
    if not out:
        where = f"application {app!r}" if app else "the cluster"
        raise UsageError(f"{where} serves no model with a LoRA path (lora_config.dynamic_lora_loading_path)"
                         + (f" named {model!r}" if model else ""))
    return out


def store_check(config: dict, file: str, target: Optional[Target]) -> tuple[list, list]:
    """(diagnostics, reports) of every LoRA store of a deployable serve config,
    read with the settings its replicas would get on ``target``."""
    from llmctl.validate.lora_store import check_config

    reports: list = []
    node = node_environ(target) if target is not None else None
    return check_config(config, file, node_env=node, shell_env=dict(os.environ), reports=reports), reports


def ls(target: Target, app: str, *, log_lines: int = 3000) -> list[Listing]:
    """Adapters available in the store (with what ``check`` finds wrong) and
    loaded per live replica, for each LoRA model of ``app``."""
    from llmctl.launch.failures import diagnose
    from llmctl.launch.logs import tail

    client = ServeClient(target.dashboard_url, token=target.ray_token)
    found = lora_apps(client, target, app)
    lines = tail(target, app, lines=log_lines)
    status = client.status()
    out = []
    for la in found:
        lst = Listing(la.app, la.model_id, la.uri, la.env.describe())
        diags, reps = store_check({"applications": [la.app_config]}, f"app {la.app}", target)
        rep = next((r for r in reps if r.model_id == la.model_id), None)
        if rep is not None:
            lst.available = rep.adapters
            lst.store_error = rep.store if rep.store and rep.store != "not checked" else None
        for d in diags:
            name = d.field.split(":", 1)[1] if d.field.startswith(f"adapter {la.model_id}:") else None
            if name and d.severity == "error":
                lst.problems.setdefault(name, []).append(d.message)
        dep = llm_deployment_name(la.model_id)
        live = [r.get("replica_id") for r in ((status.get("applications") or {}).get(la.app, {}).get("deployments") or {})
                .get(dep, {}).get("replicas", []) if r.get("state") == sf.REPLICA_RUNNING]
        for rid in live:
            lst.loaded[str(rid)] = []
        failure_text = []
        for ln in lines:
            m = _LOADED.search(ln.text)
            rid = ln.source.rsplit(" ", 1)[-1]
            if m and dep in ln.source and rid in lst.loaded:
                adapter = m.group("name").split(":", 1)[-1] if m.group("name").startswith(la.model_id + ":") else None
                if adapter and adapter not in lst.loaded[rid]:
                    lst.loaded[rid].append(adapter)
            elif "Failed to load lora model" in ln.text or "Unable to find LoRA adapter config file" in ln.text:
                failure_text.append(ln.text)
        lst.failures = diagnose("\n".join(failure_text), la.llm) if failure_text else []
        out.append(lst)
    return out


@dataclass
class PushResult:
    app: str
    model_id: str
    uri: str
    name: str
    keys: list[str]
    replaced: bool
    warnings: list[str]
    request_model: str


def check_local_adapter(directory: Path, llm: dict, name: str) -> list[tuple[str, str, str]]:
    """What ``check`` would say about this adapter once in the store, read from disk."""
    from llmctl.validate.lora_store import check_adapter, model_facts

    conf = directory / "adapter_config.json"
    if not conf.is_file():
        return [("error", "lora-adapter", f"{directory}: no adapter_config.json (not a peft LoRA adapter directory)")]
    try:
        cfg = json.loads(conf.read_text(encoding="utf-8"))
    except ValueError as e:
        return [("error", "lora-adapter", f"{conf}: not valid JSON ({e})")]
    shapes = None
    st = directory / "adapter_model.safetensors"
    if st.is_file():
        with st.open("rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(n))
        shapes = {k: list(v.get("shape", [])) for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)}
    return check_adapter(name, cfg, shapes, model_facts(llm))


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def push_to_store(directory: Path | str, uri: str) -> PushResult:
    """Upload an adapter to ``s3://bucket/path/NAME`` with this shell's AWS
    settings, no cluster involved (the store an app will be deployed with)."""
    directory = Path(directory)
    if not directory.is_dir() or not (directory / "adapter_config.json").is_file():
        raise UsageError(f"{directory}: not an adapter directory (no adapter_config.json)")
    if not uri.startswith("s3://"):
        raise UsageError(f"{uri}: llmctl writes s3:// stores only")
    base, _, name = uri.rstrip("/").rpartition("/")
    if not _NAME.match(name) or base in ("s3:", "s3:/"):
        raise UsageError(f"{uri}: expected s3://BUCKET/PATH/NAME (NAME: letters, digits, '.', '_', '-')")
    env = lorastore.effective_env({}, None, dict(os.environ))
    c = lorastore.client(env)
    try:
        replaced = name in lorastore.list_adapters(c, base, env)
        keys = lorastore.upload_dir(c, directory, base, name, env)
    except lorastore.StoreError as e:
        raise UsageError(f"cannot write to {base} ({env.describe()}): {e.message}") from None
    return PushResult("", "", base, name, keys, replaced, [], f"BASE:{name}")


def push(target: Target, directory: Path | str, app: str, name: str, *, model: Optional[str] = None,
         force: bool = False) -> PushResult:
    """Upload a local adapter directory to ``<app's LoRA path>/<name>/``: the
    next request for ``<model>:<name>`` loads it, no redeploy. Refuses an
    adapter ``check`` would call an error (rank, base model, target modules)
    unless ``force``."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UsageError(f"{directory}: not a directory")
    if not _NAME.match(name):
        raise UsageError(f"adapter name {name!r}: use letters, digits, '.', '_' and '-' (it becomes part of the model id)")
    client = ServeClient(target.dashboard_url, token=target.ray_token)
    found = lora_apps(client, target, app, model)
    if len(found) > 1:
        raise UsageError(f"application {app!r} has several LoRA models ({', '.join(f.model_id for f in found)}); name one "
                         f"with the model parameter")
    la = found[0]
    problems = check_local_adapter(directory, la.llm, name)
    errors = [m for sev, _, m in problems if sev == "error"]
    if errors and not force:
        raise UsageError("not pushed: " + "; ".join(errors) + " (force pushes it anyway)")
    c = lorastore.client(la.env)
    try:
        replaced = name in lorastore.list_adapters(c, la.uri, la.env)
        keys = lorastore.upload_dir(c, directory, la.uri, name, la.env)
    except lorastore.StoreError as e:
        raise UsageError(f"cannot write to {la.uri} ({la.env.describe()}): {e.message}") from None
    warnings = [m for sev, _, m in problems if sev != "error"] + errors
    if replaced:
        warnings.append(f"{name} was already in the store: replicas that loaded it keep the old weights until they "
                        "restart (vLLM caches an adapter by name)")
    return PushResult(la.app, la.model_id, la.uri, name, keys, replaced, warnings, f"{la.model_id}:{name}")


def served_adapters(result, serve_path: Path | str) -> dict[str, list[str]]:
    """After ``up``: base model id -> the adapters its endpoint's /v1/models lists (the ingress reads the
    store), for each model of the serve file with a LoRA path; {} when none has one or nothing answers."""
    import httpx
    import yaml

    from llmctl.validate.files import inline_llm_configs

    try:
        data = inline_llm_configs(yaml.safe_load(Path(serve_path).read_text(encoding="utf-8")))
    except (OSError, ValueError, yaml.YAMLError, AttributeError):
        return {}
    bases = {str(sf.model_id_of(llm)) for app in data.get("applications") or []
             for _, llm in app_llm_configs(app) if isinstance(llm, dict) and llm.get("lora_config")}
    if not bases or not result.endpoint:
        return {}
    try:
        from llmctl.launch import apikey
        from llmctl.launch.cluster import running_state

        key = apikey.key_value(result.api_key_env, running_state() if result.local else None)
        listed = [m.get("id", "") for m in httpx.get(result.endpoint + "/models", timeout=15, trust_env=False,
                                                     headers=apikey.headers(key)).json().get("data", [])]
    except (httpx.HTTPError, ValueError, AttributeError):
        listed = []
    return {b: [m.split(":", 1)[1] for m in listed if m.startswith(b + ":")] for b in sorted(bases)}
