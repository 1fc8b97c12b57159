"""The values and modules :mod:`llmctl.engine_args.source_eval` works with:
one parsed module of a vLLM source tree and its bindings (:class:`Module`),
references to vLLM functions, classes and modules, ``field()``/``Field()``
defaults, and opaque stand-ins for what lies outside vLLM. No vllm import.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any, Optional


class Unknown(Exception):
    """An expression this reader does not evaluate."""


class _OpaqueMeta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return opaque(f"{cls.__qualname__}.{name}")

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __iter__(cls):  # not iterable (else `x in opaque` would loop over __getitem__ forever)
        raise Unknown(f"{cls.__qualname__} is outside vLLM")

    def __contains__(cls, item: Any) -> bool:
        raise Unknown(f"{cls.__qualname__} is outside vLLM")


def opaque(name: str) -> type:
    """A stand-in class for something outside vLLM (``torch.dtype``)."""
    return _OpaqueMeta(name, (), {"__module__": "opaque", "__qualname__": name})


class FieldSpec:
    """``field(...)`` / ``Field(...)``: a default or a factory (``dataclasses.MISSING`` when absent)."""

    def __init__(self, default: Any = dataclasses.MISSING, factory: Any = dataclasses.MISSING):
        self.default, self.factory = default, factory


@dataclasses.dataclass(frozen=True)
class ConfigObject:
    """An instance of a vLLM config class (a default_factory's result)."""

    cls: type


@dataclasses.dataclass(frozen=True)
class FuncRef:
    module: "Module"
    node: ast.AST

    @property
    def name(self) -> str:
        return getattr(self.node, "name", "<lambda>")


@dataclasses.dataclass(frozen=True)
class BoundRef:
    """A method looked up on a class: ``cls`` is what a classmethod gets,
    ``owner`` the class that defines it (where ``super()`` starts)."""

    func: FuncRef
    cls: type
    owner: type


@dataclasses.dataclass(frozen=True)
class ModuleRef:
    name: str


@dataclasses.dataclass(frozen=True)
class ClassInfo:
    module: "Module"
    node: ast.ClassDef
    kind: str  # enum, dataclass, typeddict, dict, model, plain
    bases: tuple  # synthesised vLLM bases


class Module:
    def __init__(self, name: str, path: Path, is_pkg: bool):
        self.name, self.path, self.is_pkg = name, path, is_pkg
        self.tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        self.runtime: dict[str, tuple] = {}
        self.tc: dict[str, tuple] = {}
        self.cache: dict[tuple[str, bool], Any] = {}
        self.stars: list[str] = []  # modules of `from M import *`
        self._bind(self.tree.body, self.runtime)

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Module) and other.name == self.name

    @property
    def package(self) -> str:
        return self.name if self.is_pkg else self.name.rpartition(".")[0]

    def _bind(self, body: list[ast.stmt], into: dict[str, tuple]) -> None:
        for st in body:
            if isinstance(st, ast.Import):
                for a in st.names:
                    if a.asname:
                        into[a.asname] = ("module", a.name)
                    else:
                        top = a.name.split(".")[0]
                        into[top] = ("module", top)
            elif isinstance(st, ast.ImportFrom):
                base = self._absolute(st.module, st.level)
                for a in st.names:
                    if a.name == "*":
                        self.stars.append(base)
                    else:
                        into[a.asname or a.name] = ("from", base, a.name)
            elif isinstance(st, ast.Assign):
                for t in st.targets:
                    if isinstance(t, ast.Name):
                        into[t.id] = ("expr", st.value)
            elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                into[st.target.id] = ("expr", st.value)
            elif isinstance(st, ast.ClassDef):
                into[st.name] = ("class", st)
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                into[st.name] = ("func", st)
            elif isinstance(st, ast.If):
                if "TYPE_CHECKING" in ast.unparse(st.test):
                    self._bind(st.body, self.tc)
                    self._bind(st.orelse, into)
                else:  # version or platform switches: the first branch, then what only the other binds
                    self._bind(st.body, into)
                    other: dict[str, tuple] = {}
                    self._bind(st.orelse, other)
                    for k, v in other.items():
                        into.setdefault(k, v)
            elif isinstance(st, ast.Try):
                self._bind(st.body, into)
                for h in st.handlers:
                    other = {}
                    self._bind(h.body, other)
                    for k, v in other.items():
                        into.setdefault(k, v)
            elif isinstance(st, ast.With):
                self._bind(st.body, into)

    def _absolute(self, module: Optional[str], level: int) -> str:
        if not level:
            return module or ""
        parts = self.package.split(".")
        if level > 1:
            parts = parts[: len(parts) - (level - 1)]
        return ".".join(parts + ([module] if module else []))
