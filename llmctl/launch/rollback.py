"""`history` and `rollback` as a core with no UI (issue 23).

``history(app)`` lists what llmctl deployed of an app on the cluster
(launch/update.py keeps it); ``iter_rollback(app, to)`` redeploys an entry
through ``up``'s own path (prepare, tokens, preflight, plan, confirm, PUT,
wait), from a private temporary serve file (0600, removed after)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Callable, Iterator

from llmctl.errors import UsageError
from llmctl.launch import address as _address
from llmctl.launch import update as _update
from llmctl.launch.events import Step, UpEvent


@dataclass
class HistoryRow:
    n: int
    time: float
    source: str
    diff: str  # against the entry before it
    current: bool  # the config deployed now

    def to_json(self) -> dict:
        return {"n": self.n, "time": self.time, "source": self.source, "diff": self.diff, "current": self.current}


def _deployed(client, app: str) -> dict | None:
    return ((client.status().get("applications") or {}).get(app) or {}).get("deployed_app_config")


def _cluster(target: _address.Target):
    from llmctl.launch.serve_api import ServeClient

    return ServeClient(target.dashboard_url, token=target.ray_token)


def history(app: str | None = None, *, address: str | None = None,
            ray_token_env: str | None = None) -> dict[str, list[HistoryRow]]:
    """Per app (all with a history on the cluster, or ``app``): its entries, oldest first."""
    target = _address.resolve_target(address, ray_token_env)
    with _cluster(target) as client:
        key = _update.history_key(target, client)
        names = [app] if app else _update.apps_with_history(key)
        out: dict[str, list[HistoryRow]] = {}
        for name in names:
            entries = list(_update.iter_history(key, name))
            if app and not entries:
                raise UsageError(f"no history for application {app!r} on {target.dashboard_url}: llmctl records what "
                                 "`llmctl up` deploys there", param="app")
            now = _deployed(client, name)
            cur = None
            if now is not None:
                cur = next((e.n for e, _ in reversed(entries) if _update._same(e.config, now)), None)
            out[name] = [HistoryRow(e.n, e.time, e.source, d, e.n == cur) for e, d in entries]
    return out


def iter_rollback(app: str, *, to: int | None = None, address: str | None = None, timeout: float = 900.0,
                  dry_run: bool = False, confirm: Callable | None = None,
                  ray_token_env: str | None = None) -> Iterator[UpEvent]:
    """Redeploy entry ``to`` of ``app``'s history (default: the newest one
    that differs from what runs): yields up's events (the plan first)."""
    from llmctl.launch.deploy import UpOptions, iter_up

    target = _address.resolve_target(address, ray_token_env)
    with _cluster(target) as client:
        entry = _update.pick(_update.read(_update.history_key(target, client), app), _deployed(client, app), to, app)
    yield Step(f"rolling {app} back to entry {entry.n} of its history ({entry.source})")
    path = _update.write_temp_serve(entry, {})
    try:
        yield from iter_up(path, UpOptions(address=target.dashboard_url if target.local is None else None, timeout=timeout,
                                           dry_run=dry_run, confirm=confirm, source=f"rollback to {entry.n}",
                                           ray_token_env=ray_token_env))
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)


def rollback(app: str, *, to: int | None = None, address: str | None = None, timeout: float = 900.0,
             dry_run: bool = False, confirm: Callable | None = None, on_event: Callable | None = None,
             ray_token_env: str | None = None):
    """:func:`iter_rollback` run to its end: returns up's :class:`UpResult`,
    progress (the plan first) to ``on_event``. ``confirm(plan)`` returning
    False stops before anything is sent (DeployFailed)."""
    from llmctl.launch.events import UpResult, run_to_result

    return run_to_result(iter_rollback(app, to=to, address=address, timeout=timeout, dry_run=dry_run, confirm=confirm,
                                       ray_token_env=ray_token_env), UpResult, on_event)
