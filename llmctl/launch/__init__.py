"""Launch and operate: ``up``, ``status``, ``down`` and logs, as a core with no UI.

``up()`` and ``down()`` run to completion and return their result
(:class:`UpResult`, :class:`DownResult`), with progress to an optional
``on_event`` callback; ``iter_up()`` and ``iter_down()`` are the same as
generators: they yield :class:`Step` (one-off facts: validated, cluster
started, deployed) and :class:`Progress` (a snapshot of the apps being
deployed) and end with the result. They raise llmctl.errors types; they
never print.

Modules: :mod:`.cluster` (the local Ray head llmctl owns), :mod:`.address`
(which cluster a command talks to), :mod:`.serve_api` (Serve's REST API),
:mod:`.prepare` (the serve file loaded, tokens filled or kept), :mod:`.deploy` (compose, up), :mod:`.watch` (unschedulable
replicas), :mod:`.reasons` (why a deployment failed), :mod:`.operate`
(status, down), :mod:`.logs`.

The names below are imported on first use: the package itself imports none
of its modules, so a module of it importing a sibling never runs this file's
imports half-way (no import cycle through the package).
"""

from __future__ import annotations

from typing import Any

_NAMES = {
    **{n: "deploy" for n in ("UpOptions", "compose", "connect", "iter_up", "up")},
    **{n: "prepare" for n in ("Prepared", "prepare")},
    "check_models": "watch",
    **{n: "events" for n in ("PlanReady", "Progress", "Step", "UpEvent", "UpResult")},
    **{n: "operate" for n in ("DownResult", "StatusReport", "down", "iter_down", "status")},
    "reason_from_message": "reasons",
}

__all__ = list(_NAMES)


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
