"""``llmctl security [APP]``: what a running app exposes, measured.

Three kinds of checks, each a row of one table:

- **endpoint** — every route the app mounts (its OpenAPI schema, read with
  the key when it has one, plus the routes of Ray Serve LLM's OpenAI ingress)
  requested without a key, with a wrong key and with the right one. A route
  that answers without the right key (anything but 401/403/404) is a finding;
  a 404 means "not mounted". Requests carry an empty JSON body, which every
  generating route refuses (400/422) before any token is generated.
- **dashboard** — the Serve, job, state and log APIs requested without the Ray
  token: anything but 401/403 is a finding (whoever reaches the dashboard can
  ``POST /api/jobs/`` and run code on the cluster).
- **leak** — the Hugging Face token and the API key searched for in the app's
  deployed config, Ray's runtime_env / actor / task / job APIs, and the
  cluster's logs (the local head's session directory; a remote cluster's
  through the log API). Secrets are never printed.

No ``import ray``: Ray's REST API and the endpoint over HTTP only.
"""

from __future__ import annotations

import os
import time
import urllib.parse
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import httpx

from llmctl.errors import UsageError
from llmctl.launch import address as _address
from llmctl.launch import apikey, tokens
from llmctl.launch.serve_api import ServeClient, summarize

# Ray Serve LLM 2.60's OpenAiIngress routes (core/ingress/ingress.py DEFAULT_ENDPOINTS)
INGRESS_ROUTES = [("GET", "/v1/models"), ("GET", "/v1/models/{model}"), ("POST", "/v1/completions"),
                  ("POST", "/v1/chat/completions"), ("POST", "/v1/embeddings"), ("POST", "/v1/audio/transcriptions"),
                  ("POST", "/v1/score"), ("POST", "/tokenize"), ("POST", "/detokenize")]
# routes of vLLM's own server that must not be reachable either (vllm-project/vllm#58144: /invocations)
EXTRA_ROUTES = [("POST", "/invocations"), ("GET", "/openapi.json"), ("GET", "/docs")]
DASHBOARD_PATHS = [("GET", "/api/serve/applications/"), ("GET", "/api/jobs/"), ("GET", "/api/v0/actors?limit=1"),
                   ("GET", "/api/v0/nodes?limit=1"), ("GET", "/api/version")]
LEAK_APIS = ["/api/serve/applications/", "/api/v0/runtime_envs?detail=1", "/api/v0/actors?detail=1&limit=10000",
             "/api/v0/tasks?detail=1&limit=10000", "/api/jobs/"]
REFUSED = (401, 403)
MAX_LOG_FILES = 400


@dataclass
class Row:
    area: str  # endpoint | dashboard | leak
    target: str  # what was requested / searched
    check: str  # what was done
    result: str  # what happened
    finding: bool

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class SecurityReport:
    dashboard_url: str
    apps: list[str]
    rows: list[Row] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def findings(self) -> list[Row]:
        return [r for r in self.rows if r.finding]

    def to_json(self) -> dict:
        return {"dashboard_url": self.dashboard_url, "apps": self.apps, "ok": not self.findings,
                "findings": len(self.findings), "rows": [r.to_json() for r in self.rows], "seconds": round(self.seconds, 2)}


def security_check(app: Optional[str] = None, *, address: Optional[str] = None, ray_token_env: Optional[str] = None,
                   api_key_env: Optional[str] = None, search_logs: bool = True) -> SecurityReport:
    """Check ``app`` (default: every app) on a running cluster; see the module doc."""
    t0 = time.monotonic()
    target = _address.resolve_target(address, ray_token_env)
    with ServeClient(target.dashboard_url, token=target.ray_token) as client:
        status = client.status()
        apps = [a for a in summarize(status, client.url) if app is None or a.name == app]
        if app is not None and not apps:
            names = ", ".join(sorted(status.get("applications") or {})) or "none"
            raise UsageError(f"no application named {app!r} on {target.dashboard_url} (apps: {names})")
        rep = SecurityReport(target.dashboard_url, [a.name for a in apps])
        keys: dict[str, str] = {}
        for a in apps:
            key = apikey.required_key(a.name, a.api_key_env, target.local, flag_var=api_key_env) if a.api_key_env or api_key_env else None
            if key:
                keys[a.name] = key
                rep.rows += key_rows(a.name, api_key_env or a.api_key_env, key)
            rep.rows += endpoint_rows(a, key)
        rep.rows += dashboard_rows(target.dashboard_url)
        secrets = _secrets(target, keys)
        rep.rows += leak_rows(client, status, secrets, target, search_logs)
    rep.seconds = time.monotonic() - t0
    return rep


# --------------------------------------------------------------------------
# endpoint


def _routes(base: str, key: Optional[str], model_ids: list[str]) -> list[tuple[str, str]]:
    found: set[tuple[str, str]] = set(INGRESS_ROUTES) | set(EXTRA_ROUTES)
    try:
        r = httpx.get(base + "/openapi.json", headers=apikey.headers(key), timeout=30, trust_env=False)
        if r.status_code == 200:
            for path, ops in (r.json().get("paths") or {}).items():
                for method in ops:
                    if method.upper() in ("GET", "POST", "PUT", "DELETE", "PATCH"):
                        found.add((method.upper(), path))
    except (httpx.HTTPError, ValueError):
        pass
    model = urllib.parse.quote(model_ids[0] if model_ids else "model", safe="")
    out = {(m, p.replace("{model:path}", model).replace("{model}", model)) for m, p in found}
    return sorted(out, key=lambda mp: (mp[1], mp[0]))


def _request(method: str, url: str, key: Optional[str]) -> str:
    try:
        r = httpx.request(method, url, headers=apikey.headers(key), json={} if method != "GET" else None,
                          timeout=60, trust_env=False)
        return str(r.status_code)
    except httpx.HTTPError as e:
        return type(e).__name__


def key_rows(app: str, var: Optional[str], key: str) -> list[Row]:
    """The key's length against the ingress's minimum (llmctl_apikey.MIN_KEY_CHARS): a shorter one is a finding
    (the ingress refuses it; one that runs anyway was set before llmctl checked)."""
    problem = apikey.short_key(var or "API key", key)
    result = problem or f"{len(key.strip())} characters (the ingress takes {apikey.min_key_chars()} or more)"
    return [Row("endpoint", app, "API key length", result, problem is not None)]


def endpoint_rows(a, key: Optional[str]) -> list[Row]:
    if not a.endpoint:
        return [Row("endpoint", a.name, "routes", "no HTTP endpoint (Serve's proxy not running?)", False)]
    base = a.endpoint[: -len("/v1")] if a.endpoint.endswith("/v1") else a.endpoint
    rows = []
    for method, path in _routes(base, key, a.model_ids):
        url = base + path
        none = _request(method, url, None)
        wrong = _request(method, url, "llmctl-wrong-key-" + "0" * 16)
        right = _request(method, url, key) if key else "-"
        open_ = [label for label, got in (("no key", none), ("a wrong key", wrong))
                 if got.isdigit() and int(got) not in REFUSED and int(got) != 404]
        result = f"no key {none}, wrong key {wrong}, right key {right}"
        if open_:
            result += f": answers with {' and '.join(open_)}"
        rows.append(Row("endpoint", f"{a.name} {method} {path}", "without / wrong / right API key", result, bool(open_)))
    return rows


# --------------------------------------------------------------------------
# dashboard


def dashboard_rows(dashboard_url: str) -> list[Row]:
    rows = []
    for method, path in DASHBOARD_PATHS:
        got = _request(method, dashboard_url + path, None)
        bad = got.isdigit() and int(got) not in REFUSED
        what = "answers without a Ray token: whoever reaches it can run code (POST /api/jobs/)" if bad else "refused"
        rows.append(Row("dashboard", f"{method} {path}", "without the Ray token", f"HTTP {got}: {what}", bad))
    return rows


# --------------------------------------------------------------------------
# leaks


def _secrets(target, keys: dict[str, str]) -> dict[str, str]:
    """name -> value of what must not leak: the HF token(s) and the API keys."""
    out: dict[str, str] = {}
    for var in tokens.TOKEN_VARS:
        if os.environ.get(var, "").strip():
            out[f"Hugging Face token (${var})"] = os.environ[var].strip()
    hf = tokens.user_token()
    if hf:
        out.setdefault("Hugging Face token", hf)
    if target.local is not None:
        held = tokens.read(target.local.pid, target.local.token_fd)
        if held:
            out["Hugging Face token (the local head's)"] = held
    for app_name, key in keys.items():
        out[f"API key of {app_name}"] = key
    return {k: v for k, v in out.items() if len(v) >= 8}


def leak_rows(client: ServeClient, status: dict, secrets: dict[str, str], target, search_logs: bool) -> list[Row]:
    if not secrets:
        return [Row("leak", "HF token, API keys", "searched", "none known here (no HF token in this shell or on the "
                    "local head, no API key): nothing to search for", False)]
    rows = []
    import json

    texts = {"the deployed configs (GET /api/serve/applications/)": json.dumps(status)}
    for path in LEAK_APIS[1:]:
        try:
            _, raw = client._request("GET", path, timeout=60)
            texts[f"GET {path.split('?')[0]}"] = raw.decode(errors="replace")
        except Exception as e:  # noqa: BLE001 - an API this cluster lacks is reported, not fatal
            texts[f"GET {path.split('?')[0]}"] = ""
            rows.append(Row("leak", f"GET {path.split('?')[0]}", "searched", f"not readable ({type(e).__name__})", False))
    for where, text in texts.items():
        hits = [name for name, value in secrets.items() if value in text]
        rows.append(Row("leak", where, f"searched for {len(secrets)} secret(s)",
                        f"holds the {', '.join(hits)}" if hits else "clean", bool(hits)))
    if search_logs:
        rows += _log_rows(client, secrets, target)
    return rows


def _log_rows(client: ServeClient, secrets: dict[str, str], target) -> list[Row]:
    hits: dict[str, list[str]] = {}
    searched = 0
    if target.local is not None:  # the local head: its whole session directory (logs, runtime_env files)
        session = Path(target.local.temp_dir)
        for p in session.rglob("*"):
            if not p.is_file() or p.is_symlink():
                continue
            try:
                data = p.read_bytes()
            except OSError:
                continue
            searched += 1
            for name, value in secrets.items():
                if value.encode() in data:
                    hits.setdefault(name, []).append(str(p.relative_to(session)))
        where = f"the local head's session directory ({searched} files)"
    else:  # a remote cluster: every node's log files through the log API
        for node in client.nodes():
            nid = node.get("node_id")
            if not nid:
                continue
            for files in client.list_logs(nid).values():
                for f in files:
                    if searched >= MAX_LOG_FILES:
                        break
                    searched += 1
                    try:
                        text = client.log_file(nid, f, lines=100000)
                    except Exception:  # noqa: BLE001 - a file that went away
                        continue
                    for name, value in secrets.items():
                        if value in text:
                            hits.setdefault(name, []).append(f"{node.get('node_ip', nid[:8])}:{f}")
        where = f"the cluster's logs through the log API ({searched} files)"
    if not hits:
        return [Row("leak", where, "searched", "clean", False)]
    return [Row("leak", where, "searched", f"the {name} is in {', '.join(files[:5])}"
                + (f" and {len(files) - 5} more" if len(files) > 5 else ""), True) for name, files in hits.items()]
