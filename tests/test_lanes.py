"""`make test`'s scheduler (tests/conftest.py) reads the `cluster` marks from
the source to run those tests on one worker, with that worker's Ray head. It
must agree with pytest's own view of the marks, or a test that uses the
session's head would run on the other worker and start a second head. The
tests marked `own_cluster` run beside that lane: they must not use the
session's head, and keep the `cluster` mark (`make test-fast` leaves them out)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import cluster_tests, in_head_lane, in_lane, own_cluster_tests

TESTS = Path(__file__).resolve().parent


def _collect(marker: str) -> set[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", marker, str(TESTS)], capture_output=True, text=True, cwd=TESTS.parent).stdout
    return {line for line in out.splitlines() if "::" in line}


def test_lane_classifier_agrees_with_pytest_marks(request):
    marked, own = cluster_tests(), own_cluster_tests()
    assert own, "no test is marked own_cluster"
    items = request.session.items
    if len({i.nodeid.split("::")[0] for i in items}) == len(list(TESTS.glob("test_*.py"))):
        # the whole suite is collected (make test): pytest's own marks and fixtures, per item
        for item in items:
            lane = in_head_lane(item.nodeid, marked, own)
            beside = item.get_closest_marker("own_cluster") is not None
            assert beside == in_lane(item.nodeid, own), item.nodeid
            assert lane == (item.get_closest_marker("cluster") is not None and not beside), item.nodeid
            if beside:
                assert item.get_closest_marker("cluster") is not None, f"{item.nodeid}: own_cluster without cluster"
            if {"ray_head", "cluster_home"} & set(item.fixturenames):
                assert lane, f"{item.nodeid} uses the session's Ray head but is not in its lane"
                assert not beside, f"{item.nodeid} is marked own_cluster but uses the session's Ray head"
    else:  # run on its own: collect the suite in a child
        cluster, other = _collect("cluster and not own_cluster"), _collect("not cluster or own_cluster")
        beside = _collect("own_cluster")
        assert cluster and other and beside
        assert {n for n in cluster if not in_head_lane(n, marked, own)} == set()
        assert {n for n in other if in_head_lane(n, marked, own)} == set()
        assert {n for n in beside if not in_lane(n, own)} == set()
        assert {n for n in other - beside if in_lane(n, own)} == set()
        assert beside <= _collect("cluster")
