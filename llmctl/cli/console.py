"""The one place output goes: ``out`` for results on stdout,
``err`` for progress, warnings and errors on stderr. Rich honours NO_COLOR and
drops styling when the stream is not a terminal."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

import os


def _width(stream) -> int | None:
    # Piped output: wide enough that tables never wrap mid-word (COLUMNS wins).
    if "COLUMNS" in os.environ or stream.isatty():
        return None
    return 200


out = Console(soft_wrap=True, highlight=False, width=_width(sys.stdout))
err = Console(stderr=True, soft_wrap=True, highlight=False, width=_width(sys.stderr))


def print_json(data: Any) -> None:
    """Plain JSON on stdout, nothing else mixed in."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def error(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {message}", markup=True, highlight=False)
