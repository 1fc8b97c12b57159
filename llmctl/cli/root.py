"""The Typer app every command module registers itself on, and the global
options (``--debug``, ``--version``)."""

from __future__ import annotations

import typer

from llmctl._version import __version__
from llmctl.errors import EXIT_CODES


def _exit_codes_epilog() -> str:
    """The root --help's list of exit codes, from llmctl.errors.EXIT_CODES ("\\b": click keeps the lines as they are)."""
    return "\b\nExit codes:\n" + "\n".join(f"  {code:>3}  {text}" for code, text in EXIT_CODES.items())


app = typer.Typer(
    name="llmctl",
    help="Generate, validate, size and launch Ray Serve LLM deployments.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    epilog=_exit_codes_epilog(),
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"llmctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", envvar="LLMCTL_DEBUG", help="Show tracebacks for errors."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """--debug reaches the core as a parameter (:func:`debug_enabled`), never through the environment."""


def debug_enabled(ctx: typer.Context) -> bool:
    """``--debug`` (or LLMCTL_DEBUG=1) of this command line, for a command that passes it to the core."""
    return bool(ctx.find_root().params.get("debug"))
