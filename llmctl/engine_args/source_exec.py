"""Run small vLLM functions and methods from their source (statements on top
of :mod:`llmctl.engine_args.source_eval`'s expressions): the default factories
some config fields use (``_get_mm_hasher_algorithm`` in vLLM 0.29) and, in
:mod:`llmctl.engine_args.source`, the ``add_cli_args`` methods.

Nothing outside vLLM runs except the calls ``source_eval`` allows. The build
sees a clean environment, as an introspection with no ``VLLM_*`` variables
set would: ``os.getenv(name, default)`` is ``default``, vLLM's
``envs.is_set`` is false and ``get_from_deprecated_env_if_set`` is None.
"""

from __future__ import annotations

import ast
from typing import Any, Optional

from llmctl.engine_args.source_eval import BoundRef, FuncRef, Module, Tree, Unknown, _binop

MAX_DEPTH = 6
# vLLM functions that read the environment or load plugins, by (module, name): what they
# return in a clean environment with no plugins installed (what introspection here sees).
ENV_FREE = {("vllm.envs", "is_set"): False, ("vllm.config.utils", "get_from_deprecated_env_if_set"): None,
            ("vllm.plugins", "load_general_plugins"): None}


class _Return(Exception):
    def __init__(self, value: Any):
        self.value = value


class Super:
    """``super()`` inside a method: attributes come from the owner's bases."""

    def __init__(self, cls: type, owner: type):
        self.cls, self.owner = cls, owner


class Interpreter(Tree):
    """A :class:`Tree` that also runs function bodies.

    In :attr:`lenient_functions`, a statement that cannot run is reported in ``problems`` and
    skipped (for ``add_cli_args``, where one odd line must not lose every
    argument); otherwise it fails the call (for default factories, whose value
    must be right or reported as unknown)."""

    #: functions whose statements run leniently (see the class docstring)
    lenient_functions: frozenset[str] = frozenset()

    def __init__(self, root):
        super().__init__(root)
        self._frames: list[tuple[Optional[type], Optional[type], bool]] = []

    @property
    def lenient(self) -> bool:
        return bool(self._frames) and self._frames[-1][2]

    # ---------------------------------------------------------------- calls

    def call(self, fn: Any, args: list, kwargs: dict) -> Any:
        name = getattr(fn, "__qualname__", "")
        if getattr(fn, "__module__", None) == "opaque" and name in ("os.getenv", "os.environ.get"):
            return args[1] if len(args) > 1 else kwargs.get("default")
        return super().call(fn, args, kwargs)

    def call_expr(self, node: ast.Call, mod: Module, local: Optional[dict] = None, prefer_tc: bool = False) -> Any:
        if isinstance(node.func, ast.Name) and node.func.id == "super" and (local is None or "super" not in local):
            cls, owner, _ = self._frames[-1] if self._frames else (None, None, False)
            if owner is None:
                raise Unknown("super() outside a method")
            return Super(cls, owner)
        return super().call_expr(node, mod, local, prefer_tc)

    def attr(self, obj: Any, name: str) -> Any:
        if isinstance(obj, Super):
            for base in self.classes[obj.owner].bases:
                try:
                    return self.class_attr(base, name, obj.cls)
                except Unknown:
                    continue
            raise Unknown(f"super() has no {name!r}")
        return super().attr(obj, name)

    def run_function(self, fn: Any, args: list, kwargs: dict) -> Any:
        bound = fn if isinstance(fn, BoundRef) else None
        ref: FuncRef = fn.func if bound else fn
        key = (ref.module.name, ref.name)
        if key in ENV_FREE:
            return ENV_FREE[key]
        node = ref.node
        if not isinstance(node, ast.FunctionDef):
            raise Unknown(f"cannot run {ref.name}")
        if len(self._frames) >= MAX_DEPTH:
            raise Unknown(f"{ref.name}(): calls nested too deep")
        decos = {ast.unparse(d) for d in node.decorator_list}
        params = [a.arg for a in node.args.args]
        env: dict[str, Any] = {}
        if bound is not None and "staticmethod" not in decos:
            env[params.pop(0)] = bound.cls  # classmethod: cls (instances are not modelled)
        defaults = node.args.defaults
        first_default = len(params) - len(defaults)
        for i, p in enumerate(params):
            if i < len(args):
                env[p] = args[i]
            elif p in kwargs:
                env[p] = kwargs[p]
            elif i >= first_default:
                env[p] = self.ev(defaults[i - first_default], ref.module)
        for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults):
            env[a.arg] = kwargs[a.arg] if a.arg in kwargs else (self.ev(d, ref.module) if d is not None else None)
        self._frames.append((bound.cls if bound else None, bound.owner if bound else None,
                             ref.name in self.lenient_functions))
        try:
            self.exec_body(node.body, env, ref.module)
        except _Return as r:
            return r.value
        finally:
            self._frames.pop()
        return None

    # ---------------------------------------------------------------- statements

    def exec_body(self, body: list[ast.stmt], env: dict, mod: Module) -> None:
        for st in body:
            try:
                self.stmt(st, env, mod)
            except _Return:
                raise
            except Exception as e:  # noqa: BLE001 - reported (lenient) or turned into Unknown
                if not self.lenient:
                    raise Unknown(f"{mod.name} line {st.lineno}: {e}") from None
                self.problems.append(f"{mod.name} line {st.lineno}: skipped `{ast.unparse(st).splitlines()[0]}` ({e})")

    def stmt(self, st: ast.stmt, env: dict, mod: Module) -> None:
        ev = lambda n: self.ev(n, mod, env)  # noqa: E731
        if isinstance(st, ast.Expr):
            if not isinstance(st.value, ast.Constant):  # docstrings
                ev(st.value)
        elif isinstance(st, (ast.Assign, ast.AnnAssign)):
            if st.value is None:
                return
            value = ev(st.value)
            for t in (st.targets if isinstance(st, ast.Assign) else [st.target]):
                self.assign(t, value, env, mod)
        elif isinstance(st, ast.AugAssign):
            target = st.target
            if isinstance(target, ast.Subscript):
                box, key = ev(target.value), ev(target.slice)
                box[key] = _binop(st.op, box[key], ev(st.value), st)
            elif isinstance(target, ast.Name):
                env[target.id] = _binop(st.op, ev(target), ev(st.value), st)
            else:
                raise Unknown(f"assignment to {ast.unparse(target)}")
        elif isinstance(st, ast.Delete):
            for t in st.targets:
                if isinstance(t, ast.Subscript):
                    del ev(t.value)[ev(t.slice)]
        elif isinstance(st, ast.If):
            try:
                test = bool(ev(st.test))
            except Exception:  # noqa: BLE001
                if not self.lenient:
                    raise
                test = True  # sys.argv checks in add_cli_args: introspection's parser has every argument
            self.exec_body(st.body if test else st.orelse, env, mod)
        elif isinstance(st, ast.For):
            for item in list(ev(st.iter)):
                self.assign(st.target, item, env, mod)
                self.exec_body(st.body, env, mod)
        elif isinstance(st, (ast.With, ast.Try)):
            self.exec_body(st.body, env, mod)
        elif isinstance(st, ast.Return):
            raise _Return(ev(st.value) if st.value is not None else None)
        elif isinstance(st, ast.ImportFrom):
            base = mod._absolute(st.module, st.level)
            for a in st.names:
                env[a.asname or a.name] = self.attr(self._module_value(base), a.name)
        elif isinstance(st, (ast.Pass, ast.FunctionDef, ast.ClassDef, ast.Import)):
            return
        else:
            raise Unknown(f"statement {type(st).__name__}")

    def assign(self, target: ast.expr, value: Any, env: dict, mod: Module) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, ast.Subscript):
            self.ev(target.value, mod, env)[self.ev(target.slice, mod, env)] = value
        elif isinstance(target, ast.Tuple):
            for t, v in zip(target.elts, value):
                self.assign(t, v, env, mod)
        else:
            raise Unknown(f"assignment to {ast.unparse(target)}")
