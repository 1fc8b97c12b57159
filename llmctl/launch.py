"""`llmctl up`, `status` and `down` as a core with no UI.

``up()`` is a generator: it yields :class:`Step` (one-off facts: validated,
cluster started, deployed) and :class:`Progress` (a snapshot of the apps being
deployed: status, deployments, replica states, elapsed seconds) and ends with
an :class:`UpResult`. It raises llmctl.errors types; it never prints.

How a serve file reaches the cluster
------------------------------------
``validate.load_deployable`` returns the serve config with every
``llm_configs`` file path replaced by the parsed LLMConfig, so the payload
PUT to the cluster is self-contained: it works wherever ``llmctl up`` runs and
whatever the cluster's working directory is.

Tokens for gated models
-----------------------
A model config names the variable, never the value:
``runtime_env: {env_vars: {HF_TOKEN: "${HF_TOKEN}"}}``. ``up`` replaces every
``${VAR}`` value in ``runtime_env.env_vars`` (the app's and each LLMConfig's)
with ``os.environ[VAR]`` in the payload it sends, and fails naming the
variable when it is unset. llmctl keeps the value in memory and in the request
only: never in the state file, the config files or its output (error text and
logs coming back from Ray are scrubbed of it). Ray itself, though, logs
runtime_env env_vars in plain text on the cluster (runtime_env_agent.log, the
app build log) — see docs/launch-notes.md. Ray itself would expand ``${VAR}`` too, but
on the *worker* (``ray._private.utils.update_envs``: ``os.path.expandvars``
against the node's environment, unset references silently become ""), so a
cluster whose nodes lack the variable would start the replica with an empty
token and fail later with an HTTP 401 from the Hub. Ray Serve LLM also copies
HF_TOKEN from the environment of the process that builds the app (the cluster
side), which again is not the user's shell.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Union

from llmctl import cluster as _cluster
from llmctl.errors import ClusterUnreachable, DeployFailed, UsageError
from llmctl.serve_api import (
    TERMINAL_BAD,
    AppSummary,
    HTTPFailure,
    ServeClient,
    deployed_configs,
    http_base,
    scrub,
    secret_values,
    summarize,
    wait_gone,
)

_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
POLL_S = 0.5
RESOURCE_CHECK_S = 1.0
# Resources Ray adds on its own that say nothing about what a user asked for.
_INTERNAL_RES = re.compile(r"^(node:|bundle_group_|.*_group_[0-9a-f]+$|memory$|object_store_memory$)")


# --------------------------------------------------------------------------
# events


@dataclass
class Step:
    message: str


@dataclass
class Progress:
    elapsed: float
    apps: list[AppSummary]
    note: str = ""


@dataclass
class UpResult:
    apps: list[AppSummary]
    dashboard_url: str
    endpoint: str | None
    model_ids: list[str]
    elapsed: float
    running: bool
    local: bool
    cluster_started: bool = False

    def to_json(self) -> dict:
        return {
            "apps": [a.to_json() for a in self.apps],
            "dashboard_url": self.dashboard_url,
            "endpoint": self.endpoint,
            "model_ids": self.model_ids,
            "elapsed_s": round(self.elapsed, 2),
            "running": self.running,
            "local_cluster": self.local,
            "cluster_started": self.cluster_started,
        }


UpEvent = Union[Step, Progress, UpResult]


# --------------------------------------------------------------------------
# preparing the payload


@dataclass
class Prepared:
    config: dict  # the serve config with llm_configs inlined and ${VAR}s filled
    app_names: list[str]
    model_ids: dict[str, list[str]]  # app -> model ids
    sources: dict[str, str] = field(default_factory=dict)  # model id -> model_source (for messages)
    secrets: list[str] = field(default_factory=list)  # values to scrub from output
    env_vars_used: list[str] = field(default_factory=list)


def prepare(serve_path: Path | str, environ: dict[str, str] | None = None, *, local_node: bool = True) -> Prepared:
    """Validate and load a serve file, inline its model configs, fill ``${VAR}``s.

    Raises ValidationFailed (exit 2) if the files are invalid, UsageError if a
    referenced variable is unset. Nothing is sent anywhere.
    """
    from llmctl.validate import load_deployable  # heavy-ish (pydantic, Ray's LLMConfig)

    path = Path(serve_path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    # A local model path is checked here only when this machine is the node
    # that serves it (the local cluster); on a remote cluster it is a warning.
    config = load_deployable(path, local_node=local_node)
    env = os.environ if environ is None else environ
    secrets: list[str] = []
    used: list[str] = []
    names: list[str] = []
    model_ids: dict[str, list[str]] = {}
    sources: dict[str, str] = {}
    for app in config.get("applications") or []:
        name = app.get("name") or "default"
        names.append(name)
        _fill_env(app.get("runtime_env"), f"application {name!r}", env, secrets, used, path)
        ids = []
        for llm in ((app.get("args") or {}).get("llm_configs") or []):
            if isinstance(llm, dict):
                mid = (llm.get("model_loading_config") or {}).get("model_id")
                if mid:
                    ids.append(str(mid))
                    src = (llm.get("model_loading_config") or {}).get("model_source", mid)
                    sources[str(mid)] = src if isinstance(src, str) else json.dumps(src)
                _fill_env(llm.get("runtime_env"), f"model {mid!r}", env, secrets, used, path)
        model_ids[name] = ids
    if len(set(names)) != len(names):
        raise UsageError(f"{path}: two applications have the same name")
    return Prepared(config, names, model_ids, sources, secrets, used)


def _fill_env(runtime_env, where: str, env, secrets: list[str], used: list[str], path: Path) -> None:
    if not isinstance(runtime_env, dict):
        return
    env_vars = runtime_env.get("env_vars")
    if not isinstance(env_vars, dict):
        return
    for key, value in list(env_vars.items()):
        m = _ENV_REF.match(value) if isinstance(value, str) else None
        if not m:
            continue
        var = m.group(1)
        if not env.get(var):
            raise UsageError(
                f"{path}: {where} takes {key} from the environment variable {var}, which is not set; "
                f"export {var}=... (for a gated Hugging Face model: a token with access to it) and run `llmctl up` again"
            )
        env_vars[key] = env[var]
        secrets.append(env[var])
        used.append(var)




# --------------------------------------------------------------------------
# composing what to PUT


_HTTP_KEYS = ("host", "port", "root_path", "request_timeout_s", "keep_alive_timeout_s")


def compose(prepared: Prepared, current: dict, local: _cluster.ClusterState | None) -> dict:
    """The full serve config to PUT: the apps already running (minus those
    being replaced) plus the new ones, and the global options."""
    new_apps = prepared.config.get("applications") or []
    keep = [a for a in deployed_configs(current) if a.get("name") not in prepared.app_names]
    routes: dict[str, str] = {}
    for a in keep:
        if a.get("route_prefix"):
            routes[a["route_prefix"]] = a.get("name")
    for a in new_apps:
        rp = a.get("route_prefix", "/")
        if rp in routes:
            raise UsageError(
                f"application {a.get('name')!r} wants route_prefix {rp!r}, which application {routes[rp]!r} "
                f"already serves; change route_prefix (or the app name to replace it), or `llmctl down {routes[rp]}` first"
            )
    payload = {k: v for k, v in prepared.config.items() if k != "applications"}
    http = dict(payload.get("http_options") or {})
    cur_http = {k: v for k, v in (current.get("http_options") or {}).items() if k in _HTTP_KEYS and v is not None}
    if local is not None:
        http.update({"host": "127.0.0.1", "port": local.serve_http_port})
        grpc = dict(payload.get("grpc_options") or {})
        grpc.setdefault("port", local.ports.get("serve_grpc"))
        payload["grpc_options"] = grpc
    elif not http and cur_http:
        http = {k: cur_http[k] for k in ("host", "port") if k in cur_http}
    if http:
        payload["http_options"] = http
    if "proxy_location" not in payload and current.get("proxy_location"):
        payload["proxy_location"] = current["proxy_location"]
    payload["applications"] = keep + list(new_apps)
    return payload


# --------------------------------------------------------------------------
# up


def connect(address: str | None, *, start: bool = False, num_cpus: int | None = None) -> tuple[ServeClient, _cluster.Target, bool]:
    """The cluster to talk to; with ``start``, start the local one if needed."""
    started = False
    try:
        target = _cluster.resolve_target(address)
    except ClusterUnreachable:
        if not start or (address or "").strip() not in ("", "local", "auto"):
            raise
        _cluster.start_head(num_cpus=num_cpus)
        started = True
        target = _cluster.resolve_target(None)
    return ServeClient(target.dashboard_url), target, started


def up(
    serve_path: Path | str,
    *,
    address: str | None = None,
    timeout: float = 900.0,
    wait: bool = True,
    num_cpus: int | None = None,
) -> Iterator[UpEvent]:
    t0 = time.monotonic()
    prepared = prepare(serve_path, local_node=(address or "").strip() in ("", "local", "auto"))
    n_models = sum(len(v) for v in prepared.model_ids.values())
    yield Step(
        f"validated {serve_path}: {len(prepared.app_names)} application(s) "
        f"({', '.join(prepared.app_names)}), {n_models} model(s)"
        + (f"; filled {', '.join(sorted(set(prepared.env_vars_used)))} from the environment" if prepared.env_vars_used else "")
    )
    local_default = (address or "").strip() in ("", "local", "auto")
    if local_default and _cluster.running_state() is None:
        yield Step("starting a local Ray head (127.0.0.1, private ports and temp dir) …")
    client, target, started = connect(address, start=True, num_cpus=num_cpus)
    if started:
        st = target.local
        yield Step(f"started a local Ray head: dashboard {st.dashboard_url}, state {_cluster.state_path()}")
    current = client.status()
    payload = compose(prepared, current, target.local)
    # Ray does not retry a failed app whose config did not change: remove it first.
    failed_same = [
        a.get("name") for a in payload["applications"]
        if a.get("name") in prepared.app_names
        and (current.get("applications") or {}).get(a.get("name"), {}).get("status") in TERMINAL_BAD
        and current["applications"][a.get("name")].get("deployed_app_config") == a
    ]  # fmt: skip
    if failed_same:
        yield Step(f"removing the failed {', '.join(failed_same)} before deploying it again …")
        without = dict(payload, applications=[a for a in payload["applications"] if a.get("name") not in failed_same])
        if without["applications"]:
            client.deploy(without)
        else:
            client.delete_all()
        for _ in wait_gone(client, failed_same, timeout=120):
            pass
        current = client.status()
    # Apps being replaced by a different config: until the controller takes the
    # new config, GET still shows the old version (possibly RUNNING).
    before = current.get("applications") or {}
    stale = {
        a.get("name"): before[a.get("name")].get("last_deployed_time_s")
        for a in payload["applications"]
        if a.get("name") in prepared.app_names and a.get("name") in before
        and before[a.get("name")].get("deployed_app_config") != a
    }
    try:
        client.deploy(payload)
    except DeployFailed as e:
        raise DeployFailed(scrub(e.message, prepared.secrets)) from None
    t_deploy = time.monotonic()
    yield Step(f"deployed to {target.dashboard_url}")

    if not wait:
        st = client.status()
        apps = [a for a in summarize(st, client.url) if a.name in prepared.app_names]
        yield _result(apps, client, target, prepared, time.monotonic() - t0, False, started)
        return

    watcher = _ResourceWatcher(client, prepared.app_names)
    deadline = t_deploy + timeout
    while True:
        st = client.status()
        raw_apps = st.get("applications") or {}
        for name, t_before in list(stale.items()):
            if name in raw_apps and raw_apps[name].get("last_deployed_time_s") != t_before:
                del stale[name]  # the controller has the new config
        if stale and time.monotonic() - t_deploy < 30:
            for name in stale:
                raw_apps.pop(name, None)  # not ours yet: show as not listed
        else:
            stale.clear()
        apps = [a for a in summarize(st, client.url) if a.name in prepared.app_names]
        by_name = {a.name: a for a in apps}
        note = ""
        failed = [a for a in apps if a.status in TERMINAL_BAD]
        if failed:
            raise DeployFailed(scrub(_failure_message(failed[0], st, target, prepared.sources), prepared.secrets + secret_values(st)))
        if len(by_name) == len(prepared.app_names) and all(a.status == "RUNNING" for a in apps):
            yield Progress(time.monotonic() - t0, apps)
            break
        problem = watcher.check(st)
        if problem is not None:
            fatal, text = problem
            if fatal:
                raise DeployFailed(scrub(text, prepared.secrets))
            note = text
        yield Progress(time.monotonic() - t0, apps, note)
        if time.monotonic() > deadline:
            states = ", ".join(f"{a.name} {a.status}" for a in apps) or "not listed yet"
            raise DeployFailed(
                f"timed out after {timeout:.0f}s ({states}){'; ' + note if note else ''}; "
                "the deployment continues on the cluster: see `llmctl status` / `llmctl logs`, or remove it with `llmctl down APP`"
            )
        time.sleep(POLL_S)

    # RUNNING: the HTTP endpoint must list the models.
    base = http_base(st, client.url)
    for app in apps:
        if app.endpoint and prepared.model_ids.get(app.name):
            check_models(app.endpoint, prepared.model_ids[app.name], timeout=30)
    yield _result(apps, client, target, prepared, time.monotonic() - t0, True, started, base)


def _result(apps, client, target, prepared, elapsed, running, started, base=None) -> UpResult:
    endpoint = next((a.endpoint for a in apps if a.endpoint), None)
    ids = [m for name in prepared.app_names for m in prepared.model_ids.get(name, [])]
    return UpResult(
        apps=apps,
        dashboard_url=client.url,
        endpoint=endpoint,
        model_ids=ids,
        elapsed=elapsed,
        running=running,
        local=target.is_local,
        cluster_started=started,
    )


def check_models(endpoint: str, model_ids: list[str], *, timeout: float = 30.0) -> list[str]:
    """``GET {endpoint}/models`` until it lists every id; returns the listed ids."""
    url = endpoint.rstrip("/") + "/models"
    t0 = time.monotonic()
    last = ""
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                data = json.loads(r.read())
            listed = [m.get("id") for m in data.get("data") or []]
            missing = [m for m in model_ids if m not in listed]
            if not missing:
                return listed
            last = f"it lists {listed}, not {missing}"
        except urllib.error.HTTPError as e:
            last = f"HTTP {e.code}"
        except (urllib.error.URLError, OSError, ValueError) as e:
            last = str(getattr(e, "reason", e))
        if time.monotonic() - t0 > timeout:
            raise DeployFailed(f"the app is RUNNING but GET {url} failed: {last}")
        time.sleep(0.5)


# --------------------------------------------------------------------------
# failures


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


def _failure_message(app: AppSummary, status: dict, target: _cluster.Target, sources: dict[str, str] | None = None) -> str:
    from llmctl import logs as _logs

    sources = sources or {}
    parts = [f"application {app.name!r} is {app.status}" + (f": {app.message.splitlines()[0]}" if app.message else "")]
    raw_app = (status.get("applications") or {}).get(app.name) or {}
    for dep in app.deployments:
        if dep.status in ("DEPLOY_FAILED", "UNHEALTHY") and dep.message:
            first = _ANSI.sub("", dep.message.splitlines()[0])
            src = sources.get(dep.name.split(":", 1)[1]) if dep.name.startswith("LLMServer:") else None
            parts.append(f"deployment {dep.name!r}" + (f" (model_source {src})" if src else "") + f" is {dep.status}: {first}")
            reason = reason_from_message(dep.message)
            if reason and reason != first:
                parts.append(reason)
            pids = _PID_RE.findall(dep.message)
            raw_dep = (raw_app.get("deployments") or {}).get(dep.name) or {}
            pids += [str(r["pid"]) for r in raw_dep.get("replicas") or [] if r.get("pid")]
            pid = int(pids[-1]) if pids else None
            tail = _logs.replica_log_tail(target, pid, lines=20, app=app.name, deployment=dep.name)
            if tail:
                parts.append(f"--- last lines of the replica's log{f' (pid {pid})' if pid else ''} ---")
                parts.append(tail)
    parts.append(f"see `llmctl logs {app.name}`; remove it with `llmctl down {app.name}`")
    return "\n".join(parts)


# --------------------------------------------------------------------------
# resources


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


class _ResourceWatcher:
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
                if dep.get("status") == "HEALTHY":
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


# --------------------------------------------------------------------------
# status


@dataclass
class StatusReport:
    dashboard_url: str
    local: bool
    http_base: str | None
    apps: list[AppSummary]

    @property
    def all_running(self) -> bool:
        return all(a.status == "RUNNING" for a in self.apps)

    def to_json(self) -> dict:
        return {
            "dashboard_url": self.dashboard_url,
            "local_cluster": self.local,
            "http": self.http_base,
            "all_running": self.all_running,
            "applications": [a.to_json() for a in self.apps],
        }


def status(address: str | None = None) -> StatusReport:
    target = _cluster.resolve_target(address)
    client = ServeClient(target.dashboard_url, timeout=5)
    st = client.status()
    apps = summarize(st, client.url)
    secrets = secret_values(st)
    if secrets:  # Ray can echo a config (with its env vars) in an error message
        for a in apps:
            a.message = scrub(a.message, secrets)
            for d in a.deployments:
                d.message = scrub(d.message, secrets)
    return StatusReport(target.dashboard_url, target.is_local, http_base(st, client.url), apps)


# --------------------------------------------------------------------------
# down


@dataclass
class DownResult:
    removed: list[str]
    remaining: list[str]
    cluster_stopped: bool
    stop: _cluster.StopResult | None = None


def down(
    app: str | None = None,
    *,
    address: str | None = None,
    stop_cluster: bool = False,
    timeout: float = 120.0,
) -> Iterator[Union[Step, DownResult]]:
    """Delete one app (PUT the config without it) or all (DELETE), wait until
    gone; with ``stop_cluster`` also stop the local head llmctl started."""
    local_default = (address or "").strip() in ("", "local", "auto")
    if stop_cluster and not local_default:
        target = _cluster.resolve_target(address)
        if not target.is_local:
            raise UsageError("--cluster stops only the local cluster llmctl started; this address is another cluster")
    try:
        target = _cluster.resolve_target(address)
    except ClusterUnreachable:
        if stop_cluster and local_default:
            # Nothing answers; stop whatever the state file still names (idempotent).
            res = _cluster.stop_head() if _cluster.load_state() is not None else None
            yield DownResult([], [], True, res)
            return
        raise
    client = ServeClient(target.dashboard_url)
    removed: list[str] = []
    if stop_cluster and app is None and target.is_local:
        # The whole head goes away: no need to delete the apps one by one.
        try:
            removed = list((client.status().get("applications") or {}).keys())
        except ClusterUnreachable:
            removed = []
        yield Step("stopping the local Ray head …")
        stop = _cluster.stop_head(target.local)
        if stop.remaining:
            raise DeployFailed(f"processes of the local cluster are still running after SIGKILL: {stop.remaining}")
        yield DownResult(removed, [], True, stop)
        return
    try:
        st = client.status()
    except ClusterUnreachable:
        if stop_cluster and target.is_local:
            st = None
        else:
            raise
    if st is not None:
        present = list((st.get("applications") or {}).keys())
        if app is not None and app not in present:
            if not stop_cluster:
                raise UsageError(f"no application named {app!r} on {target.dashboard_url} (apps: {', '.join(present) or 'none'})")
        elif app is None or present == [app]:
            if present:
                client.delete_all()
                removed = present
        else:
            rest = [c for c in deployed_configs(st) if c.get("name") != app]
            payload = {"applications": rest}
            cur_http = {k: v for k, v in (st.get("http_options") or {}).items() if k in ("host", "port") and v is not None}
            if cur_http:
                payload["http_options"] = cur_http
            if st.get("proxy_location"):
                payload["proxy_location"] = st["proxy_location"]
            client.deploy(payload)
            removed = [app]
        if removed:
            yield Step(f"deleting {', '.join(removed)} …")
            for _ in wait_gone(client, removed, timeout=timeout):
                pass
    remaining = []
    if st is not None and not stop_cluster:
        remaining = list((client.status().get("applications") or {}).keys())
    stop = None
    if stop_cluster:
        yield Step("stopping the local Ray head …")
        stop = _cluster.stop_head(target.local)
        if stop.remaining:
            raise DeployFailed(f"processes of the local cluster are still running after SIGKILL: {stop.remaining}")
    yield DownResult(removed, remaining, stop_cluster, stop)
