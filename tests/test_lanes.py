"""`make test`'s scheduler (tests/conftest.py) reads the `cluster` marks from
the source to run those tests on one worker, with that worker's Ray head. It
must agree with pytest's own view of the marks, or a test that uses the
session's head would run on the other worker and start a second head."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import cluster_tests, in_cluster_lane

TESTS = Path(__file__).resolve().parent


def _collect(marker: str) -> set[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", marker, str(TESTS)], capture_output=True, text=True, cwd=TESTS.parent).stdout
    return {line for line in out.splitlines() if "::" in line}


def test_lane_classifier_agrees_with_pytest_marks(request):
    marked = cluster_tests()
    items = request.session.items
    if len({i.nodeid.split("::")[0] for i in items}) == len(list(TESTS.glob("test_*.py"))):
        # the whole suite is collected (make test): pytest's own marks and fixtures, per item
        for item in items:
            lane = in_cluster_lane(item.nodeid, marked)
            assert lane == (item.get_closest_marker("cluster") is not None), item.nodeid
            if {"ray_head", "cluster_home"} & set(item.fixturenames):
                assert lane, f"{item.nodeid} uses the session's Ray head but is not marked cluster"
    else:  # run on its own: collect the suite in a child
        cluster, other = _collect("cluster"), _collect("not cluster")
        assert cluster and other
        assert {n for n in cluster if not in_cluster_lane(n, marked)} == set()
        assert {n for n in other if in_cluster_lane(n, marked)} == set()
