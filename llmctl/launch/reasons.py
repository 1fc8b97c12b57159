"""Why a deployment failed, in words: the exception at the end of Ray's
traceback message and the tail of the failing replica's logs."""

from __future__ import annotations

import re

from llmctl import serve_facts as sf
from llmctl.launch import address as _address
from llmctl.launch.serve_api import AppSummary

_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)|[A-Za-z_][\w.]*Error\b)")
_PID_RE = re.compile(r"\bpid=(\d+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def reason_from_message(message: str, max_lines: int = 6) -> str:
    """The exception at the end of a Ray traceback message, else the message's first line."""
    lines = [_ANSI.sub("", ln).rstrip() for ln in message.splitlines()]
    idx = None
    for i, ln in enumerate(lines):
        if _EXC_LINE.match(ln) and ":" in ln and not ln.startswith("RuntimeError: Traceback"):
            idx = i
    if idx is None:
        return next((ln for ln in lines if ln.strip()), "")
    return "\n".join(ln for ln in lines[idx : idx + max_lines] if ln.strip())


def failure_message(app: AppSummary, status: dict, target: _address.Target, sources: dict[str, str] | None = None,
                    configs: dict[str, dict] | None = None) -> tuple[str, list]:
    """Why ``app`` failed, in words, and what llmctl.launch.failures recognises
    in it: (text, [(app, model id, Diagnosis)])."""
    from llmctl.launch import logs as _logs
    from llmctl.launch.failures import diagnose

    sources, configs = sources or {}, configs or {}
    found: list = []
    parts = [f"application {app.name!r} is {app.status}" + (f": {app.message.splitlines()[0]}" if app.message else "")]
    raw_app = (status.get("applications") or {}).get(app.name) or {}
    for dep in app.deployments:
        if sf.is_failed(dep.status) and dep.message:
            first = _ANSI.sub("", dep.message.splitlines()[0])
            model_id = sf.llm_server_id(dep.name)
            src = sources.get(model_id) if model_id else None
            parts.append(f"deployment {dep.name!r}" + (f" (model_source {src})" if src else "") + f" is {dep.status}: {first}")
            reason = reason_from_message(dep.message)
            if reason and reason != first:
                parts.append(reason)
            pids = _PID_RE.findall(dep.message)
            raw_dep = (raw_app.get("deployments") or {}).get(dep.name) or {}
            pids += [str(r["pid"]) for r in raw_dep.get("replicas") or [] if r.get("pid")]
            pid = int(pids[-1]) if pids else None
            tail = _logs.replica_log_tail(target, pid, lines=200, app=app.name, deployment=dep.name, status=status)
            for d in diagnose(dep.message + "\n" + tail, configs.get(model_id or "")):
                found.append((app.name, model_id, d))
                parts.append(f"cause: {d.cause}")
                parts.append(f"fix: {d.fix}" + (" (`llmctl up FILE --fix` applies it)" if d.changes else ""))
            if tail:
                shown = tail.splitlines()[-20:]
                parts.append(f"--- last lines of the replica's log{f' (pid {pid})' if pid else ''} ---")
                parts.append("\n".join(shown))
    parts.append(f"see `llmctl logs {app.name}`; remove it with `llmctl down {app.name}`")
    return "\n".join(parts), found
