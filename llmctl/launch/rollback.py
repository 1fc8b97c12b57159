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


def _deployed(dashboard_url: str, app: str) -> dict | None:
    from llmctl.launch.serve_api import ServeClient

    with ServeClient(dashboard_url) as c:
        return ((c.status().get("applications") or {}).get(app) or {}).get("deployed_app_config")


def history(app: str | None = None, *, address: str | None = None) -> dict[str, list[HistoryRow]]:
    """Per app (all with a history on the cluster, or ``app``): its entries, oldest first."""
    target = _address.resolve_target(address)
    names = [app] if app else _update.apps_with_history(target.dashboard_url)
    out: dict[str, list[HistoryRow]] = {}
    for name in names:
        entries = list(_update.iter_history(target.dashboard_url, name))
        if app and not entries:
            raise UsageError(f"no history for application {app!r} on {target.dashboard_url}: llmctl records what "
                             "`llmctl up` deploys there", param="app")
        now = _deployed(target.dashboard_url, name)
        cur = None
        if now is not None:
            cur = next((e.n for e, _ in reversed(entries) if _update._same(e.config, now)), None)
        out[name] = [HistoryRow(e.n, e.time, e.source, d, e.n == cur) for e, d in entries]
    return out


def iter_rollback(app: str, *, to: int | None = None, address: str | None = None, timeout: float = 900.0,
                  dry_run: bool = False, confirm: Callable | None = None) -> Iterator[UpEvent]:
    """Redeploy entry ``to`` of ``app``'s history (default: the newest one
    that differs from what runs): yields up's events (the plan first)."""
    from llmctl.launch.deploy import iter_up

    target = _address.resolve_target(address)
    entry = _update.pick(_update.read(target.dashboard_url, app), _deployed(target.dashboard_url, app), to, app)
    yield Step(f"rolling {app} back to entry {entry.n} of its history ({entry.source})")
    path = _update.write_temp_serve(entry, {})
    try:
        yield from iter_up(path, address=target.dashboard_url if target.local is None else None, timeout=timeout,
                           dry_run=dry_run, confirm=confirm, source=f"rollback to {entry.n}")
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)
