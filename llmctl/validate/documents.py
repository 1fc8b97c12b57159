"""YAML documents with line numbers, and the Diagnostic every check emits.

A :class:`Diagnostic` prints as ``file:line: field.path: message``; its
``code`` is a stable identifier (``does-not-fit``, ``unknown-engine-arg``, …)
that callers and tests match instead of message text.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

import yaml

from llmctl.sources import path_probe

@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: Optional[int]
    field: str
    message: str
    severity: str = "error"
    code: str = "invalid"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "field": self.field, "code": self.code,
                "severity": self.severity, "message": self.message}

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        prefix = f"{self.severity}: " if self.severity in ("warning", "note") else ""
        if self.field:
            return f"{where}: {self.field}: {prefix}{self.message}"
        return f"{where}: {prefix}{self.message}"


# --------------------------------------------------------------------------
# YAML with line numbers


class _Doc:
    """A parsed YAML document plus its node tree, to find the line of a field.

    ``line_offset`` shifts every line number: for a document embedded in
    another file (a RayService's serveConfigV2 block), lines point into that
    file. ``node`` may be given instead of text (one document of a stream)."""

    def __init__(self, path: str, text: Optional[str] = None, *, line_offset: int = 0, node: Any = None):
        self.path = path
        self.line_offset = line_offset
        if node is not None:
            self.node = node
            self.data = yaml.SafeLoader("").construct_document(node)
        else:
            self.node = yaml.compose(text, Loader=yaml.SafeLoader)
            self.data = yaml.safe_load(text)

    def line(self, loc: Iterable[Any]) -> Optional[int]:
        n = self._line(loc)
        return None if n is None else n + self.line_offset

    def _line(self, loc: Iterable[Any]) -> Optional[int]:
        node = self.node
        if node is None:
            return None
        best = node.start_mark.line + 1
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    if getattr(k, "value", None) == str(part) or (isinstance(part, int) and k.value == str(part)):
                        best = k.start_mark.line + 1
                        node = v
                        break
                else:
                    return best
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
                best = node.start_mark.line + 1
            else:
                return best
        return best


def _loc_str(loc: Iterable[Any]) -> str:
    out = ""
    for p in loc:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


class _Sink:
    """Collects diagnostics for one document, mapping a field path to a line.
    ``debug``: a check that crashes is raised (its traceback shown) instead of
    reported (:meth:`guard`); :meth:`child` sinks inherit it."""

    def __init__(self, doc: _Doc, base: tuple = (), display: Optional[str] = None, *, debug: bool = False):
        self.doc = doc
        self.base = base
        self.display = display or doc.path
        self.debug = debug
        self.items: list[Diagnostic] = []

    def child(self, doc: _Doc, base: tuple = ()) -> "_Sink":
        """A sink for a part of this document (or a document embedded in it), with this one's settings."""
        return _Sink(doc, base, debug=self.debug)

    def add(self, loc: tuple, message: str, severity: Optional[str] = None, *, code: str = "invalid") -> None:
        """One diagnostic; its severity is the code's (llmctl.validate.codes), or
        the one given for a ``depends`` code. A severity that contradicts the
        code's is a bug (raised, so tests catch it)."""
        from llmctl.validate.codes import default_severity

        fixed = default_severity(code)
        if severity is None:
            if fixed is None:
                raise ValueError(f"diagnostic code {code!r} needs a severity")
            severity = fixed
        elif fixed is not None and severity != fixed:
            raise ValueError(f"diagnostic code {code!r} is a {fixed}, not a {severity}")
        full = self.base + tuple(loc)
        self.items.append(Diagnostic(self.display, self.doc.line(full), _loc_str(full), message, severity, code))

    def warn(self, loc: tuple, message: str, *, code: str) -> None:
        self.add(loc, message, "warning", code=code)

    def cluster_only(self, loc: tuple, problem: str, local_node: bool, *, code: str) -> None:
        """Something that may exist only where the app runs (a model directory,
        a class): an error for a deployment on this machine, else a warning."""
        if local_node:
            self.add(loc, problem, "error", code=code)
        else:
            self.warn(loc, f"{problem}; it must exist on the cluster's nodes (validate --local makes this an error)", code=code)

    @contextmanager
    def guard(self, what: str, loc: tuple = ()):
        """Run one check; an exception inside it (an llmctl bug on input it did
        not foresee) becomes a ``check-failed`` error at ``loc`` naming the
        check, so the result is incomplete (:class:`Verdict`: exit 2, never
        "valid"), and the other checks still run. With ``debug`` it is
        raised, so the traceback shows where."""
        try:
            yield
        except Exception as e:  # noqa: BLE001 - any failure of a check is reported, never raised
            if self.debug:
                raise
            self.add(loc, failed_check_message(what, e), code="check-failed")

    def has(self, loc: tuple) -> bool:
        s = _loc_str(self.base + tuple(loc))
        return any(d.field == s or d.field.startswith(s + ".") or s.startswith(d.field + ".") or s.startswith(d.field + "[")
                   for d in self.items if d.severity == "error")


def _read_doc(path: Path, results: list[Diagnostic]) -> Optional[_Doc]:
    shown = str(path)
    if not path_probe(path):
        results.append(Diagnostic(shown, None, "", "no such file", code="no-such-file"))
        return None
    if path.is_dir():
        results.append(Diagnostic(shown, None, "", "is a directory, not a YAML file", code="no-such-file"))
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        results.append(Diagnostic(shown, None, "", f"cannot read: {e}", code="unreadable"))
        return None
    try:
        doc = _Doc(shown, text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        results.append(Diagnostic(shown, mark.line + 1 if mark else None, "", f"malformed YAML: {problem}", code="yaml"))
        return None
    if not isinstance(doc.data, dict):
        results.append(Diagnostic(shown, 1, "", "expected a mapping: a serve config (applications: …) or a model config (model_loading_config: …)", code="not-a-config"))
        return None
    return doc


def errors_only(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diags if d.is_error]


_NOT_CHECKED = ": what it checks was not checked, so the result is incomplete (an llmctl bug: please report it)"


def failed_check_message(what: str, e: BaseException) -> str:
    """The one line of a ``check-failed`` diagnostic: the check and its error."""
    detail = " ".join(str(e).split())[:200]
    return f"llmctl's {what} check crashed on this input ({type(e).__name__}{': ' + detail if detail else ''})" + _NOT_CHECKED


def crash_of(d: Diagnostic) -> str:
    """``where: llmctl's X check crashed on this input (Error: …)`` of a ``check-failed`` diagnostic."""
    return str(d).removesuffix(_NOT_CHECKED)


def failed_checks(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    """The ``check-failed`` diagnostics: checks that crashed, so the result says
    nothing about what they check (never "valid")."""
    return [d for d in diags if d.code == "check-failed"]


class Verdict(list):
    """The diagnostics of a validation, in file order (it is a list of
    :class:`Diagnostic`), and what they amount to. ``strict``: warnings fail
    too. A crashed check (``check-failed``) makes it :attr:`incomplete`, and an
    incomplete result is never :attr:`valid`."""

    def __init__(self, diagnostics: Iterable[Diagnostic] = (), *, strict: bool = False):
        super().__init__(diagnostics)
        self.strict = strict

    @property
    def errors(self) -> list[Diagnostic]:
        return errors_only(self)

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self if d.severity == "warning"]

    @property
    def failed_checks(self) -> list[Diagnostic]:
        return failed_checks(self)

    @property
    def incomplete(self) -> bool:
        return bool(self.failed_checks)

    @property
    def failing(self) -> list[Diagnostic]:
        """What makes it fail: the errors (crashed checks among them), and with ``strict`` the warnings."""
        return self.errors + (self.warnings if self.strict else [])

    @property
    def valid(self) -> bool:
        return not self.failing
