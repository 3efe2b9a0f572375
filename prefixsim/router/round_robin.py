"""RoundRobin: replicas in turn, ignoring load and caches."""

from __future__ import annotations

from collections.abc import Sequence

from prefixsim.router.protocol import ROUTERS, ReplicaView
from prefixsim.trace import Request


@ROUTERS.register("round_robin")
class RoundRobin:
    """Request i goes to replica i mod N."""

    reads_caches = False  # the engine may leave deferred evictions to the replicas

    def __init__(self) -> None:
        self._next = 0

    def route(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        chosen = self._next % len(replicas)
        self._next += 1
        return chosen
