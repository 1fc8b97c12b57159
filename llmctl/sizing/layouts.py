"""The default layout of a model on a GPU type: the one rule the catalog's
``layouts``, ``gen-config --yes`` (no --tp/--pp/--dp given) and ``plan``
use, so they cannot disagree.

In order, the first that fits (sizing's verdict "fits" or "tight" at the
context :func:`~llmctl.sizing.advice.choose` picks):

1. **single node**: one engine of TP GPUs on one node (``choose``: the
   smallest TP that fits, the longest context up to the default);
2. **DP+EP** (MoE models only), what DeepSeek's, Moonshot's and Qwen's
   model cards and vLLM's recipes run for large MoE checkpoints:
   data-parallel attention with expert parallelism, TP 1 per rank and DP =
   the GPUs of 1, 2 or 4 nodes, experts dealt over all of them, each rank's
   batch at :func:`llmctl.patterns.dp_batched_tokens` (Ray's
   build_dp_openai_app; a DP group is gang-scheduled over the nodes);
3. **multi-node**: pipeline parallelism across 2-4 nodes, TP the largest
   valid size within a node (Ray's placement group PACK puts the stages on
   other nodes: :func:`~llmctl.sizing.advice.layout_problem`).

None when nothing up to 4 nodes holds the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from llmctl.arch import ModelArch
from llmctl.hardware import GPUType
from llmctl.patterns import dp_batched_tokens
from llmctl.sizing.advice import Choice, choose, tp_sizes_on_node

MAX_NODES = 4


@dataclass(frozen=True)
class Layout:
    kind: str  # "single node" | "DP+EP" | "multi-node"
    tp: int
    pp: int
    dp: int
    max_model_len: Optional[int]
    nodes: int
    choice: Choice
    engine: tuple[tuple[str, Any], ...] = ()  # engine settings the layout adds (data_parallel_size, …)

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp

    def to_dict(self) -> dict[str, Any]:
        """The catalog's form (llmctl.catalog.LayoutEntry)."""
        return {"kind": self.kind, "tp": self.tp, "pp": self.pp, "dp": self.dp, "max_model_len": self.max_model_len,
                "nodes": self.nodes, "engine_kwargs": dict(self.engine)}

    def describe(self) -> str:
        from llmctl.catalog import LayoutEntry

        return LayoutEntry.model_validate(self.to_dict()).describe()


def dp_engine(dp: int) -> dict[str, Any]:
    """The engine settings of a DP+EP layout of ``dp`` ranks (a MoE model)."""
    return {"data_parallel_size": dp, "enable_expert_parallel": True, "max_num_batched_tokens": dp_batched_tokens(dp)}


def default_layout(arch: Optional[ModelArch], gpu: GPUType, **kw: Any) -> Optional[Layout]:
    """The first layout of the module's list that fits, or None. ``kw``: the
    plan's engine inputs (llmctl.sizing.sizing_options)."""
    if arch is None or gpu.is_cpu:
        return None
    c = choose(arch, gpu, **kw)
    if c.fits and c.max_model_len:
        return Layout("single node", c.tp, 1, 1, c.max_model_len, 1, c)
    node = gpu.gpus_per_node
    if arch.moe is not None:
        for nodes in (1, 2, MAX_NODES):
            dp = node * nodes
            engine = {**dp_engine(dp), **{k: v for k, v in kw.items() if k == "max_num_batched_tokens"}}
            c = choose(arch, gpu, tp=1, **{**kw, **engine})
            if c.fits and c.max_model_len:
                return Layout("DP+EP", 1, 1, dp, c.max_model_len, nodes, c, tuple(engine.items()))
    for pp in range(2, MAX_NODES + 1):
        sizes = tp_sizes_on_node(arch, gpu, pp)
        if not sizes:
            continue
        tp = sizes[-1]
        if tp * pp <= node:
            continue  # one node: the single-node choice already tried it
        c = choose(arch, gpu, tp=tp, pp=pp, **kw)
        if c.fits and c.max_model_len:
            return Layout("multi-node", tp, pp, 1, c.max_model_len, -(-tp * pp // node), c)
    return None
