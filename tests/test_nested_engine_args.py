"""Issue 20, "Nested engine settings": the keys and value types inside
dict-valued engine arguments (compilation_config, speculative_config,
kv_transfer_config, limit_mm_per_prompt, ...) are checked against the TARGET
vLLM's config classes, read per release into the shipped tables (``configs``).

Expected behaviour is derived from the tables, not from lists written here:
which fields a class has in which release, which choices a field takes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import model_file, run_cli
from llmctl import engine_args as ea
from llmctl.engine_args.nested import check_nested, config_at, other_release_with_key
from llmctl.vllm_version import default_vllm_version

PIN = default_vllm_version()
VERSIONS = [v.label for v in ea.shipped_versions()]

#: Real published settings: vLLM's recipe for Qwen3-Next (compilation_config,
#: speculative_config) and Ray Serve LLM's prefill/decode docs (kv_transfer_config).
PUBLISHED = {
    "compilation_config": {"cudagraph_mode": "PIECEWISE"},
    "speculative_config": {"method": "qwen3_next_mtp", "num_speculative_tokens": 2},
    "kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
}



pytestmark = pytest.mark.usefixtures("shipped_engine_args")


def _specs(version: str = PIN.label) -> dict:
    return ea.shipped_table(version)


def _classes(version: str) -> dict:
    return next(iter(_specs(version).values())).configs.classes


_file = model_file


def _lines(err: str, field: str) -> list[str]:
    return [ln for ln in err.splitlines() if f": engine_kwargs.{field}: " in ln]


def _line_of(f: Path, key: str) -> int:
    """The 1-based line of the first ``key:`` in the file."""
    return next(i for i, ln in enumerate(f.read_text().splitlines(), 1) if ln.strip().startswith(f"{key}:"))


# --------------------------------------------------------------------------
# the tables


@pytest.mark.parametrize("version", VERSIONS)
def test_every_config_reference_resolves(version):
    specs, classes = _specs(version), _classes(version)
    assert {"CompilationConfig", "SpeculativeConfig", "KVTransferConfig", "KVEventsConfig", "AttentionConfig",
            "StructuredOutputsConfig"} <= set(classes)
    for name in ("compilation_config", "speculative_config", "kv_transfer_config", "kv_events_config",
                 "attention_config", "structured_outputs_config"):
        assert specs[name].config in classes, name
    # speculative_config is a plain dict in EngineArgs: the class is the one create_speculative_config builds
    assert specs["speculative_config"].config == "SpeculativeConfig" and specs["speculative_config"].dashes
    # free-form mappings: no class, no value type
    assert specs["hf_overrides"].config is None and specs["hf_overrides"].values is None
    refs = [s for s in specs.values() if s.config] + [f for c in classes.values() for f in c.fields.values() if f.config]
    for r in refs:
        assert r.kind == "dict" and r.config in classes, r
    for c in classes.values():
        assert c.extra in ("forbid", "ignore", "allow") and c.fields
        for f in c.fields.values():
            assert f.kind in ea.KINDS and (f.choices is not None) == (f.kind == "choice" or f.item == "choice"), f


@pytest.mark.parametrize("version", VERSIONS)
def test_limit_mm_per_prompt_shape_is_read_from_the_validator(version):
    v = _specs(version)["limit_mm_per_prompt"].values
    classes = _classes(version)
    assert v.shorthand == "count" and v.config == "BaseDummyOptions"
    assert dict(v.keyed) == {"image": "ImageDummyOptions", "video": "VideoDummyOptions", "audio": "AudioDummyOptions"}
    assert "num_frames" in classes["VideoDummyOptions"].fields and classes["BaseDummyOptions"].extra == "ignore"


def test_enum_fields_take_the_declared_choices():
    cc = _classes(PIN.label)["CompilationConfig"].fields
    assert {"NONE", "PIECEWISE", "FULL", "FULL_AND_PIECEWISE"} <= set(cc["cudagraph_mode"].choices)
    assert cc["cudagraph_mode"].ignore_case  # vLLM upper-cases the name
    assert {"VLLM_COMPILE", 3} <= set(cc["mode"].choices)
    assert "level" not in cc  # gone before 0.29: an error, not a silent pass
    assert "qwen3_next_mtp" in _classes(PIN.label)["SpeculativeConfig"].fields["method"].choices
    assert set(_classes(PIN.label)["KVTransferConfig"].fields["kv_role"].choices) == {"kv_producer", "kv_consumer", "kv_both"}


# --------------------------------------------------------------------------
# published settings pass, typos fail


@pytest.mark.parametrize("version", VERSIONS)
def test_published_settings_pass(version):
    for key, value in PUBLISHED.items():
        assert ea.check_value(key, value, specs=_specs(version)) is None
        assert check_nested(_specs(version)[key], value) == [], (version, key)


def test_published_settings_pass_validate(capsys, tmp_path):
    r = run_cli(capsys, "validate", _file(tmp_path, **PUBLISHED))
    assert r.code == 0, r.err
    assert "engine_kwargs.compilation_config" not in r.err and "engine_kwargs.speculative_config" not in r.err
    assert "engine_kwargs.kv_transfer_config" not in r.err


TYPOS = [
    ("compilation_config", {"cudagraph_mod": 1}, "cudagraph_mod", "CompilationConfig", "cudagraph_mode"),
    ("speculative_config", {"methd": "ngram", "num_speculative_tokens": 2}, "methd", "SpeculativeConfig", "method"),
    ("kv_transfer_config", {"kv_connector": "NixlConnector", "kv_rol": "kv_both"}, "kv_rol", "KVTransferConfig", "kv_role"),
    ("kv_events_config", {"enable_kv_cache_event": True}, "enable_kv_cache_event", "KVEventsConfig", "enable_kv_cache_events"),
    ("structured_outputs_config", {"backnd": "xgrammar"}, "backnd", "StructuredOutputsConfig", "backend"),
]


@pytest.mark.parametrize("arg,value,key,cls,near", TYPOS, ids=[t[2] for t in TYPOS])
def test_typo_is_an_error_naming_path_target_and_near_miss(capsys, tmp_path, arg, value, key, cls, near):
    assert key not in _classes(PIN.label)[cls].fields and near in _classes(PIN.label)[cls].fields
    f = _file(tmp_path, **{arg: value})
    r = run_cli(capsys, "validate", f)
    assert r.code == 2
    [line] = _lines(r.err, f"{arg}.{key}")
    assert line == (f"{f}:{_line_of(f, key)}: engine_kwargs.{arg}.{key}: "
                    f"not a field of vLLM {PIN.label}'s {cls} (did you mean '{near}'?)")
    [d] = [d for d in run_cli(capsys, "validate", f, "--json").json()["diagnostics"] if d["field"] == f"engine_kwargs.{arg}.{key}"]
    assert d["code"] == "unknown-engine-arg" and d["severity"] == "error" and d["line"] == _line_of(f, key)


def test_json_output_has_the_nested_field_and_line(capsys, tmp_path):
    f = _file(tmp_path, compilation_config={"pass_config": {"fuse_nrm_quant": True}})
    r = run_cli(capsys, "validate", f, "--json")
    [e] = [e for e in r.json()["diagnostics"] if "pass_config" in e["field"]]
    assert e["field"] == "engine_kwargs.compilation_config.pass_config.fuse_nrm_quant"
    assert e["line"] == _line_of(f, "fuse_nrm_quant") and "PassConfig" in e["message"]


@pytest.mark.parametrize("arg,value,path,message", [
    ("speculative_config", {"method": "ngram", "num_speculative_tokens": "2"}, "num_speculative_tokens",
     "expected an integer, got '2' (a string: write it without quotes)"),
    ("speculative_config", {"method": "ngarm"}, "method", "(did you mean 'ngram'?)"),
    ("compilation_config", {"cudagraph_mode": "PIECEWIS"}, "cudagraph_mode", "(did you mean 'PIECEWISE'?)"),
    ("compilation_config", {"mode": 7}, "mode", "must be one of"),
    ("compilation_config", {"pass_config": {"eliminate_noops": "yes"}}, "pass_config.eliminate_noops",
     "expected true or false, got 'yes'"),
    ("compilation_config", {"cudagraph_capture_sizes": [1, "two"]}, "cudagraph_capture_sizes", "item 2: expected an integer"),
    ("compilation_config", {"pass_config": None}, "pass_config", "must not be null"),
    ("kv_transfer_config", {"kv_role": "kv_all"}, "kv_role", "must be one of"),
    ("limit_mm_per_prompt", {"image": "2"}, "image", "expected an integer (count) or a mapping of ImageDummyOptions options"),
    ("limit_mm_per_prompt", {"video": {"count": 1, "num_frames": 1.5}}, "video.num_frames", "expected an integer, got 1.5"),
    ("limit_mm_per_prompt", {"video": {"num_frame": 8}}, "video.num_frame",
     f"not a field of vLLM {PIN.label}'s VideoDummyOptions (did you mean 'num_frames'?)"),
])
def test_wrong_value_is_an_error(capsys, tmp_path, arg, value, path, message):
    r = run_cli(capsys, "validate", _file(tmp_path, **{arg: value}))
    assert r.code == 2, r.err
    [line] = _lines(r.err, f"{arg}.{path}")
    assert message in line and "warning:" not in line


@pytest.mark.parametrize("arg,value", [
    ("compilation_config", {"cudagraph_mode": "piecewise", "mode": "VLLM_COMPILE"}),  # names in any case
    ("compilation_config", {"mode": 3, "cudagraph_mode": 2}),  # integer values: pydantic looks them up
    ("compilation_config", {"pass_config": {"eliminate_noops": False}, "cudagraph_capture_sizes": [1, 2, 4]}),
    ("speculative_config", {"method": "ngram", "num-speculative-tokens": 3, "prompt_lookup_max": 4}),  # dashes: vLLM rewrites them
    ("limit_mm_per_prompt", {"image": 2, "video": {"count": 1, "num_frames": 32, "width": 512}, "audio": 0}),
    ("hf_overrides", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}, "anything": [1, 2]}),  # free-form
    ("kv_transfer_config", None),
])
def test_good_nested_values_pass(capsys, tmp_path, arg, value):
    r = run_cli(capsys, "validate", _file(tmp_path, **{arg: value}))
    assert r.code == 0, r.err
    assert not [ln for ln in r.err.splitlines() if f"engine_kwargs.{arg}" in ln], r.err


def test_unknown_key_of_a_class_that_ignores_it_warns(capsys, tmp_path):
    assert _classes(PIN.label)["BaseDummyOptions"].extra == "ignore"
    r = run_cli(capsys, "validate", _file(tmp_path, limit_mm_per_prompt={"point_cloud": {"count": 1, "density": 3}}))
    assert r.code == 0
    [line] = _lines(r.err, "limit_mm_per_prompt.point_cloud.density")
    assert line.endswith(f"warning: not a field of vLLM {PIN.label}'s BaseDummyOptions; vLLM ignores it")


# --------------------------------------------------------------------------
# versions: a field of a newer vLLM warns, a field gone is an error there


def _added(cls: str, old: str, new: str) -> list[str]:
    a, b = _classes(old).get(cls), _classes(new).get(cls)
    return sorted(set(b.fields) - set(a.fields)) if a and b else []


def _first_added_after_pin() -> tuple[str, str, str, str]:
    """(argument, class, field, release) of a field some shipped release added after the pin."""
    for arg in ("compilation_config", "speculative_config", "kv_transfer_config", "attention_config"):
        cls = _specs()[arg].config
        for v in VERSIONS[VERSIONS.index(PIN.label) + 1:]:
            new = _added(cls, PIN.label, v)
            if new:
                return arg, cls, new[0], v
    raise AssertionError("no nested field was added after the pin")


def test_field_of_a_newer_vllm_warns_and_vllm_version_changes_the_verdict(capsys, tmp_path):
    arg, cls, name, release = _first_added_after_pin()
    spec = _classes(release)[cls].fields[name]
    value = {"int": 1, "float": 1.0, "bool": True, "str": "x", "list": [], "dict": {}}.get(spec.kind)
    value = spec.choices[0] if spec.kind == "choice" else value
    f = _file(tmp_path, **{arg: {name: value}})
    r = run_cli(capsys, "validate", f)
    assert r.code == 0, r.err
    [line] = _lines(r.err, f"{arg}.{name}")
    assert (f"warning: exists from vLLM {release.rpartition('.')[0]} ({cls}); the target is vLLM {PIN.label} "
            f"({PIN.source}), which refuses it") in line
    r2 = run_cli(capsys, "validate", f, "--vllm-version", release)
    assert r2.code == 0 and not _lines(r2.err, f"{arg}.{name}"), r2.err


def test_field_gone_from_a_newer_target_is_an_error_there(capsys, tmp_path):
    gone = [(cls, n) for cls in ("KVTransferConfig", "PassConfig", "CompilationConfig", "SpeculativeConfig")
            for n in sorted(set(_classes(PIN.label)[cls].fields) - set(_classes(VERSIONS[-1])[cls].fields))]
    assert gone  # KVTransferConfig.kv_ip and PassConfig.enable_sp when written
    cls, name = gone[0]
    arg = {"KVTransferConfig": "kv_transfer_config", "SpeculativeConfig": "speculative_config"}.get(cls, "compilation_config")
    value = {name: _value_for(_classes(PIN.label)[cls].fields[name])}
    if cls == "PassConfig":
        value = {"pass_config": value}
    f = _file(tmp_path, **{arg: value})
    assert run_cli(capsys, "validate", f).code == 0
    last = next(v for v in reversed(VERSIONS) if name in _classes(v)[cls].fields)
    r = run_cli(capsys, "validate", f, "--vllm-version", VERSIONS[-1])
    assert r.code == 2
    path = f"{arg}.pass_config.{name}" if cls == "PassConfig" else f"{arg}.{name}"
    [line] = _lines(r.err, path)
    assert f"not a field of vLLM {VERSIONS[-1]}'s {cls}" in line and line.endswith(f"; vLLM {last} had it")


def _value_for(spec) -> object:
    if spec.kind == "choice":
        return spec.choices[0]
    return {"int": 1, "float": 1.0, "bool": True, "str": "x", "list": [], "dict": {}, "json": "x"}[spec.kind]


def test_other_release_with_key_follows_the_path():
    arg, cls, name, release = _first_added_after_pin()
    assert other_release_with_key(arg, (name,), PIN.label) == (release, None)
    assert config_at(_specs()["compilation_config"], ("pass_config", "x")).name == "PassConfig"
    assert config_at(_specs()["limit_mm_per_prompt"], ("video", "x")).name == "VideoDummyOptions"
    assert config_at(_specs()["limit_mm_per_prompt"], ("lidar", "x")).name == "BaseDummyOptions"
    assert config_at(_specs()["hf_overrides"], ("a", "b")) is None


# --------------------------------------------------------------------------
# gen-config --engine-arg: the same checks, through the parse path


def test_parse_value_checks_the_keys_inside():
    specs = _specs()
    with pytest.raises(ValueError) as ei:
        ea.parse_value("compilation_config", '{"cudagraph_mod": 1}', specs=specs)
    assert str(ei.value) == (f"compilation_config.cudagraph_mod: not a field of vLLM {PIN.label}'s CompilationConfig "
                             "(did you mean 'cudagraph_mode'?)")
    with pytest.raises(ValueError, match=r"^speculative_config\.num_speculative_tokens: expected an integer"):
        ea.parse_value("speculative_config", '{"method": "ngram", "num_speculative_tokens": "2"}', specs=specs)
    for key, value in PUBLISHED.items():
        assert ea.parse_value(key, json.dumps(value), specs=specs) == value
    # a field of a newer vLLM: gen-config writes for the target, so it is refused, naming the release
    arg, cls, name, release = _first_added_after_pin()
    value = _value_for(_classes(release)[cls].fields[name])
    with pytest.raises(ValueError) as ei:
        ea.parse_value(arg, json.dumps({name: value}), specs=specs)
    assert str(ei.value) == f"{arg}.{name}: not a field of vLLM {PIN.label}'s {cls}; it exists from vLLM {release.rpartition('.')[0]}"


def test_gen_config_engine_arg_nested_typo(capsys, tmp_path):
    from helpers import files_under

    r = run_cli(capsys, "gen-config", "--model", "qwen2.5-0.5b-instruct", "--gpu", "L4", "--yes", "-o", tmp_path,
                "--engine-arg", 'compilation_config={"cudagraph_mod": 1}')
    assert r.code == 2
    assert r.err.strip() == ("error: --engine-arg: compilation_config.cudagraph_mod: not a field of vLLM "
                             f"{PIN.label}'s CompilationConfig (did you mean 'cudagraph_mode'?)")
    assert files_under(tmp_path) == []
    r = run_cli(capsys, "gen-config", "--model", "qwen2.5-0.5b-instruct", "--gpu", "L4", "--yes", "-o", tmp_path,
                "--engine-arg", 'compilation_config={"cudagraph_mode": "PIECEWISE"}')
    assert r.code == 0, r.err
