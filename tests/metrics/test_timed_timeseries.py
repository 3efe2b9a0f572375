"""timeseries.parquet from recorded state changes: a hand-worked run, a differential test
against a polling sampler, the row cap, and a slow cost model costing events, not time."""

import math

import numpy as np
import pytest
import simpy
from fakes import Ticks, lru
from hypothesis import given, settings
from hypothesis import strategies as st

import prefixsim.engine.timed as timed
from prefixsim.cache import TTLMode, TTLRule
from prefixsim.config import load_config
from prefixsim.costmodel import StepRoofline
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.metrics.summary import sampling_keys
from prefixsim.metrics.timeseries import (
    TIMESERIES_COLUMNS,
    effective_interval,
    sample_states,
    timeseries,
)
from prefixsim.pipeline import simulate
from prefixsim.presets import get_gpu, get_model
from prefixsim.router import ROUTERS
from prefixsim.trace import Request

NAN = float("nan")
ROOFLINE = StepRoofline(get_model("llama-3.1-8b"), get_gpu("h100-sxm"))


def test_known_answer_by_hand():
    """One replica (1000 tokens, budget 64), 1 s steps, samples every 0.5 s.

    A (32 tokens, pages 1 2, 3 outputs) arrives at 0.25: admitted, 32 private tokens, its
    prefill runs 0.25-1.25 (query 32, hit 0). At 1.25 its pages enter the cache (32 cached)
    and a 2-step decode run starts, reserving 2 tokens. B (same pages, 1 output) arrives at
    1.5 (waiting 1; a tie with the 1.5 sample, which shows the state after it) and cuts the
    run at the step boundary 2.25: 1 unused token freed, A keeps 1, reserves 1 more for the
    mixed step 2.25-3.25 with B's 16-token chunk (B hits page 1 only: the cap L - 1 = 31 is
    page-aligned, R3; query 64, hit 16; B's 16 private tokens make 18). Both finish at
    3.25 = duration; the last sample is at 3.0.
    """
    requests = [Request(0, 0.25, 32, 3, (1, 2), 16), Request(1, 1.5, 32, 1, (1, 2), 16)]
    result = replay_timed(requests, Fleet([lru(1000)], Ticks(),
                          ContinuousBatching(64, 4), ROUTERS.build("round_robin")),
                          Sampling(check_invariants=True))
    assert result.duration_s == 3.25
    frame, about = timeseries(result, 0.5)
    assert sampling_keys(about) == {"timeseries_interval_s": 0.5, "timeseries_rows": 7}
    assert list(frame.columns) == list(TIMESERIES_COLUMNS)
    assert frame["time_s"].tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    assert frame["running"].tolist() == [0, 1, 1, 1, 1, 2, 2]
    assert frame["waiting"].tolist() == [0, 0, 0, 1, 1, 0, 0]
    assert frame["cached_tokens"].tolist() == [0, 0, 0, 32, 32, 32, 32]
    assert frame["private_tokens"].tolist() == [0, 32, 32, 2, 2, 18, 18]
    assert frame["cache_usage"].tolist() == [0, 0.032, 0.032, 0.034, 0.034, 0.05, 0.05]
    np.testing.assert_array_equal(frame["rolling_hit_rate"],
                                  [NAN, 0.0, NAN, NAN, NAN, 16 / 32, NAN])
    assert frame["evictions"].tolist() == [0] * 7
    assert frame["preemptions"].tolist() == [0] * 7


def replay_private_requests(count: int, gap_s: float, replicas: int):
    """`count` requests of four private 16-token pages and 4 outputs, `gap_s` apart, round
    robin over `replicas` LRU replicas of 1000 tokens (budget 64, 4 sequences), 1 s steps."""
    requests = [Request(i, gap_s * i, 64, 4, (10 * i, 10 * i + 1, 10 * i + 2, 10 * i + 3), 16)
                for i in range(count)]
    return replay_timed(requests, Fleet([lru(1000) for _ in range(replicas)], Ticks(),
                                        ContinuousBatching(64, 4), ROUTERS.build("round_robin")))


def test_rows_per_replica_are_time_major():
    result = replay_private_requests(6, 0.3, replicas=3)
    frame, _ = timeseries(result, 0.5)
    assert frame["replica"].tolist() == [0, 1, 2] * (len(frame) // 3)
    assert frame["time_s"].tolist() == sorted(frame["time_s"])


@pytest.mark.parametrize(("duration", "interval", "replicas", "max_rows", "expected"), [
    (10.0, 1.0, 1, 11, 1.0),   # 11 samples 0..10 fit exactly
    (10.0, 1.0, 1, 10, 2.0),   # 0, 2, .., 10: 6 samples
    (10.0, 1.0, 1, 5, 3.0),    # 0, 3, 6, 9: 4 (every 2 s would give 6)
    (10.0, 1.0, 2, 10, 3.0),   # 5 samples per replica
    (10.0, 1.0, 4, 2, 11.0),   # at least one sample per replica: t = 0 only
    (0.0, 0.5, 3, 100, 0.5),
])
def test_effective_interval_known_answers(duration, interval, replicas, max_rows, expected):
    assert effective_interval(duration, interval, replicas, max_rows) == expected


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 1e7), st.floats(1e-3, 1e3), st.integers(1, 64),
       st.integers(1, 200_000))
def test_effective_interval_is_the_smallest_multiple_under_the_cap(duration, interval,
                                                                   replicas, max_rows):
    used = effective_interval(duration, interval, replicas, max_rows)
    factor = round(used / interval)
    per_replica = max(1, max_rows // replicas)
    assert math.floor(duration / used) + 1 <= per_replica
    if factor > 1:
        assert math.floor(duration / ((factor - 1) * interval)) + 1 > per_replica


def test_row_cap_widens_the_interval_and_says_so():
    result = replay_private_requests(20, 2.0, replicas=2)
    assert result.duration_s == 38.0 + 4.0  # the last request: arrival 38, 4 steps
    frame, info = timeseries(result, 0.5, max_rows=30)
    about = sampling_keys(info)
    assert about["timeseries_interval_s"] == 3.0  # 15 samples per replica: 0, 3, .., 42
    assert about["timeseries_rows"] == len(frame) == 30
    assert "instead of 0.5 s" in about["timeseries_warning"]
    fine, info_fine = timeseries(result, 0.5)
    assert "timeseries_warning" not in sampling_keys(info_fine)
    coarse = fine[np.isin(fine["time_s"], frame["time_s"])].reset_index(drop=True)
    same = ["time_s", "replica", "running", "waiting", "cache_usage", "evictions"]
    assert coarse[same].equals(frame[same])  # the wide grid samples the same states


# ------------------------------------------------------------ differential: a polling sampler
def _poll_reference(monkeypatch, interval):
    """Patch the engine with the old design: a process that wakes every `interval` and
    reads every replica (cumulative counters; rolling hit rates computed afterwards)."""
    rows, created = [], []
    base = timed.Replica

    def poll(env):
        while True:
            for r in created:
                cache = r.cache
                rows.append((env.now, r.index, len(r.running), len(r.waiting),
                             cache.resident_tokens, cache.reserved_tokens, r.query_tokens,
                             r.hit_tokens, cache.counters.evicted_pages, r.num_preemptions))
            yield env.timeout(interval)

    class Polled(base):
        def __init__(self, index, env, *args, **kwargs):
            super().__init__(index, env, *args, **kwargs)
            created.append(self)
            if index == 0:
                env.process(poll(env))

    monkeypatch.setattr(timed, "Replica", Polled)
    return rows


def _workload(seed, num, num_prefixes):
    rng = np.random.default_rng(seed)
    t, out = 0.0, []
    for i in range(num):
        t += float(rng.exponential(0.02)) + 1e-6
        prefix = int(rng.integers(0, num_prefixes))
        pages = int(rng.integers(1, 40))
        ids = tuple(range(1000 * prefix, 1000 * prefix + pages // 2)) + tuple(
            range(10**6 + 100 * i, 10**6 + 100 * i + pages - pages // 2))
        out.append(Request(i, t, pages * 16 - int(rng.integers(0, 16)),
                           int(rng.integers(1, 300)), ids, 16))
    return out


class LivePrefixAware:
    """prefix_aware reading every replica's cache live (no PrefixIndex: not an
    IndexedRouter), so its matches expire dead pages on each replica it looks at."""

    def __init__(self):
        self.inner = ROUTERS.build("prefix_aware")

    def route(self, request, replicas, now):
        return self.inner.route(request, replicas, now)


def _assert_matches_polling(requests, replicas, router, ttl, capacity):
    with pytest.MonkeyPatch.context() as monkeypatch:
        polled = _poll_reference(monkeypatch, 0.125)
        rule = None if ttl is None else TTLRule(ttl, TTLMode.SLIDING)
        caches = [lru(capacity, rule) for _ in range(replicas)]
        router = ROUTERS.build(router) if isinstance(router, str) else router
        result = timed.replay_timed(requests, Fleet(caches, ROOFLINE, ContinuousBatching(512, 8),
                                    router))
    frame = sample_states(result.states, [capacity] * replicas, 0.125, result.duration_s)
    reference = [row for row in polled if row[0] <= result.duration_s]
    assert len(reference) == len(frame)
    last = {}
    for row, sample in zip(reference, frame.itertuples(index=False), strict=True):
        time_s, replica, running, waiting, cached, private, query, hits, evicted, pre = row
        q0, h0 = last.get(replica, (0, 0))
        last[replica] = (query, hits)
        rate = (hits - h0) / (query - q0) if query > q0 else NAN
        assert (sample.time_s, sample.replica) == (time_s, replica)
        assert (sample.running, sample.waiting, sample.cached_tokens, sample.private_tokens,
                sample.evictions, sample.preemptions) == (running, waiting, cached, private,
                                                          evicted, pre)
        assert sample.cache_usage == (cached + private) / capacity
        assert sample.rolling_hit_rate == rate or (math.isnan(rate)
                                                  and math.isnan(sample.rolling_hit_rate))
    return frame


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), replicas=st.integers(1, 3),
       router=st.sampled_from(["prefix_aware", "round_robin", "least_loaded"]),
       ttl=st.sampled_from([None, 0.05]), capacity=st.sampled_from([3000, 8000, 100_000]))
def test_matches_a_polling_sampler(seed, replicas, router, ttl, capacity):
    """Tight memory (evictions, preemptions), TTL caches, several replicas: every sample
    equals what a sampler waking every 1/8 s read at that instant (arrivals and roofline
    step times never fall exactly on the grid)."""
    _assert_matches_polling(_workload(seed, 40, 4), replicas, router, ttl, capacity)


def test_routing_expiry_on_a_busy_replica_shows_at_once():
    """TTL 1 s. A (4 pages, 1 output) and then D (5 pages, 3000 outputs: a long decode run)
    go to replica 0. B at 5.01 s goes to replica 1 (replica 0 has the load), but a
    prefix_aware reading the caches live matched B on replica 0 too, which expired A's pages
    there (R11) while D's run goes on without a step boundary. The 5.125 s sample shows them
    gone, as a poller would. (Through the PrefixIndex the router expires nothing: A's pages
    stay until replica 0's next match, as its next sample shows.)"""
    requests = [Request(0, 0.1, 64, 1, (1, 2, 3, 4), 16),
                Request(1, 0.2, 80, 3000, (100, 101, 102, 103, 104), 16),
                Request(2, 5.01, 64, 1, (200, 201, 202, 203), 16)]
    frame = _assert_matches_polling(requests, 2, LivePrefixAware(), 1.0, 100_000)
    replica0 = frame[frame["replica"] == 0].set_index("time_s")
    assert replica0.loc[4.875, "cached_tokens"] == 64 + 80
    assert replica0.loc[5.125, "cached_tokens"] == 80
    indexed = _assert_matches_polling(requests, 2, "prefix_aware", 1.0, 100_000)
    assert indexed[indexed["replica"] == 0].set_index("time_s").loc[5.125,
                                                                   "cached_tokens"] == 64 + 80


# ------------------------------------------------------------- slow cost model: events, not time
def test_slow_profile_costs_events_not_simulated_time(monkeypatch):
    """The CPU-calibrated profile on an H100 preset stretches simulated time ~1000x. The
    engine's simpy events then stay about what the roofline run needs (the old sampler woke
    once per simulated second: ~duration events), and the rows stay under the cap."""
    steps = [0]
    original = simpy.Environment.step

    def counting(self):
        steps[0] += 1
        return original(self)

    monkeypatch.setattr(simpy.Environment, "step", counting)
    requests = _workload(3, 150, 6)
    figures = {}
    for profile in (None, "cpu-llama-3.1-8b"):
        overrides = {"trace.path": "unused.jsonl", "model.name": "llama-3.1-8b",
                     "hardware.gpu": "h100-sxm", "engine.replicas": 2}
        if profile is not None:
            overrides["cost_model.profile"] = profile
        steps[0] = 0
        result = simulate(load_config(None, overrides), requests)
        figures[profile] = (steps[0], result.summary, len(result.timeseries))
    fast_steps, fast, _ = figures[None]
    slow_steps, slow, slow_rows = figures["cpu-llama-3.1-8b"]
    assert slow["completed"] == fast["completed"] == len(requests)
    assert slow["duration"] > 100 * fast["duration"]
    # a sampler waking every second would have cost `duration` events on its own
    assert slow["duration"] > 10 * slow_steps
    assert slow_steps < 3 * (slow["num_events"] + len(requests))
    assert slow_steps < 3 * fast_steps
    assert slow_rows == slow["timeseries_rows"] <= 100_000
    assert slow["timeseries_interval_s"] == effective_interval(slow["duration"], 1.0, 2)
