"""llmctl's API-key ingress for Ray Serve LLM (issue 22).

Ray Serve LLM has no API-key option (ray-project/ray#59578; ``VLLM_API_KEY``
is ignored under Serve, #55369). This module plugs into its ingress extension
point: ``build_openai_app``'s ``ingress_cls_config.ingress_cls`` names
``llmctl_apikey:ApiKeyIngress``, a subclass of Ray's ``OpenAiIngress`` whose
ASGI app answers every HTTP request without ``Authorization: Bearer <key>``
with 401 in OpenAI's error shape — every route the app mounts, ``/v1/models``,
``/docs`` and ``/openapi.json`` included. Serve's proxy health checks
(``/-/healthz``, ``/-/routes``) are the proxy's own and never reach the app;
the replica's health check is an actor call, not HTTP.

The key is never in the deployed config: ``ingress_extra_kwargs`` name where
it is — ``api_key_env`` (an environment variable of the node, inherited by the
ingress replica) and/or ``api_key_file`` (a file on the node, e.g. a
Kubernetes Secret mounted in the pod). With neither readable the replica
refuses to start (fail closed).

It is delivered to the cluster by ``llmctl up`` as a ``runtime_env``
``py_modules`` package, so no image change is needed. It imports only what a
Ray Serve LLM node has (Ray, FastAPI/Starlette): never llmctl.
"""

from __future__ import annotations

import hmac
import json
import os
from typing import Any, Optional

try:  # the public name (Ray >= 2.4x); the class itself lives in ray.llm._internal
    from ray.serve.llm.ingress import OpenAiIngress
except ImportError:  # pragma: no cover
    from ray.llm._internal.serve.core.ingress.ingress import OpenAiIngress

__all__ = ["ApiKeyIngress", "ApiKeyMiddleware", "load_key"]

# The shortest key the ingress accepts (llmctl reads this line: `up` and `check --security` report a shorter one).
MIN_KEY_CHARS = 16


def _long_enough(key: bytes, where: str) -> bytes:
    if len(key) < MIN_KEY_CHARS:
        raise RuntimeError(
            f"llmctl API-key ingress: the API key in {where} has {len(key)} characters, fewer than {MIN_KEY_CHARS}: a "
            "short key can be guessed, so the ingress refuses to start. Use a long random key (e.g. `openssl rand -hex 32`)."
        )
    return key


def load_key(api_key_env: Optional[str], api_key_file: Optional[str]) -> bytes:
    """The key from the node's environment or file; raises RuntimeError (the
    replica then fails to start) when neither holds one, or the one found is
    shorter than MIN_KEY_CHARS (fail closed)."""
    tried = []
    if api_key_env:
        tried.append(f"environment variable {api_key_env}")
        value = os.environ.get(api_key_env, "").strip()
        if value:
            return _long_enough(value.encode(), f"environment variable {api_key_env}")
    if api_key_file:
        tried.append(f"file {api_key_file}")
        try:
            with open(api_key_file, "rb") as f:
                value_b = f.read().strip()
        except OSError:
            value_b = b""
        if value_b:
            return _long_enough(value_b, f"file {api_key_file}")
    raise RuntimeError(
        "llmctl API-key ingress: no API key on this node (" + (", ".join(tried) or "nothing named") + "); "
        "the endpoint would be open, so the ingress refuses to start. Set the variable in the environment of the "
        "Ray node (for the local head: export it before `llmctl up` starts the head) or mount the key file."
    )


def _error_body(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": "invalid_api_key"}}).encode()


class ApiKeyMiddleware:
    """Pure ASGI: pass a request with the right bearer key, answer 401 otherwise."""

    def __init__(self, app: Any, key: bytes):
        self.app = app
        self._key = key

    def _authorized(self, scope: dict) -> tuple[bool, str]:
        given = None
        for name, value in scope.get("headers") or []:
            if name.lower() == b"authorization":
                given = value
                break
        if not given:
            return False, "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'."
        scheme, _, token = given.partition(b" ")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self._key):
            return False, "Incorrect API key provided."
        return True, ""

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") not in ("http", "websocket"):
            return await self.app(scope, receive, send)  # lifespan
        ok, message = self._authorized(scope)
        if ok:
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = _error_body(message)
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b'Bearer realm="llmctl"')]})
        await send({"type": "http.response.body", "body": body})


class ApiKeyIngress(OpenAiIngress):
    """Ray Serve LLM's OpenAI ingress behind an API key (see the module doc)."""

    def __init__(self, llm_deployments, model_cards, *, lora_paths=None, api_key_env: Optional[str] = None,
                 api_key_file: Optional[str] = None, **kwargs):
        # Before the parent, and before Serve builds the ASGI app (_set_asgi_app runs after __init__).
        self._llmctl_api_key = load_key(api_key_env, api_key_file)
        super().__init__(llm_deployments, model_cards, lora_paths=lora_paths, **kwargs)

    def _set_asgi_app(self, app: Any) -> None:
        """Serve's hook that stores the replica's ASGI app: the key check goes
        in front of every route. A FastAPI app not yet started takes it as its
        outermost middleware (so Serve still sees a FastAPI app: /docs)."""
        key = self._llmctl_api_key
        if getattr(app, "add_middleware", None) is not None and getattr(app, "middleware_stack", None) is None:
            app.add_middleware(ApiKeyMiddleware, key=key)
        else:
            app = ApiKeyMiddleware(app, key)
        super()._set_asgi_app(app)
