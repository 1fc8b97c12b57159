"""The whole gen-config flow: every model, then the app's own questions."""

from __future__ import annotations

import dataclasses

from llmctl import sizing
from llmctl import spec as S
from llmctl.serve_facts import LOOPBACK_HOST
from llmctl.errors import UsageError
from llmctl.prompts.engine import check_selectors
from llmctl.prompts.layout import pd_pools
from llmctl.prompts.model import collect_model
from llmctl.prompts.session import Flags, Session, ask_confirm, ask_text

def collect(session: Session, flags: Flags) -> S.DeploymentSpec:
    """Every answer of a gen-config run, as one checked DeploymentSpec."""
    flags = dataclasses.replace(flags, gpu_memory_utilization=S.parse_flag(
        flags.gpu_memory_utilization, flag="--gpu-memory-utilization", parse=S.parse_gpu_memory_utilization))
    n = max(len(flags.models), 1)
    models: list[S.ModelSpec] = []
    taken: set[str] = set()
    i = 0
    while True:
        m = collect_model(session, flags, i, n, taken_ids=taken)
        if m.model_id in taken:
            raise UsageError(f"--model-id: duplicate model id '{m.model_id}'; give each model a distinct --model-id")
        taken.add(m.model_id)
        models.append(m)
        i += 1
        if flags.models:
            if i >= len(flags.models):
                break
            continue
        if not (session.interactive and not session.assume_yes and ask_confirm("Add another model to this app?", False)):
            break
        n = i + 1
    check_selectors(flags, [m.profile for m in models])
    if (flags.dp is not None or flags.pd is not None) and len(models) > 1:
        raise UsageError(f"{'--pd' if flags.pd is not None else '--dp'}: Ray's "
                         f"{'prefill/decode' if flags.pd is not None else 'data-parallel'} builder serves one model; "
                         "generate one app per model")
    pools = pd_pools(session, flags, models[0])
    if pools is not None:
        models = [pools[0], pools[1]]
    app_name = session.answer(
        flags.app_name, flag="--app-name", label="app name", parse=S.parse_app_name, default=S.DEFAULT_APP_NAME,
        ask=lambda: ask_text("Serve application name:", S.parse_app_name, default=S.DEFAULT_APP_NAME),
    )
    route_prefix = session.answer(
        flags.route_prefix, flag="--route-prefix", label="route prefix", parse=S.parse_route_prefix,
        default=S.DEFAULT_ROUTE_PREFIX,
        ask=lambda: ask_text("Route prefix:", S.parse_route_prefix, default=S.DEFAULT_ROUTE_PREFIX),
    )
    serving = [m for m in models if m.role != "prefill"]  # the ingress talks to decode only (a P/D app)
    ingress = sizing.ingress_autoscaling([m.max_replicas * m.dp for m in serving], [m.min_replicas * m.dp for m in serving],
                                         [m.max_ongoing_requests or 1 for m in serving])
    api_key_env = _api_key_env(session, flags, models)
    spec = S.DeploymentSpec(
        app_name=app_name, route_prefix=route_prefix, models=tuple(models),
        http_host=flags.http_host or LOOPBACK_HOST, http_port=flags.http_port or 8000, ingress=ingress,
        api_key_env=api_key_env,
    )
    try:
        spec.check()
    except ValueError as e:
        raise UsageError(str(e)) from None
    return spec


DEFAULT_API_KEY_ENV = "LLMCTL_API_KEY"


def _api_key_env(session: Session, flags: Flags, models: list) -> str | None:
    """The API key's variable: the flag; in a terminal, asked (default off for
    CPU-only apps, on with a warning for GPU apps); otherwise none."""
    if flags.api_key_env is not None:
        return S.parse_flag(flags.api_key_env, flag="--api-key-env", parse=S.parse_env_name) if flags.api_key_env else None
    if not session.interactive or session.assume_yes:
        return None
    gpu = any(not m.gpu.is_cpu for m in models)
    warning = " (warning: without one, anyone who reaches the endpoint uses the GPUs)" if gpu else ""
    if not ask_confirm(f"Require an API key on the endpoint (Authorization: Bearer)?{warning}", gpu):
        return None
    return ask_text("Environment variable holding the key (its name, never the key):", S.parse_env_name,
                    default=DEFAULT_API_KEY_ENV)
