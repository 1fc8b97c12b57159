"""Ray Serve's REST API on the dashboard port (httpx).

No ``import ray`` here: ``llmctl status`` is one HTTP GET (~15 ms) where
``serve status`` spends ~1 s importing Ray. The calls used (Ray 2.60):

- ``GET/PUT/DELETE /api/serve/applications/`` — status, deploy a whole serve
  config (what ``serve deploy`` sends), delete every app.
- ``GET /api/v0/placement_groups?detail=1`` and ``GET /api/v0/nodes?detail=1``
  (the state API) — to tell "waiting for resources the cluster does not have"
  from "starting slowly".
- ``GET /api/v0/logs`` / ``/api/v0/logs/file`` — log files of a remote cluster.
- ``POST/GET/DELETE /api/jobs/`` — a short job on the head node (the versions
  of Ray and vLLM installed there, :mod:`llmctl.launch.versions`).

Errors: nothing answering -> :class:`ClusterUnreachable` (exit 3); Ray
rejecting a config -> :class:`DeployFailed` with Ray's own message.
"""

from __future__ import annotations

import json
import logging
import re
import urllib.parse
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator

import httpx

# httpx logs every request at INFO; Ray's logging set-up would print them.
logging.getLogger("httpx").setLevel(logging.WARNING)
logging.getLogger("httpcore").setLevel(logging.WARNING)

from llmctl.errors import ClusterUnreachable, DeployFailed, LlmctlError, RequestTimeout
from llmctl import serve_facts as sf
from llmctl.builders import app_llm_configs, key_settings, llm_deployments
from llmctl.secrets import literal_secret

APPS_PATH = "/api/serve/applications/"


class HTTPFailure(LlmctlError):
    """The dashboard answered with an HTTP error (carries status and body)."""

    def __init__(self, status: int, body: str, url: str):
        self.status = status
        self.body = body
        self.url = url
        super().__init__(f"{url}: HTTP {status}: {_short(body)}")


def _short(text: str, limit: int = 2000) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + " …"


class ServeClient:
    """A thin client of one cluster's dashboard (``http://host:port``), on httpx.

    Nothing listening, a refused or timed-out connection: ClusterUnreachable
    (exit 3). Connected but no answer in time: RequestTimeout (exit 1) — the
    cluster is there but slow, and a deploy may still be applied.

    Close it (``with ServeClient(url) as c:`` or ``close()``): its keep-alive
    connection is a socket, and a socket left for the garbage collector is
    closed by a finalizer that runs Python code (the ResourceWarning's
    ``repr``) and then restores the exception state it saved — a Ctrl-C
    handled during it is lost (the `up --follow` that kept following)."""

    def __init__(self, dashboard_url: str, *, timeout: float = 10.0, token: str | None | object = ...):
        """``token``: the cluster's Ray token, sent as ``Authorization: Bearer``;
        by default the local head's own or a remote cluster's by Ray's
        conventions (:func:`llmctl.launch.address.ray_token_for`)."""
        from llmctl.launch import raytoken

        self.url = dashboard_url.rstrip("/")
        self.timeout = timeout
        if token is ...:
            from llmctl.launch.address import ray_token_for

            token = ray_token_for(self.url)
        self.token = token if isinstance(token, str) and token else None
        self._headers = raytoken.headers(self.token)
        self._http = httpx.Client(headers={"Accept": "application/json", **self._headers}, trust_env=False)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "ServeClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ----------------------------------------------------------
    def _request(self, method: str, path: str, body: Any = None, *, timeout: float | None = None,
                 content: bytes | None = None) -> tuple[int, bytes]:
        wait = timeout or self.timeout
        try:
            r = self._http.request(method, self.url + path, json=body if content is None else None, content=content,
                                   timeout=httpx.Timeout(wait, connect=min(wait, 10.0)))
        except (httpx.ConnectError, httpx.ConnectTimeout) as e:
            from llmctl.launch.address import no_cluster_message

            raise ClusterUnreachable(f"{no_cluster_message(self.url)} ({_reason(e)})") from None
        except httpx.TimeoutException:
            raise RequestTimeout(
                f"{self.url}{path}: the dashboard took the connection but did not answer {method} within {wait:g}s; "
                "the cluster is reachable but busy (see `llmctl status`)"
            ) from None
        except httpx.TransportError as e:
            from llmctl.launch.address import no_cluster_message

            raise ClusterUnreachable(f"{no_cluster_message(self.url)} ({_reason(e)})") from None
        if r.status_code in (401, 403) and "authentication token" in r.text:
            from llmctl.launch.raytoken import auth_error

            raise auth_error(self.url, r.status_code, self.token is not None) from None
        if r.status_code >= 400:
            raise HTTPFailure(r.status_code, _error_text(r.text), self.url + path)
        return r.status_code, r.content

    def _json(self, method: str, path: str, body: Any = None, **kw) -> Any:
        _, raw = self._request(method, path, body, **kw)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise LlmctlError(f"{self.url}{path}: not JSON (is this a Ray dashboard?)") from None

    # -- Serve -------------------------------------------------------------
    def status(self) -> dict:
        """``GET /api/serve/applications/`` as a dict (raises ClusterUnreachable)."""
        try:
            data = self._json("GET", APPS_PATH)
        except HTTPFailure as e:
            if e.status == 404:
                raise ClusterUnreachable(f"{self.url} answers but has no Serve API (not a Ray dashboard, or Ray < 2.x)") from None
            raise
        return data or {}

    def deploy(self, config: dict) -> None:
        """``PUT`` a whole serve config. Ray replaces the set of apps with it."""
        try:
            self._request("PUT", APPS_PATH, config, timeout=max(self.timeout, 60))
        except HTTPFailure as e:
            raise DeployFailed(f"Ray rejected the config: {e.body}") from None
        except RequestTimeout as e:
            raise RequestTimeout(f"{e.template}; the config may still be applied") from None

    def delete_all(self) -> None:
        self._request("DELETE", APPS_PATH, timeout=max(self.timeout, 60))

    def session_name(self) -> str | None:
        """The Ray session of the cluster (``GET /api/version``): new at every
        start of a cluster, so two clusters behind one address differ."""
        try:
            data = self._json("GET", "/api/version")
        except (HTTPFailure, LlmctlError):
            return None
        return (data or {}).get("session_name") or None

    # -- state API -----------------------------------------------------------
    def _state_list(self, resource: str, **params: str) -> list[dict]:
        q = urllib.parse.urlencode({"detail": "1", "limit": "1000", **params})
        data = self._json("GET", f"/api/v0/{resource}?{q}")
        try:
            return list(data["data"]["result"]["result"])
        except (KeyError, TypeError):
            return []

    def placement_groups(self) -> list[dict]:
        return self._state_list("placement_groups")

    def nodes(self) -> list[dict]:
        return self._state_list("nodes")

    def node_usage(self) -> dict[str, str]:
        """Per node id, the dashboard's "used/total resource" lines (``GET /nodes?view=summary``)."""
        try:
            data = self._json("GET", "/nodes?view=summary")
        except HTTPFailure:
            return {}
        try:
            return dict(data["data"]["node_logical_resources"] or {})
        except (KeyError, TypeError):
            return {}

    def actors(self, **filters: str) -> list[dict]:
        return self._state_list("actors", **filters)

    # -- logs (remote clusters) ----------------------------------------------
    def list_logs(self, node_id: str, glob: str | None = None) -> dict[str, list[str]]:
        params = {"node_id": node_id}
        if glob:
            params["glob"] = glob
        data = self._json("GET", "/api/v0/logs?" + urllib.parse.urlencode(params))
        try:
            return dict(data["data"]["result"])
        except (KeyError, TypeError):
            return {}

    def log_file(self, node_id: str, filename: str, lines: int = 100) -> str:
        q = urllib.parse.urlencode({"node_id": node_id, "filename": filename, "lines": str(lines), "filter_ansi_code": "true"})
        _, raw = self._request("GET", "/api/v0/logs/file?" + q)
        return raw.decode(errors="replace")

    def log_stream(self, node_id: str, filename: str, lines: int = 100) -> Iterator[str]:
        """Follow one log file (``/api/v0/logs/stream``); yields text chunks."""
        q = urllib.parse.urlencode({"node_id": node_id, "filename": filename, "lines": str(lines), "filter_ansi_code": "true"})
        try:
            with httpx.Client(trust_env=False, headers=self._headers) as c, c.stream("GET", self.url + "/api/v0/logs/stream?" + q,
                                                             timeout=httpx.Timeout(None, connect=10.0)) as r:
                for chunk in r.iter_raw():
                    yield chunk.decode(errors="replace")
        except httpx.TransportError as e:
            raise ClusterUnreachable(f"{self.url}: log stream failed ({_reason(e)})") from None


    # -- packages (runtime_env py_modules) -----------------------------------------
    def upload_package(self, uri: str, data: bytes) -> None:
        """Store a ``gcs://`` package in the cluster (``PUT /api/packages/gcs/NAME``, as Ray's job SDK does)."""
        protocol, _, name = uri.partition("://")
        self._request("PUT", f"/api/packages/{protocol}/{urllib.parse.quote(name)}", content=data, timeout=max(self.timeout, 60))

    # -- jobs ------------------------------------------------------------------
    def submit_job(self, entrypoint: str, submission_id: str) -> str:
        """``POST /api/jobs/`` (entrypoint on the head node, no CPU reserved)."""
        body = {"entrypoint": entrypoint, "submission_id": submission_id, "entrypoint_num_cpus": 0}
        data = self._json("POST", "/api/jobs/", body)
        return str((data or {}).get("submission_id") or submission_id)

    def job(self, submission_id: str) -> dict:
        return self._json("GET", f"/api/jobs/{urllib.parse.quote(submission_id)}") or {}

    def job_logs(self, submission_id: str) -> str:
        return str((self._json("GET", f"/api/jobs/{urllib.parse.quote(submission_id)}/logs") or {}).get("logs") or "")

    def stop_job(self, submission_id: str) -> None:
        self._request("POST", f"/api/jobs/{urllib.parse.quote(submission_id)}/stop")

    def delete_job(self, submission_id: str) -> None:
        self._request("DELETE", f"/api/jobs/{urllib.parse.quote(submission_id)}")


def _reason(e: Exception) -> str:
    return str(e) or type(e).__name__


def _error_text(raw: str) -> str:
    """Ray's error bodies are plain text or JSON with a message field."""
    raw = raw.strip()
    try:
        data = json.loads(raw)
    except ValueError:
        return raw
    if isinstance(data, dict):
        for key in ("msg", "message", "error", "detail"):
            if data.get(key):
                return str(data[key])
    return raw


# --------------------------------------------------------------------------
# summaries (what status / progress show)


# Serve's own words for an autoscaling decision (ray/serve/_private/deployment_state.py).
_SCALING_MESSAGE = re.compile(r"^(Upscaling|Downscaling) from \d+ to \d+ replicas")


@dataclass
class DeploymentSummary:
    name: str
    status: str
    message: str
    target_replicas: int | None  # what Serve's autoscaler wants now
    replicas: dict[str, int]  # state -> count
    required_resources: dict[str, float] = field(default_factory=dict)
    running_replicas: int = 0
    autoscaling: str = ""  # Serve's autoscaling decision, e.g. "Upscaling from 1 to 2 replicas."
    rollout: str = ""  # mid-rollout: old and new replicas and the wave (see rollout_text)
    part: str = ""  # its part of a DP / P/D app: "prefill pool", "decode pool", "DP group of N ranks" (parts_of)


@dataclass
class AppSummary:
    name: str
    status: str
    message: str
    route_prefix: str | None
    model_ids: list[str]
    endpoint: str | None
    deployments: list[DeploymentSummary]
    api_key_env: str | None = None  # the app's API key variable (llmctl's API-key ingress), never the key
    api_key_file: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


def model_ids_of(app: dict) -> list[str]:
    """Model ids an LLM app serves: from its deployed config, else its deployment names."""
    ids: list[str] = []
    cfg = app.get("deployed_app_config") or {}
    for _, llm in app_llm_configs(cfg):
        if isinstance(llm, dict):
            mid = sf.model_id_of(llm)
            if mid and str(mid) not in ids:  # a P/D app's two pools serve one model id
                ids.append(str(mid))
    if not ids:
        for name in (app.get("deployments") or {}):
            if sf.is_llm_server(name):
                ids.append(sf.llm_server_id(name))
    return ids


def parts_of(app: dict) -> dict[str, str]:
    """Deployment name -> its part of a data-parallel or prefill/decode app
    (builders.llm_deployments names them as Ray's builders do)."""
    out: dict[str, str] = {}
    for name, _, dp in llm_deployments(app.get("deployed_app_config") or {}):
        bits = []
        if name.startswith(("Prefill:", "Decode:")):
            bits.append(f"{name.split(':', 1)[0].lower()} pool")
        if dp > 1:
            running = sum(1 for r in ((app.get("deployments") or {}).get(name) or {}).get("replicas") or []
                          if r.get("state") == sf.REPLICA_RUNNING)
            bits.append(f"DP groups of {dp} ranks: {running // dp} whole group(s) running")
        if bits:
            out[name] = ", ".join(bits)
    return out


def http_base(status: dict, dashboard_url: str) -> str | None:
    """``http://host:port`` of the Serve HTTP proxy, as a client should reach it."""
    opts = status.get("http_options") or {}
    port = opts.get("port")
    if not port:
        return None
    host = opts.get("host") or sf.LOOPBACK_HOST
    dash_host = urllib.parse.urlsplit(dashboard_url).hostname or sf.LOOPBACK_HOST
    if sf.is_wildcard(host):
        host = dash_host
    return f"http://{host}:{port}"


def endpoint_of(base: str | None, route_prefix: str | None) -> str | None:
    if not base or route_prefix is None:
        return None
    prefix = "" if route_prefix in ("/", "") else "/" + route_prefix.strip("/")
    return f"{base}{prefix}/v1"


def summarize(status: dict, dashboard_url: str) -> list[AppSummary]:
    base = http_base(status, dashboard_url)
    apps = []
    for name, app in sorted((status.get("applications") or {}).items()):
        deps = []
        parts = parts_of(app)
        for dname, dep in sorted((app.get("deployments") or {}).items()):
            counts: dict[str, int] = {}
            for r in dep.get("replicas") or []:
                counts[r.get("state", "?")] = counts.get(r.get("state", "?"), 0) + 1
            status = dep.get("status", "?")
            deps.append(
                DeploymentSummary(
                    name=dname,
                    status=status,
                    message=dep.get("message") or "",
                    target_replicas=dep.get("target_num_replicas"),
                    replicas=counts,
                    required_resources=dep.get("required_resources") or {},
                    running_replicas=counts.get(sf.REPLICA_RUNNING, 0),
                    autoscaling=(dep.get("message") or "") if _SCALING_MESSAGE.match(dep.get("message") or "") else "",
                    rollout=rollout_text(dep, app.get("last_deployed_time_s")),
                    part=parts.get(dname, ""),
                )
            )
        route = app.get("route_prefix")
        keyed = key_settings(app.get("deployed_app_config") or {})
        apps.append(
            AppSummary(
                name=name,
                status=app.get("status", "?"),
                message=app.get("message") or "",
                route_prefix=route,
                model_ids=model_ids_of(app),
                endpoint=endpoint_of(base, route),
                deployments=deps,
                api_key_env=(keyed or {}).get("api_key_env"),
                api_key_file=(keyed or {}).get("api_key_file"),
            )
        )
    return apps


def rollout_text(dep: dict, deployed_at: float | None) -> str:
    """A deployment mid-rollout, e.g. ``rolling: 1 old, 1 new (wave 2 of 2)``.

    Serve's REST API gives no replica versions; a replica started before the
    app's last deploy (``start_time_s`` < ``last_deployed_time_s``) is of the
    old version while the deployment is UPDATING for a config update (an
    in-place change finishes without restarting, so it never shows here for
    long). Waves as in llmctl/rollout.py (Serve's ``_rollout_size``)."""
    import math

    if dep.get("status") != sf.DEP_UPDATING or not deployed_at:
        return ""
    reps = [r for r in dep.get("replicas") or [] if r.get("state") in sf.LIVE_REPLICA_STATES]
    old = [r for r in reps if (r.get("start_time_s") or 0) < deployed_at and r.get("state") != sf.REPLICA_STOPPING]
    stopping = [r for r in reps if (r.get("start_time_s") or 0) < deployed_at and r.get("state") == sf.REPLICA_STOPPING]
    new = [r for r in reps if (r.get("start_time_s") or 0) >= deployed_at]
    if not new and not stopping:
        return ""
    target = dep.get("target_num_replicas") or len(old) + len(new) or 1
    pct = float(((dep.get("deployment_config") or {}).get("rolling_update_percentage")) or 0.2)
    wave = max(int(pct * target), 1)
    waves = math.ceil(target / wave)
    running_new = sum(1 for r in new if r.get("state") == sf.REPLICA_RUNNING)
    current = min(running_new // wave + 1, waves)
    return (f"rolling: {len(old)} old, {len(new)} new ({running_new} RUNNING)"
            + (f", {len(stopping)} old stopping" if stopping else "") + f" (wave {current} of {waves})")


def secret_values(status: dict) -> list[str]:
    """Values of secret-looking runtime_env env_vars in the deployed configs.

    Ray itself writes runtime_env into its logs (runtime_env_agent.log, the
    app build log); llmctl scrubs these values from everything it shows.
    """
    found: list[str] = []

    def take(runtime_env) -> None:
        env = (runtime_env or {}).get("env_vars") if isinstance(runtime_env, dict) else None
        for k, v in (env or {}).items():
            if isinstance(v, str) and len(v) >= 8 and literal_secret(k, v):
                found.append(v)

    for app in (status.get("applications") or {}).values():
        cfg = app.get("deployed_app_config") or {}
        take(cfg.get("runtime_env"))
        for _, llm in app_llm_configs(cfg):
            if isinstance(llm, dict):
                take(llm.get("runtime_env"))
    return sorted(set(found), key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "***")
    return text


def deployed_configs(status: dict) -> list[dict]:
    """The app configs currently deployed declaratively (to re-send with a PUT)."""
    out = []
    for name, app in (status.get("applications") or {}).items():
        cfg = app.get("deployed_app_config")
        if cfg is None:
            raise DeployFailed(
                f"application {name!r} was deployed from Python (serve.run), not from a config; "
                "Ray's REST API cannot update the cluster around it — delete it first"
            )
        out.append(cfg)
    return out


def wait_gone(client: ServeClient, names: list[str] | None, *, timeout: float, interval: float = 0.5) -> Iterator[dict]:
    """Poll until the named apps (all apps if None) are gone; yields each status.

    Raises DeployFailed on timeout.
    """
    from llmctl.poll import poll_iter

    for _ in poll_iter(timeout, interval):
        st = client.status()
        present = set((st.get("applications") or {}).keys())
        left = present if names is None else present & set(names)
        yield st
        if not left:
            return
    raise DeployFailed(f"timed out after {timeout:.0f}s waiting for {', '.join(sorted(left))} to be deleted")
