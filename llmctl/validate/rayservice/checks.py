"""The checks a RayService needs beyond its CRD schema.

The operator's own rules (KubeRay ``utils/validation.go`` and the behaviour
in docs/clusters.md, "How a serve config maps to a RayService"): the name (a DNS-1035
label of at most 47 characters: kuberay#4045 requeues longer ones forever),
min ≤ max worker replicas, unique group names, ``rayStartParams`` resource
keys not mixed with a group's ``resources``, the upgrade strategy, the
initializing-timeout annotation.

The GPU arithmetic against the embedded Serve config, decided by the same
placement rules ``llmctl up`` uses on a live cluster
(:func:`llmctl.placement.demands` / :func:`~llmctl.placement.place`):
each worker pod is a node of G GPUs; a replica needs TP × PP GPU bundles with
its tensor-parallel group inside one pod; every deployment's max_replicas must
fit the pods the worker groups can reach.
"""

from __future__ import annotations

import re
from typing import Callable, Optional

from llmctl.validate.rayservice.nodes import Group, family, read_group, undetected
from llmctl.validate.rayservice.schema import dns1035_problem
from llmctl.placement import ACC_PREFIX, bundles_total
from llmctl.secrets import literal_secret
from llmctl import serve_facts as sf

NAME_MAX = 47  # kuberay#4045: longer RayService names are requeued forever
UPGRADE_TYPES = ("NewCluster", "NewClusterWithIncrementalUpgrade", "None")
TIMEOUT_ANNOTATION = "ray.io/initializing-timeout"
_GO_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$")
_START_PARAM_RESOURCES = ("num-cpus", "num-gpus", "memory", "resources")
# Ray Serve LLM's ENV_VARS_TO_PROPAGATE (ray/llm/_internal/serve/constants.py), copied into runtime_envs.
_PROPAGATED = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
_SIM_LIMIT = 4096  # replicas or pods beyond this: GPU arithmetic only, no bundle-by-bundle placement

Add = Callable[..., None]  # add(loc, message, severity="error", code=...)


def _dict(v) -> dict:
    return v if isinstance(v, dict) else {}


def _list(v) -> list:
    return v if isinstance(v, list) else []


def _cluster(obj: dict) -> dict:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    rc = spec.get("rayClusterConfig")
    return rc if isinstance(rc, dict) else {}


def operator_rules(obj: dict, add: Add) -> None:
    """The operator's checks the schema lacks, on the API server's view of ``obj``."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        add(("metadata", "name"), "missing: a RayService needs a name", code="k8s-name")
    elif problem := dns1035_problem(name, NAME_MAX):
        add(("metadata", "name"), f"'{name}': {problem} (KubeRay requeues a RayService with a longer name forever, "
                                  "kuberay#4045)", code="k8s-name")
    ann = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    t = ann.get(TIMEOUT_ANNOTATION)
    if t is None:
        add(("metadata",), f"no {TIMEOUT_ANNOTATION} annotation: a pod that never starts (a bad image, no GPU node) "
                           "leaves the RayService Initializing forever; e.g. \"30m\" (kuberay#4138)", "note",
            code="k8s-no-timeout")
    elif not (isinstance(t, str) and _GO_DURATION.match(t) and re.search(r"[1-9]", t)):
        add(("metadata", "annotations", TIMEOUT_ANNOTATION), f"{t!r} is not a positive duration such as \"30m\" or \"1h30m\"",
            code="k8s-timeout")
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    us = spec.get("upgradeStrategy")
    ut = us.get("type") if isinstance(us, dict) else None
    if ut is not None and ut not in UPGRADE_TYPES:
        add(("spec", "upgradeStrategy", "type"), f"{ut!r} is not a RayService upgrade strategy: {', '.join(UPGRADE_TYPES)}",
            code="k8s-upgrade")
    elif ut == "NewClusterWithIncrementalUpgrade" and not (us or {}).get("clusterUpgradeOptions"):
        add(("spec", "upgradeStrategy"), "NewClusterWithIncrementalUpgrade needs clusterUpgradeOptions "
                                         "(gatewayClassName, stepSizePercent, intervalSeconds)", code="k8s-upgrade")
    if "serveConfigV2" not in spec:
        add(("spec",), "no serveConfigV2: the RayService would start a cluster and serve nothing", code="k8s-no-serve-config")
    rc = _cluster(obj)
    seen: dict[str, int] = {}
    for i, g in enumerate(_list(rc.get("workerGroupSpecs"))):
        if not isinstance(g, dict):
            continue
        loc = ("spec", "rayClusterConfig", "workerGroupSpecs", i)
        gname = g.get("groupName")
        if isinstance(gname, str):
            if gname in seen:
                add(loc + ("groupName",), f"'{gname}' is also the name of worker group {seen[gname] + 1}; group names must be unique",
                    code="k8s-group")
            seen[gname] = i
        mn, mx = g.get("minReplicas"), g.get("maxReplicas")
        if isinstance(mn, int) and isinstance(mx, int) and mn > mx:
            add(loc + ("minReplicas",), f"{mn} is more than maxReplicas {mx}", code="k8s-replicas")
        params = g.get("rayStartParams") if isinstance(g.get("rayStartParams"), dict) else {}
        if isinstance(g.get("resources"), dict) and g["resources"]:
            mixed = [k for k in _START_PARAM_RESOURCES if k in params]
            if mixed:
                add(loc + ("rayStartParams", mixed[0]), f"set together with the group's resources field; KubeRay rejects "
                                                        f"both: declare {', '.join(mixed)} in one of them", code="k8s-resources")
    head = rc.get("headGroupSpec") if isinstance(rc.get("headGroupSpec"), dict) else {}
    if rc.get("enableInTreeAutoscaling"):
        hc = _containers(head)
        limits = _dict(_dict(hc[0].get("resources")).get("limits")) if hc else {}
        if hc and not {"cpu", "memory"} <= set(limits):
            add(("spec", "rayClusterConfig", "headGroupSpec", "template", "spec", "containers", 0, "resources"),
                "set cpu and memory limits on the head with the autoscaler on (the autoscaler fails without them, "
                "kuberay#2612)", "warning", code="k8s-head")
    copied = []  # where an HF token comes from a Secret into a container's environment
    for loc, c in _all_containers(rc):
        for j, e in enumerate(_list(c.get("env"))):
            if isinstance(e, dict) and literal_secret(e.get("name"), e.get("value")):
                add(loc + ("env", j, "value"), f"{e['name']} holds a literal value: anyone who can read the RayService reads "
                                               "it; use valueFrom.secretKeyRef (a Kubernetes Secret)", code="literal-token")
            elif isinstance(e, dict) and e.get("name") in _PROPAGATED and isinstance(e.get("valueFrom"), dict):
                copied.append((loc + ("env", j), e["name"]))
    if copied:
        add(copied[0][0], f"{copied[0][1]} from a Secret in the pods' environment ({len(copied)} entr"
                          f"{'y' if len(copied) == 1 else 'ies'}): Ray Serve LLM copies HF_TOKEN and HUGGING_FACE_HUB_TOKEN "
                          "from a replica's environment into its engine workers' runtime_env, which Ray's dashboard and "
                          "state API show; mount the Secret as a file and set HF_TOKEN_PATH to it instead "
                          "(llmctl kuberay --hf-secret does)", "warning", code="k8s-token-env")


def _containers(group: dict) -> list[dict]:
    spec = ((group.get("template") or {}).get("spec") or {}) if isinstance(group.get("template"), dict) else {}
    cs = spec.get("containers") if isinstance(spec, dict) else None
    return [c for c in cs if isinstance(c, dict)] if isinstance(cs, list) else []


def _all_containers(rc: dict):
    head = rc.get("headGroupSpec") if isinstance(rc.get("headGroupSpec"), dict) else {}
    for j, c in enumerate(_containers(head)):
        yield ("spec", "rayClusterConfig", "headGroupSpec", "template", "spec", "containers", j), c
    for i, g in enumerate(_list(rc.get("workerGroupSpecs"))):
        if isinstance(g, dict):
            for j, c in enumerate(_containers(g)):
                yield ("spec", "rayClusterConfig", "workerGroupSpecs", i, "template", "spec", "containers", j), c


def _has_shm(group: dict) -> bool:
    spec = _dict(_dict(group.get("template")).get("spec"))
    vols = {v.get("name") for v in _list(spec.get("volumes")) if isinstance(v, dict)
            and isinstance(v.get("emptyDir"), dict) and v["emptyDir"].get("medium") == "Memory"}
    return any(isinstance(m, dict) and m.get("mountPath") == "/dev/shm" and m.get("name") in vols
               for c in _containers(group) for m in _list(c.get("volumeMounts")))


# --------------------------------------------------------------------------
# GPU arithmetic


def groups(obj: dict, add: Optional[Add] = None) -> list[Group]:
    rc = _cluster(obj)
    auto = bool(rc.get("enableInTreeAutoscaling"))
    out = []
    for i, g in enumerate(_list(rc.get("workerGroupSpecs"))):
        if isinstance(g, dict):
            grp = read_group(g, i, auto)
            if add is not None:
                for loc, msg in grp.problems:
                    add(loc, msg, code="k8s-gpus")
            out.append(grp)
    return out


def _gloc(g: Group, *rest) -> tuple:
    return ("spec", "rayClusterConfig", "workerGroupSpecs", g.index) + rest


def gpu_arithmetic(obj: dict, serve: dict, add: Add, add_serve: Add) -> None:
    """Worker pods against the Serve config's LLM deployments. ``add`` reports
    at a manifest location, ``add_serve`` at a location inside serveConfigV2."""
    from llmctl.placement import demands, place, place_replica
    from llmctl.builders import app_llm_configs

    grps = groups(obj, add)
    rc = _cluster(obj)
    gpu_groups = [g for g in grps if g.gpus]
    ds = demands(serve)
    llm_slots = [(("applications", i) + slot, c) for i, app in enumerate(_list(serve.get("applications")))
                 for slot, c in app_llm_configs(app) if isinstance(c, dict)]
    wanted = {str(c.get("accelerator_type")) for _, c in llm_slots if isinstance(c.get("accelerator_type"), str)}
    unknown = _infer_types(gpu_groups, wanted)
    llm_demands = [d for d in ds if sf.is_llm_server(d.deployment)]
    broken = False
    for (loc, llm), d in zip(llm_slots, llm_demands):
        gpu_n = round(bundles_total(d.bundles, "GPU"))
        if gpu_n == 0:
            continue
        ek = llm.get("engine_kwargs") if isinstance(llm.get("engine_kwargs"), dict) else {}
        tp = ek.get("tensor_parallel_size", 1) if isinstance(ek.get("tensor_parallel_size", 1), int) else 1
        pp = ek.get("pipeline_parallel_size", 1) if isinstance(ek.get("pipeline_parallel_size", 1), int) else 1
        acc = llm.get("accelerator_type") if isinstance(llm.get("accelerator_type"), str) else None
        mid = sf.model_id_of(llm) or "?"
        if not gpu_groups:
            add_serve(loc, f"{mid} needs {gpu_n} GPU(s) per replica but no worker group has GPUs "
                           "(set nvidia.com/gpu limits on a worker group)", code="k8s-gpus")
            broken = True
            continue
        fit = [g for g in gpu_groups if acc is None or g.selected is None or g.selected == family(acc)]
        if not fit:
            sel = "; ".join(f"{g.name} selects {g.selected} ({g.selector})" for g in gpu_groups)
            add_serve(loc + ("accelerator_type",), f"{acc}: no worker group runs on {acc} nodes: {sel}", code="k8s-accelerator")
            broken = True
            continue
        known = [g for g in fit if g.selected is not None or (acc and ACC_PREFIX + acc in g.declared)]
        fit = known or fit  # groups whose GPU type is unknown are candidates only when no group names it
        for g in fit:
            if undetected(acc) and ACC_PREFIX + acc not in g.declared:
                add(_gloc(g, "rayStartParams"), f"{mid} asks for accelerator_type {acc}, which Ray never detects (a node gets "
                                                f"only A100): declare it, resources: '\"{{\\\"{ACC_PREFIX}{acc}\\\": 1}}\"'",
                    code="k8s-accelerator")
                broken = True
            elif acc and g.autoscaling and g.pods_min == 0 and g.selected is not None and ACC_PREFIX + acc not in g.declared:
                add(_gloc(g, "minReplicas"), f"0 pods at rest: the autoscaler cannot scale {g.name} up from zero for "
                                             f"accelerator_type {acc} unless rayStartParams.resources declares it (kuberay#863)",
                    code="k8s-scale-from-zero")
        holds = [g for g in fit if int(g.gpus or 0) >= tp and int(g.gpus or 0) % tp == 0]
        if not holds:
            g = fit[0]
            G = int(g.gpus or 0)
            where = _gloc(g, "template", "spec", "containers", 0, "resources", "limits")
            if G < tp:
                add(where, f"{G} GPU(s) per pod ({g.gpu_from}) but {mid} runs tensor parallel over {tp} GPUs, which must share "
                           f"a pod (set {tp * max(1, -(-G // tp))} or more, a multiple of {tp})", code="k8s-gpus")
            else:
                add(where, f"{G} GPUs per pod ({g.gpu_from}) is not a multiple of {mid}'s TP {tp}: "
                           f"{G % tp} GPU(s) per pod idle or a replica split across pods", code="k8s-gpus")
            broken = True
        for g in holds:
            G = int(g.gpus or 0)
            if pp > 1 and G % gpu_n and gpu_n % G:
                add(_gloc(g, "template", "spec", "containers", 0, "resources", "limits"),
                    f"{G} GPUs per pod vs {mid}'s TP {tp} x PP {pp} = {gpu_n}: pipeline stages land unevenly on pods",
                    code="k8s-pp-uneven")
            if tp > 1 and not _has_shm(rc["workerGroupSpecs"][g.index]):
                add(_gloc(g, "template", "spec"), f"no /dev/shm memory volume: Kubernetes' 64 MB default breaks NCCL "
                                                  f"for {mid}'s TP {tp} (mount an emptyDir with medium: Memory at /dev/shm)",
                    "warning", code="k8s-shm")
    if broken or not gpu_groups:
        return
    if unknown:
        add(_gloc(unknown[0]), f"no nodeSelector or declared accelerator_type says which GPU {unknown[0].name} has, so "
                               "llmctl cannot tell which models its pods hold; worker capacity not checked", "note",
            code="k8s-capacity")
        return
    _capacity(grps, ds, llm_slots, llm_demands, wanted, rc, add_serve, place, place_replica)


def _infer_types(gpu_groups: list[Group], wanted: set[str]) -> list[Group]:
    """Give a group without a node selector or declared type the GPU type it
    must have: the only one the models want, or the one its name spells
    (llmctl names groups gpu-<type>). Returns the groups left unknown."""
    fams = {family(t) for t in wanted}
    left = []
    for g in gpu_groups:
        if g.selected is not None:
            continue
        declared = [k[len(ACC_PREFIX):] for k in g.declared if k.startswith(ACC_PREFIX)]
        if declared:
            g.selected, g.selector = family(declared[0]), f"declares {ACC_PREFIX}{declared[0]}"
            continue
        named = {family(t) for t in wanted if t.lower() in re.split(r"[^a-z0-9-]+", g.name.lower())
                 or family(t).lower() in re.split(r"[^a-z0-9]+", g.name.lower())}
        if len(fams) == 1 or len(named) == 1:
            g.selected = next(iter(fams)) if len(fams) == 1 else next(iter(named))
            g.selector = "no selector; the only type wanted" if len(fams) == 1 else "no selector; from its name"
        elif len(fams) > 1:
            left.append(g)
    return left


def _head_pool(rc: dict) -> dict[str, float]:
    from llmctl.validate.rayservice.nodes import quantity

    head = rc.get("headGroupSpec") if isinstance(rc.get("headGroupSpec"), dict) else {}
    params = head.get("rayStartParams") if isinstance(head.get("rayStartParams"), dict) else {}
    cs = _containers(head)
    res = (cs[0].get("resources") or {}) if cs else {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    cpu = quantity(params["num-cpus"]) if "num-cpus" in params else quantity(limits.get("cpu")) or quantity(requests.get("cpu"))
    gpu = quantity(params["num-gpus"]) if "num-gpus" in params else quantity(limits.get("nvidia.com/gpu"))
    return {"CPU": cpu if cpu is not None else 1e9, "GPU": gpu or 0.0}


def _capacity(grps, ds, llm_slots, llm_demands, wanted, rc, add_serve, place, place_replica) -> None:
    total_need = sum(d.max_replicas * len(d.bundles) for d in ds)
    if any(d.max_replicas > _SIM_LIMIT for d in ds):
        return  # an absurd max_replicas is validate's own error; no simulation
    pools = [_head_pool(rc)]
    for g in grps:
        pools += [g.pool(wanted) for _ in range(min(g.pods, total_need + 1, _SIM_LIMIT))]
    by_name = {d.deployment: (loc, llm) for (loc, llm), d in zip(llm_slots, llm_demands)}
    for count, what in ((lambda d: d.min_replicas, "min_replicas"), (lambda d: d.max_replicas, "max_replicas")):
        trial = [dict(p) for p in pools]
        failed = place(ds, trial, count)
        if failed is None:
            continue
        d, placed = failed
        loc, llm = by_name.get(d.deployment, (("applications",), {}))
        gpus = round(bundles_total(d.bundles, "GPU"))
        reach = "maxReplicas" if any(g.autoscaling for g in grps) else "replicas (enableInTreeAutoscaling is off)"
        have = ", ".join(f"{g.name}: {g.pods} pod(s) x {g.gpus:g} GPU" for g in grps if g.gpus)
        asc = ("deployment_config", "autoscaling_config", "max_replicas" if what == "max_replicas" else "min_replicas")
        if not isinstance((llm.get("deployment_config") or {}).get("autoscaling_config"), dict):
            asc = ("deployment_config", "num_replicas")
        if not sf.is_llm_server(d.deployment):  # the ingress
            # min_replicas that cannot be placed: the app never runs (an error); max_replicas: the extra stay pending
            severity, code = ("error", "k8s-capacity") if what == "min_replicas" else (None, "k8s-max-replicas")
            add_serve(loc, f"{d.app}/{d.deployment}: {what} {count(d)} do not fit next to the models: each needs 1 CPU and the "
                           "pods have no CPU left (head num-cpus \"0\" puts it on the workers)", severity, code=code)
        else:
            severity, code = ("error", "k8s-capacity") if what == "min_replicas" else (None, "k8s-max-replicas")
            tail = "" if what == "min_replicas" else ": the extra replicas stay pending; the app runs"
            model = sf.model_id_of(llm) or d.deployment
            add_serve(loc + asc, f"{what} {count(d)} of {model} need {count(d) * gpus} GPUs "
                                 f"({gpus} per replica) but the worker groups at {reach} hold {placed} replica(s) next to the "
                                 f"other deployments ({have}){tail}; raise the group's maxReplicas or the GPUs per pod",
                      severity, code=code)
        return
