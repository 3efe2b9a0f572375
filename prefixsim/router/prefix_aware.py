"""PrefixAware: the longest cached prefix, traded against load.

score(replica) = cached prefix tokens - load_weight x outstanding tokens; the highest score
wins, ties go to the lower load, then the lower index. With load_weight = 1 a cached token is
worth one token of queued work. `staleness_s` > 0 makes the router see each cache as a
snapshot of its page ids refreshed every `staleness_s` simulated seconds (as a router fed by
periodic cache reports would); 0 reads the caches live. Load is always read live.
"""

from __future__ import annotations

from collections.abc import Sequence

from prefixsim.router.protocol import ROUTERS, ReplicaView, prefix_tokens_in
from prefixsim.trace import Request


@ROUTERS.register("prefix_aware")
class PrefixAware:
    """Cache-hit-seeking routing with a load penalty and an optional stale cache view."""

    def __init__(self, load_weight: float = 1.0, staleness_s: float = 0.0) -> None:
        if not load_weight >= 0:
            raise ValueError(f"load_weight must be >= 0, got {load_weight}")
        if not staleness_s >= 0:
            raise ValueError(f"staleness_s must be >= 0, got {staleness_s}")
        self.load_weight = load_weight
        self.staleness_s = staleness_s
        self._snapshots: list[set[int]] = []
        self._snapshot_s = -float("inf")

    def _cached(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> list[int]:
        if self.staleness_s == 0:
            return [r.cached_prefix_tokens(request, now) for r in replicas]
        if now - self._snapshot_s >= self.staleness_s or len(self._snapshots) != len(replicas):
            self._snapshots = [set(r.cached_page_ids()) for r in replicas]
            self._snapshot_s = now
        return [prefix_tokens_in(request, snapshot) for snapshot in self._snapshots]

    def route(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        cached = self._cached(request, replicas, now)
        best_key = None
        best = 0
        for position, replica in enumerate(replicas):
            load = replica.outstanding_tokens
            key = (cached[position] - self.load_weight * load, -load, -position)
            if best_key is None or key > best_key:
                best_key, best = key, position
        return best
