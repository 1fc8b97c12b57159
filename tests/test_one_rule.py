"""One rule per decision: plan's advice, gen-config's defaults and the
catalog's recommendations are the same function's answer, and defaults the
user never chose always fit (issue 7)."""

from __future__ import annotations

import pytest

import llmctl
from llmctl import sizing
from llmctl.catalog import load_catalog
from llmctl.errors import DoesNotFit
from llmctl.hardware import GPUS

from helpers import load_yaml, run_cli, serve_file

CATALOG = load_catalog()
GPU_TYPES = [g for g in GPUS.values() if not g.is_cpu]


@pytest.mark.parametrize("model_id", sorted(CATALOG))
def test_plan_gen_config_and_catalog_agree(model_id):
    """Every catalog model x GPU type at the default context: plan's advised
    layout == the layout `gen-config --yes` writes == the catalog's (single
    node: also its TP recommendation; issue 40: DP+EP or multi-node where one
    node is too small)."""
    profile = CATALOG[model_id]
    table = llmctl.plan(model_id)  # every GPU type, default context
    for gpu in GPU_TYPES:
        advised = [r for r in table.rows if r["gpu"] == gpu.name and r["advised"]]
        lay = profile.layouts.get(gpu.name)
        try:
            gen = llmctl.generate(model_id, gpu=gpu.name, write_files=False)
        except DoesNotFit:
            assert not advised and lay is None, (model_id, gpu.name)
            continue
        m = gen.spec.models[0]
        assert len(advised) == 1 and lay is not None, (model_id, gpu.name)
        assert (advised[0]["tp"], advised[0]["pp"], advised[0]["dp"]) == (m.tp, m.pp, m.dp) == (lay.tp, lay.pp, lay.dp), \
            (model_id, gpu.name)
        assert advised[0]["max_model_len"] == m.max_model_len == lay.max_model_len, (model_id, gpu.name)
        rec = profile.recommended.get(gpu.name)
        if lay.kind == "single node":
            assert rec is not None and rec.tp == m.tp, (model_id, gpu.name)
        assert m.plan.verdict != "does_not_fit"


def test_tp_given_length_is_the_most_that_fits_within_the_error_band_rounded_to_1024():
    """TP given, length not: the longest max_model_len that still starts if the
    estimate is as far off as the plan's error band, a multiple of 1,024."""
    arch = CATALOG["llama-3.1-8b-instruct"].architecture
    c = sizing.choose(arch, GPUS["L4"], tp=1)
    probe = sizing.plan_for_gpu(arch, GPUS["L4"], tp=1, max_model_len=1)
    safe = int(probe.max_model_len_fits * (1 - probe.margin))
    assert c.max_model_len == safe - safe % 1024 and c.max_model_len < sizing.DEFAULT_CONTEXT_CAP
    assert c.plan.verdict != "does_not_fit"
    assert c.max_model_len < probe.max_model_len_fits  # starts even if the KV estimate is `margin` too high
    assert any(r.startswith(f"max_model_len {c.max_model_len:,}: the most that fits on L4 at TP 1") and "error band" in r
               for r in c.reasons)


def test_no_default_below_the_shortest_useful_context():
    """kimi-k2-instruct on one H200 node under vLLM 0.21 (the V1 runner's
    14-byte-per-logit profile sampler): only a few hundred tokens of KV cache
    would be left, so llmctl picks no length of its own (it does not fit).
    vLLM 0.29's Model Runner V2 samples without the float32 copy and the
    catalog (0.29) gets a shorter context there."""
    arch = CATALOG["kimi-k2-instruct"].architecture
    c = sizing.choose(arch, GPUS["H200"], vllm_version="0.21.0")
    assert c.plan.verdict == "does_not_fit" and any("does not pick below 2,048" in r for r in c.reasons), c.reasons
    now = sizing.choose(arch, GPUS["H200"])
    rec = CATALOG["kimi-k2-instruct"].recommended.get("H200")
    assert rec is not None and (rec.tp, rec.max_model_len) == (now.tp, now.max_model_len)


def test_long_context_models_are_capped_and_say_so():
    arch = CATALOG["llama-3.1-8b-instruct"].architecture  # 131,072 tokens of context
    c = sizing.choose(arch, GPUS["H100"])
    assert c.max_model_len == sizing.DEFAULT_CONTEXT_CAP < arch.context_limit
    assert any("the model supports 131,072" in r for r in c.reasons)
    short = CATALOG["qwen2.5-7b-instruct"].architecture  # 32,768: not capped
    assert sizing.choose(short, GPUS["H100"]).max_model_len == short.context_limit


def test_fits_is_preferred_over_tight():
    """gpt-oss-120b on H100 under vLLM 0.21 (the V1 runner's sampler): TP 1
    only just starts (tight), TP 2 fits; all three callers used to disagree here."""
    arch = CATALOG["gpt-oss-120b"].architecture
    p1 = sizing.plan_for_gpu(arch, GPUS["H100"], tp=1, max_model_len=sizing.DEFAULT_CONTEXT_CAP, vllm_version="0.21.0")
    assert p1.verdict == "tight"
    c = sizing.choose(arch, GPUS["H100"], vllm_version="0.21.0")
    assert c.tp == 2 and c.plan.verdict == "fits"


def test_no_tp_fits_the_default_context_gives_a_shorter_one_at_the_largest_tp():
    # a GPU size at which Llama-3.1-70B's weights fit at TP 8 but 32k of context does not
    from llmctl.hardware import GPUType

    arch = CATALOG["llama-3.1-70b-instruct"].architecture
    length, _ = sizing.default_context(arch)
    found = None
    for tenths in range(150, 400, 5):
        g = GPUType(f"{tenths / 10} GiB", "GPU", tenths / 10, "-", 8, "test")
        if sizing.advise_tp(arch, g, max_model_len=length) is None and sizing.choose(arch, g).fits:
            found = g
            break
    assert found is not None
    c = sizing.choose(arch, found)
    assert c.tp == 8 == sizing.tp_sizes_on_node(arch, found)[-1]
    assert c.max_model_len < length and c.max_model_len % 1024 == 0
    assert c.plan.verdict != "does_not_fit"
    most = sizing.plan_for_gpu(arch, found, tp=8, max_model_len=1)
    assert c.max_model_len <= most.max_model_len_fits * (1 - most.margin)  # within the error band
    assert any("the most that fits" in r for r in c.reasons) and any("the largest on one" in r for r in c.reasons)


def test_weights_that_fit_nowhere_are_not_silently_shrunk():
    """No layout up to 4 nodes holds GLM-5 on L4s: gen-config --yes refuses, naming --gpu."""
    assert "L4" not in CATALOG["glm-5"].layouts
    c = sizing.choose(CATALOG["glm-5"].architecture, GPUS["L4"])
    assert not c.fits and "weights" in c.plan.reason
    with pytest.raises(DoesNotFit, match=r"^gpu: glm-5 does not fit on one L4 node at any TP"):
        llmctl.generate("glm-5", gpu="L4", write_files=False)


def test_two_models_on_l4_at_tp1_choose_lengths_that_fit(capsys, tmp_path):
    """The issue's command: the default length no longer makes it exit 2."""
    r = run_cli(capsys, "gen-config", "-m", "llama-3.1-8b-instruct", "-m", "qwen2.5-7b-instruct", "--gpu", "L4",
                "--tp", "1", "--min-replicas", "1", "--max-replicas", "4", "--yes", "-o", tmp_path)
    assert r.code == 0, r.err
    llama = load_yaml(tmp_path / "model_config" / "llama-3.1-8b-instruct.yaml")
    mml = llama["engine_kwargs"]["max_model_len"]
    assert mml % 1024 == 0 and mml < 32768
    assert f"llama-3.1-8b-instruct: max_model_len {mml:,}: the most that fits on L4 at TP 1" in r.out
    assert run_cli(capsys, "validate", serve_file(tmp_path)).code == 0


def test_only_what_the_user_set_can_fail():
    # the user set TP 1 and a length: that may not fit (exit 2, naming both)
    with pytest.raises(DoesNotFit, match=r"^tp/max_model_len: llama-3.1-8b-instruct does not fit on L4 at TP 1"):
        llmctl.generate("llama-3.1-8b-instruct", gpu="L4", tp=1, max_model_len=32768, write_files=False)
    # the user set only the length: llmctl picks a TP that holds it
    gen = llmctl.generate("llama-3.1-8b-instruct", gpu="L4", max_model_len=32768, write_files=False)
    assert gen.spec.models[0].tp > 1 and gen.spec.models[0].plan.verdict != "does_not_fit"


def test_python_api_validate_files_gives_codes(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("model_loading_config: {model_id: x, model_source: meta-llama/Llama-3.1-70B-Instruct}\n"
                 "accelerator_type: L4\nengine_kwargs: {tensor_parallel_size: 1, max_model_len: 8192, max_num_seq: 4}\n")
    codes = {d.code for d in llmctl.validate_files([f])}
    assert {"does-not-fit", "unknown-engine-arg"} <= codes


def test_a_failing_check_is_an_incomplete_result_and_surfaces_with_debug():
    """Issue 7, issue 38: a bug inside one validate check never crashes
    validate (the other checks run) but is not hidden either: a
    `check-failed` error naming the check (the result is incomplete, never
    valid); with debug (a parameter of the sink, never the environment) it is
    raised with its traceback."""
    from llmctl.validate.documents import Verdict, _Doc, _Sink

    sink = _Sink(_Doc("f.yaml", "engine_kwargs: {}\n"))
    with sink.guard("example", ("engine_kwargs",)):
        raise KeyError("boom")
    (d,) = sink.items
    assert d.code == "check-failed" and d.severity == "error" and "example check crashed" in d.message and "KeyError" in d.message
    assert Verdict(sink.items).incomplete and not Verdict(sink.items).valid
    with pytest.raises(KeyError):
        with _Sink(_Doc("f.yaml", "{}\n"), debug=True).child(sink.doc).guard("example"):
            raise KeyError("boom")
