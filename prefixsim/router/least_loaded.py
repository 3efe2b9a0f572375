"""LeastLoaded: the replica with the fewest outstanding tokens (ties: lowest index)."""

from __future__ import annotations

from collections.abc import Sequence

from prefixsim.router.protocol import ROUTERS, ReplicaView, least_loaded_index
from prefixsim.trace import Request


@ROUTERS.register("least_loaded")
class LeastLoaded:
    """Balance outstanding work (prefill left + tokens left to generate)."""

    reads_caches = False  # the engine may leave deferred evictions to the replicas

    def route(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        return least_loaded_index(replicas)
