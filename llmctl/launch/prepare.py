"""Preparing what `llmctl up` sends: a serve file validated and loaded, its
model configs inlined, its ``${VAR}`` references filled or kept (see
llmctl.launch.deploy's module doc on tokens). Nothing is sent anywhere."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from llmctl.builders import app_llm_configs, runtime_envs
from llmctl.engine_args import pooling_task
from llmctl.errors import UsageError
from llmctl.sources import env_ref
from llmctl.serve_facts import model_id_of


@dataclass
class Prepared:
    config: dict  # the serve config with llm_configs inlined and ${VAR}s filled
    app_names: list[str]
    model_ids: dict[str, list[str]]  # app -> model ids
    sources: dict[str, str] = field(default_factory=dict)  # model id -> model_source (for messages)
    secrets: list[str] = field(default_factory=list)  # values to scrub from output
    env_vars_used: list[str] = field(default_factory=list)
    pooling: dict[str, str] = field(default_factory=dict)  # model id -> pooling task (embedding / scoring models)
    llm_configs: dict[str, dict] = field(default_factory=dict)  # model id -> its LLMConfig as deployed
    source: str = ""  # the serve file
    filled: dict[str, str] = field(default_factory=dict)  # a value filled into the payload -> its variable

    def token_refs(self) -> dict[str, str]:
        """Values filled in (``send_token``) -> the variable they came from: history keeps the ``${VAR}``."""
        return dict(self.filled)


def prepare(serve_path: Path | str, environ: dict[str, str] | None = None, *, local_node: bool = True,
            send_tokens: bool = True) -> Prepared:
    """Validate and load a serve file, inline its model configs; with
    ``send_tokens`` fill ``${VAR}``s with their values (else keep the
    references for Ray to fill on the node, see :func:`token_steps`).

    Raises ValidationFailed (exit 2) if the files are invalid, UsageError if a
    referenced variable is unset (when filling). Nothing is sent anywhere.
    """
    from llmctl.validate import load_deployable  # heavy-ish (pydantic, Ray's LLMConfig)

    path = Path(serve_path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    # A local model path is checked here only when this machine is the node
    # that serves it (the local cluster); on a remote cluster it is a warning.
    config = load_deployable(path, local_node=local_node)
    env = os.environ if environ is None else environ
    secrets: list[str] = []
    used: list[str] = []
    names: list[str] = []
    model_ids: dict[str, list[str]] = {}
    sources: dict[str, str] = {}
    pooling: dict[str, str] = {}
    llm_configs: dict[str, dict] = {}
    for app in config.get("applications") or []:
        name = app.get("name") or "default"
        names.append(name)
        ids = []
        for _, llm in app_llm_configs(app):
            if isinstance(llm, dict):
                mid = model_id_of(llm)
                if mid:
                    ids.append(str(mid))
                    src = (llm.get("model_loading_config") or {}).get("model_source", mid)
                    sources[str(mid)] = src if isinstance(src, str) else json.dumps(src)
                    llm_configs[str(mid)] = llm
                    task = pooling_task(llm.get("engine_kwargs"), _architectures(src, path.parent))
                    if task:
                        pooling[str(mid)] = task
        model_ids[name] = ids
    for where, runtime_env in runtime_envs(config):
        _fill_env(runtime_env, where, env, secrets, used, path, send_tokens)
    if len(set(names)) != len(names):
        raise UsageError(f"{path}: two applications have the same name")
    filled = {env[v]: v for v in used if send_tokens and env.get(v)}
    return Prepared(config, names, model_ids, sources, secrets, used, pooling, llm_configs, str(path), filled)


def _architectures(source, base_dir: Path) -> list[str]:
    """The model's architectures where llmctl knows them offline (catalog, local config.json)."""
    from llmctl.catalog import known_profile
    from llmctl.errors import LlmctlError

    if not isinstance(source, str):
        return []
    try:
        prof = known_profile(source, base_dir)
    except LlmctlError:  # an unreadable config.json: validate has reported it
        return []
    return list(prof.architecture.architectures) if prof is not None and prof.architecture is not None else []


def _fill_env(runtime_env, where: str, env, secrets: list[str], used: list[str], path: Path, fill: bool = True) -> None:
    if not isinstance(runtime_env, dict):
        return
    env_vars = runtime_env.get("env_vars")
    if not isinstance(env_vars, dict):
        return
    for key, value in list(env_vars.items()):
        var = env_ref(value)
        if var is None:
            continue
        if not fill:  # the reference goes to the cluster; the value (if known here) is only scrubbed from output
            used.append(var)
            if env.get(var):
                secrets.append(env[var])
            continue
        if not env.get(var):
            raise UsageError(
                f"{path}: {where} takes {key} from the environment variable {var}, which is not set; "
                f"export {var}=... (for a gated Hugging Face model: a token with access to it) and run `llmctl up` again"
            )
        env_vars[key] = env[var]
        secrets.append(env[var])
        used.append(var)
