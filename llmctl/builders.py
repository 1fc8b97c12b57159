"""Ray Serve LLM's application builders: which ``import_path`` values Ray
2.60 accepts for an LLM app, the ``args`` each one takes, and where the
LLMConfigs sit inside those args.

Ray 2.60 has three OpenAI-compatible builders (``ray/serve/llm/__init__.py``):

- ``build_openai_app(llm_serving_args)``: ``LLMServingArgs`` —
  ``llm_configs`` (a list), ``ingress_cls_config``, ``ingress_deployment_config``
  (``ray/llm/_internal/serve/core/ingress/builder.py``);
- ``build_dp_openai_app(dp_serving_args)``: ``DPOpenAiServingArgs`` — one
  ``llm_config`` (``serving_patterns/data_parallel/builder.py``);
- ``build_pd_openai_app(pd_serving_args)``: ``PDServingArgs`` —
  ``prefill_config`` and ``decode_config``, same model id, LoRA on both or
  neither, same adapter path (``serving_patterns/prefill_decode/builder.py``).

Every args model is a ``BaseModelExtended`` (``extra="forbid"``): an unknown
key fails the deploy. The field names below are checked against the
installed Ray's classes by tests/test_validate_ray.py; importing those
modules here would import vllm (4 s), so this module never does.

Whether an import path exists is decided without running any code: the
module's file is located under the installed ``ray`` package and its top
level is read with :mod:`ast` (:func:`ray_attr_exists`).
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from llmctl.sources import path_probe
from llmctl.serve_facts import DEFAULT_INGRESS, LLM_SERVER, llm_deployment_name, model_id_of


@dataclass(frozen=True)
class Builder:
    kind: str  # "openai", "dp", "pd"
    import_path: str  # the public import path of Ray 2.60
    list_field: Optional[str]  # args field holding a list of LLMConfigs
    single_fields: tuple[str, ...]  # args fields holding one LLMConfig each
    fields: frozenset[str]  # every field of the args model

    def describe(self) -> str:
        if self.list_field:
            return f"args.{self.list_field}: a list of model config files or LLMConfig mappings"
        return " and ".join(f"args.{f}: a model config file or an LLMConfig mapping" for f in self.single_fields)


_INGRESS = ("ingress_cls_config", "ingress_deployment_config")
OPENAI = Builder("openai", "ray.serve.llm:build_openai_app", "llm_configs", (), frozenset(("llm_configs",) + _INGRESS))
DP = Builder("dp", "ray.serve.llm:build_dp_openai_app", None, ("llm_config",), frozenset(("llm_config",) + _INGRESS))
PD = Builder("pd", "ray.serve.llm:build_pd_openai_app", None, ("prefill_config", "decode_config"),
             frozenset(("prefill_config", "decode_config") + _INGRESS))
BUILDERS = (OPENAI, DP, PD)

# Every import path of Ray 2.60 that names one of the builders (public, and
# the internal functions the public ones call with the same args).
KNOWN_PATHS: dict[str, Builder] = {
    "ray.serve.llm:build_openai_app": OPENAI,
    "ray.serve.llm:build_dp_openai_app": DP,
    "ray.serve.llm:build_pd_openai_app": PD,
    "ray.llm._internal.serve.core.ingress.builder:build_openai_app": OPENAI,
    "ray.llm._internal.serve.serving_patterns.data_parallel.builder:build_dp_openai_app": DP,
    "ray.llm._internal.serve.serving_patterns.prefill_decode.builder:build_pd_openai_app": PD,
}


def split_import_path(path: str) -> tuple[str, str]:
    """("module", "attr") from "module:attr" or "module.attr" (Serve accepts both)."""
    if ":" in path:
        module, _, attr = path.partition(":")
    else:
        module, _, attr = path.rpartition(".")
    return module, attr


def normalize(path: str) -> str:
    module, attr = split_import_path(path)
    return f"{module}:{attr}"


@dataclass(frozen=True)
class Resolved:
    builder: Optional[Builder]  # None: not a Ray Serve LLM builder (a user's app)
    problem: Optional[str] = None  # the import path does not exist in the installed Ray


def resolve(import_path: Any) -> Resolved:
    """The builder an application's import_path names, or why it names none."""
    if not isinstance(import_path, str) or not import_path.strip():
        return Resolved(None)
    path = normalize(import_path.strip())
    if path in KNOWN_PATHS:
        return Resolved(KNOWN_PATHS[path])
    module, attr = split_import_path(path)
    if module == "rayllm" or module.startswith("rayllm."):
        guess = _guess(module, attr)
        return Resolved(guess, f"'{import_path}' is RayLLM's, which was replaced by Ray Serve LLM (ray.serve.llm) and is "
                               f"not installed with Ray {_ray_version()}; use '{guess.import_path}' (its args are checked "
                               "as that builder's)")
    if not module.startswith("ray.") or not _looks_llm(module, attr):
        return Resolved(None)
    guess = _guess(module, attr)
    if ray_attr_exists(module, attr):
        return Resolved(None)  # a Ray function llmctl does not know as an LLM builder (build_llm_deployment, …)
    return Resolved(guess, f"'{import_path}' does not exist in the installed Ray {_ray_version()}; "
                           f"use '{guess.import_path}' (its args are checked as that builder's)")


def _looks_llm(module: str, attr: str) -> bool:
    return ".llm" in module or "llm" in attr or "openai" in attr


def _guess(module: str, attr: str) -> Builder:
    text = f"{module}.{attr}".lower()
    if "prefill" in text or "_pd" in text or "pd_" in text or "disagg" in text:
        return PD
    if "data_parallel" in text or "_dp" in text or "dp_" in text:
        return DP
    return OPENAI


@lru_cache(maxsize=1)
def _ray_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ray")
    except PackageNotFoundError:
        return "(not installed)"


def module_file(module: str) -> Optional[Path]:
    """The source file of a module, found without importing it or its parents
    (only the top-level package is located by importlib)."""
    parts = module.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if len(parts) == 1:
        return Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None
    roots = list(spec.submodule_search_locations or [])
    for root in roots:
        base = Path(root).joinpath(*parts[1:])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if path_probe(candidate, "is_file"):
                return candidate
    return None


@lru_cache(maxsize=256)
def _top_level_names(file: Path) -> frozenset[str]:
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):  # includes names bound under `if TYPE_CHECKING:` / try blocks
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return frozenset(names)


def ray_attr_exists(module: str, attr: str) -> bool:
    """Whether ``module`` is a file of the installed package that binds ``attr``
    (a def, class, assignment or import), or ``attr`` is a submodule of it."""
    f = module_file(module)
    if f is None:
        return False
    if attr in _top_level_names(f):
        return True
    return module_file(f"{module}.{attr}") is not None


def class_path_problem(path: Any) -> Optional[str]:
    """Why a ``module:Class`` / ``module.Class`` string cannot be found on this
    machine (None if it can). No code is run: the module file is located and
    read. Ray imports the class where the app is built: on the cluster."""
    if not isinstance(path, str) or not path.strip():
        return "must be an import path like 'my_pkg.my_module:MyClass'"
    module, attr = split_import_path(path.strip())
    if not module or not attr:
        return f"'{path}' is not an import path like 'my_pkg.my_module:MyClass'"
    if module_file(module) is None:
        return f"module '{module}' is not importable on this machine"
    if not ray_attr_exists(module, attr):
        return f"module '{module}' defines no '{attr}'"
    return None


def llm_config_slots(builder: Builder, args: Any) -> Iterator[tuple[tuple, Any]]:
    """(path under the app, entry) of every LLMConfig in a builder's args: a
    file path string or an LLMConfig mapping."""
    if not isinstance(args, dict):
        return
    if builder.list_field:
        entries = args.get(builder.list_field)
        if isinstance(entries, list):
            for j, entry in enumerate(entries):
                yield ("args", builder.list_field, j), entry
    for f in builder.single_fields:
        if f in args:
            yield ("args", f), args[f]


def app_llm_configs(app: Any) -> Iterator[tuple[tuple, Any]]:
    """Every LLMConfig slot of one serve application (any Ray 2.60 builder,
    including import paths that no longer exist but name one)."""
    if not isinstance(app, dict):
        return
    builder = resolve(app.get("import_path")).builder
    if builder is not None:
        yield from llm_config_slots(builder, app.get("args"))


# Args fields of custom builders that by convention hold LLMConfigs (the names
# Ray's own builders use): checked as LLMConfigs wherever they appear.
LLM_CONFIG_FIELDS = ("llm_configs", "llm_config", "prefill_config", "decode_config")


def custom_llm_configs(args: Any) -> Iterator[tuple[tuple, dict]]:
    """(slot under args, mapping) of every LLMConfig-shaped mapping in a custom
    builder's args: under the conventional fields, a mapping with
    model_loading_config."""
    if not isinstance(args, dict):
        return
    for f in LLM_CONFIG_FIELDS:
        v = args.get(f)
        items = list(enumerate(v)) if isinstance(v, list) else [(None, v)]
        for i, item in items:
            if isinstance(item, dict) and "model_loading_config" in item:
                yield ((f,) if i is None else (f, i)), item


def runtime_envs(config: Any) -> Iterator[tuple[str, Any]]:
    """``(where, runtime_env)`` of every application of a serve config and of
    each of its (inlined) LLMConfigs; ``where`` names it for messages
    ("application 'x'", "model 'y'")."""
    for app in (config.get("applications") if isinstance(config, dict) else None) or []:
        if not isinstance(app, dict):
            continue
        yield f"application {app.get('name') or 'default'!r}", app.get("runtime_env")
        for _, llm in app_llm_configs(app):
            if isinstance(llm, dict):
                yield f"model {(llm.get('model_loading_config') or {}).get('model_id')!r}", llm.get("runtime_env")


def is_llm_app(app: Any) -> bool:
    return isinstance(app, dict) and resolve(app.get("import_path")).builder is not None


def dp_size(llm: Any) -> int:
    """An LLMConfig's ``engine_kwargs.data_parallel_size`` (1 when unset or not a positive int)."""
    ek = llm.get("engine_kwargs") if isinstance(llm, Mapping) else None
    n = ek.get("data_parallel_size", 1) if isinstance(ek, Mapping) else 1
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1


def llm_deployments(app: Any) -> Iterator[tuple[str, dict, int]]:
    """``(deployment name, LLMConfig mapping, DP size)`` of every engine
    deployment of an LLM app, named as Ray 2.60's builders name them
    (core/server/builder.py ``build_llm_deployment``: the class name as prefix
    unless the builder gives one): ``LLMServer:<id>`` (build_openai_app),
    ``DPServer:<id>`` (build_dp_openai_app), ``Prefill:<id>`` and
    ``Decode:<id>`` (build_pd_openai_app, with or without DP). With DP > 1
    one Serve replica is one DP rank and a group of ``DP size`` replicas is
    gang-scheduled and restarted as a unit (dp_server.py)."""
    if not isinstance(app, dict):
        return
    builder = resolve(app.get("import_path")).builder
    if builder is None:
        return
    for slot, llm in llm_config_slots(builder, app.get("args")):
        if not isinstance(llm, dict):
            continue
        base = llm_deployment_name(model_id_of(llm) or "?").split(":", 1)[1]
        if builder.kind == "pd":
            prefix = "Prefill:" if slot[-1] == "prefill_config" else "Decode:"
        elif builder.kind == "dp":
            prefix = "DPServer:"
        else:
            prefix = LLM_SERVER + ":"
        yield prefix + base, llm, dp_size(llm) if builder.kind != "openai" else 1


def ingress_deployment_name(app: Any) -> str:
    """An LLM app's ingress deployment: named after its class (Serve names a
    deployment after its class; core/ingress/ingress.py make_fastapi_ingress
    keeps the name), OpenAiIngress unless ``args.ingress_cls_config`` names
    another (llmctl's API-key ingress: ApiKeyIngress)."""
    args = app.get("args") if isinstance(app, Mapping) else None
    icc = args.get("ingress_cls_config") if isinstance(args, Mapping) else None
    cls = icc.get("ingress_cls") if isinstance(icc, Mapping) else None
    return split_import_path(cls)[1] if isinstance(cls, str) and cls else DEFAULT_INGRESS


def get_in(data: Any, path: tuple) -> Any:
    for p in path:
        data = data[p]
    return data


def set_in(data: Any, path: tuple, value: Any) -> None:
    get_in(data, path[:-1])[path[-1]] = value


# --------------------------------------------------------------------------
# llmctl's API-key ingress (issue 22), named in args.ingress_cls_config

APIKEY_MODULE = "llmctl_apikey"
INGRESS_CLS = f"{APIKEY_MODULE}:ApiKeyIngress"  # llmctl's API-key ingress (llmctl/cluster_modules, launch/apikey.py)
APIKEY_KWARGS = ("api_key_env", "api_key_file")


def ingress_cls_config(api_key_env: Optional[str] = None, api_key_file: Optional[str] = None) -> dict:
    kw = {k: v for k, v in (("api_key_env", api_key_env), ("api_key_file", api_key_file)) if v}
    return {"ingress_cls": INGRESS_CLS, "ingress_extra_kwargs": kw}


def is_apikey_ingress(icc: Any) -> bool:
    return isinstance(icc, dict) and isinstance(icc.get("ingress_cls"), str) and \
        icc["ingress_cls"].replace(".ApiKeyIngress", ":ApiKeyIngress") == INGRESS_CLS


def key_settings(app: Mapping) -> Optional[dict]:
    """The app's ``ingress_extra_kwargs`` when it uses llmctl's API-key ingress, else None."""
    args = app.get("args") if isinstance(app, Mapping) else None
    icc = args.get("ingress_cls_config") if isinstance(args, dict) else None
    if not is_apikey_ingress(icc):
        return None
    kw = icc.get("ingress_extra_kwargs")
    return dict(kw) if isinstance(kw, dict) else {}


def keyed_apps(config: Mapping) -> Iterator[tuple[dict, dict]]:
    for app in config.get("applications") or []:
        if isinstance(app, dict) and (kw := key_settings(app)) is not None:
            yield app, kw
