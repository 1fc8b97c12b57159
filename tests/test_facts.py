"""One fact in one place (issue 39): each fact llmctl knows about Ray Serve,
quantization, GPUs, secrets and config files, and each helper that applies a
rule (suggestions, atomic writes, polling), has exactly one definition in
llmctl/. The scan reads every module's syntax tree (docstrings excluded: prose
may name a fact) and fails naming the file and line of a second spelling."""

from __future__ import annotations

import ast
import json
import re
from functools import lru_cache

import pytest

from llmctl import quant
from llmctl import serve_facts as sf

from helpers import REPO

PKG = REPO / "llmctl"
# The modules `up` ships to a cluster's nodes (llmctl/cluster_modules) run there without llmctl: they
# import nothing of it, so they spell what they need themselves.
STANDALONE = {str(p.relative_to(REPO)) for p in PKG.glob("cluster_modules/**/*.py")}


@lru_cache(maxsize=None)
def modules() -> dict[str, ast.Module]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = str(p.relative_to(REPO))
        if rel not in STANDALONE:
            out[rel] = ast.parse(p.read_text(encoding="utf-8"), filename=rel)
    return out


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


@lru_cache(maxsize=None)
def strings() -> list[tuple[str, int, str]]:
    """(file, line, text) of every string literal that is not a docstring (f-string parts included)."""
    out = []
    for rel, tree in modules().items():
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                out.append((rel, node.lineno, node.value))
    return out


def where(pred) -> set[str]:
    return {f"{f}:{ln}" for f, ln, s in strings() if pred(s)}


def files(hits: set[str]) -> set[str]:
    return {h.rsplit(":", 1)[0] for h in hits}


def calls(name: str) -> set[str]:
    """``file:line`` of every call of a dotted name (``os.replace``, ``difflib.get_close_matches``)."""
    out = set()
    for rel, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                parts = []
                while isinstance(f, ast.Attribute):
                    parts.append(f.attr)
                    f = f.value
                if isinstance(f, ast.Name):
                    parts.append(f.id)
                if ".".join(reversed(parts)) == name:
                    out.add(f"{rel}:{node.lineno}")
    return out


def collections_with(names: set[str], at_least: int) -> set[str]:
    """``file:line`` of tuple/list/set/dict literals holding ``at_least`` of ``names`` (a table of them)."""
    out = set()
    for rel, tree in modules().items():
        for node in ast.walk(tree):
            elts = node.keys if isinstance(node, ast.Dict) else node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else None
            if elts is None:
                continue
            found = {e.value for e in elts if isinstance(e, ast.Constant) and e.value in names}
            if len(found) >= at_least:
                out.add(f"{rel}:{node.lineno}")
    return out


def defs(name: str) -> set[str]:
    return {f"{rel}:{n.lineno}" for rel, tree in modules().items() for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name}


SERVE_FACTS = "llmctl/serve_facts.py"


# --------------------------------------------------------------------------
# Ray Serve's facts: llmctl/serve_facts.py


@pytest.mark.parametrize("state", sorted(set(sf.APP_STATES) | set(sf.DEPLOYMENT_STATES) | {sf.REPLICA_RUNNING, sf.REPLICA_STARTING,
                                                                                          sf.REPLICA_STOPPING}))
def test_each_serve_state_is_spelled_once(state):
    assert files(where(lambda s: s == state)) == {SERVE_FACTS}, where(lambda s: s == state)


def test_serve_states_are_rays():
    from ray.serve._private.common import DeploymentStatus, ReplicaState
    from ray.serve.schema import ApplicationStatus

    assert set(sf.APP_STATES) == {s.value for s in ApplicationStatus}
    assert set(sf.DEPLOYMENT_STATES) == {s.value for s in DeploymentStatus}
    assert set(sf.REPLICA_STATES) == {s.value for s in ReplicaState}
    assert set(sf.FAILED_STATES) < set(sf.APP_STATES) and set(sf.KEPT_STATES) < set(sf.APP_STATES)


@pytest.mark.parametrize("name", [sf.LLM_SERVER, sf.DEFAULT_INGRESS])
def test_each_deployment_name_is_spelled_once(name):
    assert files(where(lambda s: name in s)) == {SERVE_FACTS}, where(lambda s: name in s)


def test_deployment_names_are_rays():
    """LLMServer:<id> as Ray's builder names it (core/server/builder.py _get_deployment_name)."""
    from ray.llm._internal.serve.core.ingress.ingress import OpenAiIngress
    from ray.llm._internal.serve.core.server.llm_server import LLMServer

    assert sf.LLM_SERVER == LLMServer.__name__ and sf.DEFAULT_INGRESS == OpenAiIngress.__name__
    name = sf.llm_deployment_name("Qwen/Qwen2.5-0.5B")
    assert sf.is_llm_server(name) and not sf.is_llm_server(sf.DEFAULT_INGRESS)
    assert sf.deployment_from_log_name(name.replace(":", "_", 1)) == name


def test_model_id_of_an_llm_config_is_read_once():
    src = re.compile(r'model_loading_config"\)\s*or\s*\{\}\)\.get\("model_id"')
    hits = {str(p.relative_to(REPO)) for p in PKG.rglob("*.py") if src.search(p.read_text(encoding="utf-8"))}
    assert hits == set(), hits
    assert sf.model_id_of({"model_loading_config": {"model_id": "m"}}) == "m" and sf.model_id_of({}) is None


def test_put_global_options_are_listed_once():
    """A table of two or more of a serve config's global options exists only in serve_facts, and it is Ray's."""
    from ray.serve.schema import ServeDeploySchema

    assert set(ServeDeploySchema.model_fields) == {"applications", *sf.GLOBAL_OPTIONS}
    assert set(sf.FIXED_GLOBALS) | set(sf.APPLIED_GLOBALS) | set(sf.SHOWN_GLOBALS) <= set(sf.GLOBAL_OPTIONS)
    assert files(collections_with(set(sf.GLOBAL_OPTIONS), 2)) == {SERVE_FACTS}


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_loopback_rules_are_spelled_once(host):
    assert files(where(lambda s: host in s)) == {SERVE_FACTS}, where(lambda s: host in s)


def test_one_loopback_rule():
    assert files(defs("is_loopback")) == {SERVE_FACTS}
    assert all(sf.is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"))
    assert not any(sf.is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "example.com", "", None))


# --------------------------------------------------------------------------
# quantization: llmctl/quant.py METHODS


def test_one_table_of_quantization_methods():
    """Tables naming two or more quantization methods (other than the bare schemes fp8, int8, ... that
    dtype and roofline tables also use) exist only in quant.py; --dtype's vocabulary reads METHODS."""
    schemes = {m.scheme for m in quant.METHODS.values()}
    method_names = set(quant.METHODS) - schemes
    assert files(collections_with(method_names, 2)) - {"llmctl/sizing/formats.py"} == {"llmctl/quant.py"}
    formats = (PKG / "sizing" / "formats.py").read_text()
    assert 'METHODS["awq"].scheme' in formats and 'METHODS["gptq"].scheme' in formats


def test_quantization_methods_match_vllms_choices():
    """Every method METHODS says vLLM lists is a ``quantization`` choice of every shipped engine-argument table."""
    for table in sorted((PKG / "engine_args" / "tables").glob("vllm-*.json")):
        data = json.loads(table.read_text())
        choices = next(a["choices"] for a in data["args"] if a["name"] == "quantization")
        listed = {n for n, m in quant.METHODS.items() if m.vllm is not None}
        assert listed <= set(choices), (table.name, listed - set(choices))
        assert not {n for n, m in quant.METHODS.items() if m.vllm is None} & set(choices), table.name


def test_quantized_bytes_have_one_rule():
    """Bytes per quantized weight: Quant.bytes_per_weight is the only place that does the arithmetic."""
    from llmctl import sizing

    assert sizing.FP8_BYTES == quant.scheme_quant("fp8").bytes_per_weight() == 1 + 4 / (128 * 128)
    assert sizing.INT4_BYTES == quant.scheme_quant("int4").bytes_per_weight()
    assert files(defs("bytes_per_weight")) == {"llmctl/quant.py"}


# --------------------------------------------------------------------------
# helpers that apply a rule: suggestion, atomic write, poll


def test_one_suggestion_helper():
    assert files(calls("difflib.get_close_matches")) == {"llmctl/suggest.py"}
    assert calls("difflib.SequenceMatcher") == set()
    assert files(where(lambda s: "did you mean" in s)) == {"llmctl/suggest.py"}


@pytest.mark.parametrize("call", ["os.replace", "os.rename", "tempfile.mkstemp"])
def test_one_atomic_write(call):
    assert files(calls(call)) <= {"llmctl/paths.py"}, calls(call)


def test_no_file_is_written_in_place():
    """Every file llmctl writes goes through paths.write_atomic: no write_text / write_bytes, no open() for
    writing ("a", appending to a log, is no rewrite: history entries, the head's log)."""
    direct = set()
    for rel, tree in modules().items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in ("write_text", "write_bytes"):
                direct.add(f"{rel}:{node.lineno}")
            if isinstance(f, ast.Name) and f.id == "open" or isinstance(f, ast.Attribute) and f.attr in ("open", "fdopen"):
                modes = [a.value for a in node.args[1:2] if isinstance(a, ast.Constant)]
                modes += [k.value.value for k in node.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)]
                if any(isinstance(m, str) and set(m) & set("wx") for m in modes):
                    direct.add(f"{rel}:{node.lineno}")
    assert {d for d in direct if not d.startswith("llmctl/paths.py:")} == set(), direct


# Loops that sleep but wait for nothing: a follow stream (until Ctrl-C), a live view's refresh.
NOT_WAITS = {"llmctl/launch/logs.py": "logs --follow re-reads the log files", "llmctl/cli/top.py": "top's refresh",
             "llmctl/loadgen.py": "the load run samples the replicas while it lasts"}


def test_one_poll_helper():
    """A loop that sleeps is a wait: it goes through llmctl.poll (poll_until / poll_iter)."""
    loops = set()
    for rel, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.While, ast.For)):
                if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "sleep"
                       for n in ast.walk(node)):
                    loops.add(rel)
    assert loops - set(NOT_WAITS) == {"llmctl/poll.py"}, loops


# --------------------------------------------------------------------------
# GPUs, secrets, config.json


def test_one_gpu_spec_table():
    assert files(calls("GPUType")) == {"llmctl/hardware.py"}
    assert files(defs("GPUType")) == {"llmctl/hardware.py"}


def test_one_set_of_secret_patterns():
    assert files(where(lambda s: "hf_[" in s or s.startswith(r"\bhf_"))) == {"llmctl/secrets.py"}


def test_one_config_json_reader():
    """config.json is parsed in one place (catalog.read_config_json); others ask it."""
    readers = set()
    for rel, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("load", "loads") \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "json":
                if any(isinstance(n, ast.Constant) and n.value == "config.json" for n in ast.walk(node)):
                    readers.add(rel)
    assert readers == set(), readers
    assert files(defs("read_config_json")) == {"llmctl/catalog.py"}


def test_one_reading_of_a10():
    """Ray's LLMConfig turns accelerator_type "A10" into "A10G"; --gpu a10 means A10G: hardware.py says both."""
    from llmctl.hardware import RAY_ACCELERATOR_REWRITES, by_ray_type

    assert files(where(lambda s: s == "A10")) == {"llmctl/hardware.py"}
    assert by_ray_type("A10").name == RAY_ACCELERATOR_REWRITES["A10"] == "A10G"


def test_one_unspecified_gpu_node_size():
    """The "8 GPUs per node" of a GPU whose type is not known is UNSPECIFIED_GPU's, read everywhere from it."""
    from llmctl.hardware import UNSPECIFIED_GPU, gpu_of_memory

    assert gpu_of_memory(40).gpus_per_node == UNSPECIFIED_GPU.gpus_per_node
    src = (PKG / "validate" / "llm_config.py").read_text()
    assert "else 8" not in src and ', 8, "' not in src
