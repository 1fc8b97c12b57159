"""What the memory profile needs to know about a GPU besides its memory:
compute capability (which kernels and communicators vLLM enables), SM count
(one sampler buffer), and how the GPUs of a node are connected (which
communication buffers exist).

vLLM's own conditions decide what each trait switches on (see
:mod:`llmctl.sizing.profile`); the traits themselves are NVIDIA's published
specifications (product briefs / architecture whitepapers: compute capability
and SM count per board) — the only figure here that depends on them is a
≤ 0.1 GiB sampler buffer of vLLM 0.17-0.20.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from llmctl.sizing.formats import GIB


@dataclass(frozen=True)
class GPUTraits:
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    # "nvswitch": SXM boards whose GPUs reach each other over NVLink (A100 /
    # H100 / H200 / B200 HGX); "pcie": GPUs that talk over PCIe only.
    interconnect: str
    known: bool = True

    @property
    def hopper_or_newer(self) -> bool:
        """SM 9.0 / 10.x: where vLLM enables symmetric-memory all-reduce, the
        FlashInfer all-reduce fusion workspace and NCCL NVLS
        (SYMM_MEM_ALL_REDUCE_MAX_SIZES / FI_ALLREDUCE_FUSION_MAX_SIZE_MB keys)."""
        return self.compute_capability >= (9, 0)

    @property
    def blackwell_datacenter(self) -> bool:
        return self.compute_capability[0] == 10


# name pattern (regex, case-insensitive, matched against the GPU type's name) -> traits
_TABLE: list[tuple[str, GPUTraits]] = [
    (r"\bh100\b", GPUTraits("H100", (9, 0), 132, "nvswitch")),
    (r"\bh200\b", GPUTraits("H200", (9, 0), 132, "nvswitch")),
    (r"\bb200\b", GPUTraits("B200", (10, 0), 148, "nvswitch")),
    (r"\ba100\b", GPUTraits("A100", (8, 0), 108, "nvswitch")),
    (r"\bl40s\b", GPUTraits("L40S", (8, 9), 142, "pcie")),
    (r"\bl20\b", GPUTraits("L20", (8, 9), 92, "pcie")),
    (r"\bl4\b", GPUTraits("L4", (8, 9), 58, "pcie")),
    (r"\ba10g\b", GPUTraits("A10G", (8, 6), 80, "pcie")),
    (r"\ba10\b", GPUTraits("A10", (8, 6), 72, "pcie")),
    (r"\brtx ?4090\b", GPUTraits("RTX 4090", (8, 9), 128, "pcie")),
    (r"\brtx ?3090\b", GPUTraits("RTX 3090", (8, 6), 82, "pcie")),
    (r"\b(rtx )?a5000\b", GPUTraits("RTX A5000", (8, 6), 64, "pcie")),
]


def gpu_traits(name: Optional[str], memory_bytes: int) -> GPUTraits:
    """Traits of a GPU type by name; for a name llmctl does not know (e.g.
    ``--gpu-memory``) a guess by size, marked ``known=False``: ≥ 70 GiB is
    taken as a Hopper-class SXM board (vLLM's own size tiers), smaller as a
    PCIe card."""
    if name:
        for pattern, traits in _TABLE:
            if re.search(pattern, name, re.IGNORECASE):
                return traits
    if name is None:
        from llmctl.hardware import GPUS  # plan(gpu_memory_bytes=...) of a listed GPU type

        for g in GPUS.values():
            if not g.is_cpu and g.memory_bytes == memory_bytes:
                return gpu_traits(g.name, memory_bytes)
    label = name or f"{memory_bytes / GIB:.4g} GiB GPU"
    if memory_bytes >= 70 * GIB:
        return GPUTraits(label, (9, 0), 132, "nvswitch", known=False)
    return GPUTraits(label, (8, 9), 128, "pcie", known=False)
