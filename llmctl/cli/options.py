"""Options shared by several commands, defined once, with
readable metavars and shell completion of catalog model ids and GPU types."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from typing_extensions import Annotated


def complete_model(incomplete: str) -> list[str]:
    """Catalog ids for shell completion (a local path or repo id is typed as is)."""
    from llmctl.catalog import load_catalog

    return [i for i in load_catalog() if i.startswith(incomplete)]


def complete_gpu(incomplete: str) -> list[str]:
    from llmctl.hardware import GPUS

    return [g for g in GPUS if g.lower().startswith(incomplete.lower())]


def _gpu_help() -> str:
    from llmctl.hardware import GPUS

    return "GPU type: " + ", ".join(n for n, g in GPUS.items() if not g.is_cpu) + ", or cpu."


GPU_HELP = _gpu_help()

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of a table.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Accept defaults and skip the confirmation.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite existing files / accept a configuration that does not fit.")]
AddressOpt = Annotated[
    Optional[str],
    typer.Option(
        "--address",
        envvar="RAY_ADDRESS",
        metavar="ADDRESS",
        help="Ray dashboard URL (http://HOST:8265), GCS address (HOST:6379) or Ray Client address (ray://HOST:10001); default: the local cluster llmctl started.",
        show_envvar=True,
    ),
]


RayTokenEnvOpt = Annotated[
    Optional[str],
    typer.Option(
        "--ray-token-env",
        metavar="NAME",
        help="Environment variable holding the Ray token of a cluster with token authentication (default: RAY_AUTH_TOKEN, "
        "RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token; the local head llmctl started uses its own).",
    ),
]
OutputDirOpt = Annotated[Path, typer.Option("--output-dir", "-o", metavar="DIR", help="Directory to write model_config/ and serve_*.yaml into.")]
ModelOpt = Annotated[
    Optional[str],
    typer.Option("--model", "-m", metavar="MODEL", autocompletion=complete_model,
                 help="Catalog id, HF repo id (org/name) or local directory with config.json."),
]
GpuOpt = Annotated[
    Optional[str],
    typer.Option("--gpu", metavar="GPU", autocompletion=complete_gpu, help=GPU_HELP.replace(", or cpu", "") + " Default: every type."),
]
# Repeatable per-model options of gen-config: once for every model, or once per --model.
Multi = Optional[List[str]]

# KubeRay manifest options (llmctl kuberay, gen-config --kuberay).
GpusPerNodeOpt = Annotated[Optional[List[str]], typer.Option(
    "--gpus-per-node", metavar="N|GPU=N",
    help="GPUs per node (a KubeRay worker pod), for every GPU type or one (H100=8): TP stays within a node and a replica of "
         "TP x PP larger than one spans several. Default: the GPU type's usual node (8 for data-center GPUs); KubeRay pods: "
         "the models' TP x PP, at most a node.")]
NodeSelectorOpt = Annotated[str, typer.Option(
    "--node-selector", metavar="STYLE",
    help="Node label that picks the GPU type: gke (cloud.google.com/gke-accelerator), nvidia (nvidia.com/gpu.product, GPU feature discovery) or none.")]
HfSecretOpt = Annotated[Optional[str], typer.Option(
    "--hf-secret", metavar="NAME:KEY",
    help="Kubernetes Secret (and key) holding the Hugging Face token, mounted as a file on every pod (HF_TOKEN_PATH). Never the token.")]
ApiKeySecretOpt = Annotated[Optional[str], typer.Option(
    "--api-key-secret", metavar="NAME:KEY",
    help="Kubernetes Secret (and key) holding the endpoint's API key, mounted as a file on every pod; the app gets llmctl's API-key ingress (401 without the key). Never the key.")]
ImageOpt = Annotated[Optional[str], typer.Option(
    "--image", metavar="IMAGE", help="Container image (default rayproject/ray-llm:<Ray version>-py311-cu128).")]
UpgradeStrategyOpt = Annotated[str, typer.Option(
    "--upgrade-strategy", metavar="TYPE",
    help="NewCluster (zero-downtime: a second cluster's worth of GPUs during upgrades) or None (in place).")]

# Serving patterns (llmctl.patterns): gen-config and plan.
DpOpt = Annotated[Optional[str], typer.Option(
    "--dp", metavar="N",
    help="Data-parallel attention: N ranks per group (each a vLLM engine of --tp GPUs), written as Ray's "
         "build_dp_openai_app; replicas count groups. For MoE models, with --enable-expert-parallel.")]
EpOpt = Annotated[Optional[bool], typer.Option(
    "--enable-expert-parallel/--no-enable-expert-parallel",
    help="Deal a MoE model's experts over the ranks (DP x TP) instead of splitting each (default: on with --dp for MoE models).")]
PdOpt = Annotated[Optional[str], typer.Option(
    "--pd", metavar="PREFILL:DECODE",
    help="Prefill/decode disaggregation (Ray's build_pd_openai_app): replicas of each pool per replica asked, e.g. 1:2.")]
KvConnectorOpt = Annotated[Optional[str], typer.Option(
    "--kv-connector", metavar="NAME",
    help="With --pd: the vLLM KV connector between the pools: NixlConnector (default) or LMCacheConnectorV1 (Ray sets up both); "
         "another vLLM connector (e.g. ExampleConnector) runs with Ray's default backend.")]
PrefillTpOpt = Annotated[Optional[str], typer.Option("--prefill-tp", metavar="N", help="With --pd: the prefill pool's TP (default: --tp).")]
DecodeTpOpt = Annotated[Optional[str], typer.Option("--decode-tp", metavar="N", help="With --pd: the decode pool's TP (default: --tp).")]
PrefillArgOpt = Annotated[Optional[List[str]], typer.Option(
    "--prefill-arg", metavar="KEY=VALUE", help="With --pd: a vLLM engine argument of the prefill pool only (repeatable).")]
DecodeArgOpt = Annotated[Optional[List[str]], typer.Option(
    "--decode-arg", metavar="KEY=VALUE", help="With --pd: a vLLM engine argument of the decode pool only (repeatable).")]

# Latency estimates (llmctl.planner.capacity / load): gen-config --slo and plan.
IslOpt = Annotated[int, typer.Option("--isl", metavar="TOKENS", help="With --slo (plan: also --concurrency, --rate): prompt tokens per request.")]
OslOpt = Annotated[int, typer.Option("--osl", metavar="TOKENS", help="With --slo (plan: also --concurrency, --rate): output tokens per request.")]
PriceOpt = Annotated[Optional[str], typer.Option(
    "--price", metavar="GPU=USD,...",
    help="With --slo: USD per GPU-hour, overriding llmctl's dated default table (e.g. L4=0.70,H100=2.99).")]
ProfileOpt = Annotated[Optional[List[Path]], typer.Option(
    "--profile", metavar="FILE",
    help="With --slo: a `bench --sweep --output` file (repeatable: one per replica count) to fit the model's efficiencies to; needed for --gpu cpu.")]
