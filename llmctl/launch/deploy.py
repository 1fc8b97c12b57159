"""`llmctl up`, `status` and `down` as a core with no UI.

``up()`` runs to completion and returns an :class:`UpResult`; progress goes
to an optional ``on_event`` callback. ``iter_up()`` is the same as a
generator: it yields :class:`Step` (one-off facts: validated, cluster
started, deployed) and :class:`Progress` (a snapshot of the apps being
deployed: status, deployments, replica states, elapsed seconds) and ends
with the :class:`UpResult`. Both raise llmctl.errors types; they never print.

How a serve file reaches the cluster
------------------------------------
``validate.load_deployable`` returns the serve config with every
``llm_configs`` file path replaced by the parsed LLMConfig, so the payload
PUT to the cluster is self-contained: it works wherever ``llmctl up`` runs and
whatever the cluster's working directory is.

Tokens for gated models
-----------------------
A model config names the variable, never the value:
``runtime_env: {env_vars: {HF_TOKEN: "${HF_TOKEN}"}}``. By default ``up``
never sends a value:
- to the local head it starts, the Hugging Face token goes through an
  in-memory token file (``HF_TOKEN_PATH``, see launch/tokens.py) and the
  ``HF_TOKEN`` entry is left out of the payload: Ray Serve LLM copies a
  replica's ``HF_TOKEN`` into the runtime_env of its download tasks, which
  Ray logs and its state API returns. Other ``${VAR}`` references are filled
  by Ray from the head's environment (checked; the restart is named when one
  is missing);
- to a cluster llmctl did not start, the references go as they are and Ray
  fills them from the nodes' environment (``ray._private.utils.update_envs``:
  ``os.path.expandvars`` on the worker; an unset one becomes "").
``send_token`` (``--send-token``) fills the values into the payload instead, with a warning:
Ray's dashboard API returns runtime_env values to every client. Whatever
value llmctl learns is scrubbed from the text it shows (Ray's errors, logs).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Callable, Generator, Iterator

from llmctl.errors import DeployFailed, PreflightFailed, UsageError, param
from llmctl import serve_facts as sf
from llmctl.launch import address as _address
from llmctl.launch import cluster as _cluster
from llmctl.launch import preflight as _preflight
from llmctl.launch import tokens as _tokens
from llmctl.launch import update as _update
from llmctl.latency import POLICY_MODULE, POLICY_PATH, policy_apps
from llmctl.launch.prepare import Prepared, prepare
from llmctl.launch.events import PlanReady, Progress, Step, UpEvent, UpResult, run_to_result
from llmctl.launch.watch import check_models, wait_running  # noqa: F401 (check_models: re-exported)
from llmctl.launch.serve_api import ServeClient, deployed_configs, scrub, secret_values, summarize


# --------------------------------------------------------------------------
# composing what to PUT




def compose(prepared: Prepared, current: dict, local: _cluster.ClusterState | None, *,
            dashboard_url: str | None = None, http_host: str | None = None, recorded: dict | None = None) -> dict:
    """The full serve config to PUT: the apps already running (minus those
    being replaced) plus the new ones, and the cluster-wide options
    (:func:`llmctl.launch.update.cluster_wide`: the file's, else the
    cluster's, else what llmctl last sent there, ``recorded``).

    Where Serve listens belongs to the target: the local head llmctl started
    always binds 127.0.0.1 (its own port); a cluster reached at a non-loopback
    address gets the file's ``http_options.host`` (or ``http_host``), and a
    loopback host there is refused with the fix — its proxies would accept
    connections from their own node only."""
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
    given = {k: v for k, v in prepared.config.items() if k != "applications"}
    payload = _update.cluster_wide(current, given, recorded or {})
    http = dict(given.get("http_options") or {})
    cur_http = {k: v for k, v in (current.get("http_options") or {}).items() if k in sf.HTTP_KEYS and v is not None}
    if local is not None:
        http.update({"host": sf.LOOPBACK_HOST, "port": local.serve_http_port})
        grpc = dict(payload.get("grpc_options") or {})
        grpc.setdefault("port", local.ports.get("serve_grpc"))
        payload["grpc_options"] = grpc
    else:
        if http_host:
            http["host"] = http_host
        elif not http and cur_http:
            http = {k: cur_http[k] for k in sf.HTTP_KEYS[:2] if k in cur_http}
        import urllib.parse

        remote = dashboard_url is not None and not sf.is_loopback(urllib.parse.urlsplit(dashboard_url).hostname)
        if remote and sf.is_loopback(http.get("host")):
            raise UsageError(
                f"http_options.host is {http['host']}: on the cluster at {dashboard_url} Serve's proxies would accept "
                f"connections from their own node only, so the endpoint is unreachable from here; pass "
                f"`{param('http_host', '0.0.0.0')}` (or the nodes' address), or write the file with "
                "`gen-config --http-host 0.0.0.0`", param="http_host")
    if http:
        payload["http_options"] = http
    payload["applications"] = keep + list(new_apps)
    return payload


# --------------------------------------------------------------------------
# up


def connect(address: str | None, *, start: bool = False, num_cpus: int | None = None,
            num_gpus: int | None = None, ray_token_env: str | None = None) -> tuple[ServeClient, _address.Target, bool]:
    """The cluster to talk to; with ``start``, start the local one if needed
    (``num_gpus`` None: Ray detects the GPUs)."""
    started = False
    if start and _local_default(address):
        # Under the start lock: a head another llmctl is starting is waited for, never
        # taken while its dashboard is not up yet (its state file exists from the start).
        _tokens.require_memfd()  # Linux only: elsewhere one line naming the way out (address), before anything starts
        _, started = _cluster.ensure_head(num_cpus=num_cpus, num_gpus=num_gpus)
    target = _address.resolve_target(address, ray_token_env)
    return ServeClient(target.dashboard_url, token=target.ray_token), target, started


def token_steps(prepared: Prepared, target: _address.Target, environ: dict[str, str] | None = None) -> list[Step]:
    """Where the ``${VAR}`` references of a deployment get their values, when
    they are sent as references (the default): on the local head, from the
    head's own environment — checked here, the fix named when it lacks one; on
    a cluster llmctl did not start, from its nodes' environment (a warning: it
    cannot be checked from here)."""
    names = sorted(set(prepared.env_vars_used))
    if not names:
        return []
    env = os.environ if environ is None else environ
    if target.local is not None:
        head = _cluster.head_environ(target.local)
        if head is None:
            return [Step(f"warning: cannot read the local head's environment to check {', '.join(names)}")]
        missing = [v for v in names if not head.get(v)]
        if missing:
            raise UsageError(
                f"the local Ray head was started without {', '.join(missing)} in its environment, and Ray fills "
                f"${{{missing[0]}}} from the node's environment: export {missing[0]}=… and restart the head "
                f"(`llmctl down --cluster`, then `llmctl up` again); {param('send_token', True)} sends the value instead "
                "(readable by every dashboard client)")
        stale = [v for v in names if env.get(v) and env.get(v) != head.get(v)]
        return [Step(f"{', '.join(names)}: sent as ${{…}} references, filled by Ray from the local head's environment "
                     "(the values never reach Ray's API or the config)")] + \
            [Step(f"warning: {v} in this shell differs from the one the local head was started with; the head's is used "
                  "(restart the head to change it)") for v in stale]
    return [Step(f"warning: {', '.join(names)} sent as ${{…}} references: Ray fills them from the environment of the "
                 "cluster's nodes, which must hold them (set before `ray start`); unset, they become empty strings. "
                 f"{param('send_token', True)} sends the values instead, readable by every dashboard client")]


def cluster_versions_steps(client: ServeClient, config: dict) -> list[Step]:
    """The Ray and vLLM on the cluster's head node, with the version guard's verdict."""
    from llmctl.launch.versions import report

    r = report(client, config)
    return ([Step(r.info)] if r.info else []) + [Step(f"warning: {w}") for w in r.warnings]


# --------------------------------------------------------------------------
# up, seam by seam: prepare → connect (start the head) → tokens → preflight →
# deploy → watch (launch/watch.py). Each seam is a generator of Steps that
# returns what the next one needs.


def _local_default(address: str | None) -> bool:
    return (address or "").strip() in ("", "local", "auto")


def _prepare_steps(serve_path: Path | str, address: str | None, send_token: bool,
                   http_host: str | None) -> Generator[Step, None, Prepared]:
    """Validate and load the file; the warnings that need no cluster."""
    local_default = _local_default(address)
    starting = local_default and _cluster.running_state() is None
    # A head llmctl starts inherits this environment: the variables must be set now.
    prepared = prepare(serve_path, local_node=local_default, send_tokens=send_token or starting)
    n_models = sum(len(v) for v in prepared.model_ids.values())
    yield Step(
        f"validated {serve_path}: {len(prepared.app_names)} application(s) "
        f"({', '.join(prepared.app_names)}), {n_models} model(s)"
    )
    if local_default:  # the API key's variable must be where the ingress replica will read it
        from llmctl.launch import apikey

        running = _cluster.running_state()
        head_env = _cluster.head_environ(running) if running is not None else None
        for w in apikey.check_local_key(prepared.config, head_env, os.environ, starting):
            yield Step(f"warning: {w}")
    if starting and not send_token and prepared.env_vars_used:
        prepared = prepare(serve_path, local_node=True, send_tokens=False)  # checked above; keep the references
    if send_token and prepared.env_vars_used:
        yield Step(f"warning: {param('send_token', True)}: the values of {', '.join(sorted(set(prepared.env_vars_used)))} "
                   "go into the deployed config, which Ray's dashboard API returns to every client and Ray logs")
    if local_default:  # the local head runs the vLLM installed here
        from llmctl.compat import warning as version_warning

        version = version_warning()
        if version:
            yield Step(f"warning: {version}")
        if http_host:
            raise UsageError(f"{param('http_host')}: the local head llmctl starts serves on {sf.LOOPBACK_HOST} only; "
                             f"{param('http_host')} is for a cluster given with {param('address')}", param="http_host")
    return prepared


def _connect_steps(address: str | None, num_cpus: int | None, num_gpus: int | None = None,
                   ray_token_env: str | None = None) -> Generator[Step, None, tuple[ServeClient, _address.Target, bool]]:
    """The cluster to deploy to; the local head started when there is none."""
    if _local_default(address) and _cluster.running_state() is None:
        _tokens.require_memfd()
        yield Step(f"starting a local Ray head ({sf.LOOPBACK_HOST}, private ports and temp dir) …")
    client, target, started = connect(address, start=True, num_cpus=num_cpus, num_gpus=num_gpus, ray_token_env=ray_token_env)
    if started:
        from llmctl.launch.raytoken import access_hint

        yield Step(f"started a local Ray head: state {_cluster.state_path()}; "
                   + access_hint(target.local.dashboard_url, target.local.ray_token_file))
    return client, target, started


def _token_steps(prepared: Prepared, target: _address.Target) -> Iterator[Step]:
    """The Hub token handed to the local head in memory; where the other references get their values."""
    if target.local is not None:
        msgs, handled, value = _tokens.hand_over(prepared.config, target.local.pid, target.local.token_fd, os.environ)
        prepared.env_vars_used = [v for v in prepared.env_vars_used if v not in handled]
        if value:
            prepared.secrets.append(value)
        yield from (Step(m) for m in msgs)
    yield from token_steps(prepared, target)


def _preflight_steps(prepared: Prepared, client: ServeClient, target: _address.Target) -> Iterator[Step]:
    """Can the cluster hold it? PreflightFailed (nothing deployed) when not."""
    pf = _preflight.check(prepared.config, client)
    for w in pf.warnings:
        yield Step(f"warning: {w}")
    if not pf.ok:
        raise PreflightFailed("\n".join(pf.errors) + "\nnothing was deployed (`llmctl check` repeats this; "
                              f"{param('preflight', False)} skips it)")
    yield Step(f"preflight: the cluster can hold it ({len(pf.nodes)} node(s), {pf.seconds:.2f}s)")
    if target.local is None:  # a cluster llmctl did not start: its replicas run the vLLM installed there
        yield from cluster_versions_steps(client, prepared.config)


def _deploy_steps(prepared: Prepared, client: ServeClient, target: _address.Target, http_host: str | None,
                  dry_run: bool = False, confirm: Callable | None = None) -> Generator[UpEvent, None, tuple[dict, float] | None]:
    """The plan (llmctl/rollout.py), then PUT the apps (with the others already
    running). Returns the apps being replaced ({name: their
    last_deployed_time_s}) and when the PUT returned (or was found needless:
    :func:`update.unchanged`); None for a dry run."""
    current = client.status()
    key = _update.history_key(target, client)
    recorded = _update.recorded_globals(key)
    payload = compose(prepared, current, target.local, dashboard_url=target.dashboard_url, http_host=http_host,
                      recorded=recorded)
    payload, the_plan = _update.lift_and_plan(current, payload, prepared.app_names)
    yield PlanReady(_update.scrub_plan(the_plan, prepared.secrets + secret_values(current)))
    problem = _update.surge_check(the_plan, client)
    if problem:
        raise PreflightFailed(problem + f"; nothing was deployed ({param('preflight', False)} skips this check)")
    if dry_run:
        return None
    if confirm is not None and not confirm(the_plan):
        raise DeployFailed("the plan was not confirmed; nothing was deployed")
    current = yield from _update.remove_failed_same(client, payload, current, prepared.app_names)
    # Apps being replaced by a different config: until the controller takes the
    # new config, GET still shows the old version (possibly RUNNING).
    before = current.get("applications") or {}
    stale = {
        a.get("name"): before[a.get("name")].get("last_deployed_time_s")
        for a in payload["applications"]
        if a.get("name") in prepared.app_names and a.get("name") in before
        and before[a.get("name")].get("deployed_app_config") != a
    }
    if _update.unchanged(the_plan, payload, current, prepared.app_names, recorded):
        t_deploy = time.monotonic()
        yield Step(f"{target.dashboard_url} already has this config: nothing sent")
    else:
        try:
            client.deploy(payload)
        except DeployFailed as e:
            raise DeployFailed(scrub(e.template, prepared.secrets)) from None
        t_deploy = time.monotonic()
        yield Step(f"deployed to {target.dashboard_url}")
        _update.record_globals(key, payload)
    _update.record(key, [a for a in payload["applications"] if a.get("name") in prepared.app_names],
                   str(prepared.source), prepared.token_refs())
    return stale, t_deploy


@dataclass(frozen=True)
class UpOptions:
    """How :func:`up` / :func:`iter_up` deploy (the CLI builds one from its flags).

    ``address``: a dashboard URL, GCS ``host:port`` or ``ray://host:port``
    (default: the local head llmctl started, started now if none runs);
    ``ray_token_env``: the variable holding a remote cluster's Ray token
    (default: Ray's conventions); ``timeout``: seconds to wait for RUNNING;
    ``wait=False`` returns once Ray took the config; ``num_cpus`` /
    ``num_gpus``: of a local head started now (``num_gpus`` None: Ray detects
    them); ``preflight=False`` skips the resource check; ``send_token`` sends
    the values of ``${VAR}`` references instead of the references;
    ``http_host``: where Serve listens on a cluster given with ``address``;
    ``dry_run`` stops after the plan; ``confirm(plan)`` returning False stops
    there too (DeployFailed); ``source``: what the history names (default: the
    file)."""

    address: str | None = None
    ray_token_env: str | None = None
    timeout: float = 900.0
    wait: bool = True
    num_cpus: int | None = None
    num_gpus: int | None = None
    preflight: bool = True
    send_token: bool = False
    http_host: str | None = None
    dry_run: bool = False
    confirm: Callable | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise UsageError(f"{param('timeout')} must be positive (got {self.timeout:g})", param="timeout")

    @classmethod
    def of(cls, options: "UpOptions | None" = None, **settings) -> "UpOptions":
        """``options`` (default: the defaults) with the keyword settings given
        laid over it; an ``address`` or ``ray_token_env`` of None keeps the
        one of ``options``. An unknown setting is a TypeError naming the valid ones."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(settings) - set(names))
        if unknown:
            raise TypeError(f"up: unknown option(s) {', '.join(unknown)} (UpOptions has {', '.join(names)})")
        given = {k: v for k, v in settings.items() if v is not None or k not in ("address", "ray_token_env")}
        return replace(options or cls(), **given)


def iter_up(serve_path: Path | str, options: UpOptions | None = None, *, address: str | None = None,
            ray_token_env: str | None = None, **settings) -> Iterator[UpEvent]:
    """:func:`up` as a generator: yields Step and Progress events as they
    happen and ends with the UpResult (the CLI's progress display)."""
    o = UpOptions.of(options, address=address, ray_token_env=ray_token_env, **settings)
    t0 = time.monotonic()
    prepared = yield from _prepare_steps(serve_path, o.address, o.send_token, o.http_host)
    prepared.source = o.source or prepared.source  # what the history names (rollback: the entry)
    if o.dry_run and _local_default(o.address) and _cluster.running_state() is None:  # a dry run starts nothing
        yield PlanReady(_update.plan_without_cluster(prepared.config, prepared.app_names))
        yield Step("no local Ray head runs: `llmctl up` would start one")
        yield UpResult([], "", None, [m for n in prepared.app_names for m in prepared.model_ids.get(n, [])], 0.0, False, True)
        return
    client, target, started = yield from _connect_steps(o.address, o.num_cpus, o.num_gpus, o.ray_token_env)
    with client:
        if not o.send_token:
            yield from _token_steps(prepared, target)
        if o.preflight:
            yield from _preflight_steps(prepared, client, target)
        from llmctl.launch import apikey

        yield from apikey.deliver_steps(prepared.config, client, target)  # before the plan: it names the package
        uri = apikey.deliver(prepared.config, client, policy_apps(prepared.config), POLICY_MODULE)
        if uri:
            yield Step(f"latency autoscaling policy ({POLICY_PATH}) uploaded to the cluster as {uri} (runtime_env py_modules)")
        deployed = yield from _deploy_steps(prepared, client, target, o.http_host, o.dry_run, o.confirm)
        if deployed is None or not o.wait:  # a dry run, or not waiting for RUNNING
            apps = [a for a in summarize(client.status(), client.url) if a.name in prepared.app_names]
            yield _result(apps, client, target, prepared, time.monotonic() - t0, False, started)
            return
        stale, t_deploy = deployed
        apps = yield from wait_running(client, target, prepared, stale, t0=t0, t_deploy=t_deploy, timeout=o.timeout)
        # RUNNING: the HTTP endpoint must list the models.
        for app in apps:
            if app.endpoint and prepared.model_ids.get(app.name):
                headers, note = apikey.check_headers(prepared.config, app.name, target)
                if note:
                    yield Step(note)
                else:
                    check_models(app.endpoint, prepared.model_ids[app.name], timeout=30, headers=headers)
        yield _result(apps, client, target, prepared, time.monotonic() - t0, True, started)


def up(serve_path: Path | str, options: UpOptions | None = None, *, address: str | None = None,
       ray_token_env: str | None = None, on_event: Callable[[Step | Progress], None] | None = None, **settings) -> UpResult:
    """Validate, (start a local head,) preflight, deploy, wait until RUNNING;
    returns the :class:`UpResult` (endpoint, model ids, apps).

    How: an :class:`UpOptions`, or its fields as keywords
    (``up(path, address=..., timeout=...)``), or both (the keywords win).
    Before the PUT the plan (:class:`PlanReady`, llmctl/rollout.py) goes to
    ``on_event``, then progress (a :class:`Step` or :class:`Progress`;
    ``print`` shows one line each). Raises ValidationFailed / PreflightFailed
    (exit 2), DeployFailed (exit 1), ClusterUnreachable (exit 3)."""
    return run_to_result(iter_up(serve_path, options, address=address, ray_token_env=ray_token_env, **settings),
                         UpResult, on_event)


def _result(apps, client, target, prepared, elapsed, running, started) -> UpResult:
    endpoint = next((a.endpoint for a in apps if a.endpoint), None)
    ids = [m for name in prepared.app_names for m in prepared.model_ids.get(name, [])]
    return UpResult(
        apps=apps,
        dashboard_url=client.url,
        endpoint=endpoint,
        model_ids=ids,
        pooling=dict(prepared.pooling),
        elapsed=elapsed,
        running=running,
        api_key_env=next((a.api_key_env for a in apps if a.api_key_env), None),
        local=target.is_local,
        cluster_started=started,
    )
