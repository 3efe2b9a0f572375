"""The replica's debug check of R13 (free + evictable + locked + reserved = capacity) compares
the cache's counters with sums it makes itself, so a corrupted counter is caught even when the
cache's own check is switched off (the four counters alone always add up to the capacity)."""

import pytest
from fakes import Ticks, lru, unchecked_lru

from prefixsim.engine import replica as replica_module
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.router import ROUTERS
from prefixsim.trace import Request


def _run(check: bool):
    """Two requests sharing a 2-page prefix (P=4), the second hitting it while running."""
    requests = [Request(0, 0.0, 12, 3, (1, 2, 3), 4), Request(1, 1.0, 12, 3, (1, 2, 4), 4)]
    cache = lru(200)
    return replay_timed(requests, Fleet([cache], Ticks(), ContinuousBatching(8192, 256),
                        ROUTERS.build("round_robin")), Sampling(check_invariants=check,
                        max_run_steps=1))


@pytest.mark.parametrize("counter", ["locked_tokens", "resident_tokens"])
def test_r13_catches_a_corrupted_cache_counter(monkeypatch, counter):
    """After admission, one cache counter is off by a token: free + evictable + locked +
    reserved still equals the capacity (each counter cancels), but the replica's own sums of
    the pages do not match, so the R13 check fails."""
    original = replica_module.Replica.admit

    def corrupting(self, state, budget):
        admitted = original(self, state, budget)
        if admitted:
            setattr(self.cache, counter, getattr(self.cache, counter) + 1)
        return admitted

    monkeypatch.setattr(replica_module.Replica, "admit", corrupting)
    monkeypatch.setitem(globals(), "lru", unchecked_lru)  # _run's cache
    _run(check=False)  # unchecked: goes unnoticed
    with pytest.raises(AssertionError, match="R13"):
        _run(check=True)


def test_r13_holds_on_an_honest_run():
    result = _run(check=True)
    assert [r.cached_tokens for r in result.records] == [0, 8]
