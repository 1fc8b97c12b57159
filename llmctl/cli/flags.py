"""Parameters of the core, spelled as the CLI's flags.

The core names a parameter in a message with ``llmctl.errors.param`` (it
does not know the flags); the CLI prints it as the flag that sets it:
``param("max_model_len")`` → ``--max-model-len``, ``param("http_host",
"0.0.0.0")`` → ``--http-host 0.0.0.0``, ``param("force", True)`` →
``--force``, ``param("preflight", False)`` → ``--no-preflight``. A
parameter whose flag is its name with dashes needs no entry below.
"""

from __future__ import annotations

from typing import Any

from llmctl.errors import UNSET, render, template_of

# parameter -> flag, where the flag is not ``--`` + the name with dashes
FLAGS: dict[str, str] = {
    "stop_cluster": "--cluster",
}
# boolean parameters whose False is a flag of its own
NEGATED: dict[str, str] = {
    "preflight": "--no-preflight",
    "wait": "--no-wait",
}


def flag(name: str, value: Any = UNSET) -> str:
    """The flag (with its value) that sets parameter ``name`` to ``value``."""
    if value is False and name in NEGATED:
        return NEGATED[name]
    opt = FLAGS.get(name) or "--" + name.replace("_", "-")
    if value is UNSET or value is True:
        return opt
    return f"{opt} {value}"


def cli_text(message_or_error: Any) -> str:
    """A core message (or an error's) with its parameters spelled as flags."""
    text = message_or_error if isinstance(message_or_error, str) else template_of(message_or_error)
    return render(text, flag)
