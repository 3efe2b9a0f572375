"""Timed engine properties on generated multi-turn workloads.

Every run here checks docs/cache-semantics.md R13 and the replica's accounting after every step
(check_invariants). Workloads are small, seeded, with shared prefixes, tight memory (so
eviction and preemption happen) and bursts (so queues form).
"""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from radix_reference import RadixCache

from prefixsim.cache import POLICIES, TTLMode, TTLRule
from prefixsim.costmodel import StepRoofline
from prefixsim.engine import replay_cache_only
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.metrics.requests import records_frame
from prefixsim.metrics.timeseries import timeseries
from prefixsim.presets import get_gpu, get_model
from prefixsim.router import ROUTERS
from prefixsim.trace import Request

COST = StepRoofline(get_model("llama-3.1-8b"), get_gpu("h100-sxm"))
P = 16


def workload(seed, num_sessions=12, turns=4, rate_s=0.05, max_output=200):
    """Multi-turn sessions: each turn's prompt extends the previous turn's (chained ids)."""
    rng = np.random.default_rng(seed)
    requests, next_id = [], 1
    system = tuple(range(10**6, 10**6 + 8))  # a 128-token shared system prompt
    for session in range(num_sessions):
        t = float(rng.exponential(rate_s * num_sessions)) + session * rate_s
        ids, tokens = system, len(system) * P
        for _turn in range(turns):
            added = int(rng.integers(20, 600))
            total = tokens + added
            pages = -(-total // P)
            full = tokens // P  # keep whole pages of the previous prompt
            new_ids = tuple(range(next_id, next_id + pages - full))
            next_id += pages - full
            ids = ids[:full] + new_ids
            requests.append((t, total, int(rng.integers(1, max_output)), ids, f"s{session}"))
            tokens = total
            t += float(rng.exponential(0.5))
    requests.sort(key=lambda r: r[0])
    return [Request(i, t, n, o, ids, P, s) for i, (t, n, o, ids, s) in enumerate(requests)]


def run(requests, capacity=6000, replicas=2, router="prefix_aware", budget=1024, seqs=16,
        ttl=None, **kwargs):
    ttl_rule = None if ttl is None else TTLRule(ttl, TTLMode.SLIDING)
    caches = [RadixCache(capacity, POLICIES.build("lru"), ttl_rule) for _ in range(replicas)]
    return replay_timed(requests, Fleet(caches, COST, ContinuousBatching(budget, seqs),
                        ROUTERS.build(router)), Sampling(check_invariants=True, **kwargs))


def frame(result):
    from prefixsim.engine.request_state import ServedRecord
    return records_frame(result.records, ServedRecord)


def compute_floor_s(input_tokens, cached):
    """Compute-only time of the uncached part of a prefill (no memory, no overhead)."""
    gemm, attn = COST.prefill_flops(input_tokens - cached, cached)
    return gemm * COST._s_per_gemm_flop + attn * COST._s_per_attn_flop


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), capacity=st.sampled_from([2500, 6000, 50_000]),
       router=st.sampled_from(["round_robin", "least_loaded", "session_affinity",
                               "prefix_aware"]),
       budget=st.sampled_from([64, 512, 4096]), ttl=st.sampled_from([None, 0.3, 5.0]))
def test_invariants_statuses_and_floors(seed, capacity, router, budget, ttl):
    """R13 holds at every step (checked inside); every request ends completed or rejected;
    no TTFT beats the compute floor of its uncached prefill; hits never exceed the
    unbounded cache-only replay's."""
    requests = workload(seed)
    result = run(requests, capacity=capacity, router=router, budget=budget, ttl=ttl)
    df = frame(result)
    assert len(df) == len(requests)
    assert set(df["status"]) <= {"completed", "rejected"}
    done = df[df["status"] == "completed"]
    assert (done["output_tokens"] == [max(1, requests[i].output_tokens)
                                      for i in done["request_id"]]).all()
    for row in done.itertuples():
        floor = compute_floor_s(row.input_tokens, row.cached_tokens)
        assert row.ttft_ms >= floor * 1e3 * (1 - 1e-12)
        assert row.first_token_s <= row.finish_s
        assert row.queue_ms >= 0
    unbounded = replay_cache_only(requests, RadixCache(None, POLICIES.build("lru")))
    assert df["cached_tokens"].sum() <= sum(r.cached_tokens for r in unbounded.records)
    rejected = df[df["status"] == "rejected"]
    for row in rejected.itertuples():
        req = requests[row.request_id]
        assert req.input_tokens + max(1, req.output_tokens) > capacity


def test_tight_memory_preempts_and_still_finishes():
    requests = workload(3, num_sessions=20, rate_s=0.005, max_output=400)
    result = run(requests, capacity=3000, replicas=1, budget=2048, seqs=64)
    df = frame(result)
    assert df["preemptions"].sum() > 0
    preempted = df[df["preemptions"] > 0]
    assert (preempted["recomputed_tokens"] > 0).all()
    assert (df["status"] == "completed").sum() + (df["status"] == "rejected").sum() == len(df)


def test_request_that_can_never_fit_is_rejected():
    big = Request(0, 0.0, 5000, 10, tuple(range(1, 314)), P)
    small = Request(1, 0.0, 100, 10, tuple(range(1000, 1007)), P)
    df = frame(run([big, small], capacity=4000, replicas=1))
    assert list(df["status"]) == ["rejected", "completed"]
    assert np.isnan(df["ttft_ms"][0])


@pytest.mark.parametrize("router", ROUTERS.names())
@pytest.mark.parametrize("capacity,ttl", [(3000, None), (8000, 0.5), (100_000, None)])
def test_fast_path_equals_step_by_step(router, capacity, ttl):
    """Differential: decode runs summed in one timeout (with wake-ups at arrivals, evictions
    at the same step boundaries) give the same records as one timeout per decode step."""
    requests = workload(11, num_sessions=10)
    fast = frame(run(requests, router=router, capacity=capacity, ttl=ttl))
    slow = frame(run(requests, router=router, capacity=capacity, ttl=ttl, max_run_steps=1))
    pd.testing.assert_frame_equal(fast, slow, check_exact=False, rtol=1e-9)


def test_fast_path_uses_far_fewer_events():
    requests = workload(5, num_sessions=10)
    fast = run(requests, capacity=50_000)
    slow = run(requests, capacity=50_000, max_run_steps=1)
    assert fast.num_events * 3 < slow.num_events


def test_same_input_same_records():
    requests = workload(7)
    a, b = frame(run(requests)), frame(run(requests))
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_overload_grows_queues_without_crashing():
    """300 requests in 0.3 s on one replica with room for 4 sequences: the waiting queue
    grows, the timeseries shows it, and everything still completes."""
    requests = workload(2, num_sessions=75, turns=4, rate_s=0.001)
    requests = [Request(i, r.arrival_s * 0.01, r.input_tokens, r.output_tokens, r.page_ids,
                        P, r.session_id) for i, r in enumerate(requests)]
    result = run(requests, capacity=20_000, replicas=1, seqs=4)
    df = frame(result)
    assert (df["status"] == "completed").all()
    samples, _ = timeseries(result, 0.05)
    assert samples["waiting"].max() > 100
    assert df["queue_ms"].max() > 1000
    times = samples["time_s"].tolist()
    assert times == sorted(times) and times[-1] <= result.duration_s


@pytest.mark.parametrize("mode", ["radix", "block"])
@pytest.mark.parametrize("policy", POLICIES.names())
def test_every_policy_and_cache_mode_keeps_r13_in_timed_mode(policy, mode):
    """The contract suite over the policy registry: under tight memory (evictions and
    preemptions), R13 and the replica's accounting hold after every step."""
    from prefixsim.cache import CacheMode, build_policy

    requests = workload(4, num_sessions=12, rate_s=0.01, max_output=300)

    def prefill_time_s(new_tokens, cached_tokens):
        gemm, attn = COST.prefill_flops(new_tokens, cached_tokens)
        return gemm * COST._s_per_gemm_flop + attn * COST._s_per_attn_flop

    caches = [RadixCache(3000, build_policy(policy, requests, prefill_time_s),
                         TTLRule(2.0, TTLMode.SLIDING), CacheMode(mode)) for _ in range(2)]
    result = replay_timed(requests, Fleet(caches, COST, ContinuousBatching(512, 16),
                          ROUTERS.build("prefix_aware")), Sampling(check_invariants=True))
    df = frame(result)
    assert set(df["status"]) <= {"completed", "rejected"}
    assert (df["status"] == "completed").sum() > len(df) // 2
    assert sum(fig.counters.evicted_pages for fig in result.replicas) > 0


@pytest.mark.parametrize("mode", ["radix", "block"])
@pytest.mark.parametrize("policy", POLICIES.names())
def test_every_policy_fast_path_equals_step_by_step(policy, mode):
    """Differential over the policy registry, under tight memory with a TTL: decode runs
    past the free memory (evictions deferred to their step boundaries, applied when the
    router next looks) give the records and victims of one timeout per step."""
    from prefixsim.cache import CacheMode, build_policy

    requests = workload(6, num_sessions=10, rate_s=0.01, max_output=300)

    def serve(max_run_steps):
        caches = [RadixCache(3000, build_policy(policy, requests), TTLRule(2.0, TTLMode.SLIDING),
                             CacheMode(mode)) for _ in range(2)]
        result = replay_timed(requests, Fleet(caches, COST, ContinuousBatching(512, 16),
                              ROUTERS.build("prefix_aware")), Sampling(max_run_steps=max_run_steps))
        return frame(result), [fig.counters.evicted_pages for fig in result.replicas]

    (fast, fast_evicted), (slow, slow_evicted) = serve(None), serve(1)
    pd.testing.assert_frame_equal(fast, slow, check_exact=False, rtol=1e-9)
    assert fast_evicted == slow_evicted and sum(fast_evicted) > 0
