"""The eviction-policy interface and its registry.

A policy only *orders* victims: `key(page)` returns a sortable value, lowest evicted first,
computed when a page becomes an evictable leaf or is accessed while it is one. The tree
breaks ties by older access, then deeper page, then page id (docs/cache-semantics.md R11),
and owns all structure, locks, TTL and accounting. Stateful policies use the hooks declared
in the `EvictionPolicy` protocol (defaults in `Policy`); none may change a page's fields
but its own record of the page, `page.policy_state` (S3-FIFO's queue and frequency).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Protocol

from prefixsim.cache.page import Page
from prefixsim.registry import Registry
from prefixsim.trace import Request


class EvictionPolicy(Protocol):
    """Victim order over evictable pages (unlocked leaves), and the hooks the caches call.

    Only `key` is needed; every hook has a do-nothing default in `Policy`, which each
    registered policy subclasses, so a policy overrides just what it uses. The tree (and
    SegmentCache) skip hooks a policy left at their default.
    """

    node_uniform: bool
    """Class attribute: True when `key` reads only statistics shared by all pages of a
    segment (recency, last access, deadline, hits, priority) or the insertion order
    (`inserted`, a segment's being its last page's) and the hooks are stateless, or the
    policy is a GreedyDual one whose `segment_value` gives a segment's last page's value
    (cache/aging.py), so a cache-only replay may run on SegmentCache
    (cache/segment_tree.py)."""

    key_field: str | None
    """Class attribute: the one statistic `key` returns as it is ("recency", "inserted" or
    "deadline_s"), or None. The caches read that field of a page or segment themselves
    rather than calling `key` (`key_field_code`); they take the declaration only from the
    class whose `key` runs, so a subclass that overrides `key` without declaring it again
    is called as usual."""

    offline: bool
    """Class attribute: True for a policy that must learn the future first (`prepare`)."""

    page_keyed: bool
    """True when a page's key is fixed by the request that last touched it and nothing else
    (belady: the replay position of its next use), and `request_keys(recency)` gives the
    keys of that request's pages, first page first, before the cache touches them: the
    values `key` returns for them afterwards. A cache-only replay may then run on
    SegmentCache, which keeps the keys of a segment's pages (cache/segment_tree.py). An
    instance may clear it (a trace its keys cannot be read from that way)."""

    access_keyed: bool
    """True when `key(page)` reads only the page's id, last access time and recency, as
    `access_key(page_id, last_access_s, recency)` (belady): a SegmentCache built
    `by_access` (a timed replica's, a shared pool's) then reads a page's key from its
    segment's statistics whenever a per-page cache would call `key`."""

    run_keyed: bool
    """Class attribute: True when a page's key is fixed when a request touches it (a hit or
    its insert), from the policy's own statistics then (workload-aware: a GreedyDual
    priority learned per prompt head and position), and `run_keys` gives the keys of a run
    of pages touched together, updating those statistics as `on_insert` / `on_access` do
    page by page. A SegmentCache keeps the keys per page (cache/segment_tree.py), without
    the page hooks."""

    parents_outlast_children: bool
    """Class attribute: True when, in a replay whose every request touches its whole path
    from the root (cache-only: match, touch, insert below), no page's victim order comes
    before a descendant's: its key is made of what a touch of a page raises on its
    ancestors too (recency, priority), and a tie goes to the deeper page. Block mode (any
    unlocked page a victim) then evicts exactly the leaves radix mode does, without
    orphans, so such a replay may run on SegmentCache in block mode too (lru, priority;
    not fifo or gdsf, whose keys grow with depth, nor ttl, nor lfu: a request touches its
    path before it evicts, which raises L, and inserts its new pages after, so a parent's
    priority can be below its new children's)."""

    shared_key: bool
    """Class attribute: True when the pages of a segment, which share their statistics
    (touched and inserted together), share their key too (recency, priority, hits), so
    that the victim order within a segment is the tie order, deepest page first. Block
    mode (any unlocked page a victim) then takes a segment's pages from its tail, so any
    replay in block mode may run on SegmentCache (lru, priority, lfu, ttl; not fifo or
    gdsf, whose keys grow with depth)."""

    head_first: bool
    """Class attribute: True when the keys of a segment's pages, which share their
    statistics, grow along it and no other page's lie between (fifo's insertion orders:
    a segment's pages were inserted together), so that in block mode a segment's next
    victims are its first pages, and the rest of it goes on as an orphan: any replay in
    block mode may then run on SegmentCache. (Not gdsf: its value grows along a segment
    too, but another segment's page may come between two of them, so its pages go one
    at a time, each under its own entry: `run_valued`.)"""

    run_valued: bool
    """Class attribute: a GreedyDual policy (cache/aging.py) whose value of a page, fixed
    when a request touches it, reads the page's depth, its hits and the tokens of the page
    before it (gdsf), which `run_values` gives for a run of pages at once. In block mode a
    SegmentCache keeps each page's priority as set (L + value: `keys`), since an orphaning
    changes the page before a segment's first later, and queues each page on its own."""

    page_states: bool
    """Class attribute: True when the policy keeps a state per page that changes without
    a touch (S3-FIFO: S overflowing marks pages due, a second chance moves a page to M),
    and offers it state by state (`enter_run`, `hit_run`, `key_of`, `second_chance`,
    `leave`, and `requeue` taking a state where the cache `requeues_states`): a
    SegmentCache keeps the states per page of a segment (cache/s3fifo.py)."""

    parameters: Mapping[str, str]
    """Class attribute: the policy's own knobs (keyword arguments of its constructor) ->
    what each means, e.g. S3-FIFO's `small_fraction`; `cache.policy_params` sets them. The
    constructor checks their values (ValueError). Empty for a policy without knobs."""

    def key(self, page: Page) -> float:
        """Sort key of `page` as a victim; lower goes first. Read-only on `page`. Called
        when a page becomes an evictable leaf or is accessed while it is one."""
        ...

    def on_insert(self, page: Page) -> None:
        """Called after `page` becomes resident."""
        ...

    def on_access(self, page: Page) -> None:
        """Called after a hit refreshed `page` (its stats are already updated)."""
        ...

    def on_evict(self, page: Page) -> None:
        """Called after `page` left the cache by eviction (or by expiry, unless the policy
        overrides `on_expire`)."""
        ...

    def on_expire(self, page: Page) -> None:
        """Called instead of `on_evict` when `page` left by TTL expiry (GreedyDual's clock
        rises only on evictions). Default: `on_evict`."""
        ...

    def reconsider(self, page: Page) -> bool:
        """Second chance (S3-FIFO, CLOCK): True re-queues a popped victim under its new key
        instead of evicting it. Default: False (never called when not overridden)."""
        ...

    def bind_cache(self, cache: object) -> None:
        """Called by the cache built over the policy (S3-FIFO learns the capacity and
        calls `cache.requeue(page)` when a key changes without an access)."""
        ...

    def bind_prefill_time(self, prefill_time_s: Callable[[int, int], float]) -> None:
        """Cost-aware policies (gdsf): price recomputation with `prefill_time_s(new_tokens,
        cached_tokens)` from the run's cost model, when the run has one."""
        ...

    def prepare(self, requests: Sequence[Request], time_scale: float = 1.0) -> None:
        """Offline policies: learn the future from the whole trace in replay order
        (arrivals at arrival_s x time_scale, the timed engine's clock)."""
        ...

    def request_keys(self, recency: int) -> Sequence[float]:
        """A `page_keyed` policy: the keys of the pages of the request replayed at position
        `recency`, first page first (module docstring of cache/segment_tree.py)."""
        ...

    def run_keys(self, category: int, depth: int, count: int,
                 num_hits: int) -> tuple[float, ...]:
        """A `run_keyed` policy: the keys of `count` pages at depths `depth`, `depth + 1`,
        ... of a prompt whose first page id is `category`, touched in that order with
        `num_hits` hits each, counted (0: just inserted), as its hooks would key them page
        by page, its statistics updated as they would be."""
        ...

    def run_values(self, depth: int, count: int, page_tokens: int, parent_tokens: int,
                   num_hits: int) -> list[float]:
        """A `run_valued` policy: `value` of `count` pages at depths `depth`, `depth + 1`,
        ..., each hit `num_hits` times, the first below a page of `parent_tokens` tokens
        (0: none, a prompt's first page), the others each below a page of `page_tokens`."""
        ...


class Policy:
    """Do-nothing defaults of every EvictionPolicy hook; a policy overrides what it uses.
    Compiled, an extension type without fields (policy.pxd), so that a compiled policy can
    be one too (s3fifo.pxd); a subclass written in Python overrides hooks as usual
    (docs/architecture.md "Compiled hot modules")."""

    node_uniform = False
    key_field: str | None = None
    offline = False
    page_keyed = False
    access_keyed = False
    run_keyed = False
    page_states = False
    parents_outlast_children = False
    shared_key = False
    head_first = False
    run_valued = False
    parameters: Mapping[str, str] = MappingProxyType({})

    def key(self, page: Page) -> float:
        raise NotImplementedError

    def on_insert(self, page: Page) -> None:
        return None

    def on_access(self, page: Page) -> None:
        return None

    def on_evict(self, page: Page) -> None:
        return None

    def on_expire(self, page: Page) -> None:
        self.on_evict(page)

    def reconsider(self, page: Page) -> bool:
        return False

    def bind_cache(self, cache: object) -> None:
        return None

    def bind_prefill_time(self, prefill_time_s: Callable[[int, int], float]) -> None:
        return None

    def prepare(self, requests: Sequence[Request], time_scale: float = 1.0) -> None:
        return None

    def request_keys(self, recency: int) -> Sequence[float]:
        raise NotImplementedError

    def run_keys(self, category: int, depth: int, count: int,
                 num_hits: int) -> tuple[float, ...]:
        raise NotImplementedError

    def run_values(self, depth: int, count: int, page_tokens: int, parent_tokens: int,
                   num_hits: int) -> list[float]:
        raise NotImplementedError


def overrides(policy: EvictionPolicy, hook: str) -> bool:
    """Whether `policy`'s class overrides `hook` (the caches skip hooks left at default)."""
    return getattr(type(policy), hook) is not getattr(Policy, hook)


_KEY_FIELDS = {"recency": 1, "inserted": 2, "deadline_s": 3}


def key_field_code(policy: EvictionPolicy) -> int:
    """Which field of a page or segment `policy.key` returns (1 recency, 2 inserted, 3
    deadline_s), from the `key_field` of the class whose `key` runs; 0 when the key must be
    called (none declared there, another field, or a `key` set on the instance)."""
    if "key" in getattr(policy, "__dict__", ()):
        return 0
    for klass in type(policy).__mro__:
        if "key" in vars(klass):
            field = vars(klass).get("key_field")
            return _KEY_FIELDS.get(field, 0) if isinstance(field, str) else 0
    return 0


POLICIES: Registry[EvictionPolicy] = Registry("eviction policy")


def check_policy_params(name: str, params: Mapping[str, object]) -> None:
    """Raise ValueError (its message names the parameter) unless `params` are knobs policy
    `name` declares in `parameters`, with values its constructor accepts. Building a policy
    has no side effects, so this builds one and throws it away."""
    declared = getattr(POLICIES.factory(name), "parameters", {})
    for param in params:
        if param not in declared:
            valid = ", ".join(sorted(declared)) or "none"
            raise ValueError(f"{name} has no parameter {param!r} (its parameters: {valid})")
    if params:
        POLICIES.build(name, **params)


def build_policy(
    name: str,
    requests: Sequence[Request] | None = None,
    prefill_time_s: Callable[[int, int], float] | None = None,
    time_scale: float = 1.0,
    params: Mapping[str, object] | None = None,
) -> EvictionPolicy:
    """Build policy `name` with its own `params` (its declared `parameters`); an offline
    one (e.g. belady) is given the whole trace in replay order first, so it must be passed
    `requests`; a cost-aware one learns `prefill_time_s`."""
    policy = POLICIES.build(name, **(params or {}))
    if prefill_time_s is not None:
        policy.bind_prefill_time(prefill_time_s)
    if policy.offline:
        if requests is None:
            raise ValueError(f"eviction policy {name!r} is offline: it needs the trace")
        policy.prepare(requests, time_scale)
    return policy
