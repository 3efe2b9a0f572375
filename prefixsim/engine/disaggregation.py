"""Prefill/decode disaggregation (docs/architecture.md "Disaggregated serving"), as
Mooncake, Dynamo or vLLM's P/D connectors run it.

Prefill replicas (ordinary replicas with a `KVTransfer`) compute prompts with their prefix
caches; a request with more than one token to generate is then handed to the decode replica
its decode router picks (by default the one with the least outstanding work). As vLLM's P/D
proxy does, the prefill's sampled token is not the client's: the decode replica generates
every output token, and its first step's token is the request's first token
(docs/architecture.md, "Disaggregated serving"). Decode replicas keep prefix caches of
their own (same policy and capacity rules as any replica): the decode replica pulls only
the prompt's KV its cache lacks (the cached run of whole pages, R3's cap, is locked and
refreshed when the pull starts), when it can hold the request's whole future (the pulled KV
and every token still to generate, beside what its running requests will still grow by,
beyond the decode tokens their step in progress holds already: so pulls never make a decode
replica preempt). The pull goes over the prefill replica's outbound link (per GPU, as each
GPU sends its share of a token's KV; transfers queue one behind another: latency + bytes /
bandwidth). When it lands, the prefill replica frees the request's KV and unlocks its
cached prefix; the decode replica inserts the pulled whole pages into its cache (a later
turn of the session finds them) and decodes the request; a decode replica that stood idle
charges its idle wake-up before its first step.
With `local_prefill_max_tokens` (selective disaggregation, as Dynamo's conditional
disaggregation and llm-d's threshold do) a request whose prompt the decode replica it would
go to lacks at most that many tokens of is served there whole, prefill included, as on a
colocated replica (such a replica may then preempt). Not here: layer-wise streaming of KV
during the prefill, reading the lacking KV from the shared pool instead of the prefill
replica.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prefixsim.cache.page import Page
from prefixsim.cache.pool import LinkDirection
from prefixsim.engine.decode_steps import BOUNDARY_TIE_S
from prefixsim.engine.replica import Replica
from prefixsim.engine.request_state import RUNNING, RequestState
from prefixsim.router import Router
from prefixsim.router.least_loaded import LeastLoaded


@dataclass(frozen=True, slots=True)
class Disaggregation:
    """How many replicas prefill and decode, and their KV link (bytes/s per GPU).
    `local_prefill_max_tokens`: a prompt whose uncached part on its decode replica is at
    most this many tokens prefills there (selective disaggregation); None: never."""

    prefill_replicas: int
    decode_replicas: int
    link_bytes_s: float = 50e9
    link_latency_s: float = 0.0002
    local_prefill_max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.prefill_replicas < 1 or self.decode_replicas < 1:
            raise ValueError("disaggregation needs >= 1 prefill and >= 1 decode replica")
        if self.local_prefill_max_tokens is not None and self.local_prefill_max_tokens < 0:
            raise ValueError("local_prefill_max_tokens must be >= 0")

    @property
    def num_replicas(self) -> int:
        return self.prefill_replicas + self.decode_replicas


class KVTransfer:
    """Hands prefilled requests to decode replicas and times their KV over the links."""

    def __init__(self, spec: Disaggregation, kv_bytes_per_token: int,
                 transfer_time_s: Callable[[int, float], float],
                 router: Router | None = None) -> None:
        self.spec = spec
        self.router = LeastLoaded() if router is None else router
        self.kv_bytes_per_token = kv_bytes_per_token
        self.transfer_time_s = transfer_time_s
        self.decoders: Sequence[DecodeReplica] = ()
        self.links = [LinkDirection(spec.link_bytes_s, spec.link_latency_s)
                      for _ in range(spec.prefill_replicas)]

    def decoder_for(self, state: RequestState, now: float) -> DecodeReplica:
        """The decode replica that takes `state`: the decode router's choice (by default
        the least loaded, ties to the lower index)."""
        decoders = self.decoders
        return decoders[self.router.route(state.request, decoders, now)]

    def local_decoder(self, state: RequestState, now: float) -> DecodeReplica | None:
        """Selective disaggregation: the decode replica `state` would go to, when the part
        of its prompt that replica's cache lacks is short enough to prefill there."""
        target = self.decoder_for(state, now)
        request = state.request
        held = target.cached_prefix_tokens(request, now) if state.rule.cacheable else 0
        return target if request.input_tokens - held <= self.spec.local_prefill_max_tokens \
            else None

    def hand_off(self, state: RequestState, source: Replica) -> None:
        """`state` finished its prefill on `source`: its decode replica takes it and
        generates every output token (the prefill's token is not the client's, as behind
        vLLM's P/D proxy)."""
        state.generated_tokens = 0
        state.first_token_s = None
        target = self.decoder_for(state, source.env.now)
        state.decode_replica = target.index
        target.receive(state, source)

    def book(self, source: Replica, state: RequestState, num_tokens: int,
             now: float) -> float:
        """Seconds from `now` until `num_tokens` of `state`'s KV have crossed `source`'s
        link."""
        return self.links[source.index].book(num_tokens * self.kv_bytes_per_token, now,
                                             self.transfer_time_s)


@dataclass(slots=True)
class Pull:
    """A pull in flight: the KV reserved for it (`lacking` tokens) and the decode cache's
    run it locked (`tip`, `num_pages` pages, `held` tokens)."""

    lacking: int
    tip: Page | None
    num_pages: int
    held: int


class DecodeReplica(Replica):
    """A replica that decodes requests prefilled elsewhere (see the module docstring)."""

    DEFERS_EVICTION = False  # a pull reserves memory mid-run

    def __init__(self, *args, transfer: KVTransfer, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.transfer_in = transfer
        self.incoming: deque[RequestState] = deque()
        self.pulling: dict[RequestState, Pull] = {}  # KV reserved here, transfer in flight

    def receive(self, state: RequestState, source: Replica) -> None:
        """A prefill replica hands `state` over: it queues until it can be pulled."""
        state.decode_source = source
        self.incoming.append(state)
        self._change_load(state.outstanding_tokens)
        self._pull()

    def _held_run(self, state: RequestState) -> tuple[list[Page], int]:
        """The pages of `state`'s prompt this replica's cache holds now (whole pages, R3's
        cap; none for an uncacheable request) and their tokens."""
        request = state.request
        limit = request.matchable_pages(request.input_tokens) if state.rule.cacheable else 0
        pages = self.cache.match(request.page_ids[:limit], self.env.now).pages
        return pages, request.prefix_tokens(len(pages))

    def _pull(self) -> None:
        """Start pulling queued requests, first come first served, while they fit."""
        cache, env = self.cache, self.env
        self._settle()
        while self.incoming and (len(self.running) + len(self.pulling)
                                 < self.scheduler.max_num_seqs):
            state = self.incoming[0]
            growth = sum(s.remaining_decode_tokens for s in self.running) + sum(
                s.remaining_decode_tokens for s in self.pulling) - self._reserved_ahead()
            pages, held = self._held_run(state)
            tip = pages[-1] if pages else None
            if tip is not None:
                cache.lock(tip)
            lacking = state.request.input_tokens - held
            if lacking + state.remaining_decode_tokens + growth > self._available():
                if tip is not None:
                    cache.unlock(tip, env.now)
                break
            self.incoming.popleft()
            self._reserve(lacking)
            if pages:
                self._recency += 1
                cache.touch(pages, env.now, self._recency, state.rule.ttl_s,
                            state.rule.priority)
            self.pulling[state] = Pull(lacking, tip, len(pages), held)
            wait = self.transfer_in.book(state.decode_source, state, lacking, env.now)
            env.process(self._land(state, wait))
        if self.incoming and cache.capacity_tokens is not None and not self.running \
                and not self.pulling and not self.loading and not cache.reserved_tokens:
            # nothing here holds KV that will be freed (a local prefill's async load, R15,
            # holds its reservation while it waits): the queue head can never fit
            state = self.incoming[0]
            raise RuntimeError(f"decode replica {self.index} can never hold request "
                               f"{state.request.request_id}")

    def _reserved_ahead(self) -> int:
        """Decode tokens the run in progress holds already and has not yet generated: the
        running requests' remaining tokens count them, so the growth still to come is the
        remaining tokens less these (a run reserves its `covered` steps when it starts and
        credits its tokens when it ends; stepping one by one, covered is 1). With them
        left out the fit test reads the same at every moment of a run, mid-step or at a
        boundary, whether the run is one timeout or many."""
        run = self._run_state
        return 0 if run is None else self._covered * run[1].num_seqs

    def _settle(self) -> None:
        """Mid-run, hold the decode KV of exactly the steps started by now, as stepping one
        by one does (a run reserves the steps its free memory covers when it starts): a
        pull or a landing then finds the cache, and evicts from it, as that would. The
        steps not started are reserved as they start (`catch_up`) or when the run ends."""
        decodes = self._run_decodes
        if self._run_state is None or not decodes:
            return
        start, clock = self._run_state  # a landing at a step's boundary: that step has not started
        started = min(clock.steps, clock.steps_done(self.env.now - start - BOUNDARY_TIE_S) + 1)
        unused = self._covered - started
        if unused > 0:
            self.cache.release(unused * len(decodes))
            for state in decodes:
                state.private_tokens -= unused
            self._covered = started
        elif unused < 0:
            self.catch_up(BOUNDARY_TIE_S)

    def _land(self, state: RequestState, wait_s: float):
        yield self.env.timeout(wait_s)
        self._settle()
        pull = self.pulling.pop(state)
        state.decode_source.release_handed_off(state)
        state.decode_source = None
        state.private_tokens = pull.lacking
        state.tip = pull.tip
        state.num_tree_pages = pull.num_pages
        state.tree_tokens = pull.held
        request = state.request
        whole = request.num_pages - (request.input_tokens % request.page_size_tokens != 0)
        self._insert_pages(state, whole, False)  # the pulled whole pages join this cache
        state.status = RUNNING
        state.gap_pending = True  # its next token is the client's first
        self.running.append(state)
        wake = self._wake
        if wake is not None and not wake.triggered:
            wake.succeed()

    def _decode_run(self, decodes: list[RequestState]):
        """A decode run, after the idle wake-up when the replica stood idle (a landing woke
        it: colocated replicas charge theirs to the prefill step that follows)."""
        wake_s = self._idle_wakeup_s
        if wake_s:
            self._idle_wakeup_s = 0.0
            self.busy_s += wake_s
            yield self.env.timeout(wake_s)
        yield from super()._decode_run(decodes)

    def _end_prefill_step(self, plan, step_s: float) -> None:
        """A prefill step (of a prompt prefilled here, selective disaggregation) whose
        decodes may hold landed requests' first tokens: those end no ITL gap."""
        firsts = [state for state in plan.decodes if state.gap_pending]
        super()._end_prefill_step(plan, step_s)
        if firsts:
            for state in firsts:
                state.gap_pending = False
                state.first_token_s = self.env.now
            segments = self.itl_segments  # the step's (gap, tokens) pair, less the firsts
            segments.tokens[-1] -= len(firsts)
            if segments.tokens[-1] == 0:
                segments.tokens.pop()
                segments.gaps.pop()

    def admit(self, state: RequestState, budget: int) -> int:
        """A request prefilled here (selective disaggregation) is admitted only while pulls
        in flight leave it a sequence slot (they join `running` when they land)."""
        if len(self.running) + len(self.pulling) >= self.scheduler.max_num_seqs:
            return 0
        return super().admit(state, budget)

    def _preempt(self, state: RequestState) -> None:
        state.gap_pending = False  # re-prefilled here: its first token ends that prefill
        super()._preempt(state)

    def _after_step(self) -> None:
        self._pull()

    def _memory_in_transit(self) -> bool:
        return bool(self.pulling)

    def _held_private_tokens(self) -> int:
        return sum(pull.lacking for pull in self.pulling.values())

    def _queued_outstanding(self) -> int:
        return sum(s.outstanding_tokens for group in (self.incoming, self.pulling)
                   for s in group)
