"""PrefixAware: the longest cached prefix, traded against load.

score(replica) = cached prefix tokens - load_weight x outstanding tokens; the highest score
wins, ties go to the lower load, then the lower index. With load_weight = 1 a cached token is
worth one token of queued work. `staleness_s` > 0 makes the router see each cache as a
snapshot of its page ids refreshed every `staleness_s` simulated seconds (as a router fed by
periodic cache reports would). With `staleness_s` = 0 the router reads the caches through the
engine's PrefixIndex when it binds one (router/index.py: one walk over the prompt's pages,
whatever the number of replicas; `event_delay_s` > 0 delivers the caches' events that late,
as a KV-event-fed router sees them), else live from each replica. Load is always read live.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prefixsim.cache import RadixCache
from prefixsim.router.index import PrefixIndex
from prefixsim.router.protocol import ROUTERS, ReplicaView, prefix_tokens_in
from prefixsim.trace import Request


@ROUTERS.register("prefix_aware")
class PrefixAware:
    """Cache-hit-seeking routing with a load penalty and an optional stale cache view."""

    def __init__(self, load_weight: float = 1.0, staleness_s: float = 0.0,
                 event_delay_s: float = 0.0) -> None:
        if not load_weight >= 0:
            raise ValueError(f"load_weight must be >= 0, got {load_weight}")
        if not staleness_s >= 0:
            raise ValueError(f"staleness_s must be >= 0, got {staleness_s}")
        if not event_delay_s >= 0:
            raise ValueError(f"event_delay_s must be >= 0, got {event_delay_s}")
        self.load_weight = load_weight
        self.staleness_s = staleness_s
        self.event_delay_s = event_delay_s
        self._index: PrefixIndex | None = None
        self._snapshots: list[set[int]] = []
        self._snapshot_s = -float("inf")

    def bind_caches(self, caches: Sequence[RadixCache], clock: Callable[[], float]) -> None:
        """Read the caches through one PrefixIndex (unless a stale snapshot is asked for)."""
        if self.staleness_s > 0:
            return
        self._index = PrefixIndex(clock, self.event_delay_s)
        for replica, cache in enumerate(caches):
            self._index.attach(replica, cache)

    def _cached(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> list[int]:
        if self.staleness_s == 0:
            return [r.cached_prefix_tokens(request, now) for r in replicas]
        if now - self._snapshot_s >= self.staleness_s or len(self._snapshots) != len(replicas):
            self._snapshots = [set(r.cached_page_ids()) for r in replicas]
            self._snapshot_s = now
        return [prefix_tokens_in(request, snapshot) for snapshot in self._snapshots]

    def route(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        weight = self.load_weight
        best, best_score, best_load = 0, -float("inf"), 0
        if self._index is not None:  # one walk over the prompt; replicas absent hold none
            found = self._index.prefix_tokens(request, now)
            for position, replica in enumerate(replicas):  # ties: lower load, lower index
                load = replica.outstanding_tokens
                score = found.get(position, 0) - weight * load
                if score > best_score or (score == best_score and load < best_load):
                    best, best_score, best_load = position, score, load
            return best
        cached = self._cached(request, replicas, now)
        for position, replica in enumerate(replicas):
            load = replica.outstanding_tokens
            score = cached[position] - weight * load
            if score > best_score or (score == best_score and load < best_load):
                best, best_score, best_load = position, score, load
        return best
