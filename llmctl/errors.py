"""User-facing errors. Core modules raise these; the CLI maps them to exit codes.

Exit codes (docs/cli.md, "Exit codes"): 0 ok; 1 the operation ran and failed; 2 usage or
validation error; 3 no cluster reachable; 130 interrupted.

Parameters named in messages
----------------------------
The core does not know the CLI's flags. A message that names a parameter of
the call (``tp``, ``http_host``, ``force``) writes it with :func:`param`; the
text holds a marker that :func:`render` spells for the reader: the Python
API (``str(e)``, ``e.message``) as the parameter (``tp``, ``http_host='0.0.0.0'``,
``force=True``), the CLI as its flag (``--tp``, ``--http-host 0.0.0.0``,
``--force``; ``llmctl.cli.flags``). ``e.template`` keeps the markers, for
code that wraps one message in another.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Callable, Optional

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_CLUSTER = 3
EXIT_INTERRUPTED = 130
# What each exit code means (the root --help lists them from here).
EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_FAILED: "the operation ran and failed (deploy failed, unhealthy, timed out; status: not every app RUNNING)",
    EXIT_USAGE: "usage or validation error (bad flag, invalid file, does not fit)",
    EXIT_NO_CLUSTER: "no cluster reachable",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}

UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET"})()
_PARAM = re.compile("\u27e8([A-Za-z_][A-Za-z0-9_]*)(?:=([^\u27e9]*))?\u27e9")  # ⟨name⟩ or ⟨name=repr⟩


def param(name: str, value: Any = UNSET) -> str:
    """A parameter named inside a message (see the module doc): ``param("tp")``,
    ``param("http_host", "0.0.0.0")``, ``param("force", True)``,
    ``param("preflight", False)``. Values are Python literals."""
    return f"\u27e8{name}\u27e9" if value is UNSET else f"\u27e8{name}={value!r}\u27e9"


def python_spelling(name: str, value: Any = UNSET) -> str:
    """How the Python API names a parameter: ``tp``, ``http_host='0.0.0.0'``."""
    return name if value is UNSET else f"{name}={value!r}"


def render(text: str, spell: Optional[Callable[[str, Any], str]] = None) -> str:
    """``text`` with every :func:`param` marker spelled by ``spell(name,
    value)`` (default: the Python API's spelling)."""
    spell = spell or python_spelling

    def one(m: "re.Match[str]") -> str:
        return spell(m.group(1), UNSET if m.group(2) is None else ast.literal_eval(m.group(2)))

    return _PARAM.sub(one, text)


def template_of(e: BaseException) -> str:
    """The message of an exception with its parameter markers (see :func:`param`)."""
    return getattr(e, "template", None) or str(e)


class LlmctlError(Exception):
    """Base class: a message meant for the user and the exit code it maps to.

    ``message`` is the text as the Python API shows it, ``template`` the same
    with parameter markers (the CLI spells them as flags), ``param`` the
    parameter whose value was wrong, when there is one."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, exit_code: int | None = None, param: str | None = None):
        super().__init__(message)
        self.template = message
        self.message = render(message)
        self.param = param
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message


class UsageError(LlmctlError):
    """A bad flag, a bad answer or a missing answer (exit 2)."""

    exit_code = EXIT_USAGE


class MissingAnswerError(UsageError):
    """No terminal to ask on and no flag given (exit 2, names the flag)."""


class ValidationFailed(LlmctlError):
    """One or more diagnostics on files (exit 2). Carries the diagnostics."""

    exit_code = EXIT_USAGE

    def __init__(self, diagnostics: list, message: str | None = None):
        self.diagnostics = list(diagnostics)
        super().__init__(message or "\n".join(str(d) for d in self.diagnostics))


class ValidationIncomplete(ValidationFailed):
    """Validation could not run every check (one crashed on the input: an
    llmctl bug), so the files are not used (exit 2). Carries the diagnostics."""


class SizingError(UsageError, ValueError):
    """A value the arithmetic cannot work with (exit 2). ``param`` names the
    sizing parameter (not a flag: the caller knows which flag, if any, gave it).
    Also raised for a vLLM version that is not one (llmctl.vllm_version)."""

    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param


class CatalogError(LlmctlError):
    """A broken catalog entry (names its file and field)."""

    exit_code = EXIT_USAGE


class ModelNotFound(UsageError):
    """A model that is neither in the catalog nor a readable repo / directory."""


class DoesNotFit(UsageError):
    """The model does not fit on the chosen hardware (exit 2 unless forced)."""


class OutputExists(UsageError):
    """Refusing to overwrite a file unless forced."""


class PreflightFailed(UsageError):
    """The cluster cannot hold what the config asks for (exit 2, nothing deployed)."""


class ClusterUnreachable(LlmctlError):
    """No Ray cluster answers at the address (exit 3)."""

    exit_code = EXIT_NO_CLUSTER


class RequestTimeout(LlmctlError):
    """A cluster took the connection but did not answer in time (exit 1):
    reachable, so not exit 3, and a deploy request may still be applied."""

    exit_code = EXIT_FAILED


class DeployFailed(LlmctlError):
    """The app was deployed but failed, was unhealthy or timed out (exit 1).
    ``diagnoses``: what llmctl recognised, [(app, model id, Diagnosis)]."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, diagnoses: list | None = None):
        super().__init__(message)
        self.diagnoses = list(diagnoses or [])
