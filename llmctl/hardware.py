"""GPU types llmctl offers, mapped to Ray's accelerator_type strings.

Each ``ray_type`` is a value of ``ray.util.accelerators.accelerators`` (ray
2.60.0), which is also what Ray Serve LLM's ``LLMConfig.accelerator_type``
accepts; tests check the mapping against Ray itself. ``memory_gib`` is the
device memory the CUDA driver reports as total (what ``nvidia-smi`` shows as
"MiB" total and what vLLM multiplies by gpu_memory_utilization), not the
marketing figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from llmctl.errors import UsageError

GIB = 1024**3


@dataclass(frozen=True)
class GPUType:
    name: str  # what users type: --gpu NAME
    ray_type: Optional[str]  # Ray accelerator_type; None for cpu
    memory_gib: float  # total device memory as reported by the driver
    nominal: str  # the marketing capacity, for display
    gpus_per_node: int  # the largest common node size for this GPU
    source: str

    @property
    def is_cpu(self) -> bool:
        return self.ray_type is None

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * GIB)


# Driver-reported totals (nvidia-smi "MiB" / 1024). Sources next to each.
GPUS: dict[str, GPUType] = {
    g.name: g
    for g in [
        GPUType("L4", "L4", 22.49, "24 GB", 8, "nvidia-smi: 23034MiB (g2-standard GCP L4)"),
        GPUType("A10G", "A10G", 22.49, "24 GB", 8, "nvidia-smi: 23028MiB (AWS g5)"),
        GPUType("L40S", "L40S", 44.99, "48 GB", 8, "nvidia-smi: 46068MiB (AWS g6e)"),
        GPUType("A100-40G", "A100-40G", 39.59, "40 GB", 8, "nvidia-smi: 40536MiB (A100-SXM4-40GB)"),
        GPUType("A100-80G", "A100-80G", 79.15, "80 GB", 8, "nvidia-smi: 81050MiB (A100-SXM4-80GB)"),
        GPUType("H100", "H100", 79.65, "80 GB", 8, "nvidia-smi: 81559MiB (H100 80GB HBM3)"),
        GPUType("H200", "H200", 140.4, "141 GB", 8, "nvidia-smi: 143771MiB (H200)"),
        GPUType("B200", "B200", 179.06, "180 GB", 8, "nvidia-smi: 183359MiB (B200)"),
        GPUType("cpu", None, 0.0, "-", 1, "CPU-only: placement bundles {CPU: 1}, no accelerator_type"),
    ]
}

# Spellings users type that mean one of the above.
ALIASES = {
    "a10": "A10G",
    "a100": "A100-80G",
    "a100-80gb": "A100-80G",
    "a100-40gb": "A100-40G",
    "h100-80gb": "H100",
    "l40s-48gb": "L40S",
}


def gpu_names() -> list[str]:
    return list(GPUS)


def get_gpu(name: str, *, flag: str = "--gpu") -> GPUType:
    """The GPU type a user named (case-insensitive; a few aliases)."""
    key = name.strip()
    for n, g in GPUS.items():
        if n.lower() == key.lower():
            return g
    alias = ALIASES.get(key.lower())
    if alias:
        return GPUS[alias]
    raise UsageError(f"{flag}: unknown GPU type '{name}'; choose one of: {', '.join(GPUS)}")


def by_ray_type(ray_type: str) -> Optional[GPUType]:
    for g in GPUS.values():
        if g.ray_type == ray_type:
            return g
    if ray_type == "A100":
        return GPUS["A100-80G"]
    return None
