"""Checks of an LLM deployment's request router and autoscaling policy (issue 41).

- ``request_router_config.request_router_class``: a class of the installed Ray
  (``ray.*``) is imported and must be a Serve ``RequestRouter``; its
  ``request_router_kwargs`` must be parameters of its ``initialize_state``.
  A class outside Ray is looked for without running it (llm_config's
  class-path check). ``KVAwareRouter`` deploys but, behind
  ``build_openai_app``'s ingress, routes at random (llmctl.latency).
- ``autoscaling_config.policy``: llmctl's latency policy (shipped by ``llmctl
  up``) has its settings checked; a policy of the installed Ray must be
  callable.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from llmctl.builders import module_file, split_import_path
from llmctl.latency import KV_REFUSED, POLICY_MODULE, POLICY_PATH, PREFIX_ROUTER_PATH, policy_kwargs_problems
from llmctl.validate.documents import _Sink

ROUTER = ("deployment_config", "request_router_config")
POLICY = ("deployment_config", "autoscaling_config", "policy")


def is_llmctl_policy(path: Any) -> bool:
    if not isinstance(path, str):
        return False
    p = path.strip().replace(":", ".")
    return p == POLICY_PATH.replace(":", ".")


@dataclass(frozen=True)
class Found:
    """What the source of the installed Ray says a path is (read, not imported:
    importing Ray's routers imports vLLM and torch, ~10-50 s here)."""

    kind: str  # "class" | "function" | "other"
    name: str
    bases: tuple[str, ...] = ()  # every base class name up the chain found in Ray's source
    init_params: Optional[tuple[str, ...]] = None  # initialize_state's keyword parameters (None: none found)
    var_kw: bool = False


def _resolve(module: str, attr: str, depth: int = 0) -> Optional[tuple[Path, ast.AST, str]]:
    """(file, node, module) of the def/class binding ``attr`` in ``module``, following imports."""
    f = module_file(module)
    if f is None or depth > 6:
        return None
    try:
        tree = ast.parse(f.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == attr:
            return f, node, module
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                if (a.asname or a.name) == attr:
                    return _resolve(node.module, a.name, depth + 1)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in node.targets):
            return f, node, module
    return None


def _base_chain(module: str, node: ast.ClassDef, depth: int = 0) -> tuple[list[str], list[ast.ClassDef]]:
    """Names of the bases of a class and the ClassDefs found for them, recursively (in Ray's source)."""
    f = module_file(module)
    imports: dict[str, tuple[str, str]] = {}
    if f is not None:
        try:
            for n in ast.parse(f.read_text(encoding="utf-8")).body:
                if isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
                    for a in n.names:
                        imports[a.asname or a.name] = (n.module, a.name)
        except (OSError, SyntaxError, UnicodeDecodeError):
            pass
    names, defs = [], [node]
    for b in node.bases:
        name = b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else None
        if name is None:
            continue
        src_mod, src_name = imports.get(name, (module, name))
        names.append(src_name)
        if depth < 8:
            r = _resolve(src_mod, src_name)
            if r is not None and isinstance(r[1], ast.ClassDef):
                more, more_defs = _base_chain(r[2], r[1], depth + 1)
                names += more
                defs += more_defs
    return names, defs


def find(path: str) -> Optional[Found]:
    """What ``path`` names in the installed packages' source, or None when not found."""
    module, attr = split_import_path(path.strip())
    r = _resolve(module, attr) if module and attr else None
    if r is None:
        return None
    _, node, mod = r
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return Found("function", node.name)
    if not isinstance(node, ast.ClassDef):
        return Found("other", attr)
    bases, defs = _base_chain(mod, node)
    params, var_kw = None, False
    for d in defs:  # the class first, then its bases: the first initialize_state found is the one Serve calls
        fn = next((n for n in d.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "initialize_state"), None)
        if fn is not None:
            params = tuple(a.arg for a in fn.args.args[1:] + fn.args.kwonlyargs)
            var_kw = fn.args.kwarg is not None
            break
    return Found("class", node.name, tuple(bases), params, var_kw)


def check_latency(data: dict, sink: _Sink) -> None:
    dc = data.get("deployment_config")
    if not isinstance(dc, dict):
        return
    rrc = dc.get("request_router_config")
    if isinstance(rrc, dict):
        _check_router(rrc, data, sink)
    asc = dc.get("autoscaling_config")
    pol = asc.get("policy") if isinstance(asc, dict) else None
    if isinstance(pol, dict):
        _check_policy(pol, sink)


def _check_router(rrc: dict, data: dict, sink: _Sink) -> None:
    from llmctl.latency import DEFAULT_ROUTER_PATH as DEFAULT_REQUEST_ROUTER_PATH

    path = rrc.get("request_router_class", DEFAULT_REQUEST_ROUTER_PATH)
    kwargs = rrc.get("request_router_kwargs") or {}
    if not isinstance(path, str) or not path.strip().startswith("ray."):
        return  # not Ray's: looked for without running it (class-path)
    cls = find(path)
    if cls is None:
        return  # the class-path check says it is not in the installed Ray
    loc = ROUTER + ("request_router_class",)
    if cls.kind != "class" or "RequestRouter" not in cls.bases:
        sink.add(loc, f"'{path}' is not a request router (not a subclass of Ray Serve's RequestRouter); use "
                      f"{PREFIX_ROUTER_PATH} or Serve's default {DEFAULT_REQUEST_ROUTER_PATH}", code="router")
        return
    if cls.name == "KVAwareRouter":
        sink.add(loc, KV_REFUSED + " (fine under direct streaming with ai-dynamo on the nodes)", code="kv-router")
    if isinstance(kwargs, dict) and kwargs:
        takes = cls.init_params or ()
        if not cls.var_kw:
            for k in kwargs:
                if k not in takes:
                    sink.add(ROUTER + ("request_router_kwargs", k),
                             f"{cls.name} takes no setting '{k}' (its initialize_state takes: {', '.join(takes) or 'none'})",
                             code="router")
        mrt = kwargs.get("match_rate_threshold")
        if cls.name == "PrefixCacheAffinityRouter" and mrt is not None and not (
                isinstance(mrt, (int, float)) and not isinstance(mrt, bool) and 0 <= mrt <= 1):
            sink.add(ROUTER + ("request_router_kwargs", "match_rate_threshold"),
                     f"must be a fraction between 0 and 1 (got {mrt!r})", code="router")
    if cls.name == "PrefixCacheAffinityRouter" and (data.get("engine_kwargs") or {}).get("enable_prefix_caching") is False:
        sink.add(loc, "routes requests to the replica that cached their prefix, but engine_kwargs.enable_prefix_caching is "
                       "false: nothing is cached; turn prefix caching on or use Serve's default router", code="kv-router")


def _check_policy(pol: dict, sink: _Sink) -> None:
    path = pol.get("policy_function")
    if is_llmctl_policy(path):
        for sub, problem in policy_kwargs_problems(pol.get("policy_kwargs")):
            sink.add(POLICY + ("policy_kwargs",) + sub, problem, code="latency-policy")
        return
    if isinstance(path, str) and path.strip().split(":")[0].split(".")[0] == POLICY_MODULE:
        sink.add(POLICY + ("policy_function",), f"llmctl's latency policy is {POLICY_PATH} (got '{path}')",
                 code="latency-policy")
