"""`llmctl gen-config`: questions (or flags) -> model_config/*.yaml + serve_<ts>.yaml."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer
from typing_extensions import Annotated

from llmctl.cli import app
from llmctl.cli.console import err, out, warn
from llmctl.cli.options import ForceOpt, OutputDirOpt, YesOpt

Multi = Optional[List[str]]


@app.command("gen-config")
def gen_config_cmd(
    model: Annotated[Multi, typer.Option("--model", "-m", help="Catalog id, HF repo id, local directory or s3://|gs:// URI. Repeat for several models in one app.")] = None,
    model_id: Annotated[Multi, typer.Option("--model-id", help="Served model id (default: the catalog id / repo name).")] = None,
    gpu: Annotated[Multi, typer.Option("--gpu", help="GPU type: L4, A10G, L40S, A100-40G, A100-80G, H100, H200, B200, or cpu.")] = None,
    tp: Annotated[Multi, typer.Option("--tp", help="Tensor-parallel size (default: the smallest that fits).")] = None,
    pp: Annotated[Multi, typer.Option("--pp", help="Pipeline-parallel size (default 1).")] = None,
    min_replicas: Annotated[Multi, typer.Option("--min-replicas", help="Autoscaling minimum (default 1).")] = None,
    max_replicas: Annotated[Multi, typer.Option("--max-replicas", help="Autoscaling maximum (default: the minimum, at least 1).")] = None,
    max_model_len: Annotated[Multi, typer.Option("--max-model-len", help="Context length in tokens (8192 or 8k; 'auto' = the model's).")] = None,
    lora_path: Annotated[Multi, typer.Option("--lora-path", help="Remote LoRA adapter directory (s3://… or gs://…).")] = None,
    max_lora_adapters: Annotated[Multi, typer.Option("--max-lora-adapters", help="LoRA adapters cached per replica (default 16).")] = None,
    max_lora_rank: Annotated[Multi, typer.Option("--max-lora-rank", help="Highest LoRA rank you will serve (vLLM default 16).")] = None,
    hf_token_env: Annotated[Multi, typer.Option("--hf-token-env", help="NAME of the environment variable holding the HF token (default HF_TOKEN for gated models). Never the token.")] = None,
    fast_download: Annotated[Optional[bool], typer.Option("--fast-download/--no-fast-download", help="Set HF_HUB_ENABLE_HF_TRANSFER=1 in the runtime_env.")] = None,
    gpu_memory_utilization: Annotated[Optional[float], typer.Option("--gpu-memory-utilization", min=0.05, max=1.0, help="vLLM gpu_memory_utilization (default 0.9, not written).")] = None,
    app_name: Annotated[Optional[str], typer.Option("--app-name", help="Serve application name (default llm_app).")] = None,
    route_prefix: Annotated[Optional[str], typer.Option("--route-prefix", help="HTTP route prefix (default /).")] = None,
    http_host: Annotated[Optional[str], typer.Option("--http-host", help="Serve HTTP host in the serve file (default 127.0.0.1).")] = None,
    http_port: Annotated[Optional[int], typer.Option("--http-port", min=1, max=65535, help="Serve HTTP port in the serve file (default 8000).")] = None,
    output_dir: OutputDirOpt = Path("."),
    yes: YesOpt = False,
    force: ForceOpt = False,
) -> None:
    """Write Ray Serve LLM configs: model_config/<id>.yaml and serve_<timestamp>.yaml.

    Asks for what no flag gives when run in a terminal; with no terminal, every
    missing answer is an error naming its flag (use --yes to accept defaults).
    """
    from llmctl.errors import DoesNotFit, UsageError, ValidationFailed
    from llmctl.prompts import Flags, Session, ask_confirm, collect, fit_plan
    from llmctl.render import render_spec, write_all

    flags = Flags(
        models=model or [], model_ids=model_id or [], gpus=gpu or [], tps=tp or [], pps=pp or [],
        min_replicas=min_replicas or [], max_replicas=max_replicas or [], max_model_lens=max_model_len or [],
        lora_paths=lora_path or [], max_lora_adapters=max_lora_adapters or [], max_lora_ranks=max_lora_rank or [],
        hf_token_envs=hf_token_env or [], fast_download=fast_download, gpu_memory_utilization=gpu_memory_utilization,
        app_name=app_name, route_prefix=route_prefix, http_host=http_host, http_port=http_port,
    )
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    if len(flags.model_ids) > 1 and len(flags.model_ids) != len(flags.models):
        raise UsageError(f"--model-id given {len(flags.model_ids)} times for {len(flags.models)} models; give it once per --model")
    session = Session(interactive=interactive, assume_yes=yes)
    spec = collect(session, flags)

    plans = [fit_plan(m.profile, m.gpu, tp=m.tp, pp=m.pp, max_model_len=m.max_model_len,
                      gpu_memory_utilization=m.gpu_memory_utilization) for m in spec.models]
    if interactive and not yes:
        _summary(spec, plans)
    bad = [(m, p) for m, p in zip(spec.models, plans) if p is not None and p.verdict == "does_not_fit"]
    if bad and not force:
        m, p = bad[0]
        raise DoesNotFit(f"--tp: {m.model_id} does not fit on {m.gpu.name} at TP {m.tp}: {p.reason} "
                         f"(see `llmctl plan --model {m.profile.id} --gpu {m.gpu.name}`; --force writes it anyway)")
    for m, p in bad:
        warn(f"{m.model_id} does not fit on {m.gpu.name} at TP {m.tp} (writing anyway: --force): {p.reason}")

    docs = render_spec(spec, output_dir)
    from llmctl.validate import errors_only, validate_rendered

    problems = errors_only(validate_rendered(
        [(str(d.path), d.text, "serve" if i == len(docs) - 1 else "model") for i, d in enumerate(docs)]
    ))
    if problems and not (force and all("does not fit" in p.message for p in problems)):
        raise ValidationFailed(problems, "the generated files would not be valid; nothing was written:\n"
                               + "\n".join(str(p) for p in problems))
    if interactive and not yes and not ask_confirm(f"Write {len(docs)} files to {output_dir.resolve()}?", True):
        err.print("Nothing written.")
        raise typer.Exit(1)
    written = write_all(docs, force=force)
    if not (interactive and not yes):
        _summary(spec, plans)
    out.print("Wrote:")
    for p in written:
        out.print(f"  {p}", markup=False)
    serve = written[-1]
    out.print("Next:")
    out.print(f"  llmctl validate {_q(serve)}", markup=False)
    out.print(f"  llmctl up {_q(serve)}", markup=False)
    out.print(f"  (or with Ray's CLI: serve run {_q(serve)})", markup=False)


def _q(p: Path) -> str:
    import shlex

    return shlex.quote(str(p))


def _summary(spec, plans) -> None:
    from rich.table import Table

    t = Table(title=f"app {spec.app_name}  route {spec.route_prefix}", title_justify="left")
    for col in ("model id", "source", "GPU", "TP", "replicas", "max_model_len", "fit"):
        t.add_column(col)
    for m, p in zip(spec.models, plans):
        if p is None:
            fit = "CPU (vLLM CPU build)" if m.gpu.is_cpu else "unknown (no config.json)"
        else:
            fit = {"fits": "✓ fits", "tight": "~ tight", "does_not_fit": "✗ does not fit"}[p.verdict]
            fit += f": {p.weights_gib_per_gpu:.1f} GiB weights/GPU, {p.kv_cache_tokens:,} KV tokens, {p.max_concurrency:.1f}x"
        mml = m.effective_max_model_len
        t.add_row(m.model_id, m.source, m.gpu.name, str(m.tp), f"{m.min_replicas}-{m.max_replicas}",
                  str(mml) if mml else "model default", fit)
    out.print(t)
