"""The replica's debug check of R13 (free + evictable + locked + reserved = capacity) compares
the cache's counters with sums it makes itself, so a corrupted counter is caught even when the
cache's own check is switched off (the four counters alone always add up to the capacity)."""

import pytest
from fakes import Ticks, UncheckedCache, lru

from prefixsim.cache.policy import POLICIES
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.router import ROUTERS
from prefixsim.trace import Request


def _run(check: bool, cache=None):
    """Two requests sharing a 2-page prefix (P=4), the second hitting it while running."""
    requests = [Request(0, 0.0, 12, 3, (1, 2, 3), 4), Request(1, 1.0, 12, 3, (1, 2, 4), 4)]
    return replay_timed(requests, Fleet([cache or lru(200)], Ticks(),
                                        ContinuousBatching(8192, 256),
                                        ROUTERS.build("round_robin")),
                        Sampling(check_invariants=check, max_run_steps=1))


@pytest.mark.parametrize("counter", ["locked_tokens", "resident_tokens"])
def test_r13_catches_a_corrupted_cache_counter(counter):
    """At each admission (the cache's `touch` of the matched path, its last step), one
    cache counter goes off by a token: free + evictable + locked + reserved still equals
    the capacity (each counter cancels), but the replica's own sums of the pages do not
    match, so the R13 check fails. (The cache is a subclass: the compiled replica and
    cache are extension types, whose methods cannot be patched.)"""

    class Corrupting(UncheckedCache):
        def touch(self, *args, **kwargs):
            super().touch(*args, **kwargs)
            setattr(self, counter, getattr(self, counter) + 1)

    def corrupting():
        return Corrupting(200, POLICIES.build("lru"))

    _run(check=False, cache=corrupting())  # unchecked: goes unnoticed
    with pytest.raises(AssertionError, match="R13"):
        _run(check=True, cache=corrupting())


def test_r13_holds_on_an_honest_run():
    result = _run(check=True)
    assert [r.cached_tokens for r in result.records] == [0, 8]
