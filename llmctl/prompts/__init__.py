"""The gen-config question flow: flags and prompts fill one DeploymentSpec.

Each question is asked through :meth:`Session.answer`: a flag value wins and is
parsed by the same ``llmctl.spec.parse_*`` function a prompt's ``validate=``
uses; without a flag, a terminal gets a prompt (the CLI's questionary
front-end, :mod:`llmctl.cli.ask`, given by :func:`use_terminal`); with no terminal,
``--yes`` takes the default and anything else is a MissingAnswerError naming
the flag (exit 2 at once, never a wait for input).

Modules: :mod:`.session` (Flags, Session, the terminal's questions),
:mod:`.model` (one model's questions), :mod:`.scaling` (autoscaling details),
:mod:`.engine` (engine settings), :mod:`.app` (the whole flow).
"""

from llmctl.prompts.app import collect  # noqa: F401
from llmctl.prompts.model import TPOption, collect_model, tp_options  # noqa: F401
from llmctl.prompts.session import (  # noqa: F401
    CUSTOM,
    Flags,
    Session,
    ask_confirm,
    ask_select,
    ask_text,
    per_model,
    use_terminal,
)
