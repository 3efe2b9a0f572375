"""A replica's KV memory accounting: admission, preemption, prefill inserts
(docs/cache-semantics.md Part B).

At admission the request's prompt is matched (whole pages ending by token L - 1: the cap is
page-aligned, R3, so a partial last page is never a hit; it is private KV, never inserted,
freed at finish: Part C edge case 4), its path is
locked (R8) and refreshed (R5), and the KV of its first chunk is reserved, evicting unlocked
cache pages first (R10; if free + evictable cannot cover it the request waits). Each later
chunk reserves its own KV when it is scheduled (`grow`, as vLLM v1 allocates per scheduled
chunk); when that does not fit the chunk waits (vLLM would preempt newer requests to make
room), and only a step that could run nothing at all preempts the newest request. Each prefill
chunk's fully computed pages move from the request's private reservation into the tree (R6;
an already-resident page is reused and the private copy freed, R7). Each decode step
reserves one token per decoding request; when that cannot be had, the newest running request
is preempted by recompute (its private KV freed, its lock released, it goes back to the head
of the queue). At finish the private KV is freed and the path unlocked. Generated tokens are
never cached (a hash-id trace names no pages for them). Private KV is counted in tokens, not
16-token blocks. A request's class (cache/classes.py, set by the arrivals process) gives its
pages' TTL and priority; an uncacheable one neither matches nor inserts, its whole KV stays
private.

With lower tiers (cache/tiers.py, R15) the match continues below HBM at admission: those
pages count as hits of their tier, are taken out of it and held as the request's private KV
until its first chunk inserts them. Their copy time (the cost model's `transfer_time_s`) is,
with async loads (the default, as vLLM v1's KV connectors), waited off the batch: the
request, its loaded KV and first chunk reserved, sits in `loading` until the copy ends on the
replica's host link (copies one after another), then rejoins the queue's head; with blocking
loads it is added to the step that runs the request's next prefill chunk. With a shared KV
pool (cache/pool.py, R18) the match continues in the pool the same way; its pages are read
over the replica's link (waiting for the link's earlier reads), HBM's evictions (or, with
write-through, every inserted chunk) are written to it.

`ReplicaMemory` holds this state and these transitions; replica.py's `Replica` adds the
queue, the step loop and the router's view on top.
The clock is read as `env._now` (see engine/replica.py).
"""

from __future__ import annotations

from collections import deque
from functools import partial

import simpy

from prefixsim.cache import PrefixCache
from prefixsim.cache.cache_types import ChainConflict
from prefixsim.cache.pool import PoolLink, SharedPool
from prefixsim.cache.tiers import TierStack
from prefixsim.costmodel import CostModel
from prefixsim.engine.cache_only import lower_tier_tokens
from prefixsim.engine.request_state import HELD, RUNNING, WAITING, RequestState
from prefixsim.errors import InputError


class ReplicaMemory:
    """The HBM prefix cache of one replica and the requests charged to it."""

    def __init__(self, env: simpy.Environment, cache: PrefixCache, cost_model: CostModel,
                 tiers: TierStack | None = None, kv_bytes_per_token: int = 0, *,
                 pool: SharedPool | None = None, link: PoolLink | None = None,
                 async_loads: bool = False) -> None:
        if cache.capacity_tokens is None:
            raise ValueError("a replica's cache needs a capacity (its KV pool)")
        self.env = env
        self.cache = cache
        self.capacity_tokens = cache.capacity_tokens
        self.cost_model = cost_model
        self.tiers = tiers  # host/disk tiers under this replica's HBM cache (R15)
        self.kv_bytes_per_token = kv_bytes_per_token
        self.pool, self.link = pool, link  # the shared KV pool and this replica's link (R18)
        if pool is not None and link is not None and not pool.spec.write_through:
            cache.on_demote = self._write_evicted
        self.waiting: deque[RequestState] = deque()
        self.running: list[RequestState] = []
        self.async_loads = async_loads  # loads off the batch (R15), else blocking copies
        self.loading: list[RequestState] = []  # admitted, their prefix still loading
        self._load_link_free_s = 0.0  # when the host link ends its last booked tier load
        self.num_preemptions = 0
        self.query_tokens = 0
        self.hit_tokens = 0
        self._recency = 0
        self._decode_room = 0
        self._load_tokens = 0  # `_outstanding`'s value

    @property
    def _outstanding(self) -> int:
        """Σ outstanding_tokens over the requests waiting, running or queued here, kept in
        step at admission, finishes and step ends (`_change_load`)."""
        return self._load_tokens

    def _change_load(self, tokens: int) -> None:
        """Add `tokens` (negative: take them) to `_outstanding`."""
        self._load_tokens += tokens

    def _available(self) -> int:
        return self.cache.available_tokens()  # free + evictable (R10)

    def _reserve(self, num_tokens: int) -> None:
        self.cache.evict(num_tokens)
        self.cache.reserve(num_tokens)

    def admit(self, state: RequestState, budget: int) -> int:
        """Match, lock and reserve the first chunk of `state` (at most `budget` tokens) if
        its KV fits (R10); returns the chunk's tokens, 0 when it does not fit (no trace),
        HELD when its prefix loads first off the batch (async loads, R15)."""
        if state.loaded_chunk_tokens:
            return self._admit_loaded(state, budget)
        cache, now, request = self.cache, self.env._now, state.request
        rule = state.rule
        limit = request.matchable_pages(state.prompt_tokens) if rule.cacheable else 0
        pages = cache.match(request.page_ids[:limit], now).pages
        num = len(pages)
        matched = request.prefix_tokens(num)
        lower = None
        if self.tiers is not None and num < limit:
            lower = self.tiers.peek_run(request.page_ids[num:limit])
        pooled = [] if self.pool is None else self.pool.run_after(
            request.page_ids[:limit], num, now)
        if lower:
            hit = min(request.prefix_tokens(num + lower.num_pages), state.prompt_tokens - 1)
        else:
            hit = min(request.prefix_tokens(num + len(pooled)), state.prompt_tokens - 1)
        size = min(state.prompt_tokens - hit, budget)
        need = hit + size - matched  # the first chunk's KV (and lower-tier copies) beyond the tree
        tip = pages[-1] if pages else None
        if tip is not None:
            cache.lock(tip)
        if need + self._decode_room > self._available():
            if tip is not None:
                cache.unlock(tip, now)
            return 0
        if lower:  # before _reserve: its evictions demote pages and could push these out
            self.tiers.take(lower)
        from_pool = 0
        if pooled:  # read at lookup, before _reserve: its evictions write back to the pool
            from_pool = hit - min(matched, state.prompt_tokens - 1)
            self.pool.read(pooled, from_pool, now)  # (R18), which could change these pages
            pool_load_s = self.pool.fetch(pooled, self.link, self.kv_bytes_per_token, now,
                                          self.cost_model.transfer_time_s)
        self._reserve(need)
        self._recency += 1
        cache.touch(pages, now, self._recency, rule.ttl_s, rule.priority)
        state.status = RUNNING
        state.tip = tip
        state.num_tree_pages = num
        state.tree_tokens = matched
        state.computed_tokens = hit
        self._change_load(-hit)
        state.private_tokens = need
        host = disk = 0
        if lower:
            state.load_s = self.tiers.load_time_s(lower, self.kv_bytes_per_token,
                                                  self.cost_model.transfer_time_s)
            host, disk = lower_tier_tokens(request, num, lower)
        elif pooled:  # read over the links, charged to the first chunk's step (R18)
            state.load_s = pool_load_s
        elif self.pool is not None and num < limit:  # a miss of the pool costs its lookup
            state.load_s = self.pool.spec.lookup_s
        if state.admitted_s is None:
            state.admitted_s = now
            state.cached_tokens = hit
            state.cached_tokens_host = host
            state.cached_tokens_disk = disk
            state.cached_tokens_pool = from_pool
            self.query_tokens += request.input_tokens
            self.hit_tokens += hit
        else:
            state.recomputed_tokens += state.prompt_tokens - hit
        if self.async_loads and state.load_s > 0 and (lower or pooled):
            self._hold(state, size)
            return HELD
        return size

    def _hold(self, state: RequestState, size: int) -> None:
        """Async loads (R15): `state`, admitted with its loaded KV and first chunk of `size`
        tokens reserved, waits off the batch until its copy ends: lower-tier copies one
        after another on the replica's host link, pool reads when the link has read them
        (booked already, R18). One event at the copy's end."""
        now = self.env._now
        if self.link is None:
            start = self._load_link_free_s if self._load_link_free_s > now else now
            self._load_link_free_s = start + state.load_s
            wait_s = self._load_link_free_s - now
        else:
            wait_s = state.load_s
        state.load_s = 0.0
        state.status = WAITING
        state.loaded_chunk_tokens = size
        self.loading.append(state)
        self.env.timeout(wait_s).callbacks.append(partial(self._load_done, state))

    def _load_done(self, state: RequestState, _event: simpy.Event) -> None:
        """`state`'s prefix is in HBM: it rejoins the queue at its head (vLLM v1 keeps a
        request waiting for remote KV in its waiting queue, ahead of later arrivals)."""
        self.loading.remove(state)
        self.waiting.appendleft(state)

    def _admit_loaded(self, state: RequestState, budget: int) -> int:
        """Admit a request whose prefix has loaded: its first chunk, at most `budget`
        tokens, from the reservation made when its load began, grown by what memory spares
        (never below one token: it always runs, so loads cannot deadlock the queue)."""
        prepaid = state.loaded_chunk_tokens
        spare = max(0, self._available() - self._decode_room)
        size = min(state.prompt_tokens - state.computed_tokens, budget, prepaid + spare)
        if size > prepaid:
            self._reserve(size - prepaid)
        elif size < prepaid:
            self.cache.release(prepaid - size)
        state.private_tokens += size - prepaid
        state.loaded_chunk_tokens = 0
        state.status = RUNNING
        return size

    def grow(self, state: RequestState, num_tokens: int) -> bool:
        """Reserve the KV of a running request's next prefill chunk (vLLM v1 allocates per
        scheduled chunk); False, reserving nothing, when it does not fit (the chunk waits)."""
        if num_tokens + self._decode_room > self._available():
            return False
        self._reserve(num_tokens)
        state.private_tokens += num_tokens
        return True

    def _write_evicted(self, page) -> None:
        """HBM evicted `page`: write it (and the ancestors the pool lacks) to the pool."""
        try:
            written = self.pool.write_evicted(page, self.link.index)
        except ChainConflict as exc:  # which request's ids crossed is not known here
            raise InputError(f"{exc} in the shared KV pool, writing back a page evicted "
                             "from HBM (hash ids are not chained)", field="hash_ids") from None
        if written:
            self.link.write(written * self.kv_bytes_per_token * self.pool.spec.replicas,
                            self.env._now)

    def _release(self, state: RequestState) -> None:
        self.cache.release(state.private_tokens)
        state.private_tokens = 0
        if state.tip is not None:
            self.cache.unlock(state.tip, self.env._now)
            state.tip = None

    def _preempt(self, state: RequestState) -> None:
        """Preemption by recompute: free everything, requeue at the head (vLLM)."""
        self._release(state)
        self.running.remove(state)
        self._change_load(-state.outstanding_tokens)
        state.last_token_s = self.env._now  # preemption comes at a step boundary
        state.status = WAITING
        state.prompt_tokens = state.request.input_tokens + state.generated_tokens
        state.computed_tokens = state.tree_tokens = state.num_tree_pages = 0
        state.load_s = 0.0
        state.preemptions += 1
        self._change_load(state.outstanding_tokens)
        self.num_preemptions += 1
        self.waiting.appendleft(state)

    def _make_decode_room(self) -> None:
        """Preempt the newest requests until every decoding request can grow by a token."""
        while True:
            running = self.running
            room = sum([s.computed_tokens >= s.prompt_tokens for s in running])  # decoding
            if not running or room <= self.cache.available_tokens():
                self._decode_room = room
                return
            self._preempt(self.running[-1])

    def _reserve_decode(self, decodes: list[RequestState], num_steps: int) -> None:
        if decodes:
            self._reserve(len(decodes) * num_steps)
            for state in decodes:
                state.private_tokens += num_steps

    def _advance_prefill(self, state: RequestState, num_tokens: int) -> None:
        """A chunk finished: insert the pages it completed (R6); the last chunk yields a token."""
        state.computed_tokens += num_tokens
        self._change_load(-num_tokens)
        request = state.request
        if state.computed_tokens >= request.input_tokens:
            # A partial last page stays private and is freed at finish (edge case 4): the
            # page-aligned cap never lets another prompt match it, so caching it only wastes room
            covered = request.num_pages - (request.input_tokens % request.page_size_tokens != 0)
        else:
            covered = state.computed_tokens // request.page_size_tokens
        self._insert_pages(state, covered, self.pool is not None and self.pool.spec.write_through)
        if not state.prefilling:
            state.generated_tokens += 1
            self._change_load(-1)
            if state.first_token_s is None:
                state.first_token_s = self.env._now

    def _insert_pages(self, state: RequestState, covered: int, write_through: bool) -> None:
        """Move the request's pages from its tree path up to page `covered` out of its
        private KV into the tree (R6; a resident page is reused, R7), relocking its path;
        `write_through`: write the chain to the shared pool too (R18)."""
        request = state.request
        first = state.num_tree_pages
        if covered > first and state.rule.cacheable:
            tokens = request.page_tokens()[first:covered]
            moved = sum(tokens)
            self.cache.release(moved)
            state.private_tokens -= moved
            self._recency += 1
            now = self.env._now
            try:
                placed = self.cache.insert(state.tip, request.page_ids[first:covered], tokens,
                                           now, self._recency, state.rule.ttl_s,
                                           state.rule.priority)
                if write_through:
                    written = self.pool.write(request.page_ids[:covered],
                                              request.page_tokens()[:covered], self.link.index)
            except ChainConflict as exc:
                raise InputError(f"request {request.request_id}: {exc} (hash ids are not "
                                 "chained)", field="hash_ids") from None
            if len(placed) != covered - first:
                raise AssertionError("released pages did not fit back into the cache")
            if write_through:
                pool = self.pool
                if written:
                    self.link.write(written * self.kv_bytes_per_token * pool.spec.replicas,
                                    now)
            self.cache.relock(state.tip, placed[-1], now)  # lock, unlock the old
            state.tip = placed[-1]
            state.num_tree_pages = covered
            state.tree_tokens += moved
