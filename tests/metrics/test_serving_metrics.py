"""Serving metrics: weighted ITL percentiles against a naive expansion, goodput by hand,
time scaling, the debug invariant check catching a broken account."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.cache import POLICIES, SegmentCache
from prefixsim.costmodel import StepRoofline
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.metrics.requests import distribution
from prefixsim.metrics.serving import serving_summary, weighted_distribution
from prefixsim.metrics.timeseries import timeseries
from prefixsim.presets import get_gpu, get_model
from prefixsim.router import ROUTERS
from prefixsim.trace import Request

# each test runs on the package's cache and on the per-page reference (conftest: each_cache)
pytestmark = pytest.mark.usefixtures("each_cache")
Cache = SegmentCache


COST = StepRoofline(get_model("llama-3.1-8b"), get_gpu("h100-sxm"))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(0.001, 1.0), st.integers(1, 20)), min_size=1,
                max_size=30))
def test_weighted_distribution_equals_expanded_values(segments):
    expanded = np.repeat([v * 1e3 for v, _ in segments], [w for _, w in segments])
    got = weighted_distribution(segments, "itl_ms")
    naive = distribution(expanded, "itl_ms")
    assert got["mean_itl_ms"] == pytest.approx(naive["mean_itl_ms"])
    assert got["std_itl_ms"] == pytest.approx(naive["std_itl_ms"], abs=1e-9)
    for q in (50, 90, 95, 99):  # the lower of the two values around a rank
        expected = float(np.percentile(expanded, q, method="inverted_cdf"))
        assert got[f"p{q}_itl_ms"] == pytest.approx(expected)


def test_goodput_and_throughput_by_hand():
    """4 completed requests in 10 s: 2 meet TTFT <= 100 ms and TPOT <= 20 ms (one without a
    TPOT, output 1, counts as meeting it); 1 rejected request counts nowhere."""
    df = pd.DataFrame({
        "status": ["completed"] * 4 + ["rejected"],
        "input_tokens": [100, 200, 300, 400, 999], "output_tokens": [10, 1, 30, 40, 0],
        "ttft_ms": [50.0, 90.0, 150.0, 80.0, np.nan],
        "tpot_ms": [10.0, np.nan, 10.0, 25.0, np.nan],
        "e2el_ms": [1.0, 2.0, 3.0, 4.0, np.nan], "preemptions": [0, 0, 1, 0, 0],
    })
    s = serving_summary(df, 10.0, [(0.01, 5)], goodput_ttft_ms=100, goodput_tpot_ms=20)
    assert s["request_throughput"] == 0.4
    assert s["output_throughput"] == 8.1
    assert s["total_token_throughput"] == (1000 + 81) / 10
    assert s["request_goodput"] == 0.2
    assert s["rejected"] == 1 and s["num_preemptions"] == 1
    assert s["mean_itl_ms"] == pytest.approx(10.0)
    assert s["mean_ttft_ms"] == pytest.approx(92.5)


def _requests(n=30):
    return [Request(i, 0.05 * i, 200 + 10 * i, 20, tuple(range(100 * i, 100 * i + 13 + i // 2)),
                    16) for i in range(n)]


def _run(requests, time_scale=1.0, **sampling):
    caches = [Cache(50_000, POLICIES.build("lru"))]
    return replay_timed(requests, Fleet(caches, COST, ContinuousBatching(2048, 8),
                        ROUTERS.build("round_robin"), time_scale), Sampling(**sampling))


def test_time_scale_stretches_arrivals():
    half = _run(_requests(), time_scale=0.5)
    assert [r.arrival_s for r in half.records] == [0.05 * i * 0.5 for i in range(30)]


def test_no_sampling_gives_no_timeseries():
    result = _run(_requests(), record_state=False)
    assert result.states is None
    assert timeseries(result, 1.0)[0].empty
    assert timeseries(_run(_requests()), None)[0].empty


def test_debug_mode_catches_a_broken_account():
    """Every test of the engine runs with check_invariants; this shows the check can fail:
    a cache that charges each reservation a token more than the replica counts in its
    requests' private KV (the replica losing track of a token) is caught at the end of that
    step. (A cache subclass: the compiled replica's methods cannot be patched.)"""

    class Leaky(Cache):
        def reserve(self, num_tokens):
            super().reserve(num_tokens + 1 if num_tokens else 0)

    def run(check):
        return replay_timed(_requests(), Fleet([Leaky(50_000, POLICIES.build("lru"))], COST,
                                               ContinuousBatching(2048, 8),
                                               ROUTERS.build("round_robin")),
                            Sampling(check_invariants=check))

    run(check=False)  # unchecked: goes unnoticed
    with pytest.raises(AssertionError, match="private"):
        run(check=True)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 100_000), min_size=1, max_size=50), st.integers(1, 500),
       st.floats(0, 1.0))
def test_decode_step_counting_matches_a_linear_scan(contexts, steps, fraction):
    """steps_done_by / steps_reaching against walking the steps one by one."""
    from prefixsim.engine.decode_steps import steps_done_by, steps_reaching

    contexts = tuple(contexts)
    elapsed = COST.decode_steps_time_s(contexts, steps) * fraction
    times = [COST.decode_steps_time_s(contexts, m) for m in range(steps + 1)]
    assert steps_done_by(COST, contexts, steps, elapsed) == max(
        m for m in range(steps + 1) if times[m] <= elapsed)
    assert steps_reaching(COST, contexts, steps, elapsed) == min(
        m for m in range(steps + 1) if times[m] >= elapsed)
