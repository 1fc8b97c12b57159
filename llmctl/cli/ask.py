"""The terminal's questions: the questionary front-end of the question flow
(:mod:`llmctl.prompts` asks through it once :func:`llmctl.prompts.use_terminal`
is given this module) and of the CLI's own confirmations. questionary is
imported on the first question: only the interactive path needs it."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from llmctl.errors import LlmctlError


def _validator(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """The parser's one-line message under the prompt (parameters spelled as the flags that set them)."""
    from llmctl.cli.flags import cli_text

    def check(text: str):
        try:
            parse(text)
        except (ValueError, LlmctlError) as e:
            return cli_text(e)
        return True

    return check


def text(message: str, parse: Callable[[str], Any], default: str = "", instruction: Optional[str] = None) -> Any:
    import questionary

    raw = questionary.text(message, default=default, validate=_validator(parse), instruction=instruction).unsafe_ask()
    return parse(raw)


def select(message: str, choices: Sequence[tuple[str, Any]], default: Any = None, search: bool = False) -> Any:
    import questionary

    qchoices = [questionary.Choice(title=t, value=v) for t, v in choices]
    dflt = next((c for c in qchoices if c.value == default), None)
    kwargs: dict[str, Any] = {}
    if search:
        kwargs.update(use_search_filter=True, use_jk_keys=False)
    return questionary.select(message, choices=qchoices, default=dflt, **kwargs).unsafe_ask()


def confirm(message: str, default: bool) -> bool:
    import questionary

    return bool(questionary.confirm(message, default=default).unsafe_ask())
