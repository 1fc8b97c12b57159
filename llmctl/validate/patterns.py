"""Checks of the data-parallel and prefill/decode apps as Ray 2.60 builds them
(llmctl.patterns has the rules; serving_patterns/ in Ray the code): the
builder against data_parallel_size, the KV connector of both pools."""

from __future__ import annotations

from typing import Any, Optional

from llmctl import patterns as P
from llmctl.builders import Builder, get_in
from llmctl.scalars import is_int
from llmctl.validate.documents import _Sink


def _ek(data: Any) -> dict:
    ek = data.get("engine_kwargs") if isinstance(data, dict) else None
    return ek if isinstance(ek, dict) else {}


def _at(sink: _Sink, loc: tuple, *inner) -> tuple:
    """``loc`` + ``inner`` when the LLMConfig is inline in this document (the
    key is there to point at), else ``loc`` (a file path: the message names it)."""
    try:
        entry = get_in(sink.doc.data, loc)
    except (KeyError, IndexError, TypeError):
        return loc
    if not isinstance(entry, dict):
        return loc
    node, out = entry, loc
    for k in inner:
        if not isinstance(node, dict) or k not in node:
            break
        node, out = node[k], out + (k,)
    return out


def _where(sink: _Sink, loc: tuple, inner: tuple = ()) -> str:
    """'' for an LLMConfig inline in this document, else " (in its model config file)"."""
    try:
        inline = isinstance(get_in(sink.doc.data, loc), dict)
    except (KeyError, IndexError, TypeError):
        inline = False
    return "" if inline else " (in its model config file)"


def check_dp_builder(builder: Builder, seen: list[tuple[tuple, Optional[str], Any]], sink: _Sink) -> None:
    """data_parallel_size against the builder (dp_server.py DPServer.get_deployment_options)."""
    for loc, _, data in seen:
        ek = _ek(data)
        if "data_parallel_size" not in ek:
            if builder.kind == "dp":
                sink.warn(_at(sink, loc, "engine_kwargs"), f"{builder.import_path} without engine_kwargs.data_parallel_size: a "
                          "DP group of one rank, an ordinary replica (set data_parallel_size >= 2)", code="dp-builder")
            continue
        dp = ek["data_parallel_size"]
        here = _at(sink, loc, "engine_kwargs", "data_parallel_size")
        if builder.kind == "openai":
            if isinstance(dp, int) and not isinstance(dp, bool) and dp > 1:
                sink.add(here, f"data_parallel_size {dp}{_where(sink, loc, ('engine_kwargs', 'data_parallel_size'))} under "
                               f"{builder.import_path}: its replica reserves one engine's GPUs and starts no DP ranks; use "
                               f"{P.DP_BUILDER} (its replicas are the ranks)", "error", code="dp-builder")
            continue
        if not (isinstance(dp, int) and not isinstance(dp, bool) and dp > 0):
            sink.add(here, f"must be a positive integer, got {dp!r} (Ray's DPServer: \"Invalid data_parallel_size\")",
                     "error", code="dp-builder")
        elif dp == 1 and builder.kind == "dp":
            sink.warn(here, "1: a DP group of one rank, an ordinary replica (set data_parallel_size >= 2)", code="dp-builder")
        elif dp > 1:
            _group_note(data, ek, dp, here, sink)


def _group_note(data: dict, ek: dict, dp: int, here: tuple, sink: _Sink) -> None:
    """The GPUs and nodes one DP group takes (a note)."""
    from llmctl import sizing
    from llmctl.hardware import by_ray_type

    acc = data.get("accelerator_type")
    gpu = by_ray_type(acc) if isinstance(acc, str) else None  # by_ray_type reads "A10" as Ray does (A10G)
    tp, pp = (ek.get(k, 1) if is_int(ek.get(k, 1)) and ek.get(k, 1) > 0 else 1
              for k in ("tensor_parallel_size", "pipeline_parallel_size"))
    gpus = dp * tp * pp
    where = f" on {sizing.nodes_of(gpu, gpus)} {gpu.name} node(s) of {gpu.gpus_per_node}" if gpu is not None else ""
    sink.add(here, f"one DP group is {dp} ranks x TP {tp}" + (f" x PP {pp}" if pp > 1 else "") + f" = {gpus} "
                   f"{'GPUs' if gpu is not None or acc is not None else 'engine workers'}{where}, gang-scheduled (PACK) and "
                   "restarted as a unit; min/max_replicas count groups", "note", code="dp-layout")


def check_pd_connector(ploc: tuple, pdata: Any, dloc: tuple, ddata: Any, sink: _Sink) -> None:
    """Both pools' kv_transfer_config: present (PDServingArgs._validate_kv_transfer_config), a
    kv_role vLLM knows (KVTransferConfig), prefill not only consuming and decode not only
    producing, one connector; and the KV layout both sides must share."""
    configs = {}
    for role, loc, data in (("prefill", ploc, pdata), ("decode", dloc, ddata)):
        kv = _ek(data).get("kv_transfer_config")
        where = _where(sink, loc, ("engine_kwargs",))
        if kv is None:
            sink.add(_at(sink, loc, "engine_kwargs"), f"no engine_kwargs.kv_transfer_config{where}: Ray refuses a "
                     f"prefill/decode app without it on both pools (\"kv_transfer_config is required for P/D "
                     f"disaggregation\"); e.g. {{kv_connector: {P.DEFAULT_KV_CONNECTOR}, kv_role: kv_both}}",
                     code="pd-connector")
            continue
        kloc = _at(sink, loc, "engine_kwargs", "kv_transfer_config")
        if not isinstance(kv, dict):
            sink.add(kloc, "kv_transfer_config must be a mapping (kv_connector, kv_role, …)", code="pd-connector")
            continue
        configs[role] = (kloc, kv)
        if not isinstance(kv.get("kv_connector"), str) or not kv["kv_connector"].strip():
            sink.add(kloc, f"no kv_connector{where}: the {role} pool has no way to hand over the KV cache "
                           f"(e.g. {P.DEFAULT_KV_CONNECTOR})", code="pd-connector")
        kv_role = kv.get("kv_role")
        if kv_role is None:
            sink.add(kloc, f"no kv_role{where}: vLLM needs one of {', '.join(P.KV_ROLES)} (kv_both on both pools)",
                     code="pd-connector")
        elif kv_role not in P.KV_ROLES:
            sink.add(_at(sink, loc, "engine_kwargs", "kv_transfer_config", "kv_role"),
                     f"{kv_role!r}{where} is not a kv_role vLLM knows ({', '.join(P.KV_ROLES)})", code="pd-connector")
        elif (role, kv_role) in (("prefill", "kv_consumer"), ("decode", "kv_producer")):
            sink.add(_at(sink, loc, "engine_kwargs", "kv_transfer_config", "kv_role"),
                     f"{kv_role}{where} on the {role} pool: the prefill pool produces the KV cache and the decode pool "
                     "consumes it (kv_both on both is what Ray's guide gives)", code="pd-connector")
    if len(configs) == 2:
        (_, pkv), (_, dkv) = configs["prefill"], configs["decode"]
        pc, dc = pkv.get("kv_connector"), dkv.get("kv_connector")
        if isinstance(pc, str) and isinstance(dc, str) and pc != dc:
            sink.add(_at(sink, dloc, "engine_kwargs", "kv_transfer_config", "kv_connector"),
                     f"decode's kv_connector {dc!r} differs from prefill's {pc!r}: the pools hand the KV cache over "
                     "through one connector", code="pd-connector")
    pek, dek = _ek(pdata), _ek(ddata)
    for key, default in (("kv_cache_dtype", "auto"), ("block_size", None), ("dtype", "auto"), ("quantization", None)):
        if pek.get(key, default) != dek.get(key, default):
            sink.warn(_at(sink, dloc, "engine_kwargs", key), f"decode's {key} {dek.get(key, default)!r} differs from "
                      f"prefill's {pek.get(key, default)!r}: the pools must keep the KV cache in the same layout for decode "
                      "to use the blocks it pulls", code="pd-kv-layout")


def check_dp_layout(arch, gpu, ek: dict, tp: int, pp: int, sink: _Sink) -> None:
    """Data-parallel attention / expert parallelism against the model (llmctl.patterns.dp_problems)."""
    dp = ek.get("data_parallel_size", 1)
    dp = dp if is_int(dp) and dp > 1 else 1
    ep = ek.get("enable_expert_parallel") is True
    for severity, message in P.dp_problems(arch, dp, ep):
        key = "enable_expert_parallel" if message.startswith("enable_expert_parallel") else "data_parallel_size"
        sink.add(("engine_kwargs", key), message, severity, code="dp-layout")
