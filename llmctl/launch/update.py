"""Updating a running app: the payload with in-place changes lifted into
deployment overrides, its plan (:mod:`llmctl.rollout`), the surge
preflight, and the history of what llmctl deployed (issue 23).

History
-------
Every application config ``up`` (or ``rollback``) PUTs is appended, as
deployed, to ``$LLMCTL_HOME/history/<cluster>/<app>.jsonl`` (directory 0700,
file 0600), ``<cluster>`` being :func:`history_key`: ``local`` for the head
llmctl starts under this ``LLMCTL_HOME`` (a new port block at every start, one
history across them), else the dashboard's ``host_port`` with the cluster's
Ray session (two clusters reached through one ``kubectl port-forward`` keep
two histories). Token-free: the payload holds ``${VAR}`` references unless
``send_token`` filled values, and those are put back to their references
before writing.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from llmctl.errors import UsageError, param
from llmctl import serve_facts as sf
from llmctl import rollout as _rollout
from llmctl.paths import llmctl_home


def _llm_defaults() -> dict:
    """What Ray Serve LLM merges under a deployment_config: its
    ``DEFAULT_DEPLOYMENT_OPTIONS`` (core/server/builder.py), built from the
    same constants (importing the builder imports vLLM: tens of seconds)."""
    try:
        from ray.llm._internal.serve import constants as c
    except Exception:  # noqa: BLE001 - Ray LLM not importable here: the overrides go without its defaults
        return {}
    return {"max_ongoing_requests": c.DEFAULT_MAX_ONGOING_REQUESTS,
            "health_check_period_s": c.DEFAULT_HEALTH_CHECK_PERIOD_S,
            "health_check_timeout_s": c.DEFAULT_HEALTH_CHECK_TIMEOUT_S,
            "autoscaling_config": {"target_ongoing_requests": c.DEFAULT_MAX_TARGET_ONGOING_REQUESTS}}


def lift_and_plan(status: dict, payload: dict, names: list[str]) -> tuple[dict, _rollout.Plan]:
    """The payload to PUT and its plan: the file's LLM apps in
    :func:`rollout.canonical` form; when only in-place options changed, on
    the deployed ``args`` (:func:`rollout.lift_in_place`), so Serve applies
    them without restarting replicas."""
    deployed = {n: (a or {}).get("deployed_app_config") for n, a in (status.get("applications") or {}).items()}
    apps, lifted = [], []
    defaults: dict | None = None
    for app in payload.get("applications") or []:
        name = app.get("name", "default")
        if name in names:
            if defaults is None:
                defaults = _llm_defaults()
            old = deployed.get(name)
            new = _rollout.lift_in_place(old, app, defaults) if old and (old.get("args") or {}) != (app.get("args") or {}) else None
            if new is not None:
                lifted.append(name)
            app = new if new is not None else _rollout.canonical(app, defaults)
        apps.append(app)
    out = dict(payload, applications=apps)
    return out, _rollout.plan(status, out, names, lifted)


def scrub_plan(p: _rollout.Plan, secrets: list[str]) -> _rollout.Plan:
    """The plan with every known secret value (``send_token``'s, the deployed
    configs' literal tokens) replaced by ``***`` in the values it shows."""
    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str):
            for sec in secrets:
                if sec and len(sec) >= 4:
                    v = v.replace(sec, "***")
        return v

    for c in p.changes:
        c.old, c.new = walk(c.old), walk(c.new)
    return p


def plan_without_cluster(config: dict, names: list[str]) -> _rollout.Plan:
    """The plan when no cluster runs yet: every application is new."""
    return _rollout.plan({"applications": {}}, config, names)


def remove_failed_same(client, payload: dict, current: dict, names: list[str]):
    """Ray does not retry a failed app whose config did not change: remove it
    first (a generator of Steps; returns the status after)."""
    from llmctl.launch.events import Step
    from llmctl.launch.serve_api import wait_gone

    apps = current.get("applications") or {}
    failed_same = [a.get("name") for a in payload["applications"]
                   if a.get("name") in names and (apps.get(a.get("name")) or {}).get("status") in sf.FAILED_STATES
                   and apps[a.get("name")].get("deployed_app_config") == a]
    if not failed_same:
        return current
    yield Step(f"removing the failed {', '.join(failed_same)} before deploying it again …")
    without = dict(payload, applications=[a for a in payload["applications"] if a.get("name") not in failed_same])
    if without["applications"]:
        client.deploy(without)
    else:
        client.delete_all()
    for _ in wait_gone(client, failed_same, timeout=120):
        pass
    return client.status()


# The serve config's global options: llmctl.serve_facts (FIXED_GLOBALS, APPLIED_GLOBALS:
# Serve's GET does not show them, llmctl keeps what it last sent: record_globals).
_GLOBALS_FILE = "serve-globals.json"


def cluster_wide(current: dict, given: dict, recorded: dict) -> dict:
    """The cluster-wide part of a PUT, the one rule for every PUT llmctl sends
    (``up``, the failed-app replacement, ``down APP``): each option the file
    gives (``given``: a serve config's keys other than ``applications``, an
    explicit null included); else what the cluster runs with
    (``target_capacity``, ``proxy_location``, where Serve listens: Serve's GET,
    ``current``); else what llmctl last sent there (``recorded``: the options
    a GET does not show). A PUT without them would put the other apps back
    to 100 % target capacity and default logging."""
    out = {k: v for k, v in given.items() if k != "applications"}
    for k in sf.SHOWN_GLOBALS:
        if k not in out and current.get(k) is not None:
            out[k] = current[k]
    if "http_options" not in out:
        cur_http = {k: v for k, v in (current.get("http_options") or {}).items() if k in sf.HTTP_KEYS[:2] and v is not None}
        if cur_http:
            out["http_options"] = cur_http
    for k in sf.APPLIED_GLOBALS:
        if k not in out and recorded.get(k) is not None:
            out[k] = recorded[k]
    return out


def record_globals(cluster: str, payload: dict) -> None:
    """Keep the options a PUT applied that Serve's GET does not show (0600)."""
    from llmctl.paths import write_atomic

    d = history_dir(cluster)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomic(d / _GLOBALS_FILE, json.dumps({k: payload.get(k) for k in sf.APPLIED_GLOBALS}, sort_keys=True), mode=0o600)


def recorded_globals(cluster: str) -> dict:
    try:
        data = json.loads((history_dir(cluster) / _GLOBALS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}




def unchanged(p: _rollout.Plan, payload: dict, current: dict, names: list[str], recorded: dict | None = None) -> bool:
    """Whether PUTting ``payload`` would change nothing, so `up` can leave the
    cluster alone: the plan is empty, each of the file's apps is deployed with
    this very config and is RUNNING or DEPLOYING, and no global option a PUT
    applies differs from what llmctl last sent (``recorded``: Serve's GET does
    not show them). A PUT of the same config while Serve still builds the app
    would restart that build ("Existing config deployment request terminated")."""
    recorded = recorded or {}
    if not p.empty or any(payload.get(k) is not None and payload.get(k) != recorded.get(k) for k in sf.APPLIED_GLOBALS):
        return False
    if payload.get("target_capacity") != current.get("target_capacity"):
        return False
    apps = current.get("applications") or {}
    for a in payload.get("applications") or []:
        if a.get("name") not in names:
            continue
        cur = apps.get(a.get("name")) or {}
        if cur.get("status") not in sf.KEPT_STATES or cur.get("deployed_app_config") != a:
            return False
    return True


def surge_check(p: _rollout.Plan, client) -> str | None:
    """Do the rollouts' surge replicas fit in the cluster's free resources?"""
    if not any(r.surge for r in p.rollouts):
        return None
    from llmctl.launch.preflight import cluster_nodes

    return _rollout.surge_problem(p, [dict(n.free) for n in cluster_nodes(client)])


# --------------------------------------------------------------------------
# history


LOCAL_HISTORY = "local"


def history_key(target, client) -> str:
    """Whose history a command reads and writes: the local head's (one for
    every head started under this LLMCTL_HOME), or a remote cluster's: its
    dashboard's host and port and its Ray session (``client.session_name()``)."""
    if target.local is not None:
        return LOCAL_HISTORY
    u = urllib.parse.urlsplit(target.dashboard_url)
    session = client.session_name()
    return f"{u.hostname}_{u.port or 80}" + (f"@{session}" if session else "")


def history_dir(cluster: str) -> Path:
    """The history directory of a :func:`history_key`."""
    return llmctl_home() / "history" / re.sub(r"[^A-Za-z0-9._@-]", "_", cluster)


def _app_file(cluster: str, app: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", app)
    return history_dir(cluster) / f"{safe}.jsonl"


def token_free(app: dict, secrets: dict[str, str]) -> dict:
    """``app`` with every value in ``secrets`` (value -> variable) put back to its ``${VAR}`` reference."""
    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str) and v in secrets:
            return "${" + secrets[v] + "}"
        return v

    return walk(app)


@dataclass
class Entry:
    n: int  # 1-based, oldest first
    time: float
    source: str
    config: dict

    def to_json(self) -> dict:
        return {"n": self.n, "time": self.time, "source": self.source, "config": self.config}


def record(cluster: str, apps: list[dict], source: str, secrets: dict[str, str] | None = None) -> None:
    """Append each app config as deployed (token-free) to its history (0600)."""
    d = history_dir(cluster)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    for app in apps:
        cfg = token_free(app, secrets or {})
        entries = read(cluster, app.get("name", "default"))
        if entries and entries[-1].config == cfg:
            continue  # the same config deployed again: one entry
        path = _app_file(cluster, app.get("name", "default"))
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(json.dumps({"time": time.time(), "source": source, "config": cfg}, sort_keys=True) + "\n")


def read(cluster: str, app: str) -> list[Entry]:
    path = _app_file(cluster, app)
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        out.append(Entry(len(out) + 1, float(data.get("time", 0)), str(data.get("source", "")), data.get("config") or {}))
    return out


def apps_with_history(cluster: str) -> list[str]:
    d = history_dir(cluster)
    return sorted(p.stem for p in d.glob("*.jsonl")) if d.is_dir() else []


def one_line_diff(old: dict | None, new: dict) -> str:
    """The fields that differ between two app configs, on one line."""
    if old is None:
        return "first deployment"
    changes = [c for c in _rollout.plan({"applications": {new.get("name", "default"): {"deployed_app_config": old}}},
                                        {"applications": [new]}, [new.get("name", "default")]).changes]
    if not changes:
        return "no change"
    parts = [f"{(c.deployment + ' ') if c.deployment else ''}{c.field}: {_rollout._short(c.old, 24)} -> "
             f"{_rollout._short(c.new, 24)}" for c in changes]
    return "; ".join(parts[:4]) + (f"; … ({len(parts)} changes)" if len(parts) > 4 else "")


def pick(entries: list[Entry], current: dict | None, to: int | None, app: str) -> Entry:
    """The entry to roll back to: ``to`` (1-based), else the newest one that differs from what runs."""
    if not entries:
        raise UsageError(f"no history for application {app!r} on this cluster: llmctl records what `llmctl up` deploys",
                         param="app")
    if to is not None:
        if not 1 <= to <= len(entries):
            raise UsageError(f"{param('to')} must be between 1 and {len(entries)} (see `llmctl history {app}`)", param="to")
        return entries[to - 1]
    for e in reversed(entries):
        if current is None or not _same(e.config, current):
            return e
    raise UsageError(f"every recorded config of {app!r} is the one deployed now: nothing to roll back to", param="app")


def _same(a: dict, b: dict) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def write_temp_serve(entry: Entry, extra: dict) -> Path:
    """The entry as a serve file in a private temp dir (0600) for ``up`` (the caller removes it)."""
    import tempfile

    import yaml

    from llmctl.paths import write_atomic

    d = Path(tempfile.mkdtemp(prefix="llmctl-rollback-"))
    return write_atomic(d / "serve.yaml", yaml.safe_dump({**extra, "applications": [entry.config]}, sort_keys=False),
                        mode=0o600)


def iter_history(cluster: str, app: str) -> Iterator[tuple[Entry, str]]:
    prev = None
    for e in read(cluster, app):
        yield e, one_line_diff(prev, e.config)
        prev = e.config
