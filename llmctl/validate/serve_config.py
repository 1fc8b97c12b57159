"""Checks of a serve config: applications, routes, the LLM apps' llm_configs,
and Ray's ServeDeploySchema."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

from llmctl.validate.deployment import ScalingHint, check_deployment_config
from llmctl.validate.documents import _Doc, _Sink
from llmctl.validate.llm_config import SERVE_LLM_IMPORT_PATHS, _clean_msg, check_llm_config

# Checks a model config file a serve config names (by its resolved path):
# adds its diagnostics wherever they belong and returns its model_id (None if
# unreadable). Files on disk and documents about to be written differ only here.
ModelFileCheck = Callable[[Path], Optional[str]]
# Whether a model config file exists (on disk, or among the rendered documents).
ModelFileExists = Callable[[Path], bool]


def check_serve_config(doc: _Doc, sink: _Sink, base_dir: Path, check_model_file: ModelFileCheck,
                       model_file_exists: ModelFileExists, *, local_node: bool = True) -> None:
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
            if app.get("import_path") in SERVE_LLM_IMPORT_PATHS:
                _check_llm_app(doc, app, i, sink, base_dir, check_model_file, model_file_exists, local_node)
    ray_serve_schema(data, sink)


def _check_llm_app(doc: _Doc, app: dict, i: int, sink: _Sink, base_dir: Path, check_model_file: ModelFileCheck,
                   model_file_exists: ModelFileExists, local_node: bool) -> None:
    args = app.get("args")
    loc = ("applications", i, "args")
    if not isinstance(args, dict) or "llm_configs" not in args:
        sink.add(loc, "build_openai_app needs args.llm_configs: a list of model config files or LLMConfig mappings")
        return
    configs = args["llm_configs"]
    if not isinstance(configs, list) or not configs:
        sink.add(loc + ("llm_configs",), "must be a non-empty list of model config files or LLMConfig mappings")
        return
    if "ingress_deployment_config" in args:
        check_deployment_config(args["ingress_deployment_config"], sink, loc + ("ingress_deployment_config",),
                                hint=ScalingHint(None, f"the ingress of {app.get('name')!r}"))
    ids: dict[str, str] = {}
    for j, entry in enumerate(configs):
        eloc = loc + ("llm_configs", j)
        model_id = None
        where = f"{doc.path}:{doc.line(eloc)}"
        if isinstance(entry, str):
            p = Path(os.path.expanduser(entry))
            target = p if p.is_absolute() else base_dir / p
            if not model_file_exists(target):
                hint = "" if p.is_absolute() else f" (relative paths are resolved against {base_dir})"
                sink.add(eloc, f"model config file '{entry}' does not exist{hint}", code="no-such-file")
                continue
            if not p.is_absolute():
                sink.warn(eloc, "relative path: `serve run` resolves it against the directory it is started from, "
                                f"not this file's; `llmctl up` and `llmctl validate` use {base_dir}", code="relative-path")
            model_id = check_model_file(target)
            where = str(target)
        elif isinstance(entry, dict):
            inner = _Sink(doc, eloc)
            model_id = check_llm_config(entry, inner, base_dir=base_dir, local_node=local_node)
            sink.items.extend(inner.items)
        else:
            sink.add(eloc, "must be a path to a model config file or an LLMConfig mapping")
            continue
        if model_id is not None:
            if model_id in ids:
                sink.add(eloc, f"duplicate model id '{model_id}' (also in {ids[model_id]}); model ids must be unique within an app",
                         code="duplicate-model-id")
            else:
                ids[model_id] = where


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
