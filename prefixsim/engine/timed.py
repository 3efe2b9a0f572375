"""The timed serving simulation: arrivals, a router and replicas on one simpy clock.

`replay_timed(requests, fleet, sampling)` runs one process for arrivals (trace timestamps x
the fleet's `time_scale`) and one per replica (replica.py) of the `Fleet` (fleet.py: caches,
lower tiers, cost model, step planner, router, shared KV pool, disaggregation). The router
is asked once per arrival. The run ends when every request has finished (completed or
rejected); it emits frozen `ServedRecord`s, the per-replica figures and (with
`Sampling.record_state`) the replicas' state after every change as column arrays
(state_log.py), from which metrics/timeseries.py derives timeseries.parquet after the run:
no process wakes up to sample, so the cost follows engine events, not simulated time. With
a pool (cache/pool.py) each replica reads and writes it over a link of its own (`pool_links`
in the result); with disaggregation (engine/disaggregation.py) the first replicas prefill
and the rest decode, and the router chooses among the prefill replicas. Building caches and
cost models from a config is pipeline/build.py's job, pausing the garbage collector the
caller's (gc_pause.py). No pandas here: records only.
The clock is read as `env._now` (see engine/replica.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import simpy

from prefixsim.cache import CacheCounters
from prefixsim.cache.page import INFINITY
from prefixsim.cache.pool import LinkDirection, PoolLink
from prefixsim.engine.disaggregation import DecodeReplica, KVTransfer
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.frontend import FrontendQueue
from prefixsim.engine.itl import ItlSegments
from prefixsim.engine.load_board import LoadBoard
from prefixsim.engine.records import RecordTable
from prefixsim.engine.replica import CatchUps, Replica
from prefixsim.engine.request_state import (
    COMPLETED,
    RequestState,
    ServedRecord,
    served_row,
)
from prefixsim.engine.state_log import StateLog, grid_point_from_s
from prefixsim.errors import InputError
from prefixsim.router.protocol import IndexedRouter
from prefixsim.trace import Request
from prefixsim.trace.columns import RequestColumns

RECORD_STATE = Sampling()  # the default: states recorded, no checks
BLOCK_REQUESTS = 1 << 16  # requests of a RequestColumns turned into Python objects at a time


def _in_blocks(requests: Iterable[Request]) -> Iterator[Request]:
    """`requests` in order. A RequestColumns is read a block at a time (`take`): iterating
    it whole first turns every column into a Python list, objects that would live as long
    as the run (~300 bytes a request); a block's die with the block."""
    if not isinstance(requests, RequestColumns) or len(requests) <= BLOCK_REQUESTS:
        yield from requests
        return
    for start in range(0, len(requests), BLOCK_REQUESTS):
        stop = min(start + BLOCK_REQUESTS, len(requests))
        yield from requests.take(np.arange(start, stop, dtype=np.int64))


@dataclass(frozen=True, slots=True)
class ReplicaFigures:
    """Totals of one replica after the run."""

    replica: int
    capacity_tokens: int
    num_steps: int
    busy_s: float
    preemptions: int
    query_tokens: int
    hit_tokens: int
    counters: CacheCounters


@dataclass(frozen=True, slots=True)
class TimedResult:
    """Everything a timed replay produced."""

    records: RecordTable  # of ServedRecord, in request-id order
    states: dict[str, np.ndarray] | None  # state_log.STATE_COLUMNS; None: not recorded
    replicas: list[ReplicaFigures]
    itl_segments: ItlSegments  # (gap seconds, tokens) pairs, all replicas
    duration_s: float
    num_events: int
    pool_links: list[PoolLink] = field(default_factory=list)  # one per replica, with a pool
    transfer_links: list[LinkDirection] = field(default_factory=list)  # per prefill replica
    num_prefill_replicas: int | None = None  # disaggregated: the first this many prefill


def replay_timed(requests: Iterable[Request], fleet: Fleet,
                 sampling: Sampling = RECORD_STATE) -> TimedResult:
    """Serve `requests` (in arrival order; any iterable, read as the arrivals come) on one
    replica per cache of `fleet`, at their own times or as `fleet.clients` release them;
    see module docstring. A request's state is dropped once it
    has its record, so memory holds the caches and the requests in flight."""
    env = simpy.Environment()
    run = _Run(env, fleet, sampling)
    if fleet.clients is None:
        env.process(run.arrivals(requests))
    else:
        fleet.clients.start(run, _in_blocks(requests))
    try:
        env.run(until=run.all_done)
    except InputError as exc:
        # simpy re-raises an event's failure as a copy made from its args alone, which
        # drops the field (file, line) the error names; the original is its cause
        cause = exc.__cause__
        raise (cause if isinstance(cause, InputError) else exc) from None
    return run.result()


class _Run:
    """One timed replay's replicas, counts and records (`replay_timed`)."""

    def __init__(self, env: simpy.Environment, fleet: Fleet, sampling: Sampling) -> None:
        self.env, self.fleet, self.sampling = env, fleet, sampling
        self.emission_s = fleet.cost_model.serving_overheads.emission_s
        self.records = RecordTable(ServedRecord)
        self.arrived = self.finished = 0
        self.all_arrived = False
        self.clients = fleet.clients
        self.time_scale = fleet.time_scale
        overheads = fleet.cost_model.serving_overheads
        self.frontend_s = overheads.frontend_s
        # a frontend whose time grows with the prompt (tokenising, hashing) queues requests
        # for its tokenizers: one per replica's API server (frontend.py)
        servers = (len(fleet.caches) if fleet.disaggregation is None
                   else fleet.disaggregation.prefill_replicas)
        self.frontend = (FrontendQueue(overheads, servers)
                         if overheads.frontend_s_per_prompt_token > 0 else None)
        self.all_done = env.event()
        caches = fleet.caches
        self.log = StateLog(sampling.sample_interval_s) if sampling.record_state else None
        self.links = [] if fleet.pool is None else [PoolLink(fleet.pool.spec, i)
                                                    for i in range(len(caches))]
        if fleet.pool is not None:
            fleet.pool.clock = lambda: env._now
            fleet.pool.links = self.links
        split = fleet.disaggregation
        self.transfer = None
        if split is not None:
            if split.num_replicas != len(caches):
                raise ValueError("disaggregation needs one cache per prefill and decode replica")
            self.transfer = KVTransfer(split, fleet.kv_bytes_per_token,
                                       fleet.cost_model.transfer_time_s, fleet.decode_router)
        self.replicas = [self._replica(i, cache) for i, cache in enumerate(caches)]
        self.routed = self.replicas  # the replicas the router chooses among
        self.local = None  # selective disaggregation: the transfer that picks local prefills
        if self.transfer is not None:  # disaggregated: the prefill ones
            self.routed = self.replicas[:split.prefill_replicas]
            self.transfer.decoders = self.replicas[split.prefill_replicas:]
            if split.local_prefill_max_tokens is not None:
                self.local = self.transfer
        LoadBoard(self.routed)  # each list a router chooses among posts its load bounds
        if self.transfer is not None:
            LoadBoard(self.transfer.decoders)
        router = fleet.router
        indexed = isinstance(router, IndexedRouter) and not any(c.block for c in caches)
        if indexed:
            router.bind_caches([r.cache for r in self.routed], lambda: env._now)
            bind_lower = getattr(router, "bind_lower_tiers", None)
            if bind_lower is not None:  # the pool and host tiers below the routed replicas
                bind_lower(None if fleet.pool is None else fleet.pool.cache,
                           [None if r.tiers is None or not r.tiers.tiers else r.tiers.tiers[0]
                            for r in self.routed])
        decode_router = fleet.decode_router
        if (self.transfer is not None and isinstance(decode_router, IndexedRouter)
                and not any(c.block for c in caches)):  # its index follows the decode caches
            decode_router.bind_caches([r.cache for r in self.transfer.decoders],
                                      lambda: env._now)
        # a router reading the caches live expires pages of TTL caches (R11) on every replica
        # it looks at (one following them through an index changes nothing)
        self.record_all = not indexed and any(cache.ttl is not None for cache in caches)
        # Deferred evictions (Replica.catch_up) are caught up before routing: every replica
        # due by the arrival, or, where the router's scores only fall as a cache loses
        # pages and nothing else looks at the caches between steps (no lower tiers, pool
        # or disaggregation; a state log only on the grid it will be sampled on), the
        # chosen one alone (`send`); the others catch up when next chosen, when their run
        # ends, or at the last arrival before a grid point. A router that reads no cache
        # (`reads_caches = False`: by load or in turn) needs none caught up for it.
        self.grid_s = sampling.sample_interval_s
        self.reroute = getattr(router, "reads_caches", True)
        self.chosen_only = (self.transfer is None and fleet.pool is None
                            and (self.log is None or self.grid_s is not None)
                            and all(r.tiers is None or not r.tiers.tiers for r in self.replicas)
                            and (not self.reroute or (indexed and getattr(
                                router, "scores_fall_with_evictions", False))))
        self.catch_ups = CatchUps()
        if not self.chosen_only:
            for r in self.replicas:
                r.catch_ups = self.catch_ups

    def _replica(self, i: int, cache) -> Replica:
        split = self.fleet.disaggregation
        link = self.links[i] if self.links else None
        args = (i, self.env, cache, self.fleet, self.sampling, self.on_finish, self.log)
        if self.transfer is not None and i >= split.prefill_replicas:
            return DecodeReplica(*args, transfer=self.transfer, link=link)
        return Replica(*args, transfer=self.transfer, link=link)

    def on_finish(self, state: RequestState) -> None:
        self.records.append(served_row(state, self.emission_s))
        self.finished += 1
        finished = self.finished
        on_progress, every = self.sampling.on_progress, self.sampling.progress_every
        if on_progress is not None and finished % every == 0:
            on_progress(every)
        if self.clients is not None:  # a closed loop: the client saw it end
            self.clients.finished(state, self.env._now + (
                self.emission_s if state.status == COMPLETED else 0.0))
        if self.all_arrived and finished == self.arrived and not self.all_done.triggered:
            self.all_done.succeed()

    def arrivals(self, requests: Iterable[Request]):
        """The open loop: every request at its own time (x the fleet's time_scale)."""
        env, time_scale, frontend_s = self.env, self.time_scale, self.frontend_s
        send = self.send
        if self.frontend is not None:
            yield from self._through_tokenizers(requests)
            return
        upcoming = iter(_in_blocks(requests))
        request = next(upcoming, None)
        while request is not None:
            arrival_s = request.arrival_s * time_scale
            if arrival_s + frontend_s > env._now:  # the request reaches the scheduler then
                yield env.timeout(arrival_s + frontend_s - env._now)
            self.arrived += 1
            following = next(upcoming, None)
            now = env._now
            send(request, now - frontend_s, INFINITY if following is None
                 else max(now, following.arrival_s * time_scale + frontend_s))
            request = following
        self.arrivals_over()

    def _through_tokenizers(self, requests: Iterable[Request]):
        """The open loop through the frontend's tokenizers (frontend.py): requests are
        queued in arrival order, taken in as far as the earliest pending hand-over, and
        sent in the order they reach the scheduler; one event per request. The queue is
        topped up before a request is sent, so that the next one's time is known."""
        env, time_scale, frontend = self.env, self.time_scale, self.frontend
        pending: list[tuple[float, int, float, Request]] = []
        upcoming = iter(_in_blocks(requests))
        request = next(upcoming, None)

        def top_up() -> None:
            nonlocal request
            while request is not None and (
                    not pending or request.arrival_s * time_scale <= pending[0][0]):
                arrival_s = request.arrival_s * time_scale
                ready_s = frontend.reaches_scheduler_s(arrival_s, request.input_tokens)
                heapq.heappush(pending, (ready_s, self.arrived, arrival_s, request))
                self.arrived += 1
                request = next(upcoming, None)

        top_up()
        while pending:
            ready_s, _, arrival_s, first = heapq.heappop(pending)
            if ready_s > env._now:
                yield env.timeout(ready_s - env._now)
            top_up()
            now = env._now
            self.send(first, arrival_s, max(now, pending[0][0]) if pending else INFINITY)
        self.arrivals_over()

    def send(self, request: Request, arrival_s: float, next_send_s: float | None = None
             ) -> None:
        """`request`, which arrived at `arrival_s`, reaches the scheduler now: routed and
        queued. `next_send_s`: when the next request will (None: not known)."""
        state = RequestState(request, arrival_s)
        rules, routed, log = self.fleet.rules, self.routed, self.log
        if rules is not None:
            state.rule = rules.for_request(request)
        now = self.env._now
        if self.chosen_only:
            if log is not None and self._sampled_before(now, next_send_s):
                for replica in routed:  # the states sampled at that grid point
                    if replica.due_s <= now:
                        replica.catch_up()
            chosen = self._route_caught_up(request, now)
        else:
            self.catch_ups.run_until(now)  # deferred evictions due by now, before routing
            chosen = None if self.local is None else self.local.local_decoder(state, now)
            if chosen is None:
                chosen = routed[self.fleet.router.route(request, routed, now)]
            else:  # prefilled and decoded on a decode replica (engine/disaggregation.py)
                state.decode_replica = chosen.index
        chosen.submit(state)
        if log is not None:
            for other in routed if self.record_all else (chosen,):
                other.log_state(log)

    def _sampled_before(self, now: float, next_send_s: float | None) -> bool:
        """Whether a grid point of the state log's sampling may fall in [now, next_send_s)
        (state_log.grid_point_from_s): then the states logged by now are the ones sampled
        there, as if every replica were caught up at every arrival."""
        return next_send_s is None or next_send_s >= grid_point_from_s(now, self.grid_s)

    def _route_caught_up(self, request: Request, now: float) -> Replica:
        """The router's choice among caches where only the chosen replica's deferred
        evictions were caught up, which is its choice with every replica's caught up:
        catching a replica up only removes pages, which only lowers its score, so a replica
        the router passed over stays passed over; the chosen one is caught up, if due, and
        the router asked again until it chooses a replica that is current (each at most
        once: a catch-up may leave a due time at `now` by rounding, as CatchUps allows)."""
        routed, route = self.routed, self.fleet.router.route
        chosen = routed[route(request, routed, now)]
        if not self.reroute:  # it reads no cache: nothing to catch up for it
            return chosen
        caught_up = None
        while chosen.due_s <= now:
            if caught_up is None:
                caught_up = set()
            elif chosen.index in caught_up:
                break
            caught_up.add(chosen.index)
            chosen.catch_up()
            chosen = routed[route(request, routed, now)]
        return chosen

    # ------------------------------------------------ what clients see (clients.py)
    @property
    def now(self) -> float:
        return self.env._now

    def release(self, request: Request, at_s: float) -> None:
        """A closed loop's `request`, sent at `at_s` (>= now), reaches the scheduler the
        frontend's time later; always through the event queue, so a request released as
        another finishes never enters a replica in the middle of its step's bookkeeping.
        With tokenizers, it joins their queue at `at_s`, not now: a later release may be
        sent earlier (a shorter think time), and the queue takes requests in send order."""
        self.arrived += 1
        if self.frontend is None:
            self._send_at(at_s + self.frontend_s, request, at_s)
        else:
            self.call_at(at_s, lambda: self._send_at(
                self.frontend.reaches_scheduler_s(at_s, request.input_tokens), request, at_s))

    def _send_at(self, ready_s: float, request: Request, arrival_s: float) -> None:
        """`send` the request at `ready_s` (>= now), through the event queue."""
        timeout = self.env.timeout(max(0.0, ready_s - self.env._now))
        timeout.callbacks.append(lambda _event: self.send(request, arrival_s))

    def call_at(self, at_s: float, action) -> None:
        """Run `action()` at `at_s` (>= now), through the event queue."""
        timeout = self.env.timeout(max(0.0, at_s - self.env._now))
        timeout.callbacks.append(lambda _event: action())

    def arrivals_over(self) -> None:
        """No request arrives any more: the run ends when the last one finishes."""
        self.all_arrived = True
        if self.finished == self.arrived and not self.all_done.triggered:
            self.all_done.succeed()

    def result(self) -> TimedResult:
        on_progress, every = self.sampling.on_progress, self.sampling.progress_every
        if on_progress is not None:
            on_progress(self.finished % every)
        records, replicas = self.records, self.replicas
        ids = records.columns()["request_id"]
        if len(ids) > 1 and np.any(np.diff(ids) < 0):
            records.reorder(np.argsort(ids, kind="stable"))
        figures = [ReplicaFigures(r.index, r.capacity_tokens, r.num_steps, r.busy_s,
                                  r.num_preemptions, r.query_tokens, r.hit_tokens,
                                  r.cache.counters) for r in replicas]
        itl = ItlSegments()
        for r in replicas:  # moved, not copied: each replica's arrays go once appended
            itl.extend(r.itl_segments)
            r.itl_segments = ItlSegments()
        split = self.fleet.disaggregation
        return TimedResult(records, self.log.columns() if self.log is not None else None,
                           figures, itl, self.env._now,
                           sum(r.num_steps for r in replicas) + self.arrived, self.links,
                           [] if self.transfer is None else self.transfer.links,
                           None if split is None else split.prefill_replicas)
