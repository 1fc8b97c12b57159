"""Checks of a serve config: applications, routes, the LLM apps' llm_configs,
and Ray's ServeDeploySchema."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Optional

from llmctl.validate.deployment import ScalingHint, check_deployment_config
from llmctl.validate.documents import _Doc, _Sink
from llmctl.sources import path_probe
from llmctl import builders
from llmctl.validate.llm_config import _clean_msg, check_llm_config
from llmctl.vllm_version import VllmVersion
from llmctl.validate.reference import _suggest
from llmctl.validate.patterns import check_dp_builder, check_pd_connector

# Checks a model config file a serve config names (by its resolved path):
# adds its diagnostics wherever they belong and returns its model_id (None if
# unreadable). Files on disk and documents about to be written differ only here.
ModelFileCheck = Callable[[Path], Optional[str]]
# Whether a model config file exists (on disk, or among the rendered documents).
ModelFileExists = Callable[[Path], bool]


def config_file_path(entry: str, working_dir: Path) -> Path:
    """Where Ray opens an ``llm_configs`` file path: as given, so a relative
    path is relative to the working directory of the process that builds the
    app (``LLMServingArgs._validate_llm_configs``: ``os.path.exists(config)``;
    ``serve run`` builds in the directory it starts in)."""
    p = Path(os.path.expanduser(entry))
    return p if p.is_absolute() else working_dir / p


def check_serve_config(doc: _Doc, sink: _Sink, base_dir: Path, check_model_file: ModelFileCheck,
                       model_file_exists: ModelFileExists, *, local_node: bool = True,
                       working_dir: Optional[Path] = None, vllm: Optional[VllmVersion] = None,
                       load_model_file: Optional[Callable[[Path], Any]] = None) -> None:
    """``load_model_file``: a model config file's data by its resolved path
    (default: read from disk; the documents about to be written otherwise)."""
    data = doc.data
    apps = data.get("applications")
    if not isinstance(apps, list) or not apps:
        sink.add(("applications",), "must be a non-empty list of applications", code="no-applications")
    else:
        seen_routes: dict[str, int] = {}
        for i, app in enumerate(apps):
            if not isinstance(app, dict):
                sink.add(("applications", i), "must be a mapping (name, route_prefix, import_path, args)")
                continue
            rp = app.get("route_prefix")
            if isinstance(rp, str):
                if rp in seen_routes:
                    sink.add(("applications", i, "route_prefix"), f"'{rp}' is already used by application {seen_routes[rp] + 1}",
                             code="duplicate-route")
                seen_routes[rp] = i
            resolved = builders.resolve(app.get("import_path"))
            if resolved.problem:
                sink.add(("applications", i, "import_path"), resolved.problem, code="import-path")
            if resolved.builder is not None:
                with sink.guard(f"application {i + 1}", ("applications", i)):
                    _check_llm_app(doc, app, i, resolved.builder, sink, base_dir, check_model_file, model_file_exists,
                                   local_node, working_dir or Path.cwd(), vllm, load_model_file or _load)
            elif isinstance(app.get("import_path"), str):
                with sink.guard(f"application {i + 1}", ("applications", i)):
                    _check_custom_app(app, i, sink, base_dir, local_node, vllm)
    with sink.guard("Ray ServeDeploySchema"):
        ray_serve_schema(data, sink)


def _check_custom_app(app: dict, i: int, sink: _Sink, base_dir: Path, local_node: bool,
                      vllm: Optional[VllmVersion]) -> None:
    """An application whose import_path is not one of Ray Serve LLM's
    builders: say it was not checked, and check the LLMConfig-shaped mappings
    in its args as LLMConfigs."""
    found = 0
    for slot, cfg in builders.custom_llm_configs(app.get("args")):
        inner = sink.child(sink.doc, ("applications", i, "args") + slot)
        check_llm_config(cfg, inner, base_dir=base_dir, local_node=local_node, vllm=vllm)
        sink.items.extend(inner.items)
        found += 1
    checked = (f"; the {found} LLMConfig mapping{'s' if found != 1 else ''} in its args "
               f"{'were' if found != 1 else 'was'} checked as LLMConfigs") if found else ""
    sink.add(("applications", i, "import_path"), f"{app['import_path']!r} is not one of Ray Serve LLM's builders: llmctl "
                                                 f"cannot check this application's code or args{checked}",
             code="app-not-checked")


def _check_llm_app(doc: _Doc, app: dict, i: int, builder: builders.Builder, sink: _Sink, base_dir: Path,
                   check_model_file: ModelFileCheck, model_file_exists: ModelFileExists, local_node: bool,
                   working_dir: Path, vllm: Optional[VllmVersion] = None, load: Callable[[Path], Any] = None) -> None:
    args = app.get("args")
    loc = ("applications", i, "args")
    if not isinstance(args, dict):
        sink.add(loc, f"{builder.import_path} needs {builder.describe()}", code="builder-args")
        return
    for k in args:
        if k not in builder.fields:
            sink.add(loc + (k,), f"unknown argument{_suggest(str(k), builder.fields)}; {builder.import_path} takes "
                                 f"{', '.join(sorted(builder.fields))}", code="builder-args")
    if builder.list_field:
        configs = args.get(builder.list_field)
        if not isinstance(configs, list) or not configs:
            sink.add(loc + ((builder.list_field,) if builder.list_field in args else ()),
                     f"{builder.import_path} needs {builder.describe()}", code="builder-args")
            return
    missing = [f for f in builder.single_fields if f not in args]
    if missing:
        sink.add(loc, f"{builder.import_path} needs {builder.describe()}; missing {', '.join(missing)}", code="builder-args")
    if "ingress_deployment_config" in args:
        check_deployment_config(args["ingress_deployment_config"], sink, loc + ("ingress_deployment_config",),
                                hint=ScalingHint(None, f"the ingress of {app.get('name')!r}"))
    icc = args.get("ingress_cls_config")
    if isinstance(icc, dict):
        for k in icc:
            if k not in ("ingress_cls", "ingress_extra_kwargs"):
                sink.add(loc + ("ingress_cls_config", k), "unknown field; ingress_cls_config takes ingress_cls, ingress_extra_kwargs",
                         code="builder-args")
        if builders.is_apikey_ingress(icc):
            _check_apikey_ingress(icc, sink, loc + ("ingress_cls_config",))
        elif isinstance(icc.get("ingress_cls"), str) and (problem := builders.class_path_problem(icc["ingress_cls"])):
            sink.cluster_only(loc + ("ingress_cls_config", "ingress_cls"), problem, local_node, code="class-path")
    ids: dict[str, str] = {}
    seen: list[tuple[tuple, Optional[str], Any]] = []
    for slot, entry in builders.llm_config_slots(builder, args):
        eloc = ("applications", i) + slot
        model_id, data = None, None
        where = f"{doc.path}:{doc.line(eloc)}"
        if isinstance(entry, str):
            target = config_file_path(entry, working_dir)
            if not model_file_exists(target):
                sink.add(eloc, _missing_file(entry, target, working_dir, doc), code="no-such-file")
                continue
            if not Path(os.path.expanduser(entry)).is_absolute():
                sink.add(eloc, f"relative path resolved against {working_dir}, as Ray does from the directory the app is "
                               "built in", "note", code="relative-path")
            model_id = check_model_file(target)
            where = str(target)
            data = (load or _load)(target)
        elif isinstance(entry, dict):
            inner = sink.child(doc, eloc)
            model_id = check_llm_config(entry, inner, base_dir=base_dir, local_node=local_node, vllm=vllm)
            sink.items.extend(inner.items)
            data = entry
        else:
            sink.add(eloc, "must be a path to a model config file or an LLMConfig mapping")
            continue
        seen.append((eloc, model_id, data))
        if model_id is not None and builder.list_field:
            if model_id in ids:
                sink.add(eloc, f"duplicate model id '{model_id}' (also in {ids[model_id]}); model ids must be unique within an app",
                         code="duplicate-model-id")
            else:
                ids[model_id] = where
    if builder.kind == "pd" and len(seen) == 2:
        _check_pd(seen, sink)
    check_dp_builder(builder, seen, sink)


def _missing_file(entry: str, target: Path, working_dir: Path, doc: _Doc) -> str:
    if Path(os.path.expanduser(entry)).is_absolute():
        return f"model config file '{entry}' does not exist"
    msg = (f"model config file '{entry}' does not exist in {working_dir} (Ray opens relative llm_configs paths from "
           "the working directory of the process that builds the app)")
    serve_dir = Path(doc.path).resolve().parent
    beside = serve_dir / Path(os.path.expanduser(entry))
    if path_probe(beside, "is_file") and beside.resolve() != target.resolve():
        msg += f"; it is there relative to the serve file's folder: run from {serve_dir}"
    return msg


def _load(target: Path) -> Any:
    import yaml

    try:
        return yaml.safe_load(target.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def _check_pd(seen: list, sink: _Sink) -> None:
    """PDServingArgs' own rules (serving_patterns/prefill_decode/builder.py)."""
    (ploc, pid, pdata), (dloc, did, ddata) = seen
    check_pd_connector(ploc, pdata, dloc, ddata, sink)
    if pid is not None and did is not None and pid != did:
        sink.add(dloc, f"model id '{did}' differs from prefill_config's '{pid}'; prefill and decode must serve the same model id "
                       "(Ray: \"P/D model id mismatch\")", code="pd-mismatch")
    lp = pdata.get("lora_config") if isinstance(pdata, dict) else None
    ld = ddata.get("lora_config") if isinstance(ddata, dict) else None
    if (lp is None) != (ld is None):
        sink.add(dloc if lp is not None else ploc, "lora_config must be set on both prefill and decode, or on neither", code="pd-mismatch")
    elif isinstance(lp, dict) and isinstance(ld, dict) and lp.get("dynamic_lora_loading_path") != ld.get("dynamic_lora_loading_path"):
        sink.add(dloc, "lora_config.dynamic_lora_loading_path must be the same on prefill and decode", code="pd-mismatch")


def ray_serve_schema(data: dict, sink: _Sink) -> None:
    """Ray's own ServeDeploySchema, for what llmctl did not already explain."""
    from pydantic import ValidationError
    from ray.serve.schema import ServeDeploySchema

    try:
        ServeDeploySchema.model_validate(data)
    except ValidationError as e:
        for err in e.errors():
            loc = tuple(err["loc"])
            if sink.has(loc):
                continue
            sink.add(loc, _clean_msg(err["msg"]), code="ray-schema")
    except (ValueError, TypeError) as e:
        sink.add((), _clean_msg(str(e)), code="ray-schema")


def _check_apikey_ingress(icc: dict, sink, loc: tuple) -> None:
    """llmctl's API-key ingress: shipped by `llmctl up` (runtime_env py_modules), so not looked up here; its
    kwargs name where the key is (an environment variable, a file), never the key."""
    import re

    kw = icc.get("ingress_extra_kwargs")
    kloc = loc + ("ingress_extra_kwargs",)
    for k, v in (kw.items() if isinstance(kw, dict) else ()):
        if k not in builders.APIKEY_KWARGS:
            sink.add(kloc + (k,), f"unknown argument; {builders.INGRESS_CLS} takes {', '.join(builders.APIKEY_KWARGS)} "
                     "(where the key is, never the key itself)", code="api-key")
        elif not isinstance(v, str) or not v.strip():
            sink.add(kloc + (k,), "must be a non-empty string", code="api-key")
        elif k == "api_key_env" and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
            sink.add(kloc + (k,), f"{v!r} is not an environment variable name (the name of the variable, never the key)",
                     code="api-key")
        elif k == "api_key_file" and not v.startswith("/"):
            sink.add(kloc + (k,), f"{v!r}: an absolute path on the cluster's nodes", code="api-key")
    if not isinstance(kw, dict) or not any(kw.get(k) for k in builders.APIKEY_KWARGS):
        sink.add(kloc if isinstance(kw, dict) else loc, f"{builders.INGRESS_CLS} needs api_key_env (the name of the "
                 "environment variable holding the key on the cluster's nodes) or api_key_file (a file there)", code="api-key")
