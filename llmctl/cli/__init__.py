"""The llmctl command line: a thin Typer layer over the core modules.

Each command lives in its own module under ``llmctl/cli/`` and registers itself
on ``app``. Command modules import only light modules at top level; ray, vllm
and huggingface_hub are imported inside the functions that need them, so
``llmctl --help`` and ``llmctl models`` never load them (bench/startup.py).
"""

from __future__ import annotations

import functools
import os
import sys

import typer

from llmctl.errors import EXIT_INTERRUPTED, EXIT_USAGE, LlmctlError

from llmctl.cli.root import app  # noqa: E402,F401  (the Typer app; defined in llmctl.cli.root)

# Command modules register themselves on `app` when imported.
from llmctl.cli import models as _models  # noqa: E402,F401
from llmctl.cli import gen_config as _gen_config  # noqa: E402,F401
from llmctl.cli import validate as _validate  # noqa: E402,F401
from llmctl.cli import plan as _plan  # noqa: E402,F401
from llmctl.cli import up as _up, status as _status, logs as _logs, down as _down, tiny_model as _tiny  # noqa: E402,F401
from llmctl.cli import check as _check  # noqa: E402,F401
from llmctl.cli import bench as _bench, top as _top  # noqa: E402,F401
from llmctl.cli import kuberay as _kuberay  # noqa: E402,F401
from llmctl.cli import lora as _lora  # noqa: E402,F401
from llmctl.cli import history as _history, diff as _diff  # noqa: E402,F401


def run() -> int:
    """The console script (``llmctl``, ``python -m llmctl``): :func:`main` in a
    process that imports Ray's LLMConfig schema without torch and transformers
    (llmctl.light_imports; in-process callers of ``main`` load Ray as before)."""
    from llmctl import light_imports

    light_imports.enable()
    return main()


@functools.cache
def _command():
    """The click command Typer builds from ``app``: built once per process
    (Typer's ``app(...)`` rebuilds every command's parameters on each call,
    about 0.1 s, which in-process callers of :func:`main` paid every time)."""
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: one handler maps errors to exit codes."""
    argv = _global_options_first(list(sys.argv[1:] if argv is None else argv))
    debug = os.environ.get("LLMCTL_DEBUG") == "1" or "--debug" in argv
    # commands pass --debug to the core as a parameter (llmctl.cli.root.debug_enabled): nothing is set in os.environ
    return _run(argv, debug)


def _run(argv: list[str], debug: bool) -> int:
    from llmctl.cli.console import error

    try:
        rv = _command().main(args=argv, prog_name="llmctl", standalone_mode=False)
    except LlmctlError as e:
        if debug:
            raise
        from llmctl.cli.flags import cli_text

        lines = cli_text(e).splitlines() or [""]
        error(lines[0])
        for line in lines[1:]:
            _plain_err(line)
        return e.exit_code
    except KeyboardInterrupt:
        from llmctl.cli.console import err

        err.print("interrupted")
        return EXIT_INTERRUPTED
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        return EXIT_INTERRUPTED
    except _click_exceptions() as e:  # usage errors from typer/click: one line, exit 2
        if debug:
            raise
        from llmctl.cli.console import error

        ctx = getattr(e, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        error(f"{e.format_message()}{hint}")
        return getattr(e, "exit_code", EXIT_USAGE)
    except Exception as e:  # a bug: say so in one line; --debug shows the traceback
        if debug:
            raise
        from llmctl.cli.console import error

        error(f"internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback; please report it)")
        return 1
    return rv if isinstance(rv, int) else 0


_GLOBAL_FLAGS = ("--debug",)


def _global_options_first(argv: list[str]) -> list[str]:
    """``llmctl validate --debug F`` means ``llmctl --debug validate F``:
    global flags are accepted anywhere before a ``--``."""
    end = argv.index("--") if "--" in argv else len(argv)
    moved = [a for a in argv[:end] if a in _GLOBAL_FLAGS]
    if not moved:
        return argv
    return moved + [a for a in argv[:end] if a not in _GLOBAL_FLAGS] + argv[end:]


def _plain_err(line: str) -> None:
    from llmctl.cli.console import err

    err.print(line, markup=False, highlight=False)


def _click_exceptions() -> tuple:
    from typer._click.exceptions import ClickException

    return (ClickException,)
