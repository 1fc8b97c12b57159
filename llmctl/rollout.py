"""The plan of an update: what a new serve config changes in a running
cluster, how Ray Serve 2.60 will apply each change, and what the rollout costs
(issue 23). A pure function of the deployed state (``GET
/api/serve/applications/``) and the payload ``up`` is about to PUT; it sends
nothing.

Ray Serve's rules, read in its source (``ray/serve/_private/``):

- **The application's code version** is a hash of ``import_path``,
  ``runtime_env``, ``args``, the autoscaling policies, request-router and
  deployment-actor configs (``deploy_utils.py`` ``get_app_code_version``).
  When it changes, the controller rebuilds the app
  (``application_state.py`` ``apply_app_config``) and every deployment gets
  a new version whose code version differs, so every replica of every
  deployment is restarted (``version.py`` ``requires_actor_restart``). For a
  Ray Serve LLM app the ``llm_configs`` are ``args``: ANY change in them —
  engine arguments, model source, and also ``deployment_config`` written
  inside an LLMConfig (autoscaling bounds!) — restarts the LLMServer replicas
  *and* the ingress. Nothing in Ray's docs says so; users misread it
  (ray-project/ray#66265).
- **Deployment options given as overrides** (``applications[].deployments``)
  with the same code version are classed by ``DeploymentConfig``'s
  ``update_type`` (``config.py``; ``utils.py`` ``DeploymentOptionUpdateType``):
  ``LightWeight``, ``NeedsReconfigure`` and ``NeedsActorReconfigure`` are
  applied to running replicas (``deployment_state.py``
  ``_stop_or_update_outdated_version_replicas``: "only lightweight options in
  deployment config is a mismatch, so we update it dynamically without
  restarting the replica"); ``HeavyWeight`` fields and the replica options
  ``ray_actor_options``, ``placement_group_*``, ``max_replicas_per_node``
  restart replicas (``version.py`` ``requires_actor_restart``). A route
  prefix change reconfigures in place (``version.py`` ``compute_hashes``).
  llmctl uses that: when an LLM app's new file differs from the deployed one
  only in in-place fields of ``deployment_config``, ``up`` keeps the deployed
  ``llm_configs`` and sends the new values as overrides of
  ``LLMServer:<id>`` (:func:`lift_in_place`), so the change is applied
  without a restart.
- **Waves** (``deployment_state.py`` ``_rollout_size``,
  ``_check_and_stop_outdated_version_replicas``): at most
  ``max(int(rolling_update_percentage × target replicas), 1)`` replicas are
  replaced at a time (``rolling_update_percentage`` default 0.2,
  ``constants.py``). With ``max_surge_percent`` 0 (the default) an old
  replica is stopped before its replacement starts: no extra resources, one
  wave fewer replicas serving. With ``max_surge_percent`` p > 0,
  ``ceil(p × target / 100)`` replacements start first
  (``_surge_replicas_to_start``) and old ones stop only while the running
  count stays at the target (``_surge_replicas_to_stop``): the surge costs
  that many extra replicas' resources, the capacity does not dip.
- **A DP group is one unit**: Ray Serve LLM gang-schedules a DP deployment
  (``dp_server.py``, ``gang_size`` = ``data_parallel_size``), and Serve rounds
  a wave and a surge up to whole gangs and stops a gang's ranks together
  (``deployment_state.py`` ``_round_up_to_gang_size``): whole groups restart,
  never 1 rank of N (an app of one group has none serving meanwhile).
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from llmctl.builders import LLM_CONFIG_FIELDS, app_llm_configs, ingress_deployment_name, llm_deployments
from llmctl.placement import replica_bundles

IN_PLACE = "in place"
ROLLING = "rolling restart"
NEW_APP = "new application"
REMOVED_APP = "removed application"

# DeploymentConfig fields and their update_type in Ray 2.60 (ray/serve/_private/config.py).
LIGHTWEIGHT_FIELDS = {
    "num_replicas": "LightWeight", "max_queued_requests": "LightWeight",
    "rolling_update_percentage": "LightWeight", "max_surge_percent": "LightWeight",
    "graceful_shutdown_timeout_s": "NeedsReconfigure", "health_check_period_s": "NeedsReconfigure",
    "health_check_timeout_s": "NeedsReconfigure", "max_constructor_retry_count": "NeedsReconfigure",
    "max_ongoing_requests": "NeedsActorReconfigure", "backpressure_config": "NeedsActorReconfigure",
    "user_config": "NeedsActorReconfigure", "graceful_shutdown_wait_loop_s": "NeedsActorReconfigure",
    "autoscaling_config": "NeedsActorReconfigure", "request_router_config": "NeedsActorReconfigure",
    "logging_config": "NeedsActorReconfigure",
}
# HeavyWeight fields (config.py) and replica options in version.py requires_actor_restart.
RESTART_FIELDS = {
    "version": "HeavyWeight", "gang_scheduling_config": "HeavyWeight", "deployment_actors": "HeavyWeight",
    "ray_actor_options": "replica option", "placement_group_bundles": "replica option",
    "placement_group_strategy": "replica option", "placement_group_bundle_label_selector": "replica option",
    "placement_group_fallback_strategy": "replica option", "max_replicas_per_node": "replica option",
}
CODE_VERSION_KEYS = ("import_path", "runtime_env", "args")  # deploy_utils.get_app_code_version
DEFAULT_ROLLING_UPDATE_PERCENTAGE = 0.2  # ray/serve/_private/constants.py


@dataclass
class Change:
    app: str
    deployment: str | None  # None: the application itself
    field: str  # dotted path, e.g. engine_kwargs.max_num_seqs, autoscaling_config.max_replicas
    old: Any
    new: Any
    kind: str  # IN_PLACE / ROLLING / NEW_APP / REMOVED_APP
    why: str


@dataclass
class Rollout:
    """The rolling restart of one deployment."""

    app: str
    deployment: str
    replicas: int  # target replicas during the rollout
    wave: int  # replicas replaced at a time
    waves: int
    surge: int  # replacements started before old ones stop (max_surge_percent)
    serving_min: int  # replicas serving during a wave
    replica_resources: dict[str, float]
    extra: dict[str, float]  # resources needed on top of what the deployment holds, during the rollout
    gang: int = 1  # ranks of a DP group (replicas, wave, surge and serving_min count ranks: whole groups of them)

    def describe(self) -> str:
        res = ", ".join(f"{k} {v:g}" for k, v in sorted(self.replica_resources.items()))
        extra = ", ".join(f"{k} {v:g}" for k, v in sorted(self.extra.items())) or "none"
        how = (f"{self.surge} replacement(s) started before old ones stop (max_surge_percent)" if self.surge
               else "an old replica stops before its replacement starts")
        if self.gang > 1:
            g = self.gang
            how = (f"{self.surge // g} replacement group(s) started before old ones stop (max_surge_percent)" if self.surge
                   else "an old group stops before its replacement starts")
            return (f"rollout {self.deployment}: {self.replicas // g} DP group(s) of {g} ranks ({res} each rank), "
                    f"restarted a whole group at a time (Ray gang-schedules a DP group: all {g} ranks stop and start "
                    f"together), in {self.waves} wave(s) of {self.wave // g} group(s); {how}; "
                    f"{self.serving_min // g} of {self.replicas // g} group(s) serving during a wave; extra resources: {extra}")
        return (f"rollout {self.deployment}: {self.replicas} replica(s) ({res} each) in {self.waves} wave(s) of "
                f"{self.wave}; {how}; {self.serving_min} of {self.replicas} serving during a wave; extra resources: {extra}")


@dataclass
class Plan:
    changes: list[Change] = field(default_factory=list)
    rollouts: list[Rollout] = field(default_factory=list)
    lifted: list[str] = field(default_factory=list)  # apps whose in-place change goes as deployment overrides

    @property
    def empty(self) -> bool:
        return not self.changes

    def app_kind(self, app: str) -> str | None:
        kinds = {c.kind for c in self.changes if c.app == app}
        for k in (REMOVED_APP, NEW_APP, ROLLING, IN_PLACE):
            if k in kinds:
                return k
        return None

    def kinds(self) -> dict[str, str]:
        return {a: self.app_kind(a) for a in dict.fromkeys(c.app for c in self.changes)}  # type: ignore[misc]

    def extra_resources(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for r in self.rollouts:
            for k, v in r.extra.items():
                out[k] = out.get(k, 0.0) + v
        return out

    def to_json(self) -> dict:
        return {"apps": self.kinds(), "changes": [asdict(c) for c in self.changes],
                "rollouts": [asdict(r) for r in self.rollouts], "lifted": self.lifted,
                "extra_resources": self.extra_resources()}

    def lines(self) -> list[str]:
        """The plan as text, one fact a line."""
        if self.empty:
            return ["plan: no change to the deployed applications"]
        out = []
        for app, kind in self.kinds().items():
            out.append(f"{app}: {kind}")
            for c in (c for c in self.changes if c.app == app):
                if c.kind in (NEW_APP, REMOVED_APP):
                    out.append(f"  {c.why}")
                    continue
                where = f"{c.deployment} " if c.deployment else ""
                out.append(f"  {where}{c.field}: {_short(c.old)} -> {_short(c.new)}  [{c.kind}: {c.why}]")
            if app in self.lifted:
                out.append("  llmctl sends the in-place fields as `deployments:` overrides, so the app's code version "
                           "(import_path, runtime_env, args) stays and no replica restarts")
            for r in (r for r in self.rollouts if r.app == app):
                out.append("  " + r.describe())
                if r.serving_min == 0:
                    one = "DP group" if r.gang > 1 else "replica"
                    out.append(f"  warning: {r.deployment} has no {one} serving during its wave: requests wait "
                               f"(more {one}s, or deployment_config.max_surge_percent, keep one serving)")
        gpus = self.extra_resources().get("GPU", 0.0)
        out.append(f"extra GPUs during the rollout: {gpus:g}")
        return out


def _short(v: Any, limit: int = 60) -> str:
    if v is None:
        return "(unset)"
    text = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------
# views of an application


def _is_llm_app(app: dict) -> bool:
    return any(isinstance(llm, dict) for _, llm in app_llm_configs(app))


def _llms(app: dict) -> dict[str, dict]:
    return {name: llm for name, llm, _ in llm_deployments(app)}


def _dp_groups(app: dict) -> set[str]:
    """Deployments whose replicas are DP ranks: Ray multiplies their replica
    counts by the DP size when it builds them (dp_server.py
    get_deployment_options), so a ``deployments:`` override, applied after
    the build, would count ranks, not groups."""
    return {name for name, _, dp in llm_deployments(app) if dp > 1}


def _overrides(app: dict) -> dict[str, dict]:
    return {str(d.get("name")): {k: v for k, v in d.items() if k != "name"}
            for d in app.get("deployments") or [] if isinstance(d, dict)}


def code_key(app: dict) -> str:
    """What Serve hashes into the app's code version (the parts a serve file sets)."""
    policies = [d.get("autoscaling_config", {}).get("policy") for d in app.get("deployments") or []
                if isinstance(d, dict) and isinstance(d.get("autoscaling_config"), dict)]
    routers = [d.get("request_router_config") for d in app.get("deployments") or []
               if isinstance(d, dict) and isinstance(d.get("request_router_config"), dict)]
    return json.dumps({**{k: app.get(k) for k in CODE_VERSION_KEYS}, "autoscaling_policy": app.get("autoscaling_policy"),
                       "policies": policies, "routers": routers}, sort_keys=True, default=str)


def effective_options(app: dict) -> dict[str, dict]:
    """Per deployment, its options: an LLMServer's ``deployment_config`` from
    its LLMConfig (the ingress's ``ingress_deployment_config``), the
    ``deployments:`` overrides on top (Serve replaces an option given there)."""
    out: dict[str, dict] = {}
    for name, llm in _llms(app).items():
        out[name] = dict(llm.get("deployment_config") or {})
    if _is_llm_app(app):
        out[ingress_deployment_name(app)] = dict((app.get("args") or {}).get("ingress_deployment_config") or {})
    for name, opts in _overrides(app).items():
        out.setdefault(name, {}).update(opts)
    return out


def _leaves(old: Any, new: Any, path: str):
    """(path, old, new) of every differing leaf; dicts are walked, anything else compared whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new), key=str):
            if old.get(k) != new.get(k):
                yield from _leaves(old.get(k), new.get(k), f"{path}.{k}" if path else str(k))
    elif old != new:
        yield path, old, new


def _option_kind(field_: str) -> tuple[str, str]:
    top = field_.split(".", 1)[0]
    if top in LIGHTWEIGHT_FIELDS:
        if field_.startswith("autoscaling_config.policy"):
            return ROLLING, "the autoscaling policy is part of the code version (deploy_utils.get_app_code_version)"
        return IN_PLACE, f"{LIGHTWEIGHT_FIELDS[top]} option (serve/_private/config.py)"
    if top in RESTART_FIELDS:
        return ROLLING, f"{RESTART_FIELDS[top]} (serve/_private/version.py requires_actor_restart)"
    return ROLLING, "not a lightweight option of Serve's DeploymentConfig"


# --------------------------------------------------------------------------
# in place for LLM apps


def canonical(app: dict, defaults: dict | None = None, base_args: dict | None = None) -> dict:
    """The form llmctl deploys an LLM app in: every in-place option of an
    LLMConfig's ``deployment_config`` also given as a ``deployments:``
    override of its ``LLMServer:<id>`` (with what Ray Serve LLM merges under
    it, ``defaults``: an override replaces a whole option). Serve hashes the
    presence of an override's ``autoscaling_config`` into the code version
    (its policy), so an app deployed without overrides restarts when one
    appears: giving them from the first deployment keeps later changes of
    autoscaling bounds, targets, ``max_ongoing_requests`` in place.
    ``base_args``: the ``args`` to send (the deployed ones, when only such
    options changed: :func:`lift_in_place`). Overrides the user wrote win."""
    if not _is_llm_app(app):
        return app
    given = _overrides(app)
    overrides: dict[str, dict] = {}
    groups = _dp_groups(app)
    for name, llm in _llms(app).items():
        if name in groups:
            continue
        ov: dict[str, Any] = {}
        asc = (llm.get("deployment_config") or {}).get("autoscaling_config")
        if isinstance(asc, dict) and isinstance(asc.get("policy"), dict):
            # No overrides for a deployment with a custom policy: Ray 2.60 rebuilds an overridden deployment's
            # DeploymentConfig from model_dump() in the controller (application_state.override_deployment_info),
            # which drops the pickled policy and imports its path there, and the REST handler imports an override's
            # policy in the dashboard; neither has the app's py_modules (ModuleNotFoundError: llmctl_latency,
            # measured). The LLMConfig carries it to the app's build task, which has them.
            if name in given:
                overrides[name] = given.pop(name)
            continue
        for k, v in (llm.get("deployment_config") or {}).items():
            if _option_kind(k)[0] != IN_PLACE:
                continue
            d = (defaults or {}).get(k)
            ov[k] = {**d, **v} if isinstance(d, dict) and isinstance(v, dict) else copy.deepcopy(v)
        ov.update(given.pop(name, {}))
        if ov:
            overrides[name] = ov
    overrides.update(given)
    out = {k: v for k, v in app.items() if k != "deployments"}
    if base_args is not None:
        out["args"] = copy.deepcopy(base_args)
    if overrides:
        out["deployments"] = [{"name": n, **o} for n, o in overrides.items()]
    return out


def lift_in_place(deployed: dict, new: dict, defaults: dict | None = None) -> dict | None:
    """``new`` in :func:`canonical` form on the deployed ``args`` when the
    LLMConfigs differ only in in-place options of their ``deployment_config``
    and the code version stays: Serve then applies the change to running
    replicas. None otherwise (``new`` goes as it is; replicas restart)."""
    if not (_is_llm_app(deployed) and _is_llm_app(new)):
        return None
    old_args, new_args = deployed.get("args") or {}, new.get("args") or {}
    if {k: v for k, v in old_args.items() if k != "llm_configs"} != {k: v for k, v in new_args.items() if k != "llm_configs"}:
        return None
    old_llms, new_llms = _llms(deployed), _llms(new)
    if list(old_llms) != list(new_llms):
        return None
    groups = _dp_groups(new)
    for name, llm in new_llms.items():
        old_llm = old_llms[name]
        if name in groups and old_llm != llm:
            return None  # a DP group's counts are in groups, which an override cannot say: the app is re-sent
        asc = (llm.get("deployment_config") or {}).get("autoscaling_config")
        if old_llm != llm and isinstance(asc, dict) and isinstance(asc.get("policy"), dict):
            # a custom policy's deployment gets no override (canonical): its options reach Serve only in the
            # LLMConfig, part of the code version; on the deployed args the change would be dropped (it was:
            # a latency target raised in place kept the old target, issue 41)
            return None
        if {k: v for k, v in old_llm.items() if k != "deployment_config"} != \
                {k: v for k, v in llm.items() if k != "deployment_config"}:
            return None
        old_dc, new_dc = old_llm.get("deployment_config") or {}, llm.get("deployment_config") or {}
        for k in set(old_dc) | set(new_dc):
            if old_dc.get(k) != new_dc.get(k) and (k not in new_dc or _option_kind(k)[0] != IN_PLACE):
                return None
    out = canonical(new, defaults, old_args)
    return out if code_key(out) == code_key(deployed) else None


# --------------------------------------------------------------------------
# the plan


def _replicas(opts: dict, current: dict | None) -> int:
    if current and isinstance(current.get("target_num_replicas"), int) and current["target_num_replicas"] > 0:
        return current["target_num_replicas"]
    asc = opts.get("autoscaling_config")
    if isinstance(asc, dict):
        return int(asc.get("initial_replicas") or asc.get("min_replicas") or 1)
    n = opts.get("num_replicas", 1)
    return n if isinstance(n, int) and n > 0 else 1


def rollout_of(app: str, dep: str, opts: dict, resources: dict[str, float], current: dict | None,
               gang: int = 1) -> Rollout:
    """Waves of one deployment's rolling restart (see the module doc).
    ``gang``: a DP deployment's DP size (its config counts groups, Serve's target ranks)."""
    if gang > 1:
        running = (current or {}).get("target_num_replicas")
        n = running if isinstance(running, int) and running > 0 else _replicas(opts, None) * gang
    else:
        n = _replicas(opts, current)
    pct = float(opts.get("rolling_update_percentage") or DEFAULT_ROLLING_UPDATE_PERCENTAGE)
    wave = _whole_groups(max(int(pct * n), 1), gang)
    surge_pct = int(opts.get("max_surge_percent") or 0)
    if surge_pct > 0:
        surge = _whole_groups((surge_pct * n + 99) // 100, gang)
        return Rollout(app, dep, n, wave, math.ceil(n / wave), surge, n, resources,
                       {k: v * surge for k, v in resources.items() if v}, gang)
    return Rollout(app, dep, n, wave, math.ceil(n / wave), 0, max(n - wave, 0), resources, {}, gang)


def _whole_groups(replicas: int, gang: int) -> int:
    """Replicas rounded up to whole DP groups (deployment_state.py _round_up_to_gang_size)."""
    return math.ceil(max(replicas, gang) / gang) * gang if gang > 1 else replicas


def _resources(app: dict, dep: str) -> dict[str, float]:
    llm = _llms(app).get(dep)
    if llm is None:
        return {"CPU": 1.0}
    out: dict[str, float] = {}
    for b in replica_bundles(llm)[0]:
        for k, v in b.items():
            out[k] = round(out.get(k, 0.0) + v, 6)
    return out


def _raw(app: dict) -> dict[str, Any]:
    """An app's ``args`` by deployment (each LLMConfig under its LLMServer, the ingress options, the rest)."""
    out: dict[str, Any] = dict(_llms(app))
    args = app.get("args") or {}
    if "ingress_deployment_config" in args:
        out[ingress_deployment_name(app)] = args.get("ingress_deployment_config")
    rest = {k: v for k, v in args.items() if k not in (*LLM_CONFIG_FIELDS, "ingress_deployment_config")}
    if rest or not _is_llm_app(app):
        out["(args)"] = rest if _is_llm_app(app) else args
    return out


def plan(status: dict, payload: dict, names: list[str], lifted: list[str] | None = None) -> Plan:
    """What PUTting ``payload`` does to the apps in ``status`` (Serve's GET);
    ``names``: the apps the serve file brings (others are re-sent unchanged)."""
    apps = status.get("applications") or {}
    result = Plan(lifted=list(lifted or []))
    new_apps = {a.get("name", "default"): a for a in payload.get("applications") or []}
    for name in names:
        new = new_apps.get(name)
        if new is None:
            continue
        cur = apps.get(name)
        old = (cur or {}).get("deployed_app_config")
        if old is None:
            result.changes.append(Change(name, None, "", None, None, NEW_APP, "a new application: deployed from scratch"))
            continue
        restart_all = code_key(old) != code_key(new)
        code_why = "args are part of the app's code version (serve/_private/deploy_utils.py get_app_code_version)"
        old_eff, new_eff = effective_options(old), effective_options(new)
        in_args = [(dep, path, a, b) for dep, (o, n) in _pairs(_raw(old), _raw(new)).items() for path, a, b in _leaves(o, n, "")]
        shown = [c for c in in_args if not _in_effect(c[0], c[1], old_eff, new_eff)]
        for dep, path, a, b in shown or in_args:
            result.changes.append(Change(name, dep, path, a, b, ROLLING, code_why))
        for key in ("import_path", "runtime_env"):
            if old.get(key) != new.get(key):
                result.changes.append(Change(name, None, key, old.get(key), new.get(key), ROLLING,
                                             "part of the app's code version (deploy_utils.get_app_code_version)"))
        if old.get("route_prefix") != new.get("route_prefix"):
            result.changes.append(Change(name, None, "route_prefix", old.get("route_prefix"), new.get("route_prefix"),
                                         IN_PLACE, "replicas reconfigured (serve/_private/version.py compute_hashes)"))
        deps_now = (cur or {}).get("deployments") or {}
        restart: set[str] = set(new_eff) | set(deps_now) if restart_all else set()
        for dep, (o, n) in _pairs(_overrides(old), _overrides(new)).items():
            for path, a, b in _leaves(o or {}, n or {}, ""):
                kind, why = _option_kind(path)
                if restart_all and kind == IN_PLACE:
                    kind, why = ROLLING, "a `deployments:` override, but the app restarts: " + code_why
                result.changes.append(Change(name, dep, f"deployments.{path}", a, b, kind, why))
                if kind == ROLLING:
                    restart.add(dep)
        if restart_all and not any(c.app == name and c.kind == ROLLING for c in result.changes):
            result.changes.append(Change(name, None, "code version", None, None, ROLLING,
                                         "the autoscaling policies or request routers of the `deployments:` overrides "
                                         "changed (deploy_utils.get_app_code_version)"))
        gangs = {d: dp for d, _, dp in llm_deployments(new) if dp > 1}
        for c in result.changes:
            if c.app == name and c.kind == ROLLING and c.deployment in gangs:
                c.why += f"; a DP group restarts as a unit (all {gangs[c.deployment]} ranks together)"
        for dep in sorted(restart):
            result.rollouts.append(rollout_of(name, dep, new_eff.get(dep, {}), _resources(new, dep), deps_now.get(dep),
                                              gangs.get(dep, 1)))
    for name, cur in apps.items():
        if name not in {a.get("name", "default") for a in payload.get("applications") or []}:
            result.changes.append(Change(name, None, "", None, None, REMOVED_APP, "removed: its replicas stop"))
    return result


def _in_effect(dep: str, path: str, old_eff: dict, new_eff: dict) -> bool:
    """An in-place option of an LLMConfig's ``deployment_config`` that the
    args change but a ``deployments:`` override already gave the running
    app (an earlier in-place update kept the deployed args): its effective
    value stays, so it is no change of its own."""
    parts = path.split(".")
    if parts[0] != "deployment_config" or len(parts) < 2 or _option_kind(".".join(parts[1:]))[0] != IN_PLACE:
        return False
    a, b = old_eff.get(dep), new_eff.get(dep)
    for p in parts[1:]:
        a = a.get(p) if isinstance(a, dict) else None
        b = b.get(p) if isinstance(b, dict) else None
    return a == b


def _pairs(old: dict, new: dict) -> dict[str, tuple[Any, Any]]:
    return {k: (old.get(k), new.get(k)) for k in list(dict.fromkeys([*old, *new])) if old.get(k) != new.get(k)}


def surge_problem(p: Plan, free_pools: list[dict[str, float]]) -> str | None:
    """The first rollout whose surge replicas do not fit in what is free (the rollout would stall)."""
    from llmctl.placement import place_replica

    pools = copy.deepcopy(free_pools)
    for r in p.rollouts:
        for _ in range(r.surge // r.gang):  # a DP group's ranks are placed together (one gang placement group, PACK)
            if not place_replica([r.replica_resources] * r.gang, "PACK", pools):
                need = ", ".join(f"{k} {v:g}" for k, v in sorted(r.extra.items()))
                return (f"{r.app}/{r.deployment}: the rollout starts {r.surge} replacement(s) before stopping old ones "
                        f"(max_surge_percent) and needs {need} free, which the cluster does not have: it would stall "
                        "half-way; lower max_surge_percent (0: replace in place, with a capacity dip) or free resources")
    return None
