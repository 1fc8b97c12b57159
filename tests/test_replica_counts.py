"""One rule for how many replicas a deployment_config asks for
(llmctl.placement.replica_counts), used by preflight, kuberay and validate's
cpu-replicas check. The reference is Serve itself: Ray Serve LLM's defaults
merged in as its builder does, then ``serve.deployment``'s own DeploymentConfig."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmctl.placement import AUTO_MAX_REPLICAS, replica_counts
from llmctl.scalars import lax_int


class _Replica:
    pass


def serve_counts(dc: dict):
    """(min, max) replicas of the deployment Serve builds from ``dc``, or None if Serve refuses it."""
    from ray import serve
    from ray.llm._internal.common.dict_utils import maybe_apply_llm_deployment_config_defaults
    from ray.llm._internal.serve.core.server.builder import DEFAULT_DEPLOYMENT_OPTIONS

    opts = maybe_apply_llm_deployment_config_defaults(DEFAULT_DEPLOYMENT_OPTIONS, dc)
    try:
        c = serve.deployment(_Replica, **opts)._deployment_config
    except (ValueError, TypeError):  # pydantic's ValidationError is a ValueError
        return None
    a = c.autoscaling_config
    return (a.min_replicas, a.max_replicas) if a else (c.num_replicas, c.num_replicas)


FORMS = [
    {},
    {"num_replicas": 3},
    {"num_replicas": "auto"},
    {"num_replicas": "auto", "autoscaling_config": {"min_replicas": 2}},
    {"num_replicas": "auto", "autoscaling_config": {"max_replicas": 5, "min_replicas": 0}},
    {"num_replicas": "auto", "autoscaling_config": {"target_ongoing_requests": 4}},
    {"autoscaling_config": {"min_replicas": 0, "max_replicas": 4}},
    {"autoscaling_config": {"max_replicas": 6}},
    {"autoscaling_config": {"min_replicas": 1, "initial_replicas": 1}},
    {"autoscaling_config": {"max_replicas": "4"}},
    {"autoscaling_config": {"max_replicas": 4.0}},
    {"num_replicas": "2"},
    {"num_replicas": " +2 "},
    {"num_replicas": 2.0},
    {"num_replicas": None},
    {"num_replicas": True},
    {"num_replicas": "auto", "autoscaling_config": {"max_replicas": True}},
]


@pytest.mark.parametrize("dc", FORMS, ids=[repr(f) for f in FORMS])
def test_same_bounds_as_serve(dc):
    expected = serve_counts(dc)
    assert expected is not None, "every form here is one Serve accepts"
    assert replica_counts(dc) == expected


def test_auto_reaches_serves_default():
    assert replica_counts({"num_replicas": "auto"}) == serve_counts({"num_replicas": "auto"}) == (1, AUTO_MAX_REPLICAS)


REFUSED = [{"num_replicas": "two"}, {"num_replicas": 2.5}, {"num_replicas": "٣"}, {"num_replicas": -1},
           {"autoscaling_config": {"max_replicas": "²"}}, {"autoscaling_config": "x"}, ["not", "a", "mapping"], None]


@pytest.mark.parametrize("dc", REFUSED, ids=[repr(f) for f in REFUSED])
def test_values_serve_refuses_count_as_defaults(dc):
    """validate reports these; sizing must not crash on them."""
    if isinstance(dc, dict):
        assert serve_counts(dc) is None
    mn, mx = replica_counts(dc)
    assert (mn, mx) == (1, 1)


_COUNTS = st.one_of(st.integers(0, 12), st.integers(0, 12).map(str), st.integers(0, 12).map(float),
                    st.sampled_from(["two", 2.5, "²", None, True, False, " 3", "-1"]))


@given(num=st.one_of(st.none(), st.just("auto"), _COUNTS),
       asc=st.one_of(st.none(), st.fixed_dictionaries({}, optional={"min_replicas": _COUNTS, "max_replicas": _COUNTS})))
def test_any_form_serve_accepts(num, asc):
    dc = {k: v for k, v in (("num_replicas", num), ("autoscaling_config", asc)) if v is not None}
    expected = serve_counts(dc)
    if expected is not None:
        assert replica_counts(dc) == expected


@pytest.mark.parametrize("v, n", [(3, 3), (True, 1), (2.0, 2), (" 7 ", 7), ("+4", 4), ("-2", -2), (2.5, None), ("²", None),
                                  ("٣", None), ("", None), (None, None), ([1], None)])
def test_lax_int(v, n):
    assert lax_int(v) == n
