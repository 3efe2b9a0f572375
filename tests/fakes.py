"""Fakes and builders shared by the timed-engine tests: a cost model whose steps all take 1 s
(so hand-worked answers stay exact binary fractions) and an LRU radix cache.

Owns only what several test files need; a fake used by one file stays in that file.
"""

from collections.abc import Callable

from prefixsim.cache import POLICIES, RadixCache
from prefixsim.costmodel import NO_OVERHEADS, CostModelBase, ServingOverheads


class Ticks(CostModelBase):
    """A cost model (docs/architecture.md "Cost models") where every step takes 1 s, a run of
    n identical decode steps n s, and a transfer bytes / bandwidth. `probe(kind, what)`, when
    given, hears every step time asked for: ("step", batch) or ("decode", contexts)."""

    name = "ticks"

    def __init__(self, serving_overheads: ServingOverheads = NO_OVERHEADS,
                 *, probe: Callable[[str, object], None] | None = None) -> None:
        self.serving_overheads = serving_overheads
        self.probe = probe

    def step_time_s(self, batch) -> float:
        if self.probe is not None:
            self.probe("step", batch)
        return 1.0

    def decode_steps_time_s(self, contexts, num_steps) -> float:
        if self.probe is not None:
            self.probe("decode", contexts)
        return float(num_steps)

    def transfer_time_s(self, num_bytes, bandwidth_bytes_s) -> float:
        return num_bytes / bandwidth_bytes_s


def lru(capacity: int | None, ttl=None) -> RadixCache:
    """A radix cache of `capacity` tokens under LRU, with an optional TTL rule."""
    return RadixCache(capacity, POLICIES.build("lru"), ttl)
