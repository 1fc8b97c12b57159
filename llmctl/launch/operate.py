"""`status` and `down` as a core with no UI."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional, Union

from llmctl.errors import ClusterUnreachable, DeployFailed, UsageError, param
from llmctl import serve_facts as sf
from llmctl.launch import address as _address
from llmctl.launch import cluster as _cluster
from llmctl.launch.events import Step, run_to_result
from llmctl.launch.serve_api import AppSummary, ServeClient, deployed_configs, http_base, scrub, secret_values, summarize, wait_gone

@dataclass
class StatusReport:
    dashboard_url: str
    local: bool
    http_base: str | None
    apps: list[AppSummary]
    # failed apps: what llmctl.launch.failures recognises, {app: [(model id, Diagnosis)]}
    diagnoses: dict = field(default_factory=dict)
    # the cluster's nodes, each with its Serve proxy (Serve runs one per node)
    nodes: list[dict] = field(default_factory=list)
    # the local head's Ray token file (0600), None for another cluster or a head without token auth
    ray_token_file: str | None = None

    @property
    def all_running(self) -> bool:
        return all(a.status == sf.APP_RUNNING for a in self.apps)

    def to_json(self) -> dict:
        return {
            "dashboard_url": self.dashboard_url,
            "local_cluster": self.local,
            "http": self.http_base,
            "all_running": self.all_running,
            "applications": [a.to_json() for a in self.apps],
            "nodes": self.nodes,
            "ray_token_file": self.ray_token_file,
            "diagnoses": {app: [{"model_id": m, "code": d.code, "cause": d.cause, "fix": d.fix, "changes": d.changes}
                                for m, d in found] for app, found in self.diagnoses.items()},
        }


def status(address: str | None = None, *, ray_token_env: str | None = None) -> StatusReport:
    """The applications on a cluster (the local head llmctl started, or
    ``address``: a dashboard URL, GCS ``host:port`` or ``ray://host:port``):
    each app's status, deployments, replica states and Serve's autoscaling
    decisions, the endpoint a client can reach, the nodes with their Serve
    proxies, and for a failed app the cause and fix llmctl found in its logs.
    ``ray_token_env``: the variable holding a remote cluster's Ray token.
    Reads Ray's REST API only. Raises ClusterUnreachable (exit 3) or
    RequestTimeout (exit 1)."""
    target = _address.resolve_target(address, ray_token_env)
    with ServeClient(target.dashboard_url, token=target.ray_token) as client:  # the default wait: a head just started or busy
        st = client.status()
        nodes = cluster_nodes(client, st)
    apps = summarize(st, client.url)
    secrets = secret_values(st)
    if secrets:  # Ray can echo a config (with its env vars) in an error message
        for a in apps:
            a.message = scrub(a.message, secrets)
            for d in a.deployments:
                d.message = scrub(d.message, secrets)
    diagnoses = {}
    for a in apps:
        if sf.is_failed(a.status):
            from llmctl.launch.logs import failed_app_diagnoses

            diagnoses[a.name] = failed_app_diagnoses(target, a.name, st)
    return StatusReport(target.dashboard_url, target.is_local, http_base(st, client.url), apps, diagnoses, nodes,
                        target.local.ray_token_file if target.local is not None else None)


def cluster_nodes(client: ServeClient, st: dict) -> list[dict]:
    """Each node: id, IP, head or not, state, and its Serve proxy's status and
    URL (proxies listen on ``http_options.host`` of every node that has one)."""
    proxies = st.get("proxies") or {}
    port = (st.get("http_options") or {}).get("port")
    out = []
    try:
        nodes = client.nodes()
    except Exception:  # noqa: BLE001 - the node list is extra information; status works without it
        return []
    for n in nodes:
        nid = n.get("node_id")
        proxy = proxies.get(nid) or {}
        ip = n.get("node_ip")
        out.append({"node_id": nid, "ip": ip, "head": bool(n.get("is_head_node")), "state": n.get("state"),
                    "proxy": proxy.get("status"), "proxy_url": f"http://{ip}:{port}" if proxy and port else None})
    return sorted(out, key=lambda x: (not x["head"], x["ip"] or ""))


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
    on_event: Optional[Callable[[Step], None]] = None,
    ray_token_env: str | None = None,
) -> DownResult:
    """Delete one app (PUT the config without it) or all (DELETE, ``app``
    None), wait until gone; with ``stop_cluster`` also stop the local head
    llmctl started. Returns a :class:`DownResult`; progress goes to
    ``on_event``. Raises UsageError (no such app), ClusterUnreachable."""
    return run_to_result(iter_down(app, address=address, stop_cluster=stop_cluster, timeout=timeout,
                                   ray_token_env=ray_token_env), DownResult, on_event)


def iter_down(
    app: str | None = None,
    *,
    address: str | None = None,
    stop_cluster: bool = False,
    timeout: float = 120.0,
    ray_token_env: str | None = None,
) -> Iterator[Union[Step, DownResult]]:
    """:func:`down` as a generator of Steps ending in the DownResult."""
    local_default = (address or "").strip() in ("", "local", "auto")
    if stop_cluster and not local_default:
        target = _address.resolve_target(address, ray_token_env)
        if not target.is_local:
            raise UsageError(f"{param('stop_cluster', True)} stops only the local cluster llmctl started; this address is "
                             "another cluster", param="stop_cluster")
    try:
        target = _address.resolve_target(address, ray_token_env)
    except ClusterUnreachable:
        if stop_cluster and local_default:
            # Nothing answers; stop whatever the state file still names (idempotent).
            res = _cluster.stop_head() if _cluster.load_state() is not None else None
            yield DownResult([], [], True, res)
            return
        raise
    with ServeClient(target.dashboard_url, token=target.ray_token) as client:
        yield from _down(client, target, app, stop_cluster, timeout)


def _down(client: ServeClient, target: _address.Target, app: str | None, stop_cluster: bool,
          timeout: float) -> Iterator[Union[Step, DownResult]]:
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
            from llmctl.launch import update as _update

            rest = [c for c in deployed_configs(st) if c.get("name") != app]
            key = _update.history_key(target, client)
            payload = {**_update.cluster_wide(st, {}, _update.recorded_globals(key)), "applications": rest}
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
