"""The router interface: which replica serves an arriving request.

A router is a pure decision: given the request, read-only views of the replicas and `now`,
return a replica index. It never yields, sleeps or records; it may keep small bookkeeping of
its own (a round-robin position, a session map, a stale snapshot of each cache). Routers
register in `ROUTERS`; `ROUTERS.build(name, **params)` makes one per run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from prefixsim.registry import Registry
from prefixsim.trace import Request

if TYPE_CHECKING:
    from prefixsim.cache import PrefixCache


class ReplicaView(Protocol):
    """What a router may read about one replica."""

    index: int

    @property
    def outstanding_tokens(self) -> int:
        """Prefill tokens still to compute plus tokens still to generate, over every request
        waiting or running on the replica."""
        ...

    def cached_page_ids(self) -> set[int] | dict[int, object]:
        """Page ids resident in the replica's prefix cache now (for snapshots)."""
        ...

    def cached_prefix_tokens(self, request: Request, now: float) -> int:
        """Tokens of `request`'s prompt the replica's cache would serve now (the
        page-aligned L - 1 cap of R3, `Request.matchable_pages`)."""
        ...


class Router(Protocol):
    """Chooses a replica per arriving request. One that never reads a replica's cache may
    say so with a class attribute `reads_caches = False`: the engine then catches up no
    replica's deferred evictions before asking it (engine/timed.py)."""

    def route(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        """Index (into `replicas`) of the replica that gets `request`."""
        ...


@runtime_checkable
class IndexedRouter(Router, Protocol):
    """A router that may follow the replicas' caches through their events (router/index.py)
    instead of asking each replica: the timed engine hands it the caches, in replica order,
    and its clock before the first arrival when the caches allow it (radix mode)."""

    def bind_caches(self, caches: Sequence[PrefixCache], clock: Callable[[], float]) -> None:
        """Follow `caches` (replica i's is caches[i]) from now on; `clock()` is `now`."""
        ...


ROUTERS: Registry[Router] = Registry("router")


def least_loaded_index(replicas: Sequence[ReplicaView]) -> int:
    """The replica with the fewest outstanding tokens; ties go to the lowest index."""
    best, best_load = 0, None
    for position, replica in enumerate(replicas):
        load = replica.outstanding_tokens
        if best_load is None or load < best_load:
            best, best_load = position, load
    return best


def prefix_tokens_in(request: Request, page_ids: set[int] | dict[int, object]) -> int:
    """Tokens of `request`'s leading pages found in `page_ids` (chained ids), with the
    page-aligned cap admission uses (R3, `Request.matchable_pages`): a stale snapshot and the
    live view (`Replica.cached_prefix_tokens`) of the same cache give the same number."""
    matched = 0
    for page_id in request.page_ids[:request.matchable_pages(request.input_tokens)]:
        if page_id not in page_ids:
            break
        matched += 1
    return request.prefix_tokens(matched)
