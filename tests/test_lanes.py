"""`make test` runs two plain pytest lanes side by side (Makefile): the tests
on the session's Ray head (``-m "cluster and not own_cluster and not long"``, one process,
file order), and the rest (``-m "not cluster"``, then ``-m own_cluster``: the
tests that start clusters of their own). The lanes are pytest's own mark
expressions; what must hold for them to split the suite, each test once, is
checked at collection (conftest.lane_errors) and here on the whole suite."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import HEAD_LANE, lane_errors

TESTS = Path(__file__).resolve().parent


def _collect(marker: str, *paths: Path, cwd: Path = TESTS.parent) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-m", marker, *map(str, paths)], capture_output=True, text=True, cwd=cwd)


def test_this_runs_items_keep_the_lane_rules(request):
    """The lanes are pytest's mark expressions; with the rules of
    conftest.lane_errors they split the suite, each test once (under `make
    test` each lane's collection is checked by the same hook)."""
    assert lane_errors(request.session.items) == []


def test_a_test_in_the_wrong_lane_is_refused_at_collection(tmp_path):
    """A test that uses the session's head without the `cluster` mark would run
    in the other lane and start a second head; pytest refuses to collect it."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f"""
        import importlib.util, sys
        sys.path.insert(0, {str(TESTS)!r})
        spec = importlib.util.spec_from_file_location("suite_conftest", {str(TESTS / "conftest.py")!r})
        suite = sys.modules["suite_conftest"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(suite)
        pytest_collection_modifyitems = suite.pytest_collection_modifyitems
    """))
    (tmp_path / "test_wrong.py").write_text(textwrap.dedent("""
        import pytest

        def test_unmarked(cluster_home):
            pass

        @pytest.mark.own_cluster
        def test_own_without_cluster():
            pass
    """))
    p = _collect("not cluster", tmp_path, cwd=tmp_path)
    assert p.returncode != 0
    out = p.stdout + p.stderr
    assert "test_unmarked: uses the session's Ray head" in out and "test_own_without_cluster: marked own_cluster without cluster" in out


def test_the_head_lane_refuses_xdist_workers(tmp_path):
    """Plain `pytest -n 2` on the head lane would start one head per worker: refused, saying what to run."""
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "-m", HEAD_LANE,
                        str(TESTS / "test_cluster.py")], capture_output=True, text=True, cwd=TESTS.parent, timeout=300)
    assert p.returncode != 0 and "make test-head" in p.stdout + p.stderr, p.stdout[-2000:] + p.stderr[-2000:]
