"""llmctl: take an open LLM to a running, autoscaled OpenAI-compatible endpoint on Ray Serve.

The Python API is the core the CLI itself calls (nothing here prints):

- :func:`generate` — configs from answers, as ``llmctl gen-config --yes``
  (returns the spec, the documents and, when written, their paths);
- :func:`validate_files` — diagnostics for serve / model config files, as
  ``llmctl validate`` (each with a stable ``code``);
- :func:`plan` — the sizing table, as ``llmctl plan`` (rows, advised TP);
- :func:`bench` — load an app's endpoint and watch its replicas, as
  ``llmctl bench``; :func:`sweep` — steps of load held one after another, as
  ``llmctl bench --sweep``;
- :func:`capacity` — the capacity plan for latency targets, as ``llmctl plan
  --slo`` (estimates; docs/capacity.md);
- :func:`up` — validate, deploy, wait until RUNNING, as ``llmctl up``;
  returns the result (endpoint, model ids), progress to an optional
  ``on_event`` callback; how it deploys is one :class:`UpOptions` (or its
  fields as keywords: ``up(path, address=..., timeout=...)``); :func:`status` — a report, as ``llmctl status``;
  :func:`down` — delete apps (and the local head), as ``llmctl down``;
- :func:`check` — can the cluster start a serve config (preflight, the
  cluster's versions, LoRA stores; nothing deployed), as ``llmctl check``:
  a report with ``ok`` and ``to_json()``; :func:`check_security` — what a
  running app exposes, as ``llmctl security``;
- :func:`history` — what llmctl deployed of each app, as ``llmctl history``;
  :func:`rollback` — redeploy an entry of it, as ``llmctl rollback``;
- every function that talks to a cluster takes ``address`` and
  ``ray_token_env`` (the variable holding a token-auth cluster's Ray token);
- :func:`iter_up`, :func:`iter_down` — the same as generators of progress
  events (:class:`llmctl.launch.Step`, :class:`~llmctl.launch.Progress`)
  ending in the result, for a progress display of your own.

Errors are :class:`llmctl.errors.LlmctlError` subclasses carrying the exit
code the CLI would use. Names are imported on first use, so ``import
llmctl`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llmctl._version import __version__

_API = {
    "generate": ("llmctl.genconfig", "generate"),
    "validate_files": ("llmctl.validate.files", "validate_paths"),
    "plan": ("llmctl.planner", "plan"),
    "up": ("llmctl.launch.deploy", "up"),
    "iter_up": ("llmctl.launch.deploy", "iter_up"),
    "UpOptions": ("llmctl.launch.deploy", "UpOptions"),
    "status": ("llmctl.launch.operate", "status"),
    "down": ("llmctl.launch.operate", "down"),
    "iter_down": ("llmctl.launch.operate", "iter_down"),
    "bench": ("llmctl.loadgen", "bench"),
    "sweep": ("llmctl.loadsweep", "sweep"),
    "capacity": ("llmctl.planner", "capacity"),
    "trace_capacity": ("llmctl.planner", "trace_capacity"),
    "check": ("llmctl.launch.check", "check"),
    "check_security": ("llmctl.launch.security", "security_check"),
    "history": ("llmctl.launch.rollback", "history"),
    "rollback": ("llmctl.launch.rollback", "rollback"),
}

__all__ = ["__version__", *_API]

if TYPE_CHECKING:  # pragma: no cover
    from llmctl.genconfig import generate  # noqa: F401
    from llmctl.loadgen import bench  # noqa: F401
    from llmctl.loadsweep import sweep  # noqa: F401
    from llmctl.planner import capacity, trace_capacity  # noqa: F401
    from llmctl.launch.check import check  # noqa: F401
    from llmctl.launch.deploy import UpOptions, iter_up, up  # noqa: F401
    from llmctl.launch.security import security_check as check_security  # noqa: F401
    from llmctl.launch.operate import down, iter_down, status  # noqa: F401
    from llmctl.launch.rollback import history, rollback  # noqa: F401
    from llmctl.planner import plan  # noqa: F401
    from llmctl.validate.files import validate_paths as validate_files  # noqa: F401


def __getattr__(name: str) -> Any:
    if name in _API:
        import importlib

        module, attr = _API[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'llmctl' has no attribute {name!r}")
