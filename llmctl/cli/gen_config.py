"""`llmctl gen-config`: questions (or flags) -> model_config/*.yaml + serve_<ts>.yaml."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.serve_facts import LOOPBACK_HOST
from llmctl.cli.root import app
from llmctl.cli.console import err, out, print_json, warn
from llmctl.cli.options import (GPU_HELP, ApiKeySecretOpt, DecodeArgOpt, DecodeTpOpt, DpOpt, EpOpt, ForceOpt, GpusPerNodeOpt,
                                HfSecretOpt, ImageOpt, IslOpt, KvConnectorOpt, Multi, NodeSelectorOpt, OslOpt, OutputDirOpt, PdOpt,
                                PrefillArgOpt, PrefillTpOpt, PriceOpt, ProfileOpt, UpgradeStrategyOpt, YesOpt, complete_gpu,
                                complete_model)
from llmctl.workload import DEFAULT_ISL, DEFAULT_OSL


@app.command("gen-config")
def gen_config_cmd(
    model: Annotated[Multi, typer.Option("--model", "-m", metavar="MODEL", autocompletion=complete_model, help="Catalog id, HF repo id, local directory or s3://|gs:// URI. Repeat for several models in one app.")] = None,
    model_id: Annotated[Multi, typer.Option("--model-id", metavar="ID", help="Served model id (default: the catalog id / repo name).")] = None,
    gpu: Annotated[Multi, typer.Option("--gpu", metavar="GPU", autocompletion=complete_gpu, help=GPU_HELP)] = None,
    tp: Annotated[Multi, typer.Option("--tp", metavar="N", help="Tensor-parallel size (default: the smallest that fits).")] = None,
    pp: Annotated[Multi, typer.Option("--pp", metavar="N", help="Pipeline-parallel size (default 1).")] = None,
    min_replicas: Annotated[Multi, typer.Option("--min-replicas", metavar="N", help="Autoscaling minimum (default 1).")] = None,
    max_replicas: Annotated[Multi, typer.Option("--max-replicas", metavar="N", help="Autoscaling maximum (default: the minimum, at least 1).")] = None,
    dp: DpOpt = None,
    enable_expert_parallel: EpOpt = None,
    pd: PdOpt = None,
    kv_connector: KvConnectorOpt = None,
    prefill_tp: PrefillTpOpt = None,
    decode_tp: DecodeTpOpt = None,
    prefill_arg: PrefillArgOpt = None,
    decode_arg: DecodeArgOpt = None,
    max_model_len: Annotated[Multi, typer.Option("--max-model-len", metavar="TOKENS", help="Context length in tokens: 16384, or 16K = 16,384 (16k = 16,000, as vLLM reads it); default: the model's context capped at 32,768, or the most that fits.")] = None,
    target_ongoing_requests: Annotated[Multi, typer.Option("--target-ongoing-requests", metavar="N", help="Serve adds replicas above this many ongoing requests per replica (default: derived from the sizing plan).")] = None,
    max_ongoing_requests: Annotated[Multi, typer.Option("--max-ongoing-requests", metavar="N", help="At most this many requests on one replica (default: what its KV cache holds).")] = None,
    initial_replicas: Annotated[Multi, typer.Option("--initial-replicas", metavar="N", help="Replicas to start with (default: min replicas).")] = None,
    upscale_delay: Annotated[Multi, typer.Option("--upscale-delay", metavar="SECONDS", help="Seconds of load above target before Serve adds a replica (Serve's default 30; 5 for --gpu cpu).")] = None,
    downscale_delay: Annotated[Multi, typer.Option("--downscale-delay", metavar="SECONDS", help="Seconds below target before Serve removes a replica (Serve's default 600).")] = None,
    expected_tokens: Annotated[Multi, typer.Option("--expected-tokens", metavar="TOKENS", help="Typical prompt + output tokens per request, for the targets (default 2048).")] = None,
    engine_arg: Annotated[Multi, typer.Option("--engine-arg", metavar="[MODEL:]KEY=VALUE", help="A vLLM engine argument, typed as vLLM's EngineArgs types it (repeatable); MODEL: (position, --model value or catalog id) limits it to one model.")] = None,
    dtype: Annotated[Multi, typer.Option("--dtype", metavar="DTYPE", help="vLLM dtype: auto, half, float16, bfloat16, float, float32.")] = None,
    quantization: Annotated[Multi, typer.Option("--quantization", metavar="METHOD", help="vLLM quantization method (awq, gptq, fp8, …); default: what the checkpoint says.")] = None,
    kv_cache_dtype: Annotated[Multi, typer.Option("--kv-cache-dtype", metavar="DTYPE", help="KV cache dtype: auto, fp8, … (fp8 doubles the KV tokens in the sizing).")] = None,
    max_num_seqs: Annotated[Multi, typer.Option("--max-num-seqs", metavar="N", help="vLLM's max_num_seqs: caps the requests one replica runs at once (and the autoscaling targets).")] = None,
    enable_prefix_caching: Annotated[Optional[bool], typer.Option("--enable-prefix-caching/--no-enable-prefix-caching", help="vLLM prefix caching (default: vLLM's).")] = None,
    trust_remote_code: Annotated[Optional[bool], typer.Option("--trust-remote-code", help="Let vLLM run the model repo's own code (needed by some architectures).")] = None,
    tool_calling: Annotated[Optional[bool], typer.Option("--tool-calling/--no-tool-calling", help="Write the model's tool-calling recipe (enable_auto_tool_choice, tool_call_parser): its catalog entry's, its family's in vLLM's docs, or the format a local model's chat template teaches.")] = None,
    reasoning: Annotated[Optional[bool], typer.Option("--reasoning/--no-reasoning", help="Write the model's reasoning parser (its catalog entry's, or its family's in vLLM's docs).")] = None,
    inputs: Annotated[Optional[str], typer.Option("--inputs", metavar="all|image|text", help="What a multimodal model will take: text only or text and images (no video) write the catalog recipe's limits; all is vLLM's default.")] = None,
    lora_path: Annotated[Multi, typer.Option("--lora-path", metavar="URI", help="Remote LoRA adapter directory (s3://… or gs://…).")] = None,
    max_lora_adapters: Annotated[Multi, typer.Option("--max-lora-adapters", metavar="N", help="LoRA adapters cached per replica (default 16).")] = None,
    max_lora_rank: Annotated[Multi, typer.Option("--max-lora-rank", metavar="N", help="Highest LoRA rank you will serve (vLLM default 16).")] = None,
    max_loras: Annotated[Multi, typer.Option("--max-loras", metavar="N", help="vLLM max_loras: adapters in one batch (default: --max-lora-adapters, as Ray's guide has it).")] = None,
    max_cpu_loras: Annotated[Multi, typer.Option("--max-cpu-loras", metavar="N", help="vLLM max_cpu_loras: adapters vLLM keeps in CPU memory (>= --max-loras; default: vLLM's, = max_loras).")] = None,
    lora_env: Annotated[Multi, typer.Option("--lora-env", metavar="KEY[=VAR],...", help="Store settings the replicas get by reference (KEY: ${VAR}) in the app's runtime_env, e.g. AWS_ENDPOINT_URL,AWS_DEFAULT_REGION=AWS_REGION; 'none' for none (default: the AWS_* / GOOGLE_APPLICATION_CREDENTIALS set in this shell). Never values.")] = None,
    hf_token_env: Annotated[Multi, typer.Option("--hf-token-env", metavar="VAR", help="NAME of the environment variable holding the HF token (default HF_TOKEN for gated models). Never the token.")] = None,
    fast_download: Annotated[Optional[bool], typer.Option("--fast-download/--no-fast-download", help="Set HF_HUB_ENABLE_HF_TRANSFER=1 in the runtime_env.")] = None,
    gpu_memory_utilization: Annotated[Optional[float], typer.Option("--gpu-memory-utilization", metavar="FRACTION", help="vLLM gpu_memory_utilization in (0, 1] (default: vLLM's, not written).")] = None,
    app_name: Annotated[Optional[str], typer.Option("--app-name", metavar="NAME", help="Serve application name (default llm_app).")] = None,
    route_prefix: Annotated[Optional[str], typer.Option("--route-prefix", metavar="PREFIX", help="HTTP route prefix (default /).")] = None,
    http_host: Annotated[Optional[str], typer.Option("--http-host", metavar="HOST", help=f"Serve HTTP host in the serve file (default {LOOPBACK_HOST}).")] = None,
    http_port: Annotated[Optional[int], typer.Option("--http-port", metavar="PORT", min=1, max=65535, help="Serve HTTP port in the serve file (default 8000).")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", metavar="NAME", help="Require an API key on the endpoint (401 without 'Authorization: Bearer <key>' on every route): NAME of the environment variable holding it on the cluster's nodes. Never the key. In a terminal it is asked (default on for GPUs).")] = None,
    router: Annotated[Optional[str], typer.Option("--router", metavar="pow2|prefix", help="The request router: pow2 (Serve's default, power of two choices) or prefix (PrefixCacheAffinityRouter: requests that share a prefix go to the replica that cached it). kv (KVAwareRouter) is refused: Ray 2.60 needs direct streaming and ai-dynamo for it (docs/latency.md).")] = None,
    autoscale_on: Annotated[Optional[str], typer.Option("--autoscale-on", metavar="TARGETS", help="Autoscale on latency: ttft_p95=500ms and/or itl_p95=50ms, read from the engines' histograms over --autoscale-window; a replica is added while a percentile is above its target, removed while all stay below half of it (within --min/--max-replicas, after --upscale-delay / --downscale-delay). llmctl up ships the policy.")] = None,
    autoscale_window: Annotated[Optional[float], typer.Option("--autoscale-window", metavar="SECONDS", help="With --autoscale-on: seconds of requests each percentile covers (default 30).")] = None,
    kuberay: Annotated[bool, typer.Option("--kuberay", help="Also write rayservice_<timestamp>.yaml: a KubeRay RayService of the same app (see llmctl kuberay).")] = False,
    hf_secret: HfSecretOpt = None,
    api_key_secret: ApiKeySecretOpt = None,
    gpus_per_node: GpusPerNodeOpt = None,
    node_selector: NodeSelectorOpt = "none",
    image: ImageOpt = None,
    upgrade_strategy: UpgradeStrategyOpt = "NewCluster",
    slo: Annotated[Optional[str], typer.Option("--slo", metavar="TARGETS", help="Size for latency targets (ttft_p95=500ms,itl_p95=40ms): TP, GPU (when not given), replica bounds and ongoing-request targets from `llmctl plan --slo`'s cheapest setup.")] = None,
    rate: Annotated[Optional[float], typer.Option("--rate", metavar="REQ_PER_S", help="With --slo: the request rate to serve (sets --max-replicas).")] = None,
    isl: IslOpt = DEFAULT_ISL,
    osl: OslOpt = DEFAULT_OSL,
    price: PriceOpt = None,
    profile: ProfileOpt = None,
    output_dir: OutputDirOpt = Path("."),
    yes: YesOpt = False,
    force: ForceOpt = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of a table (asks nothing: "
                                                          "every missing answer is an error naming its flag).")] = False,
) -> None:
    """Write Ray Serve LLM configs: model_config/<id>.yaml and serve_<timestamp>.yaml.

    Asks for what no flag gives when run in a terminal; with no terminal, every
    missing answer is an error naming its flag (use --yes to accept defaults).
    """
    from llmctl import genconfig as G
    from llmctl.errors import UsageError
    import llmctl.cli.ask as ask
    from llmctl.prompts import Flags, Session, collect, use_terminal

    flags = Flags(
        models=model or [], model_ids=model_id or [], gpus=gpu or [], gpus_per_node=gpus_per_node or [], tps=tp or [], pps=pp or [],
        min_replicas=min_replicas or [], max_replicas=max_replicas or [], max_model_lens=max_model_len or [],
        lora_paths=lora_path or [], max_lora_adapters=max_lora_adapters or [], max_lora_ranks=max_lora_rank or [],
        max_loras=max_loras or [], max_cpu_loras=max_cpu_loras or [], lora_envs=lora_env or [],
        hf_token_envs=hf_token_env or [], fast_download=fast_download, gpu_memory_utilization=gpu_memory_utilization,
        target_ongoing_requests=target_ongoing_requests or [], max_ongoing_requests=max_ongoing_requests or [],
        initial_replicas=initial_replicas or [], upscale_delays=upscale_delay or [], downscale_delays=downscale_delay or [],
        expected_tokens=expected_tokens or [], engine_args=engine_arg or [], dtypes=dtype or [],
        quantizations=quantization or [], kv_cache_dtypes=kv_cache_dtype or [], max_num_seqs=max_num_seqs or [],
        enable_prefix_caching=enable_prefix_caching, trust_remote_code=trust_remote_code,
        tool_calling=tool_calling, reasoning=reasoning, inputs=inputs,
        app_name=app_name, route_prefix=route_prefix, http_host=http_host, http_port=http_port,
        api_key_env=api_key_env, router=router, autoscale_on=autoscale_on, autoscale_window=autoscale_window,
        dp=dp, enable_expert_parallel=enable_expert_parallel, pd=pd, kv_connector=kv_connector,
        prefill_tp=prefill_tp, decode_tp=decode_tp, prefill_args=prefill_arg or [], decode_args=decode_arg or [],
    )
    if slo is not None:
        from llmctl.planner import capacity

        table = capacity(**G.slo_question(flags), slo=slo, rate=rate, isl=isl, osl=osl, price=price,
                         profile=[str(p) for p in profile or []])
        err.print(G.apply_capacity(flags, table), markup=False, highlight=False)
    elif rate is not None or price is not None or profile:
        raise UsageError("--rate, --price and --profile size for a latency goal: add --slo (e.g. --slo ttft_p95=500ms,itl_p95=40ms)")
    interactive = sys.stdin.isatty() and sys.stdout.isatty() and not json_out
    if len(flags.model_ids) > 1 and len(flags.model_ids) != len(flags.models):
        raise UsageError(f"--model-id given {len(flags.model_ids)} times for {len(flags.models)} models; give it once per --model")
    use_terminal(ask if interactive else None)
    spec = collect(Session(interactive=interactive, assume_yes=yes), flags)
    gen = G.build(spec, output_dir, force=force)
    kube_notes: list[str] = []
    if kuberay and autoscale_on:
        raise UsageError("--autoscale-on with --kuberay: llmctl's latency policy (llmctl_latency) reaches a cluster through "
                         "`llmctl up` (runtime_env py_modules), and the RayService manifest does not carry it yet; deploy "
                         "with `llmctl up`, or leave out --kuberay")
    if kuberay:
        from llmctl.kuberay.manifest import KubeOptions

        gen, kube_notes = G.with_kuberay(gen, KubeOptions(gpus_per_node=gpus_per_node or [], node_selector=node_selector,
                                                          hf_secret=hf_secret, api_key_secret=api_key_secret, image=image,
                                                          upgrade_strategy=upgrade_strategy))
    elif hf_secret or api_key_secret or image or node_selector != "none" or upgrade_strategy != "NewCluster":
        raise UsageError("--hf-secret, --api-key-secret, --node-selector, --image and --upgrade-strategy "
                         "shape the KubeRay manifest: add --kuberay")
    for m in spec.models:
        problem = G.fit_problem(m)
        if problem:
            warn(f"{problem[1]} (writing anyway: --force)")
    asked = interactive and not yes
    if asked:
        _summary(spec)
        if not ask.confirm(f"Write {len(gen.documents) + (gen.manifest is not None)} files to {output_dir.resolve()}?", True):
            err.print("Nothing written.")
            raise typer.Exit(1)
    G.write(gen, force=force)
    if not asked and not json_out:
        _summary(spec)
    for d in gen.diagnostics:
        if not d.is_error:
            err.print(str(d), markup=False, highlight=False)
    for note in kube_notes:
        err.print(f"note: {note}", markup=False, highlight=False)
    if spec.api_key_env is None and any(not m.gpu.is_cpu for m in spec.models):
        err.print("warning: the endpoint has no API key: anyone who reaches it uses the GPUs "
                  "(--api-key-env NAME requires one)", markup=False, highlight=False)
    serve = gen.serve_file
    if json_out:
        print_json({"written": [str(p) for p in gen.written], "serve_file": str(serve),
                    "manifest": str(gen.manifest.path) if gen.manifest is not None else None,
                    "models": [m.model_id for m in spec.models],
                    "next": [f"llmctl validate {_q(serve)}", f"llmctl up {_q(serve)}"]})
        return
    out.print("Wrote:")
    for p in gen.written:
        out.print(f"  {p}", markup=False)
    out.print("Next:")
    out.print(f"  llmctl validate {_q(serve)}", markup=False)
    if spec.api_key_env:
        out.print(f"  export {spec.api_key_env}=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
                  "   # the API key, before `llmctl up` (never in a file)", markup=False)
    out.print(f"  llmctl up {_q(serve)}", markup=False)
    out.print(f"  (or with Ray's CLI: serve run {_q(serve)})", markup=False)
    if gen.manifest is not None:
        out.print(f"  kubectl apply -f {_q(gen.manifest.path)}   # Kubernetes (KubeRay)", markup=False)


def _q(p: Path) -> str:
    import shlex

    return shlex.quote(str(p))


def _summary(spec) -> None:
    from rich.table import Table

    from llmctl.genconfig import summary_rows

    t = Table(title=f"app {spec.app_name}  route {spec.route_prefix}", title_justify="left")
    for col in ("model id", "source", "GPU", "TP", "replicas", "max_model_len", "fit"):
        t.add_column(col)
    rows = list(summary_rows(spec))
    for r in rows:
        tp = (f"DP {r['dp']} x " if r["dp"] > 1 else "") + str(r["tp"]) + (f" x PP {r['pp']}" if r["pp"] > 1 else "")
        t.add_row(r["model_id"], r["source"], r["gpu"], tp, r["replicas"],
                  f"{r['max_model_len']:,}" if r["max_model_len"] else "vLLM default", r["fit"])
    out.print(t)
    for r in rows:
        for reason in r["reasons"]:
            out.print(f"  {r['model_id']}: {reason}", markup=False)
