"""`llmctl plan` as a core: a model, GPU types and options in; rows out.

Values go through the parsers gen-config uses (:mod:`llmctl.spec`; a bad one
raises UsageError naming the parameter, with gen-config's message), and the
advised row is ``sizing.choose``'s — the rule gen-config's defaults and the
catalog's recommendations follow. No ray / vllm import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from llmctl import patterns, sizing, spec
from llmctl.catalog import ModelProfile, resolve_model
from llmctl.errors import UsageError, param, template_of
from llmctl.hardware import GPUS, GPUType, gpu_of_memory, with_node_size
from llmctl.sizing.layouts import default_layout
from llmctl.workload import DEFAULT_ISL, DEFAULT_OSL, TracePlan


def weights(dtype: Optional[str], quantization: Optional[str]) -> tuple[str, Optional[str]]:
    """``dtype`` and ``quantization`` as gen-config takes them (vLLM's choices, the engine-argument table); a
    quantization given as the dtype (``fp8``, ``int4``, ``awq``: :func:`llmctl.quant.methods_for`) names ``quantization``."""
    from llmctl import engine_args as EA
    from llmctl.quant import methods_for

    text, methods = str(dtype or "auto").strip(), methods_for(str(dtype or "auto"))
    if methods:
        raise UsageError(f"{param('dtype')}: '{text}' is a quantization; {param('dtype')} is vLLM's dtype (auto, half, bfloat16, "
                         f"float32, …): pass {param('quantization', methods[0])}"
                         + (f" (or {', '.join(methods[1:])})" if len(methods) > 1 else ""), param="dtype")
    q = None if quantization is None else parse_flag("quantization", lambda v: EA.parse_value("quantization", v), quantization)
    return parse_flag("dtype", lambda v: EA.parse_value("dtype", v), text), q


def model_arch(model: Union[str, ModelProfile]) -> tuple[ModelProfile, Any]:
    """The model (a catalog id, an HF repo id, a directory or a profile) and its architecture, which sizing needs."""
    profile = model if isinstance(model, ModelProfile) else parse_flag("model", resolve_model, model)
    if profile.architecture is None:
        raise UsageError(f"{param('model')}: {profile.hf_repo}: no architecture known (weights in a bucket); "
                         "pass an HF repo id or a directory with config.json", param="model")
    return profile, profile.architecture


def _check_tokens(isl, osl) -> None:  # --isl, --osl
    for name, v in (("isl", isl), ("osl", osl)):
        if v is None or int(v) < 1:
            raise UsageError(f"{param(name)}: must be a positive number of tokens (got {v})", param=name)


def parse_flag(name: str, parse, value):
    """``value`` through ``parse``; a bad one is a UsageError naming parameter ``name``."""
    try:
        return spec.parse_flag(value, flag=param(name), parse=parse)
    except UsageError as e:
        e.param = name
        raise


@dataclass
class PlanTable:
    profile: ModelProfile
    rows: list[dict[str, Any]]
    choices: list[tuple[GPUType, sizing.Choice]] = field(default_factory=list)
    parameters: dict[str, int] = field(default_factory=dict)

    @property
    def advised(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["advised"]]

    def to_json(self) -> dict[str, Any]:
        return {"model": self.profile.id, "hf_repo": self.profile.hf_repo, "parameters": self.parameters, "rows": self.rows}


def gpu_types(gpu: Optional[str], gpu_memory: Optional[float]) -> list[GPUType]:
    """The GPU types to plan for: one named, one of a given size, or every type."""
    if gpu and gpu_memory is not None:
        raise UsageError(f"{param('gpu_memory')}: pass either {param('gpu')} or {param('gpu_memory')}, not both", param="gpu_memory")
    if gpu_memory is not None:
        if gpu_memory <= 0:
            raise UsageError(f"{param('gpu_memory')}: must be a positive number of GiB (got {gpu_memory:g})", param="gpu_memory")
        return [gpu_of_memory(gpu_memory)]
    if gpu is None or gpu.strip().lower() == "all":
        return [g for g in GPUS.values() if not g.is_cpu]
    g = parse_flag("gpu", spec.parse_gpu, gpu)
    if g.is_cpu:
        raise UsageError(f"{param('gpu')}: llmctl plan sizes GPU memory; choose a GPU type or pass {param('gpu_memory', 'GiB')} "
                         "(cpu is not sized)", param="gpu")
    return [g]


def parameters(arch) -> dict[str, int]:
    try:
        pc = sizing.count_parameters(arch)
    except sizing.SizingError:  # vocab unknown: parameters are optional in the output
        return {}
    return {"total": pc.total, "active": pc.active, "mtp": pc.mtp}


def _positive(name: str, value: Union[None, int, str]) -> Optional[int]:
    if value is None:
        return None
    return parse_flag(name, lambda v: spec.parse_tokens(v, what=name) if isinstance(v, str) else int(v), value)


def plan(
    model: Union[str, ModelProfile],
    *,
    gpu: Optional[str] = None,
    gpu_memory: Optional[float] = None,
    tp: Union[None, int, str] = None,
    pp: Union[int, str] = 1,
    max_model_len: Union[None, int, str] = None,
    gpu_memory_utilization: Optional[float] = None,
    dtype: str = "auto",
    kv_cache_dtype: str = "auto",
    min_concurrency: Optional[float] = None,
    vllm_version: Optional[str] = None,
    quantization: Optional[str] = None,
    enforce_eager: bool = False,
    enable_expert_parallel: bool = False,
    max_num_seqs: Union[None, int, str] = None,
    max_num_batched_tokens: Union[None, int, str] = None,
    gpus_per_node: Optional[list[str]] = None,
    dp: Union[None, int, str] = None,
    pd: Optional[str] = None,
    prefill_tp: Union[None, int, str] = None,
    decode_tp: Union[None, int, str] = None,
    decode_context_parallel_size: Union[None, int, str] = None,
) -> PlanTable:
    """Weights, KV cache, concurrency and a verdict per GPU type and TP size.

    ``gpus_per_node``: the node size (``["4"]`` or ``["H100=8"]``; default: the
    GPU type's usual node): TP stays within a node and a replica of TP x PP
    larger than one spans several (``row["nodes"]``).

    Without ``tp``, one row per valid TP size on one node, the advised one
    marked (``row["advised"]``, with ``row["reasons"]``); without
    ``max_model_len``, the context llmctl would choose. ``vllm_version`` is the
    vLLM whose memory profile is modelled (default: the one the installed Ray
    pins). ``quantization``, ``enforce_eager``, ``enable_expert_parallel``,
    ``max_num_seqs`` and ``max_num_batched_tokens`` are vLLM's engine arguments
    of those names, sized as :func:`llmctl.sizing.sizing_options` sizes them
    from a config. Raises UsageError with gen-config's message for a bad value.

    ``dp``: data-parallel attention (gen-config --dp): every row is one DP
    rank (``row["dp"]`` ranks per group, experts dealt over ``row["ep_size"]``
    ranks with ``enable_expert_parallel``, KV per rank). ``pd``
    (``"P:D"``): one row per pool (``row["pool"]``), prefill at
    ``prefill_tp`` and decode at ``decode_tp`` (default ``tp``). Without
    ``tp``, ``dp`` and ``pd``, a model that fits no TP of one node gets its
    default layout (llmctl.sizing.layouts: DP+EP or TP x PP over nodes) as the
    advised row. ``decode_context_parallel_size``: vLLM's DCP (it must divide the TP size)."""
    if min_concurrency is not None and min_concurrency <= 0:
        raise UsageError(f"{param('min_concurrency')}: must be a positive number (got {min_concurrency:g})",
                         param="min_concurrency")
    gmu = parse_flag("gpu_memory_utilization", spec.parse_gpu_memory_utilization, gpu_memory_utilization)
    dtype, quantization = weights(dtype, quantization)
    if str(kv_cache_dtype).lower() not in sizing.KV_CACHE_DTYPE_CHOICES:
        raise UsageError(f"{param('kv_cache_dtype')}: unknown '{kv_cache_dtype}'; choose one of: "
                         f"{', '.join(sizing.KV_CACHE_DTYPE_CHOICES)}", param="kv_cache_dtype")
    if vllm_version is not None:
        try:
            vllm_version = sizing.parse_vllm_version(vllm_version).text
        except sizing.SizingError as e:
            raise UsageError(f"{param('vllm_version')}: {template_of(e)}", param="vllm_version") from None
    gpus = [with_node_size(g, gpus_per_node or [], flag=param("gpus_per_node")) for g in gpu_types(gpu, gpu_memory)]
    profile, arch = model_arch(model)
    pp_n = parse_flag("pp", lambda v: spec.parse_pp(v, arch=arch), pp)
    tp_n = parse_flag("tp", lambda v: spec.parse_tp(v, arch=arch, gpu=gpus[0], pp=pp_n, expert_parallel=enable_expert_parallel), tp)
    mml = parse_flag("max_model_len", lambda v: spec.parse_max_model_len(v, arch=arch), max_model_len)

    engine = {"quantization": quantization, "enforce_eager": enforce_eager, "enable_expert_parallel": enable_expert_parallel,
              "max_num_seqs": _positive("max_num_seqs", max_num_seqs),
              "max_num_batched_tokens": _positive("max_num_batched_tokens", max_num_batched_tokens),
              "decode_context_parallel_size": _positive("decode_context_parallel_size", decode_context_parallel_size)}
    kw: dict[str, Any] = dict(gpu_memory_utilization=gmu, dtype=dtype, kv_cache_dtype=str(kv_cache_dtype).lower(),
                              vllm_version=vllm_version, **{k: v for k, v in sizing.sizing_options(engine).items()
                                                            if k not in ("dtype", "kv_cache_dtype")})
    dp_n = parse_flag("dp", patterns.parse_dp, dp) or 1
    pools = parse_flag("pd", patterns.parse_pd, pd)
    if pools is None and (prefill_tp is not None or decode_tp is not None):
        raise UsageError(f"{param('prefill_tp')}/{param('decode_tp')}: only with {param('pd')}", param="pd")
    if dp_n > 1:
        kw["data_parallel_size"] = dp_n
        if arch.moe is not None and max_num_batched_tokens is None:
            kw["max_num_batched_tokens"] = patterns.dp_batched_tokens(dp_n)
    table = PlanTable(profile, [], parameters=parameters(arch))
    if pools is not None:
        return _pd_plan(table, arch, gpus, pp_n, tp_n, mml, kw, prefill_tp, decode_tp, enable_expert_parallel)
    for g in gpus:
        choice = sizing.choose(arch, g, tp=tp_n, pp=pp_n, max_model_len=mml, min_concurrency=min_concurrency, **kw)
        table.choices.append((g, choice))
        sizes = [tp_n] if tp_n is not None else sizing.tp_sizes_on_node(arch, g, pp_n, enable_expert_parallel)
        for t in sizes:
            p = sizing.plan_for_gpu(arch, g, tp=t, pp=pp_n, max_model_len=choice.max_model_len, **kw)
            advised = tp_n is None and t == choice.tp and choice.fits
            table.rows.append({"gpu": g.name, **p.to_dict(), "nodes": sizing.nodes_of(g, dp_n * t, pp_n),
                               "gpus_per_node": g.gpus_per_node, "advised": advised,
                               "reasons": list(choice.reasons) if advised else []})
        if tp_n is None and dp_n == 1 and not choice.fits and pp_n == 1:
            lay = default_layout(arch, g, **kw)
            if lay is not None:
                p = lay.choice.plan
                table.rows.append({"gpu": g.name, **p.to_dict(), "nodes": lay.nodes, "gpus_per_node": g.gpus_per_node,
                                   "advised": True, "layout": lay.describe(), "engine_kwargs": dict(lay.engine),
                                   "reasons": [f"no TP of one {g.name} node holds it: its default layout is "
                                               f"{lay.describe()}", *lay.choice.reasons]})
    return table


def _pd_plan(table: PlanTable, arch, gpus, pp_n: int, tp_n, mml, kw: dict, prefill_tp, decode_tp, ep: bool) -> PlanTable:
    """One row per pool of a prefill/decode app: the prefill pool's budget is
    its batched tokens per step (max_num_batched_tokens: prompt tokens it
    takes at once), the decode pool's its KV capacity (concurrent requests)."""
    for g in gpus:
        for pool, given in (("prefill", prefill_tp), ("decode", decode_tp)):
            t = parse_flag(f"{pool}_tp", lambda v: spec.parse_tp(v, arch=arch, gpu=g, pp=pp_n, expert_parallel=ep), given)
            c = sizing.choose(arch, g, tp=t if t is not None else tp_n, pp=pp_n, max_model_len=mml, **kw)
            if c.plan is None:
                continue
            p = c.plan
            why = (f"prefill pool: {p.max_num_batched_tokens:,} prompt tokens per step (max_num_batched_tokens), "
                   f"{p.max_model_len:,}-token prompts held until decode pulls them" if pool == "prefill" else
                   f"decode pool: {p.kv_cache_tokens:,} KV tokens = {p.max_concurrency:.1f} concurrent full-length requests")
            table.rows.append({"gpu": g.name, **p.to_dict(), "nodes": sizing.nodes_of(g, c.tp * p.dp, pp_n),
                               "gpus_per_node": g.gpus_per_node, "advised": c.fits, "pool": pool,
                               "reasons": [why, *c.reasons]})
    return table


# --------------------------------------------------------------------------
# capacity for a goal (issue 24): llmctl plan --slo


@dataclass
class CapacityTable:
    profile: ModelProfile
    slo: Any
    rate: Optional[float]
    isl: int
    osl: int
    rows: list = field(default_factory=list)  # llmctl.perf.capacity.Capacity
    calibration: Any = None  # llmctl.perf.calibrate.Calibration
    prices: dict = field(default_factory=dict)  # the price used per GPU: (usd, "given" | date and source)

    @property
    def cheapest(self):
        return next((r for r in self.rows if r.cheapest), None)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.profile.id, "slo": self.slo.to_json(), "rate": self.rate, "isl": self.isl, "osl": self.osl,
                "estimate": True, "rows": [r.to_json() for r in self.rows],
                "calibration": self.calibration.to_json() if self.calibration is not None else None,
                "prices": self.prices}


def _cpu_setup(arch, name: str, sweeps: list) -> tuple:
    """The measured CPU deployment as a setup: its model shape at float32 and its engine limits."""
    from llmctl.perf.calibrate import engine_kwargs_of
    from llmctl.perf.roofline import Device, Engine, shape_of

    ek = engine_kwargs_of(sweeps[0]) if sweeps else {}
    mml = int(ek.get("max_model_len") or 512)
    p = sizing.plan(arch, gpu_memory_bytes=64 * 1024**3, tp=1, max_model_len=mml, dtype="float32", enforce_eager=True)
    shape = shape_of(arch, p, name=name, tp=1)
    kv_bytes = int(ek.get("kv_cache_memory_bytes") or 64 * 1024 * 1024)
    engine = Engine(max_num_seqs=int(ek.get("max_num_seqs") or 256),
                    max_num_batched_tokens=int(ek.get("max_num_batched_tokens") or max(mml, 4096)),
                    kv_tokens=kv_bytes // max(1, p.kv_bytes_per_token_replica))
    return ("cpu", 1, shape, Device("cpu", float("inf"), float("inf")), engine)


def _gpu_setups(arch, name: str, *, gpu: Optional[str], tp, max_model_len, dtype: str, kv_cache_dtype: str,
                max_num_seqs, quantization: Optional[str] = None) -> list[tuple]:
    """(gpu, tp, shape, device, engine) per GPU type (one, a comma list, or every one with a roofline) and TP size
    that starts the model: what plan --slo, --concurrency and --rate predict for."""
    from llmctl.perf.roofline import Engine, device_of, shape_of

    mml = parse_flag("max_model_len", lambda v: spec.parse_max_model_len(v, arch=arch), max_model_len)
    seqs = _positive("max_num_seqs", max_num_seqs)
    dtype, quantization = weights(dtype, quantization)
    q = {"quantization": quantization} if quantization else {}
    names = [x.strip() for x in gpu.split(",") if x.strip()] if gpu and "," in gpu else [gpu]
    setups = []
    for g in [g for n in names for g in gpu_types(n, None)]:
        if not g.hbm_gb_s:
            continue
        tp_n = parse_flag("tp", lambda v: spec.parse_tp(v, arch=arch, gpu=g), tp)
        choice = sizing.choose(arch, g, tp=tp_n, max_model_len=mml, dtype=dtype,
                               kv_cache_dtype=str(kv_cache_dtype).lower(), max_num_seqs=seqs, **q)
        sizes = [tp_n] if tp_n is not None else sizing.tp_sizes_on_node(arch, g, 1, False)
        for t in sizes:
            p = sizing.plan_for_gpu(arch, g, tp=t, max_model_len=choice.max_model_len, dtype=dtype,
                                    kv_cache_dtype=str(kv_cache_dtype).lower(), max_num_seqs=seqs, **q)
            if p is None or not p.fits:
                continue
            shape = shape_of(arch, p, name=name, tp=t, dtype=dtype, quantization=quantization)
            if shape is None:
                continue
            setups.append((g.name, t, shape, device_of(g), Engine(p.max_num_seqs, p.max_num_batched_tokens,
                                                                  p.kv_cache_tokens)))
    return setups


def capacity(
    model: Union[str, ModelProfile],
    *,
    slo: str,
    rate: Optional[float] = None,
    isl: int = DEFAULT_ISL,
    osl: int = DEFAULT_OSL,
    gpu: Optional[str] = None,
    tp: Union[None, int, str] = None,
    price: Optional[str] = None,
    profile: Optional[list] = None,
    max_model_len: Union[None, int, str] = None,
    dtype: str = "auto",
    kv_cache_dtype: str = "auto",
    max_num_seqs: Union[None, int, str] = None,
    quantization: Optional[str] = None,
    slo_at: str = "client",
) -> CapacityTable:
    """``llmctl plan --slo``: per GPU type and TP size, the estimated highest
    request rate one replica sustains within the targets, the replicas
    ``rate`` needs, the cost per hour and per million output tokens, and the
    bound that limits it; the cheapest priced setup that meets the goal is
    marked. ``profile``: paths of ``bench --sweep --output`` files whose fit
    replaces the default efficiencies (and makes ``gpu="cpu"`` plannable);
    ``slo_at="engine"``: TTFT targets as the engines measure it (what
    ``--autoscale-on`` scales on), fitted on the sweeps' engine-side TTFT.
    Figures are estimates (docs/capacity.md says how accurate)."""
    from llmctl.hardware import PRICES
    from llmctl.perf.calibrate import TTFT_AT, fit, load_sweeps
    from llmctl.perf.capacity import plan_capacity
    from llmctl.perf.slo import parse_prices, parse_slo

    goal = parse_slo(slo)
    if rate is not None and rate <= 0:
        raise UsageError(f"{param('rate')}: must be a positive number of requests per second (got {rate:g})", param="rate")
    _check_tokens(isl, osl)
    from llmctl.hardware import TABLE

    given = parse_prices(price, [g.name for g in TABLE])
    prices = {n: p.usd_per_hour for n, p in PRICES.items()}
    prices.update(given)
    profile_obj, arch = model_arch(model)
    sweeps = load_sweeps(profile) if profile else []
    if slo_at not in TTFT_AT or (slo_at == "engine" and not sweeps):
        raise UsageError(f"{param('slo_at')}: client (what the clients see) or engine (vLLM's own TTFT, what the latency "
                         f"policy scales on; it needs {param('profile')}, a sweep that read it); got {slo_at}", param="slo_at")
    cpu = gpu is not None and gpu.strip().lower() == "cpu"
    setups = []
    if cpu:
        if not sweeps:
            raise UsageError(f"{param('gpu', 'cpu')}: the CPU engine has no datasheet roofline; calibrate it with "
                             "`llmctl bench --sweep 1,2,4,8 --duration 30 --output bench.json` and pass it as "
                             f"{param('profile')}", param="gpu")
        setups.append(_cpu_setup(arch, profile_obj.id, sweeps))
    else:
        setups = _gpu_setups(arch, profile_obj.id, gpu=gpu, tp=tp, max_model_len=max_model_len, dtype=dtype,
                             kv_cache_dtype=kv_cache_dtype, max_num_seqs=max_num_seqs, quantization=quantization)
    if not setups:
        raise UsageError(f"no GPU setup starts this model here; lower {param('max_model_len')}, quantize ({param('quantization', 'fp8')}) "
                         "or pick a larger GPU")
    cal = None
    if sweeps:
        _, _, shape0, dev0, eng0 = setups[0]
        cal = fit(sweeps, shape0, dev0, eng0, ttft_at=slo_at)
    rows = plan_capacity(setups, goal, isl=int(isl), osl=int(osl), rate=rate, prices=prices, cal=cal)
    used = {r.gpu: ({"usd_per_hour": prices[r.gpu], "source": "given (--price)"} if r.gpu in given else
                    {"usd_per_hour": PRICES[r.gpu].usd_per_hour, "date": PRICES[r.gpu].date, "source": PRICES[r.gpu].source})
            for r in rows if r.gpu in prices}
    return CapacityTable(profile_obj, goal, rate, int(isl), int(osl), rows, cal, used)


# --------------------------------------------------------------------------
# latency and throughput at a load: llmctl plan --concurrency N,M / --rate R


@dataclass
class LoadTable:
    profile: Any
    mode: str  # "concurrency" (closed loop) | "rate" (open loop)
    values: tuple
    isl: int
    osl: int
    rows: list = field(default_factory=list)  # llmctl.perf.capacity.LoadRow

    def to_json(self) -> dict[str, Any]:
        return {"model": self.profile.id, "mode": self.mode, "values": list(self.values), "isl": self.isl,
                "osl": self.osl, "estimate": True, "per": "replica", "rows": [r.to_json() for r in self.rows]}


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``1,8,64`` → (1, 8, 64); anything else is a UsageError naming --concurrency."""
    vals = []
    for part in (text or "").split(","):
        part = part.strip()
        try:
            v = int(part)
        except ValueError:
            v = 0
        if v < 1 or str(v) != part.lstrip("+"):
            raise UsageError(f"{param('concurrency')}: '{part}' is not a positive whole number of concurrent requests "
                             "(e.g. 1,8,64)", param="concurrency")
        vals.append(v)
    return tuple(vals)


def load(
    model: Union[str, ModelProfile],
    *,
    concurrency: Optional[str] = None,
    rate: Optional[float] = None,
    isl: int = DEFAULT_ISL,
    osl: int = DEFAULT_OSL,
    gpu: Optional[str] = None,
    tp: Union[None, int, str] = None,
    max_model_len: Union[None, int, str] = None,
    dtype: str = "auto",
    kv_cache_dtype: str = "auto",
    max_num_seqs: Union[None, int, str] = None,
    quantization: Optional[str] = None,
) -> LoadTable:
    """``llmctl plan --concurrency N[,M...]`` (closed loop: N clients per
    replica) or ``--rate R`` (open loop: R requests per second per replica):
    per GPU type and TP size, the predicted TTFT, ITL, request and token
    throughput of one replica, each with the band its kind of setup was off
    by on the calibration data, and why a row extrapolates. The figures are
    those ``--slo`` searches over (llmctl.perf.capacity.at_load)."""
    from llmctl.perf.capacity import load_rows

    if (concurrency is None) == (rate is None):
        raise UsageError(f"pass one of {param('concurrency')} or {param('rate')}", param="concurrency")
    if rate is not None and not rate > 0:
        raise UsageError(f"{param('rate')}: must be a positive number of requests per second (got {rate:g})", param="rate")
    values = parse_concurrency(concurrency) if concurrency is not None else (float(rate),)
    _check_tokens(isl, osl)
    profile_obj, arch = model_arch(model)
    if gpu is not None and gpu.strip().lower() == "cpu":
        raise UsageError(f"{param('gpu', 'cpu')}: the CPU engine has no datasheet roofline; give {param('slo')} with {param('profile')} (a measured sweep)", param="gpu")
    setups = _gpu_setups(arch, profile_obj.id, gpu=gpu, tp=tp, max_model_len=max_model_len, dtype=dtype,
                         kv_cache_dtype=kv_cache_dtype, max_num_seqs=max_num_seqs, quantization=quantization)
    if not setups:
        raise UsageError(f"no GPU setup starts this model here; lower {param('max_model_len')}, quantize ({param('quantization', 'fp8')}) "
                         "or pick a larger GPU")
    mode = "concurrency" if concurrency is not None else "rate"
    rows = load_rows(setups, mode=mode, values=values, isl=int(isl), osl=int(osl))
    return LoadTable(profile_obj, mode, values, int(isl), int(osl), rows)


# --------------------------------------------------------------------------
# capacity for a traffic trace: llmctl plan --trace FILE --slo ...


DEFAULT_TRACE_WINDOW = 60.0


def trace_capacity(model: Union[str, ModelProfile], *, trace: str, slo: str, window: Optional[float] = None,
                   speedup: Optional[float] = None, **kw: Any) -> TracePlan:
    """``llmctl plan --trace``: the replicas, cost and limiting bound a trace
    needs within ``slo`` — sized for its busiest ``window`` seconds (the peak
    rate and the mean prompt / output tokens of the requests in it), not its
    mean rate; the rest of ``kw`` as :func:`capacity` takes it (gpu, tp,
    price, profile, max_model_len, …). Estimates (docs/capacity.md)."""
    from llmctl.workload import parse_speedup, read_trace

    w = DEFAULT_TRACE_WINDOW if window is None else float(window)
    if not w > 0:
        raise UsageError(f"{param('window')}: must be a positive number of seconds (got {window})", param="window")
    factor = parse_speedup(speedup)
    t = read_trace(trace).scaled(factor)
    summary = t.summary(w)
    peak = summary["peak"]
    isl = max(1, round(peak["input_tokens_mean"] or summary["input_tokens_mean"] or 1))
    osl = max(1, round(peak["output_tokens_mean"] or summary["output_tokens_mean"] or 1))
    table = capacity(model, slo=slo, rate=peak["rate"], isl=isl, osl=osl, **kw)
    return TracePlan(summary, table, t.rate_series(w), factor)
