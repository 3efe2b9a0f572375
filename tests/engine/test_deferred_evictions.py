"""A decode run may outlast the free memory: each later step evicts for itself at its own
boundary, applied when something next looks at the cache (engine/replica.py: catch_up).

Known answers with a constant cost model (every step 1 s), P = 4, LRU, two replicas: replica
0 serves A and B, replica 1 serves the probes. Capacity 20.
  A t=0: L=8 pages 1, 2, 1 output: prefill t=0->1, done (8 cached, unlocked).
  B t=1: L=4 page 3, 12 outputs: prefill t=1->2 (page 3 cached and locked: free 8), then 11
    decode steps t=2->13 in one run. Steps 1-8 (t=2->10) fit in the free 8 tokens; step 9
    (starts t=10) evicts page 2, the least recent leaf, whose 4 tokens cover steps 9-11.
    Page 1 is never evicted.
A router looking at replica 0 at t=9.5 sees page 2; at t=10.5 it is gone.
"""

from fakes import Ticks, lru

from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.trace import Request

P = 4


class Peeking:
    """Sends requests 0 and 1 to replica 0, the rest to replica 1, and writes down what
    replica 0's cache holds at each arrival."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, list[int], int]] = []

    def route(self, request, replicas, now) -> int:
        cache = replicas[0].cache
        self.seen.append((now, sorted(replicas[0].cached_page_ids()),
                          cache.counters.evicted_pages))
        return 0 if request.request_id < 2 else 1


def serve(probe_times, max_run_steps=None):
    requests = [Request(0, 0.0, 8, 1, (1, 2), P), Request(1, 1.0, 4, 12, (3,), P)]
    requests += [Request(2 + i, t, 4, 1, (100 + i,), P) for i, t in enumerate(probe_times)]
    caches = [lru(20) for _ in range(2)]
    router = Peeking()
    result = replay_timed(requests, Fleet(caches, Ticks(), ContinuousBatching(8192, 256), router),
                          Sampling(check_invariants=True, max_run_steps=max_run_steps))
    return result, router.seen, caches[0]


def test_the_run_outlasts_free_memory_in_one_timeout():
    result, _, cache = serve([])
    assert [r.finish_s for r in result.records] == [1.0, 13.0]
    assert result.replicas[0].num_steps == 3  # A's prefill, B's prefill, one decode run
    assert cache.counters.evicted_pages == 1 and cache.counters.evicted_tokens == 4
    assert sorted(p.page_id for p in cache.pages()) == [1, 3]
    assert cache.reserved_tokens == 0 and cache.free_tokens == 12


def test_a_router_sees_the_eviction_at_the_step_it_happens():
    _, seen, _ = serve([9.5, 10.5])
    assert seen[2:] == [(9.5, [1, 2, 3], 0), (10.5, [1, 3], 1)]


def test_same_as_stepping_one_by_one():
    fast, fast_seen, fast_cache = serve([3.5, 9.5, 10.5, 12.5])
    slow, slow_seen, slow_cache = serve([3.5, 9.5, 10.5, 12.5], max_run_steps=1)
    assert fast.records.columns()["finish_s"].tolist() == \
        slow.records.columns()["finish_s"].tolist()
    assert fast_seen == slow_seen
    assert sorted(p.page_id for p in fast_cache.pages()) == \
        sorted(p.page_id for p in slow_cache.pages())
    assert fast.replicas[0].num_steps < slow.replicas[0].num_steps


class LoadReading:
    """Sends request 0 to replica 0, the rest to replica 0 too, and writes down replica 0's
    outstanding tokens at each arrival."""

    def __init__(self) -> None:
        self.loads: list[int] = []

    def route(self, request, replicas, now) -> int:
        self.loads.append(replicas[0].outstanding_tokens)
        return 0


def test_load_inside_the_step_a_wake_up_cuts():
    """A (L=4, 20 outputs) decodes t=1->20 in one run. B at t=5.2 wakes it: the run ends at
    the step boundary t=6. C at t=5.6, inside that step, sees 4 of A's decode steps done
    (t=1->5), as stepping one by one shows: 19 - 4 = 15 tokens left of A, plus B's 4 + 1."""
    requests = [Request(0, 0.0, 4, 20, (1,), P), Request(1, 5.2, 4, 1, (2,), P),
                Request(2, 5.6, 4, 1, (3,), P)]
    seen = []
    for steps in (None, 1):
        router = LoadReading()
        replay_timed(requests, Fleet([lru(100)], Ticks(),
                     ContinuousBatching(8192, 256), router), Sampling(check_invariants=True,
                     max_run_steps=steps))
        seen.append(router.loads)
    assert seen[0] == seen[1] == [0, 15, 20]
