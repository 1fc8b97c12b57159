"""Where ``llmctl bench`` sends its load: an application's endpoint, model and
API key, found through the cluster's status (or a URL given), and the
replica counts sampled while it runs."""

from __future__ import annotations

from typing import Optional

import httpx

from llmctl.errors import UsageError, param


def dashboard_headers(dashboard: Optional[str], ray_token_env: Optional[str] = None) -> dict:
    """The Ray token header for ``dashboard`` (the local head's, or a remote cluster's)."""
    from llmctl.launch import raytoken
    from llmctl.launch.address import ray_token_for

    return raytoken.headers(ray_token_for(dashboard, ray_token_env)) if dashboard else {}


def endpoint_headers(app: Optional[str], url: Optional[str], address: Optional[str],
                     api_key_env: Optional[str] = None, ray_token_env: Optional[str] = None) -> dict:
    """The ``Authorization`` header for the endpoint: the key in ``api_key_env``,
    else (an app found through status) the key of the app's own variable."""
    from llmctl.launch import apikey

    if url or api_key_env:
        return apikey.headers(apikey.required_key(app or "", None, flag_var=api_key_env))
    _, _, _, _, summary, local = _endpoint_app(app, None, address, ray_token_env)
    return apikey.headers(apikey.required_key(summary.name, summary.api_key_env, local))


def resolve_endpoint(app: Optional[str], model: Optional[str], url: Optional[str], address: Optional[str],
                     headers: Optional[dict] = None, ray_token_env: Optional[str] = None):
    """(endpoint base URL ending in /v1, model id, dashboard URL or None, app name or None)."""
    if url:
        base = url.rstrip("/")
        base = base if base.endswith("/v1") else base + "/v1"
        if model is None:
            try:
                r = httpx.get(base + "/models", timeout=10, trust_env=False, headers=headers or {})
                if r.status_code in (401, 403):
                    raise UsageError(f"{param('url')}: {base}/models answered HTTP {r.status_code}: the endpoint requires an "
                                     f"API key; name the variable holding it with {param('api_key_env')}", param="api_key_env")
                listed = r.json().get("data") or []
            except (httpx.HTTPError, ValueError) as e:
                raise UsageError(f"{param('url')}: {base}/models did not answer ({type(e).__name__}); pass {param('model_id')}",
                                 param="url") from None
            if not listed:
                raise UsageError(f"{param('url')}: {base}/models lists no model; pass {param('model_id')}", param="url")
            model = listed[0]["id"]
        return base, model, None, app
    return _endpoint_app(app, model, address, ray_token_env)[:4]


def _endpoint_app(app: Optional[str], model: Optional[str], address: Optional[str], ray_token_env: Optional[str] = None):
    from llmctl.launch import status
    from llmctl.launch.cluster import running_state

    rep = status(address, ray_token_env=ray_token_env)
    apps = [a for a in rep.apps if app is None or a.name == app]
    if app is not None and not apps:
        raise UsageError(f"no application named {app!r} on {rep.dashboard_url} (apps: {', '.join(a.name for a in rep.apps) or 'none'})")
    base = model.split(":", 1)[0] if model is not None else None  # base:adapter requests a LoRA adapter of base
    if model is not None:
        apps = [a for a in apps if model in a.model_ids or base in a.model_ids] or apps
    if not apps:
        raise UsageError(f"no application to load on the cluster; deploy one with `llmctl up` or pass {param('url')}")
    if len(apps) > 1 and app is None:
        raise UsageError(f"several applications ({', '.join(a.name for a in apps)}); name one: llmctl bench APP")
    a = apps[0]
    if not a.endpoint:
        raise UsageError(f"application {a.name!r} has no HTTP endpoint (is Serve's proxy running?)")
    chosen = model or (a.model_ids[0] if a.model_ids else None)
    if chosen is None:
        raise UsageError(f"application {a.name!r} serves no model; pass {param('model_id')}")
    if a.model_ids and chosen not in a.model_ids and chosen.split(":", 1)[0] not in a.model_ids:
        raise UsageError(f"{param('model_id')}: {chosen!r} is not served by {a.name!r} (models: {', '.join(a.model_ids)})",
                         param="model_id")
    return a.endpoint, chosen, rep.dashboard_url, a.name, a, (running_state() if rep.local else None)
