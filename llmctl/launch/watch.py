"""Watching a deployment until it runs: progress, failures, and telling
"cannot be scheduled on this cluster" apart from "starting slowly"."""

from __future__ import annotations

import json
import re
import time

import httpx
from typing import TYPE_CHECKING, Generator

from llmctl.errors import ClusterUnreachable, DeployFailed
from llmctl import serve_facts as sf
from llmctl.launch.events import Progress
from llmctl.poll import poll_iter
from llmctl.launch.reasons import failure_message
from llmctl.launch.serve_api import AppSummary, HTTPFailure, ServeClient, scrub, secret_values, summarize

if TYPE_CHECKING:  # pragma: no cover
    from llmctl.launch.address import Target

RESOURCE_CHECK_S = 1.0
POLL_S = 0.5
STALE_S = 30.0  # how long a replaced app's old status is hidden while the controller takes the new config
# Resources Ray adds on its own that say nothing about what a user asked for.
_INTERNAL_RES = re.compile(r"^(node:|bundle_group_|.*_group_[0-9a-f]+$|memory$|object_store_memory$)")

def _fmt_res(res: dict[str, float]) -> str:
    out = []
    for k, v in res.items():
        if k.startswith("accelerator_type:"):
            continue
        out.append(f"{k}:{v:g}")
    acc = [k.split(":", 1)[1] for k in res if k.startswith("accelerator_type:")]
    s = ", ".join(out)
    if acc:
        s += f" (accelerator_type:{', '.join(acc)})"
    return s


def _user_resources(res: dict) -> dict[str, float]:
    return {k: float(v) for k, v in (res or {}).items() if not _INTERNAL_RES.match(k) and float(v) > 0}


def missing_resources(need: dict[str, float], nodes: list[dict]) -> dict[str, float] | None:
    """None if some alive node has all of ``need`` in total; else the shortfall
    on the best node, as {resource: what the cluster has}."""
    alive = [n for n in nodes if n.get("state", "ALIVE") == "ALIVE"]
    best: dict[str, float] | None = None
    for n in alive:
        total = n.get("resources_total") or {}
        short = {k: float(total.get(k, 0.0)) for k, v in need.items() if float(total.get(k, 0.0)) + 1e-9 < v}
        if not short:
            return None
        if best is None or len(short) < len(best):
            best = short
    if best is None:  # no nodes at all
        best = {k: 0.0 for k in need}
    return best


def _cluster_totals(nodes: list[dict]) -> dict[str, float]:
    tot: dict[str, float] = {}
    for n in nodes:
        if n.get("state", "ALIVE") != "ALIVE":
            continue
        for k, v in (n.get("resources_total") or {}).items():
            tot[k] = tot.get(k, 0.0) + float(v)
    return tot


def _infeasible_text(app: str, deployment: str, need: dict[str, float], short: dict[str, float], nodes: list[dict]) -> str:
    totals = _cluster_totals(nodes)
    acc = [k.split(":", 1)[1] for k in need if k.startswith("accelerator_type:")]
    acc_txt = f" (accelerator_type:{', '.join(acc)})" if acc else ""
    plain_short = {k: v for k, v in short.items() if not k.startswith("accelerator_type:")}
    if plain_short:
        needs = ", ".join(f"{k}:{need[k]:g}" for k in plain_short) + acc_txt
        has = ", ".join(f"{k}:{totals.get(k, 0.0):g}" for k in plain_short)
        what = f"needs {needs} but the cluster has {has}"
    elif acc:
        what = f"needs accelerator_type:{', '.join(acc)} but no node has that accelerator (GPU:{totals.get('GPU', 0.0):g} in all)"
    else:
        what = f"needs {_fmt_res(need)} in one placement group, which no node can hold"
    return (
        f"application {app!r}: deployment {deployment!r} cannot be scheduled: {what} "
        f"(each replica: {_fmt_res(need)}). Nothing will start until the cluster has it; fix the config "
        f"(for CPU: `llmctl gen-config --gpu cpu`) and run `llmctl up` again, or remove the app with `llmctl down {app}`"
    )


_REQ_RE = re.compile(r"Resources required for each replica: (\[.*?\]|\{.*?\}),")


class ResourceWatcher:
    """Tells "cannot be scheduled on this cluster" apart from "starting slowly".

    Serve reports a deployment stuck for resources only after 30 s, and only
    as a warning. The state API knows at once: the replica's placement group
    (named ``SERVE_REPLICA::<app>#<deployment>#<id>``) is PENDING with
    ``scheduling_state: INFEASIBLE``. Its bundles are compared with the nodes'
    totals to name what is missing. Requirements of replicas without a
    placement group (``required_resources``) are checked against the nodes
    directly.
    """

    def __init__(self, client: ServeClient, apps: list[str]):
        self.client = client
        self.apps = apps
        self._next = 0.0
        self._nodes: list[dict] | None = None
        self._pending_since: dict[str, float] = {}

    def nodes(self) -> list[dict]:
        if self._nodes is None:
            self._nodes = self.client.nodes()
        return self._nodes

    def check(self, status: dict) -> tuple[bool, str] | None:
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + RESOURCE_CHECK_S
        try:
            return self._check(status, now)
        except (HTTPFailure, ClusterUnreachable):
            return None

    def _check(self, status: dict, now: float) -> tuple[bool, str] | None:
        apps = status.get("applications") or {}
        waiting = False
        # 1. replicas' own requirements (no placement group)
        for name in self.apps:
            for dname, dep in ((apps.get(name) or {}).get("deployments") or {}).items():
                states = [r.get("state") for r in dep.get("replicas") or []]
                if dep.get("status") == sf.DEP_HEALTHY:
                    continue
                waiting = True
                need = _user_resources(dep.get("required_resources") or {})
                if need and any(s == "PENDING_ALLOCATION" for s in states):
                    short = missing_resources(need, self.nodes())
                    if short:
                        return True, _infeasible_text(name, dname, need, short, self.nodes())
                m = _REQ_RE.search(dep.get("message") or "")
                if m:
                    try:
                        reqs = json.loads(m.group(1))
                    except ValueError:
                        reqs = None
                    for req in reqs if isinstance(reqs, list) else [reqs] if isinstance(reqs, dict) else []:
                        need = _user_resources(req)
                        short = missing_resources(need, self.nodes()) if need else None
                        if short:
                            return True, _infeasible_text(name, dname, need, short, self.nodes())
        if not waiting and any(name in apps for name in self.apps):
            return None
        # 2. placement groups of our replicas
        notes = []
        for pg in self.client.placement_groups():
            pname = pg.get("name") or ""
            if not pname.startswith("SERVE_REPLICA::") or pg.get("state") != "PENDING":
                continue
            app, _, rest = pname[len("SERVE_REPLICA::") :].partition("#")
            if app not in self.apps:
                continue
            deployment = rest.rsplit("#", 1)[0]
            need: dict[str, float] = {}
            for b in pg.get("bundles") or []:
                for k, v in _user_resources(b.get("unit_resources") or {}).items():
                    need[k] = max(need.get(k, 0.0), v)
            sched = ((pg.get("stats") or {}).get("scheduling_state") or "").upper()
            short = missing_resources(need, self.nodes())
            if sched == "INFEASIBLE" or short:
                if short is None:  # infeasible as a whole (e.g. STRICT_PACK of many bundles)
                    short = {}
                return True, _infeasible_text(app, deployment, need, short or need, self.nodes())
            key = pg.get("placement_group_id") or pname
            since = self._pending_since.setdefault(key, now)
            if now - since > 10:
                notes.append(f"{deployment} is waiting for free resources ({_fmt_res(need)}); other apps hold them")
        return (False, "; ".join(notes)) if notes else None



def wait_running(client: ServeClient, target: "Target", prepared, stale: dict, *, t0: float,
                 t_deploy: float, timeout: float) -> Generator[Progress, None, list[AppSummary]]:
    """Poll the apps of ``prepared`` (a :class:`llmctl.launch.prepare.Prepared`) until all are RUNNING, yielding a
    Progress per poll; returns their summaries. ``stale``: apps being
    replaced ({name: last_deployed_time_s before the PUT}), hidden until the
    controller has their new config. Raises DeployFailed (with the reason and
    what llmctl recognises) for a failed app, a replica the cluster cannot
    schedule, or ``timeout`` seconds after ``t_deploy`` (when the PUT
    returned; ``t0``: when `up` began, for the elapsed time shown)."""
    watcher = ResourceWatcher(client, prepared.app_names)
    for _ in poll_iter(timeout, POLL_S, start=t_deploy):
        st = client.status()
        raw_apps = st.get("applications") or {}
        for name, t_before in list(stale.items()):
            if name in raw_apps and raw_apps[name].get("last_deployed_time_s") != t_before:
                del stale[name]  # the controller has the new config
        if stale and time.monotonic() - t_deploy < STALE_S:
            for name in stale:
                raw_apps.pop(name, None)  # not ours yet: show as not listed
        else:
            stale.clear()
        apps = [a for a in summarize(st, client.url) if a.name in prepared.app_names]
        failed = [a for a in apps if sf.is_failed(a.status)]
        if failed:
            text, found = failure_message(failed[0], st, target, prepared.sources, prepared.llm_configs)
            raise DeployFailed(scrub(text, prepared.secrets + secret_values(st)), diagnoses=found)
        if len({a.name for a in apps}) == len(prepared.app_names) and all(a.status == sf.APP_RUNNING for a in apps):
            yield Progress(time.monotonic() - t0, apps)
            return apps
        note = ""
        problem = watcher.check(st)
        if problem is not None:
            fatal, text = problem
            if fatal:
                raise DeployFailed(scrub(text, prepared.secrets))
            note = text
        yield Progress(time.monotonic() - t0, apps, note)
    states = ", ".join(f"{a.name} {a.status}" for a in apps) or "not listed yet"
    raise DeployFailed(
        f"timed out after {timeout:.0f}s ({states}){'; ' + note if note else ''}; "
        "the deployment continues on the cluster: see `llmctl status` / `llmctl logs`, or remove it with `llmctl down APP`"
    )


def check_models(endpoint: str, model_ids: list[str], *, timeout: float = 30.0, headers: dict | None = None) -> list[str]:
    """``GET {endpoint}/models`` until it lists every id; returns the listed ids."""
    url = endpoint.rstrip("/") + "/models"
    last = ""
    for _ in poll_iter(timeout, 0.5):
        try:
            r = httpx.get(url, timeout=10, trust_env=False, headers=headers or {})
            r.raise_for_status()
            listed = [m.get("id") for m in r.json().get("data") or []]
            missing = [m for m in model_ids if m not in listed]
            if not missing:
                return listed
            last = f"it lists {listed}, not {missing}"
        except httpx.HTTPStatusError as e:
            last = f"HTTP {e.response.status_code}"
        except (httpx.TransportError, ValueError) as e:
            last = str(e) or type(e).__name__
    raise DeployFailed(f"the app is RUNNING but GET {url} failed: {last}")

