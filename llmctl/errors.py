"""User-facing errors. Core modules raise these; the CLI maps them to exit codes.

Exit codes (DESIGN.md): 0 ok; 1 the operation ran and failed; 2 usage or
validation error; 3 no cluster reachable; 130 interrupted.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_CLUSTER = 3
EXIT_INTERRUPTED = 130


class LlmctlError(Exception):
    """Base class: a message meant for the user and the exit code it maps to."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
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
    """The model does not fit on the chosen hardware (exit 2 unless --force)."""


class OutputExists(UsageError):
    """Refusing to overwrite a file without --force."""


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
