"""One serving replica: its HBM prefix cache, queues and the simpy loop that runs its steps.

Memory follows cache-spec Part B. At admission the request's prompt is matched (hit capped at
L - 1, whole pages), its path is locked (R8) and refreshed (R5), and the KV it still needs is
reserved, evicting unlocked cache pages first (R10; if free + evictable cannot cover it the
request waits). Each prefill chunk's fully computed pages move from the request's private
reservation into the tree (R6; an already-resident page is reused and the private copy freed,
R7). Each decode step reserves one token per decoding request; when that cannot be had, the
newest running request is preempted by recompute (its private KV freed, its lock released, it
goes back to the head of the queue). At finish the private KV is freed and the path unlocked.
Generated tokens are never cached (a hash-id trace names no pages for them). Private KV is
counted in tokens, not 16-token blocks.

Time moves per batch change: a step with prefill chunks is one timeout; a decode-only batch
runs until its first completion (or memory limit) in one timeout, cut short at the next step
boundary when an arrival could join the batch.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import simpy

from prefixsim.cache import ChainConflict, RadixCache
from prefixsim.costmodel import CostModel, PrefillChunk, StepBatch
from prefixsim.engine.cache_only import hit_tokens
from prefixsim.engine.request_state import COMPLETED, REJECTED, RUNNING, WAITING, RequestState
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.errors import InputError
from prefixsim.trace import Request

FinishCallback = Callable[[RequestState], None]


class Replica:
    """A model instance on `tp` GPUs with its own prefix cache (a router's ReplicaView)."""

    def __init__(self, index: int, env: simpy.Environment, cache: RadixCache,
                 cost_model: CostModel, scheduler: ContinuousBatching,
                 on_finish: FinishCallback, check_invariants: bool = False) -> None:
        if cache.capacity_tokens is None:
            raise ValueError("a replica's cache needs a capacity (its KV pool)")
        self.index = index
        self.env = env
        self.cache = cache
        self.capacity_tokens = cache.capacity_tokens
        self.cost_model = cost_model
        self.scheduler = scheduler
        self.on_finish = on_finish
        self.check = check_invariants
        self.waiting: deque[RequestState] = deque()
        self.running: list[RequestState] = []
        self.num_steps = 0
        self.num_preemptions = 0
        self.busy_s = 0.0
        self.query_tokens = 0
        self.hit_tokens = 0
        self.itl_segments: list[tuple[float, int]] = []  # (step seconds, tokens produced)
        self._recency = 0
        self._decode_room = 0
        self._wake: simpy.Event | None = None
        self.process = env.process(self._loop())

    # ------------------------------------------------------------ router's view
    @property
    def outstanding_tokens(self) -> int:
        total = 0
        for state in self.running:
            total += state.outstanding_tokens
        for state in self.waiting:
            total += state.outstanding_tokens
        return total

    def cached_page_ids(self) -> set[int]:
        return {page.page_id for page in self.cache.pages()}

    def cached_prefix_tokens(self, request: Request, now: float) -> int:
        return hit_tokens(request, self.cache.match(request.page_ids, now).num_pages)

    # ------------------------------------------------------------------ arrival
    def submit(self, state: RequestState) -> None:
        """A routed request joins the queue (or is rejected if it could never fit)."""
        state.replica = self.index
        if state.prompt_tokens + state.target_tokens > self.capacity_tokens:
            state.status = REJECTED
            self.on_finish(state)
            return
        was_empty = not self.waiting
        self.waiting.append(state)
        wake = self._wake
        if wake is not None and not wake.triggered and (
            not self.running or (was_empty and len(self.running) < self.scheduler.max_num_seqs)
        ):
            wake.succeed()

    # ------------------------------------------------------------------- memory
    def _available(self) -> int:
        return self.cache.free_tokens + self.cache.evictable_tokens

    def _reserve(self, num_tokens: int) -> None:
        self.cache.evict(num_tokens)
        self.cache.reserve(num_tokens)

    def admit(self, state: RequestState) -> bool:
        """Match, lock and reserve for `state` if its KV fits (R10); False leaves no trace."""
        cache, now, request = self.cache, self.env.now, state.request
        pages = cache.match(request.page_ids, now).pages
        num = len(pages)
        if num == 0:
            matched = 0
        elif num >= request.num_pages:
            matched = request.input_tokens
        else:
            matched = num * request.page_size_tokens
        hit = min(matched, state.prompt_tokens - 1)
        need = state.prompt_tokens - matched
        tip = pages[-1] if pages else None
        if tip is not None:
            cache.lock(tip)
        if need + self._decode_room > self._available():
            if tip is not None:
                cache.unlock(tip, now)
            return False
        self._reserve(need)
        self._recency += 1
        cache.touch(pages, now, self._recency)
        state.status = RUNNING
        state.tip = tip
        state.num_tree_pages = num
        state.tree_tokens = matched
        state.computed_tokens = hit
        state.private_tokens = need
        if state.admitted_s is None:
            state.admitted_s = now
            state.cached_tokens = hit
            self.query_tokens += request.input_tokens
            self.hit_tokens += hit
        else:
            state.recomputed_tokens += state.prompt_tokens - hit
        return True

    def _release(self, state: RequestState) -> None:
        self.cache.release(state.private_tokens)
        state.private_tokens = 0
        if state.tip is not None:
            self.cache.unlock(state.tip, self.env.now)
            state.tip = None

    def _preempt(self, state: RequestState) -> None:
        """Preemption by recompute: free everything, requeue at the head (vLLM)."""
        self._release(state)
        self.running.remove(state)
        state.status = WAITING
        state.prompt_tokens = state.request.input_tokens + state.generated_tokens
        state.computed_tokens = state.tree_tokens = state.num_tree_pages = 0
        state.preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(state)

    def _make_decode_room(self) -> None:
        """Preempt the newest requests until every decoding request can grow by a token."""
        while True:
            room = sum(1 for s in self.running if not s.prefilling)
            if room <= self._available() or not self.running:
                self._decode_room = room
                return
            self._preempt(self.running[-1])

    def _finish(self, state: RequestState) -> None:
        self._release(state)
        self.running.remove(state)
        state.status = COMPLETED
        state.finish_s = self.env.now
        self.on_finish(state)

    # ----------------------------------------------------------------- progress
    def _advance_prefill(self, state: RequestState, num_tokens: int) -> None:
        """A chunk finished: insert the pages it completed (R6); the last chunk yields a token."""
        state.computed_tokens += num_tokens
        request = state.request
        if state.computed_tokens >= request.input_tokens:
            covered = request.num_pages
        else:
            covered = state.computed_tokens // request.page_size_tokens
        first = state.num_tree_pages
        if covered > first:
            tokens = request.page_tokens()[first:covered]
            moved = sum(tokens)
            self.cache.release(moved)
            state.private_tokens -= moved
            self._recency += 1
            try:
                placed = self.cache.insert(state.tip, request.page_ids[first:covered], tokens,
                                           self.env.now, self._recency)
            except ChainConflict as exc:
                raise InputError(f"request {request.request_id}: {exc} (hash ids are not "
                                 "chained)", field="hash_ids") from None
            if len(placed) != covered - first:
                raise AssertionError("released pages did not fit back into the cache")
            self.cache.lock(placed[-1])
            if state.tip is not None:
                self.cache.unlock(state.tip, self.env.now)
            state.tip = placed[-1]
            state.num_tree_pages = covered
            state.tree_tokens += moved
        if not state.prefilling:
            state.generated_tokens += 1
            if state.first_token_s is None:
                state.first_token_s = self.env.now

    def _finish_done(self) -> None:
        for state in [s for s in self.running if s.remaining_decode_tokens <= 0]:
            self._finish(state)

    # --------------------------------------------------------------------- loop
    def _loop(self):
        env, cost = self.env, self.cost_model
        while True:
            if not self.running and not self.waiting:
                self._wake = env.event()
                yield self._wake
                self._wake = None
                continue
            self._make_decode_room()
            plan = self.scheduler.plan(self.running, self.waiting, self.admit)
            decodes = plan.decodes
            if plan.chunks:
                self._reserve_decode(decodes, 1)
                batch = StepBatch(
                    tuple(PrefillChunk(n, s.computed_tokens) for s, n in plan.chunks),
                    tuple(s.context_tokens for s in decodes),
                )
                step_s = cost.step_time_s(batch)
                yield env.timeout(step_s)
                self.num_steps += 1
                self.busy_s += step_s
                for state in decodes:
                    state.generated_tokens += 1
                for state, num_tokens in plan.chunks:
                    self._advance_prefill(state, num_tokens)
                if decodes:
                    self.itl_segments.append((step_s, len(decodes)))
            elif decodes:
                yield from self._decode_run(decodes)
            else:
                raise RuntimeError(f"replica {self.index} cannot admit its queue head")
            self._finish_done()
            if self.check:
                self.check_invariants()

    def _reserve_decode(self, decodes: list[RequestState], num_steps: int) -> None:
        if decodes:
            self._reserve(len(decodes) * num_steps)
            for state in decodes:
                state.private_tokens += num_steps

    def _decode_run(self, decodes: list[RequestState]):
        """Decode-only steps until the first completion, in one timeout (or fewer if woken)."""
        env, cost = self.env, self.cost_model
        num = len(decodes)
        steps = min(s.remaining_decode_tokens for s in decodes)
        steps = max(1, min(steps, self._available() // num))
        self._reserve_decode(decodes, steps)
        contexts = tuple(s.context_tokens for s in decodes)
        total_s = cost.decode_steps_time_s(contexts, steps)
        start = env.now
        self._wake = env.event()
        yield env.any_of((env.timeout(total_s), self._wake))
        wake, self._wake = self._wake, None
        done = steps
        if wake.triggered and env.now - start < total_s:
            done = self._steps_by(contexts, steps, env.now - start)
            done_s = cost.decode_steps_time_s(contexts, done)
            if done_s > env.now - start:
                yield env.timeout(done_s - (env.now - start))
            total_s = done_s
            unused = steps - done
            if unused:
                self.cache.release(unused * num)
                for state in decodes:
                    state.private_tokens -= unused
        self.num_steps += 1
        self.busy_s += total_s
        for state in decodes:
            state.generated_tokens += done
        if done:
            self.itl_segments.append((total_s / done, done * num))

    def _steps_by(self, contexts: tuple[int, ...], steps: int, elapsed_s: float) -> int:
        """Fewest steps (0..steps) whose total time reaches `elapsed_s` (binary search)."""
        lo, hi = 0, steps
        while lo < hi:
            mid = (lo + hi) // 2
            if self.cost_model.decode_steps_time_s(contexts, mid) >= elapsed_s:
                hi = mid
            else:
                lo = mid + 1
        return lo

    # --------------------------------------------------------------- invariants
    def check_invariants(self) -> None:
        """R13 and the replica's own accounting (called after every step in debug mode)."""
        cache = self.cache
        cache.check_invariants()
        private = sum(s.private_tokens for s in self.running)
        assert private == cache.reserved_tokens, "private tokens != cache reservation"
        assert cache.free_tokens >= 0, "negative free memory"
        assert (cache.free_tokens + cache.evictable_tokens + cache.locked_tokens
                + cache.reserved_tokens == self.capacity_tokens), "R13"
        assert len(self.running) <= self.scheduler.max_num_seqs, "too many sequences"
        for state in self.running:
            assert state.status == RUNNING
            assert state.tip is None or state.tip.lock_count > 0, "running path not locked"
            assert state.tree_tokens + state.private_tokens >= state.computed_tokens
        for state in self.waiting:
            assert state.private_tokens == 0 and state.tip is None
