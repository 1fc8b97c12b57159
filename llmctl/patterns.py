"""Ray Serve LLM's serving patterns beyond one LLMConfig per model: data-parallel
attention with expert parallelism (``build_dp_openai_app``) and
prefill/decode disaggregation (``build_pd_openai_app``), as Ray 2.60 builds
them. The rules here are the ones gen-config writes by and validate checks
by (one rule per decision).

Data parallel (``ray/llm/_internal/serve/serving_patterns/data_parallel``):

- ``engine_kwargs.data_parallel_size: N`` makes N Serve replicas of the
  ``DPServer:<id>`` deployment one DP group, gang-scheduled (one placement
  group for the group, PACK) and restarted as a unit
  (``GangRuntimeFailurePolicy.RESTART_GANG``); each replica is one DP rank,
  a vLLM engine of TP x PP GPUs with its own KV cache.
- ``num_replicas`` and ``autoscaling_config``'s ``min/max/initial_replicas``
  count DP groups: Ray multiplies them by N (``DPServer.get_deployment_options``).
- ``placement_group_strategy`` is dropped (the gang is PACK).
- ``enable_expert_parallel: true`` deals the routed experts over the EP
  group, every GPU of every rank (DP x TP); attention stays per rank.

Prefill/decode (``serving_patterns/prefill_decode``): ``prefill_config`` and
``decode_config`` are two LLMConfigs of one model id, each with
``engine_kwargs.kv_transfer_config`` (Ray refuses the app without it), each
its own deployment (``Prefill:<id>``, ``Decode:<id>``) with its own TP,
engine settings and autoscaling; the ingress talks to decode, which asks
prefill for the first token and pulls the KV cache through the connector.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from llmctl.arch import ModelArch

DP_BUILDER = "ray.serve.llm:build_dp_openai_app"
PD_BUILDER = "ray.serve.llm:build_pd_openai_app"

# KV connectors Ray 2.60 registers a backend for (engines/vllm/kv_transfer/factory.py); any other
# vLLM connector runs with Ray's DefaultConnectorBackend (no setup, NIXL-style request protocol).
KV_CONNECTORS = ("NixlConnector", "LMCacheConnectorV1")
DEFAULT_KV_CONNECTOR = "NixlConnector"
# vLLM's KVTransferConfig.kv_role values (vllm/config/kv_transfer.py).
KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")
# Keys Ray's DPServer sets on every rank (dp_server.py update_engine_kwargs): a value in a file is replaced.
DP_OWNED = ("data_parallel_rank", "data_parallel_address", "data_parallel_rpc_port")

# With data-parallel attention and vLLM's default all2all backend every MoE layer runs over the tokens of
# all DP ranks (llmctl.sizing.profile: DP x max_num_batched_tokens): llmctl keeps that gathered batch at
# most this many tokens by lowering max_num_batched_tokens per rank (never below MIN_DP_BATCHED_TOKENS).
DP_GATHERED_TOKENS = 16384
MIN_DP_BATCHED_TOKENS = 2048


def parse_dp(text: Any) -> int:
    s = str(text).strip()
    if isinstance(text, bool) or not re.fullmatch(r"\+?\d+", s):
        raise ValueError(f"data-parallel size must be an integer, got '{text}'")
    if int(s) < 1:
        raise ValueError(f"data-parallel size must be >= 1, got {int(s)}")
    return int(s)


def parse_pd(text: Any) -> tuple[int, int]:
    """``"1:2"`` -> (1, 2): prefill and decode replicas (of each pool's minimum)."""
    m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", str(text))
    if not m:
        raise ValueError(f"'{text}' is not PREFILL:DECODE, e.g. 1:1 or 1:2 (replicas of each pool)")
    p, d = int(m.group(1)), int(m.group(2))
    if p < 1 or d < 1:
        raise ValueError(f"'{text}': each pool needs at least 1 replica")
    return p, d


def parse_kv_connector(text: Any) -> str:
    s = str(text).strip()
    for c in KV_CONNECTORS:
        if s.lower() == c.lower():
            return c
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*Connector[A-Za-z0-9_]*", s):
        return s  # another vLLM connector (ExampleConnector, MooncakeConnector, …): Ray's default backend runs it
    raise ValueError(f"'{text}' is not a vLLM KV connector; Ray 2.60 sets up {', '.join(KV_CONNECTORS)} "
                     "(other vLLM connectors, e.g. ExampleConnector, run with Ray's default backend)")


def kv_transfer_config(connector: str) -> dict[str, Any]:
    """The ``engine_kwargs.kv_transfer_config`` of both pools: the same
    connector, role ``kv_both`` (what Ray's P/D guide and vLLM's NIXL docs give
    both sides; the decode server decides per request who sends)."""
    return {"kv_connector": connector, "kv_role": "kv_both"}


def dp_batched_tokens(dp: int) -> int:
    return max(MIN_DP_BATCHED_TOKENS, DP_GATHERED_TOKENS // max(dp, 1))


def dp_problems(arch: Optional[ModelArch], dp: int, expert_parallel: bool) -> list[tuple[str, str]]:
    """(severity, message) for each way data-parallel attention or expert
    parallelism does not suit the model."""
    out: list[tuple[str, str]] = []
    if arch is None:
        return out
    if expert_parallel and arch.moe is None:
        out.append(("warning", "enable_expert_parallel on a model without routed experts (no MoE layers): vLLM has nothing "
                               "to deal out, the setting does nothing"))
    if dp > 1 and arch.moe is None:
        out.append(("warning", f"data_parallel_size {dp} on a dense model: vLLM's data parallelism is for MoE models "
                               "(attention per rank, experts shared over the ranks); a dense model's ranks are independent "
                               "engines that still step in lockstep, so use replicas instead (build_openai_app, "
                               "autoscaling_config.max_replicas)"))
    return out


def dp_rank_gpus(tp: int, pp: int) -> int:
    return tp * pp
