"""Replica and controller logs of a Serve app.

Local cluster (the one llmctl started): files under
``<temp-dir>/session_latest/logs/``:

- ``serve/replica_<app>_<deployment>_<id>.log`` — Serve's log of each replica;
- ``serve/controller_<pid>.log`` — the controller (lines about the app only,
  when an app is named);
- ``worker-*-<pid>.out`` and ``.err`` of each live replica — what the
  replica process (and vLLM's engine-core child, which inherits them) writes
  to stdout and stderr: vLLM's own log lines go to stdout
  (VLLM_LOGGING_STREAM defaults to sys.stdout), tracebacks to stderr; neither
  is in the Serve replica log.

Remote cluster: the same files through Ray's log API on the dashboard
(``/api/v0/logs``), listed per node.

One path reads them: :func:`_sources` lists the files (each with the
deployment and process it belongs to), :func:`_read` returns a file's last
lines (from disk, or through the log API). ``tail()`` (``llmctl logs``,
the diagnoses of ``status``) and ``replica_log_tail()`` (why ``up`` failed)
are both built on them; ``follow()`` yields new lines until the caller stops
iterating (Ctrl-C in the CLI). None of them touches the app.
"""

from __future__ import annotations

import json
import re
import threading
import queue
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from llmctl.launch.address import Target
from llmctl.errors import ClusterUnreachable, UsageError
from llmctl import serve_facts as sf
from llmctl.launch.serve_api import HTTPFailure, ServeClient, scrub, secret_values
from llmctl.builders import app_llm_configs


@dataclass(frozen=True)
class LogLine:
    source: str  # short label: "controller", "replica LLMServer:tiny-llama abc123", "engine pid 123"
    text: str


@dataclass(frozen=True)
class _Src:
    label: str
    path: str  # local path, or filename for the log API
    node_id: str | None = None  # remote only
    app_filter: str | None = None  # keep only lines that mention this app (controller)
    deployment: str | None = None  # the Serve deployment a replica's file belongs to
    pid: int | None = None  # the process whose stdout / stderr the file is


def _safe(name: str) -> str:
    return name.replace("/", "_")


def _replica_src(fname: str, app: str, path: str, node_id: str | None = None, at: str = "") -> _Src:
    """A replica's Serve log, ``replica_<app>_<deployment>_<id>.log``."""
    stem = fname[: -len(".log")] if fname.endswith(".log") else fname
    rest = stem[len(f"replica_{_safe(app)}_") :]
    dep, _, rid = rest.rpartition("_")
    dep = sf.deployment_from_log_name(dep)
    return _Src(f"replica {dep or rest} {rid}".strip() + at, path, node_id, deployment=dep or rest)


_WORKER_FILE = re.compile(r"worker-.*-(\d+)\.(out|err)$")


def _app_names(client: ServeClient) -> tuple[list[str], dict]:
    st = client.status()
    return sorted((st.get("applications") or {}).keys()), st


def _replica_pids(status: dict, apps: list[str]) -> dict[int, tuple[str, str]]:
    """{pid: (label, deployment)} of the replicas Serve lists for ``apps``."""
    out = {}
    for name in apps:
        for dname, dep in (((status.get("applications") or {}).get(name) or {}).get("deployments") or {}).items():
            for r in dep.get("replicas") or []:
                if r.get("pid"):
                    out[int(r["pid"])] = (f"{dname} {r.get('replica_id', '')}".strip(), dname)
    return out


def _mentions(line: str, app: str) -> bool:
    return f"'{app}'" in line or f"app='{app}'" in line or f"_{app}_" in line or f" {app} " in line


def _local_sources(target: Target, app: str | None, status: dict, apps: list[str],
                   pids: dict[int, tuple[str, str]]) -> list[_Src]:
    logs = target.local.session_dir / "logs"
    serve = logs / "serve"
    srcs: list[_Src] = []
    for p in sorted(serve.glob("controller_*.log")):
        if p.name.startswith("controller_build_"):
            continue
        srcs.append(_Src("controller", str(p), None, app))
    for name in apps:
        for p in sorted(serve.glob(f"controller_build_{_safe(name)}_*.log")):
            srcs.append(_Src(f"build {name}", str(p)))
        for p in sorted(serve.glob(f"replica_{_safe(name)}_*.log")):
            srcs.append(_replica_src(p.name, name, str(p)))
    live = set()
    for pid, (label, dname) in pids.items():
        for stream in ("out", "err"):
            for p in sorted(logs.glob(f"worker-*-{pid}.{stream}")):
                srcs.append(_Src(f"std{stream} {label}", str(p), deployment=dname, pid=pid))
                live.add(p.name)
    srcs += _ended_replica_sources(logs, apps, live)
    return srcs


def _ended_replica_sources(logs: Path, apps: list[str], live: set[str]) -> list[_Src]:
    """stdout / stderr of replicas that are gone (a failed start): Ray starts
    each worker's files with ``:actor_name:ServeReplica:<app>:<deployment>``."""
    out: list[_Src] = []
    for p in sorted(logs.glob("worker-*.out")) + sorted(logs.glob("worker-*.err")):
        if p.name in live:
            continue
        try:
            with open(p, "rb") as f:
                head = f.read(4096).decode(errors="replace")
        except OSError:
            continue
        for name in apps:
            m = re.search(rf"^:actor_name:ServeReplica:{re.escape(name)}:(\S+)", head, re.M)
            if m:
                w = _WORKER_FILE.match(p.name)
                out.append(_Src(f"{p.suffix[1:].replace('out', 'stdout').replace('err', 'stderr')} {m.group(1)} (ended)", str(p),
                                deployment=m.group(1), pid=int(w.group(1)) if w else None))
    return out


def failed_app_diagnoses(target: Target, app: str, status: dict) -> list:
    """What llmctl.launch.failures recognises in a failed app's messages and
    replica logs (the replicas that ended included): [(model id, Diagnosis)]."""
    from llmctl.launch.failures import diagnose

    raw = (status.get("applications") or {}).get(app) or {}
    cfg = raw.get("deployed_app_config") or {}
    configs = {sf.model_id_of(c): c
               for _, c in app_llm_configs(cfg) if isinstance(c, dict)}
    try:
        lines = tail(target, app, 300)
    except (ClusterUnreachable, UsageError, OSError):
        lines = []
    out = []
    for dname, dep in (raw.get("deployments") or {}).items():
        if not sf.is_failed(dep.get("status")) or not sf.is_llm_server(dname):
            continue
        model_id = dname.split(":", 1)[1]
        text = (dep.get("message") or "") + "\n" + "\n".join(ln.text for ln in lines if model_id in ln.source)
        out += [(model_id, d) for d in diagnose(text, configs.get(model_id))]
    return out


def _remote_sources(client: ServeClient, app: str | None, status: dict, apps: list[str],
                    pids: dict[int, tuple[str, str]]) -> list[_Src]:
    srcs: list[_Src] = []
    for node in client.nodes():
        if node.get("state") != "ALIVE":
            continue
        nid = node["node_id"]
        at = f" @{node['node_ip']}" if node.get("node_ip") else ""  # which node the replica runs on
        files = []
        for glob in ("*", "serve/*"):  # the listing does not descend into serve/ by itself
            files += [f for group in client.list_logs(nid, glob=glob).values() for f in group]
        for f in sorted(files):
            base = f.rsplit("/", 1)[-1]
            if base.startswith("controller_") and not base.startswith("controller_build_"):
                srcs.append(_Src("controller", f, nid, app))
            for name in apps:
                if base.startswith(f"replica_{_safe(name)}_"):
                    srcs.append(_replica_src(base, name, f, nid, at))
                elif base.startswith(f"controller_build_{_safe(name)}_"):
                    srcs.append(_Src(f"build {name}", f, nid))
            m = _WORKER_FILE.match(base)
            if m and int(m.group(1)) in pids:
                label, dname = pids[int(m.group(1))]
                srcs.append(_Src(f"std{m.group(2)} {label}{at}", f, nid, deployment=dname, pid=int(m.group(1))))
    return srcs


def _sources(client: ServeClient, target: Target, app: str | None, *, status: dict | None = None,
             pids: dict[int, tuple[str, str]] | None = None) -> tuple[list[_Src], list[str]]:
    """The log files to show, and secret values to scrub from them.
    ``status``: Serve's status if the caller has it; ``pids``: more processes
    whose stdout / stderr to include ({pid: (label, deployment)}, e.g. a
    replica that ended)."""
    if status is None:
        names, status = _app_names(client)
    else:
        names = sorted((status.get("applications") or {}).keys())
    if app is not None and app not in names:
        raise UsageError(f"no application named {app!r} (apps: {', '.join(names) or 'none'})")
    apps = [app] if app else names
    secrets = secret_values(status)
    procs = {**(pids or {}), **_replica_pids(status, apps)}
    if _on_disk(target):
        return _local_sources(target, app, status, apps, procs), secrets
    return _remote_sources(client, app, status, apps, procs), secrets


def _on_disk(target: Target) -> bool:
    """The cluster's log files are on this machine's disk (the local head)."""
    return target.is_local and target.local.session_dir.exists()


def _read(src: _Src, n: int, client: ServeClient) -> list[str]:
    """The last ``n`` lines of a log file: from disk, or through Ray's log API."""
    if src.node_id is None:
        return _read_tail(src.path, n)
    try:
        return client.log_file(src.node_id, src.path, lines=n).splitlines()
    except (HTTPFailure, ClusterUnreachable):
        return []


def _read_tail(path: str, n: int) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            chunk = min(size, max(8192, n * 400))
            f.seek(size - chunk)
            data = f.read().decode(errors="replace")
    except OSError:
        return []
    lines = data.splitlines()
    if chunk < size:
        lines = lines[1:]  # first line may be partial
    return lines[-n:] if n > 0 else []


def _plain(line: str) -> str:
    """Ray writes some worker lines as JSON records; show them as text."""
    if line.startswith('{"asctime"'):
        try:
            rec = json.loads(line)
            return f"{rec.get('levelname', '')} {rec.get('asctime', '')} {rec.get('message', '')}".strip()
        except ValueError:
            pass
    return line


def _filter(src: _Src, lines: list[str]) -> list[str]:
    if src.app_filter:
        lines = [ln for ln in lines if _mentions(ln, src.app_filter)]
    return [_plain(ln) for ln in lines if ln.strip() and not ln.startswith((":job_id:", ":actor_name:", ":task_name:"))]


def tail(target: Target, app: str | None = None, lines: int = 50) -> list[LogLine]:
    """The last ``lines`` lines of each log of the app (all apps if None)."""
    with ServeClient(target.dashboard_url, token=target.ray_token) as client:
        return _tail(client, target, app, lines)


def _tail(client: ServeClient, target: Target, app: str | None, lines: int) -> list[LogLine]:
    srcs, secrets = _sources(client, target, app)
    out: list[LogLine] = []
    for src in srcs:
        raw = _read(src, lines * (20 if src.app_filter else 1), client)
        out.extend(LogLine(src.label, scrub(ln, secrets)) for ln in _filter(src, raw)[-lines:])
    return out


def follow(target: Target, app: str | None = None, lines: int = 10, *, poll: float = 0.5,
           stop: threading.Event | None = None) -> Iterator[LogLine]:
    """Yield the last ``lines`` lines, then new lines as they are written,
    until ``stop`` is set (checked every ``poll`` seconds) or the caller stops
    iterating (closing the generator, Ctrl-C).

    New replicas' files are picked up as they appear. The app is not touched.
    """
    stop = stop or threading.Event()
    with ServeClient(target.dashboard_url, token=target.ray_token) as client:  # one client, closed when following ends
        if _on_disk(target):
            yield from _follow_local(client, target, app, lines, poll, stop)
        else:
            yield from _follow_remote(client, target, app, lines, poll, stop)


def _follow_local(client: ServeClient, target: Target, app: str | None, lines: int, poll: float,
                  stop: threading.Event) -> Iterator[LogLine]:
    for ln in _tail(client, target, app, lines):
        yield ln
    offsets: dict[str, int] = {}
    partial: dict[str, str] = {}
    srcs, secrets = _sources(client, target, app)
    for s in srcs:
        try:
            offsets[s.path] = Path(s.path).stat().st_size
        except OSError:
            offsets[s.path] = 0
    last_scan = time.monotonic()
    while not stop.is_set():
        if time.monotonic() - last_scan > 2.0:
            try:
                fresh, secrets = _sources(client, target, app)
            except (ClusterUnreachable, UsageError):
                fresh = srcs
            for s in fresh:
                offsets.setdefault(s.path, 0)
            srcs = fresh
            last_scan = time.monotonic()
        for s in srcs:
            try:
                with open(s.path, "rb") as f:
                    f.seek(offsets.get(s.path, 0))
                    data = f.read()
                    offsets[s.path] = f.tell()
            except OSError:
                continue
            if not data:
                continue
            text = partial.pop(s.path, "") + data.decode(errors="replace")
            parts = text.split("\n")
            if parts[-1]:
                partial[s.path] = parts[-1]
            for ln in _filter(s, parts[:-1]):
                yield LogLine(s.label, scrub(ln, secrets))
        time.sleep(poll)


def _follow_remote(client: ServeClient, target: Target, app: str | None, lines: int, poll: float,
                   stop: threading.Event) -> Iterator[LogLine]:
    srcs, secrets = _sources(client, target, app)
    q: "queue.Queue[LogLine]" = queue.Queue()

    def pump(src: _Src) -> None:
        buf = ""
        try:
            for chunk in client.log_stream(src.node_id, src.path, lines=lines * (20 if src.app_filter else 1)):
                buf += chunk
                *full, buf = buf.split("\n")
                for ln in _filter(src, full):
                    q.put(LogLine(src.label, scrub(ln, secrets)))
        except Exception:  # noqa: BLE001 - a dead stream ends that source only
            return

    for s in srcs:
        threading.Thread(target=pump, args=(s,), daemon=True).start()
    while not stop.is_set():
        try:
            yield q.get(timeout=poll)  # a timeout keeps Ctrl-C and ``stop`` responsive
        except queue.Empty:
            continue


# --------------------------------------------------------------------------
# one replica (for `up` failures)


def replica_log_tail(target: Target, pid: int | None, lines: int = 20, *, app: str | None = None,
                     deployment: str | None = None, status: dict | None = None) -> str:
    """The last lines of a replica's Serve log (its newest file) and of what
    its process wrote to stdout (vLLM's log lines) and stderr (tracebacks):
    :func:`tail`'s files of ``app``, picked for ``deployment`` and ``pid``."""
    with ServeClient(target.dashboard_url, token=target.ray_token) as client:
        return _replica_log_tail(client, target, pid, lines, app, deployment, status)


def _replica_log_tail(client: ServeClient, target: Target, pid: int | None, lines: int, app: str | None,
                      deployment: str | None, status: dict | None) -> str:
    try:
        srcs, _ = _sources(client, target, app, status=status,
                           pids={pid: (f"{deployment or 'replica'} pid {pid}", deployment or "")} if pid else None)
    except (ClusterUnreachable, UsageError, HTTPFailure):
        return ""
    out: list[str] = []
    serve_logs = [s for s in srcs if deployment and s.deployment == deployment and s.pid is None]
    if serve_logs:
        newest = max(serve_logs, key=_mtime) if _on_disk(target) else sorted(serve_logs, key=lambda s: s.path)[-1]
        out += _filter(newest, _read(newest, lines // 2, client))
    for stream in (".out", ".err"):
        for src in (s for s in srcs if pid and s.pid == pid and s.path.endswith(stream)):
            out += [ln for ln in _filter(src, _read(src, lines * 3, client)) if not ln.startswith(":")][-lines:]
    return "\n".join(out)


def _mtime(src: _Src) -> float:
    try:
        return Path(src.path).stat().st_mtime
    except OSError:
        return 0.0
