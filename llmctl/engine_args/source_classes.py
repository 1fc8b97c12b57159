"""The classes of a vLLM source tree as :mod:`llmctl.engine_args.configs`
wants them (:class:`SourceClasses`): a config class's constructor fields with
their type hints and whether the default is None, what it does with an
unknown key (read from its decorator), and its source for validators. The
source reader's counterpart of ``introspect.RealClasses``. No vllm import.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any, Optional

from llmctl.engine_args.source_eval import FuncRef, Module, Unknown
from llmctl.engine_args.source_exec import Interpreter


class SourceClasses:
    """The classes of a source tree, for :mod:`llmctl.engine_args.configs`."""

    def __init__(self, tree: Interpreter):
        self.tree = tree

    def name(self, cls: type) -> tuple[str, str]:
        return cls.__name__, self.tree.classes[cls].module.name

    def init_fields(self, cls: type) -> list[tuple[str, Any, bool]]:
        out = []
        for name, (st, mod) in self.tree.fields(cls).items():
            call = st.value if isinstance(st.value, ast.Call) else None
            kw = {k.arg: k.value for k in call.keywords} if call is not None else {}
            if isinstance(kw.get("init"), ast.Constant) and kw["init"].value is False:
                continue  # not a constructor argument
            try:
                hint = self.tree.hint(st.annotation, mod)
            except Unknown as e:
                self.tree.problems.append(f"{cls.__qualname__}.{name}: annotation not read ({e}); recorded as any JSON value")
                hint = Any
            out.append((name, hint, self._none_default(st.value, call, kw, mod)))
        return out

    def _none_default(self, value: Optional[ast.expr], call: Optional[ast.Call], kw: dict, mod: Module) -> bool:
        """The default is None: ``= None``, ``field(default=None)``, ``Field(None, ...)``."""
        if value is None:
            return False
        if call is not None and ast.unparse(call.func).split(".")[-1] in ("field", "Field"):
            first = kw.get("default", call.args[0] if call.args else None)
            return isinstance(first, ast.Constant) and first.value is None and "default_factory" not in kw
        if call is not None:
            return False
        try:
            return self.tree.ev(value, mod) is None
        except Unknown:
            return False

    def extra(self, cls: type) -> str:
        info = self.tree.classes[cls]
        for d in info.node.decorator_list:
            fn = d.func if isinstance(d, ast.Call) else d
            try:
                f = self.tree.ev(fn, info.module)
            except Unknown:
                continue
            given = None
            for k in (d.keywords if isinstance(d, ast.Call) else []):
                if k.arg == "config" and isinstance(k.value, ast.Call):
                    given = next((x.value.value for x in k.value.keywords if x.arg == "extra"
                                  and isinstance(x.value, ast.Constant)), None)
            if isinstance(f, FuncRef) and f.name == "config":  # vllm.config.utils.config: forbid unless told
                return given or "forbid"
            if str(getattr(f, "__module__", "")).startswith("pydantic"):
                return given or "ignore"
            if f is dataclasses.dataclass:
                return "forbid"
        base = next((b for b in info.bases if self.tree.classes[b].kind == "dataclass"), None)
        return self.extra(base) if base is not None else "forbid"

    def nodes(self, cls: type) -> list[ast.ClassDef]:
        info = self.tree.classes[cls]
        return [info.node] + [n for b in info.bases for n in self.nodes(b)]

    def resolve(self, module: str, name: str) -> Any:
        mod = self.tree.module(module)
        if mod is None:
            raise Unknown(f"no module {module}")
        return self.tree.lookup(mod, name)
