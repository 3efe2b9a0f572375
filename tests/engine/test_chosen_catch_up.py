"""Deferred evictions caught up for the chosen replica only (engine/timed.py
`_route_caught_up`, docs/architecture.md "Routers"): with prefix_aware reading the caches
through its index and no state log, an arrival catches up only the replica the router
chooses, asking again when that one was due; the choice is the one made with every replica
caught up.

Known answers with a constant cost model (every step 1 s), P = 4, LRU, two replicas of 20
tokens, prefix_aware (load weight 1):
  A t=0: L=8 pages 1, 2, 1 output. Both idle, ties go to replica 0: prefill t=0->1, cached.
  C t=0: L=4 page 1, 1 output. Replica 0 holds nothing yet and carries A's 9 tokens:
    replica 1, prefill t=0->1, page 1 cached there.
  B t=1.5: L=4 page 3, 12 outputs. Neither holds page 3, both idle: replica 0. Prefill
    t=1.5->2.5 (page 3 locked: 8 tokens free), 11 decode steps t=2.5->13.5 in one run:
    steps 1-8 fit in the free 8 tokens; step 9 (starts t=10.5) evicts page 2.
  D t=11: L=12 pages 1, 2, 9, 1 output (2 pages matchable). Replica 0's load is B's 3 tokens
    left; not caught up it would show pages 1, 2 (8 - 3 = 5), caught up page 1 only
    (4 - 3 = 1); replica 1 holds page 1, idle (4 - 0 = 4). So D goes to replica 1, after
    the router first chose replica 0, found it due and caught it up.
  E t=12.7: L=4 page 7, 1 output, in neither cache: replica 1 (D done at t=12: idle, load
    0; replica 0 has B's last token left).
"""

import random

import numpy as np
import pandas as pd
import pytest
from fakes import Ticks, lru

from prefixsim.costmodel import NO_OVERHEADS, ServingOverheads
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.metrics.timeseries import sample_states, timeseries
from prefixsim.router.prefix_aware import PrefixAware
from prefixsim.trace import Request

P = 4


class Watching(PrefixAware):
    """prefix_aware that writes down, at each call, the arrival, replica 0's evictions and
    the answer."""

    def __init__(self, eager: bool = False) -> None:
        super().__init__()
        self.eager = eager
        self.calls: list[tuple[int, int]] = []
        self.caches = []

    @property
    def scores_fall_with_evictions(self) -> bool:
        return not self.eager and super().scores_fall_with_evictions

    def bind_caches(self, caches, clock) -> None:
        self.caches = caches
        super().bind_caches(caches, clock)

    def route(self, request, replicas, now) -> int:
        evicted = self.caches[0].counters.evicted_pages
        answer = super().route(request, replicas, now)
        self.calls.append((request.request_id, evicted, answer))
        return answer


REQUESTS = [Request(0, 0.0, 8, 1, (1, 2), P), Request(1, 0.0, 4, 1, (1,), P),
            Request(2, 1.5, 4, 12, (3,), P), Request(3, 11.0, 12, 1, (1, 2, 9), P),
            Request(4, 12.7, 4, 1, (7,), P)]


def serve(requests, eager=False, record_state=False, max_run_steps=None, capacity=20,
          sample_interval_s=None, overheads=NO_OVERHEADS):
    router = Watching(eager)
    result = replay_timed(requests, Fleet([lru(capacity), lru(capacity)], Ticks(overheads),
                                          ContinuousBatching(8192, 256), router),
                          Sampling(record_state=record_state, check_invariants=True,
                                   max_run_steps=max_run_steps,
                                   sample_interval_s=sample_interval_s))
    return result, router.calls


def test_the_chosen_replica_is_caught_up_and_the_router_asked_again():
    result, calls = serve(REQUESTS)
    columns = result.records.columns()
    assert columns["replica"].tolist() == [0, 1, 0, 1, 1]
    # D: asked with replica 0's eviction pending, then again once it was caught up; E: the
    # router passes replica 0 over, so nothing catches it up (still 1 eviction, none new)
    assert calls == [(0, 0, 0), (1, 0, 1), (2, 0, 0), (3, 0, 0), (3, 1, 1), (4, 1, 1)]
    assert result.replicas[0].counters.evicted_pages == 1


def test_a_replica_passed_over_is_not_caught_up():
    """Without D, E at t=12.7 goes to replica 1 and replica 0's eviction (due t=10.5) waits
    for its run's end; with every replica caught up at each arrival it happens before."""
    requests = [r for r in REQUESTS if r.request_id != 3]
    _, lazy = serve(requests)
    _, eager = serve(requests, eager=True)
    assert lazy[-1] == (4, 0, 1) and eager[-1] == (4, 1, 1)


def test_same_records_as_catching_up_every_replica_and_as_stepping():
    chosen, _ = serve(REQUESTS)
    every, _ = serve(REQUESTS, eager=True)
    logged, _ = serve(REQUESTS, record_state=True)  # a state log: every replica
    stepped, _ = serve(REQUESTS, max_run_steps=1)
    for other in (every, logged, stepped):
        assert chosen.records.columns()["finish_s"].tolist() == \
            other.records.columns()["finish_s"].tolist()
        assert chosen.records.columns()["replica"].tolist() == \
            other.records.columns()["replica"].tolist()


def random_requests(rng: random.Random) -> list[Request]:
    """Prompts over a few shared prefixes (1-3 pages of one of 3 stems, an optional tail
    page), 1-30 outputs, arrivals 0-4 s apart."""
    requests, t = [], 0.0
    for i in range(rng.randint(1, 30)):
        t += rng.randint(0, 40) / 10
        first, pages, tail = rng.randint(1, 3), rng.randint(1, 3), rng.randint(0, 5)
        ids = tuple(range(first * 10, first * 10 + pages))
        ids += (1000 + 100 * first + 10 * pages + tail,) if tail else ()
        requests.append(Request(i, t, len(ids) * P, rng.randint(1, 30), ids, P))
    return requests


def test_differential_against_catching_up_every_replica():
    """400 seeded random workloads on caches of 16-48 tokens: every record (replica, times,
    cached tokens) and the caches' counters are the same whether only the chosen replica or
    every replica is caught up; the router was asked again, after a catch-up, with another
    answer in some of them (the path is exercised, not only the easy one)."""
    rng = random.Random(20261203)
    changed = 0
    for _ in range(400):
        requests, capacity = random_requests(rng), rng.randint(16, 48)
        chosen, calls = serve(requests, capacity=capacity)
        every, _ = serve(requests, eager=True, capacity=capacity)
        a, b = chosen.records.columns(), every.records.columns()
        assert a.keys() == b.keys()
        for key in a:  # NaN equals NaN here (a TPOT of one output token)
            np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]),
                                          err_msg=key)
        for x, y in zip(chosen.replicas, every.replicas, strict=True):
            assert x.counters == y.counters
        answers: dict[int, set[int]] = {}
        for request_id, _, answer in calls:
            answers.setdefault(request_id, set()).add(answer)
        changed += sum(len(seen) > 1 for seen in answers.values())
    assert changed >= 5


def test_only_an_index_read_at_once_over_hbm_lets_the_engine_catch_up_the_chosen_alone():
    """Late events (a replica's score may rise when an insert arrives), stale snapshots (no
    index) or a credited host tier (an eviction to it may raise a score): every replica."""
    caches = [lru(20), lru(20)]

    def bound(**params) -> PrefixAware:
        router = PrefixAware(**params)
        router.bind_caches(caches, lambda: 0.0)
        return router

    assert bound().scores_fall_with_evictions
    assert not PrefixAware().scores_fall_with_evictions  # not bound to the caches
    assert not bound(event_delay_s=0.5).scores_fall_with_evictions
    assert not bound(staleness_s=1.0).scores_fall_with_evictions
    tiered = bound(tier_weights={"host": 0.8})
    tiered.bind_lower_tiers(None, [lru(40), None])
    assert not tiered.scores_fall_with_evictions


def assert_same_records(a, b) -> None:
    a, b = a.records.columns(), b.records.columns()
    assert a.keys() == b.keys()
    for key in a:  # NaN equals NaN here (a TPOT of one output token)
        np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]), err_msg=key)


def test_with_a_state_log_every_replica_is_caught_up_before_a_grid_point():
    """Grid 2 s: E (t=12.7) is the last arrival before t=14, so replica 0, passed over, is
    caught up then, as every replica at every arrival would be; its evictions show at t=14.
    Without a grid (states recorded for another use), every replica at every arrival."""
    requests = [r for r in REQUESTS if r.request_id != 3]
    _, gridded = serve(requests, record_state=True, sample_interval_s=2.0)
    _, ungridded = serve(requests, record_state=True)
    assert gridded[-1] == (4, 1, 1) and ungridded[-1] == (4, 1, 1)
    _, late = serve(requests + [Request(5, 13.0, 4, 1, (8,), P)], record_state=True,
                    sample_interval_s=2.0)
    assert late[-2:] == [(4, 0, 1), (5, 1, 0)]  # 13.0 is the last before 14: then


@pytest.mark.parametrize("interval_s", [1.0, 0.3, 2.5])
@pytest.mark.parametrize("tokenizers", [False, True])
def test_differential_timeseries_against_catching_up_every_replica(interval_s, tokenizers):
    """120 seeded random workloads with states recorded for a grid of `interval_s` (0.3 is
    no binary fraction) and arrivals straight or through the frontend's tokenizers: the
    records, and the timeseries sampled on the grid and on coarser multiples of it (as a
    row cap makes it), are those of catching up every replica at every arrival with every
    state row kept (no grid given: engine/state_log.py keeps only rows a sample reads)."""
    rng = random.Random(int(interval_s * 10) + tokenizers)
    overheads = (ServingOverheads(frontend_s=0.05, frontend_s_per_prompt_token=0.01)
                 if tokenizers else NO_OVERHEADS)
    for _ in range(120):
        requests, capacity = random_requests(rng), rng.randint(16, 48)
        runs = [serve(requests, eager=eager, record_state=True, capacity=capacity,
                      sample_interval_s=None if eager else interval_s,
                      overheads=overheads)[0] for eager in (False, True)]
        assert_same_records(*runs)
        frames = [timeseries(run, interval_s)[0] for run in runs]
        pd.testing.assert_frame_equal(*frames)
        for factor in (2, 3):
            coarse = [sample_states(run.states, [capacity] * 2, factor * interval_s,
                                    run.duration_s) for run in runs]
            pd.testing.assert_frame_equal(*coarse)


@pytest.mark.parametrize("name", ["least_loaded", "round_robin", "session_affinity"])
@pytest.mark.parametrize("interval_s", [None, 0.5])
def test_a_router_reading_no_cache_catches_none_up(name, interval_s):
    """`reads_caches = False` (load or turn only): no replica is caught up for the router,
    and the records (and, with a grid, the timeseries) are those of catching every replica
    up at every arrival (the same router saying it reads caches), on 150 seeded random
    workloads with a session per stem."""
    from prefixsim.router import ROUTERS

    plain = type(ROUTERS.build(name))
    eager = type(f"Eager{plain.__name__}", (plain,), {"reads_caches": True})
    assert plain.reads_caches is False
    rng = random.Random(7)
    for _ in range(150):
        requests = [Request(r.request_id, r.arrival_s, r.input_tokens, r.output_tokens,
                            r.page_ids, P, f"s{r.page_ids[0] // 10}")
                    for r in random_requests(rng)]
        capacity = rng.randint(16, 48)
        runs = [replay_timed(requests, Fleet([lru(capacity), lru(capacity)], Ticks(),
                                             ContinuousBatching(8192, 256), router()),
                             Sampling(record_state=interval_s is not None,
                                      check_invariants=True,
                                      sample_interval_s=interval_s if router is plain
                                      else None))
                for router in (plain, eager)]
        assert_same_records(*runs)
        if interval_s is not None:
            pd.testing.assert_frame_equal(timeseries(runs[0], interval_s)[0],
                                          timeseries(runs[1], interval_s)[0])
