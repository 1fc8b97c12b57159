"""YAML documents with line numbers, and the Diagnostic every check emits.

A :class:`Diagnostic` prints as ``file:line: field.path: message``; its
``code`` is a stable identifier (``does-not-fit``, ``unknown-engine-arg``, …)
that callers and tests match instead of message text.
"""

from __future__ import annotations

import os
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
    """Collects diagnostics for one document, mapping a field path to a line."""

    def __init__(self, doc: _Doc, base: tuple = (), display: Optional[str] = None):
        self.doc = doc
        self.base = base
        self.display = display or doc.path
        self.items: list[Diagnostic] = []

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
        not foresee) becomes a warning at ``loc`` instead of a crash, and the
        other checks still run. With ``--debug`` (LLMCTL_DEBUG=1) it is raised,
        so the traceback shows where."""
        try:
            yield
        except Exception as e:  # noqa: BLE001 - any failure of a check is reported, never raised
            if os.environ.get("LLMCTL_DEBUG") == "1":
                raise
            self.warn(loc, f"llmctl's {what} check failed on this input and was skipped "
                           f"({type(e).__name__}: {str(e)[:200]}); please report it", code="check-failed")

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

