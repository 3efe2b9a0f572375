"""The timed serving simulation: arrivals, a router and replicas on one simpy clock.

`replay_timed` runs one process for arrivals (trace timestamps x `time_scale`) and one per
replica (replica.py). The router is asked once per arrival. The run ends when every request
has finished (completed or rejected); it emits frozen `ServedRecord`s, the per-replica
figures and (with `record_state`) the replicas' state after every change as column arrays
(state_log.py), from which metrics/timeseries.py derives timeseries.parquet after the run:
no process wakes up to sample, so the cost follows engine events, not simulated time.
`max_run_steps` caps decode-only runs (1 = one timeout per step, the naive reference the
tests compare the fast path against). `rules` gives each request its cache class (TTL,
priority, cacheable). `tiers` (one TierStack or None per cache) puts host/disk tiers under
each replica's HBM; loads are timed at `kv_bytes_per_token`. `pool` (cache/pool.py) is a KV
pool all replicas share, each over a link of its own (`pool_links` in the result).
`disaggregation` (engine/disaggregation.py) makes the first replicas prefill and the rest
decode; the router chooses among the prefill replicas. Building
caches and cost models from a config is pipeline/build.py's job. No pandas here: records only.
The cyclic garbage collector is paused while the simulation runs (`_cyclic_gc_paused`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import simpy

from prefixsim.cache import CacheCounters, RadixCache
from prefixsim.cache.classes import CacheRules
from prefixsim.cache.pool import LinkDirection, PoolLink, SharedPool
from prefixsim.cache.tiers import TierStack
from prefixsim.costmodel import CostModel
from prefixsim.engine.disaggregation import DecodeReplica, Disaggregation, KVTransfer
from prefixsim.engine.itl import ItlSegments
from prefixsim.engine.records import RecordTable
from prefixsim.engine.replica import CatchUps, Replica
from prefixsim.engine.request_state import RequestState, ServedRecord, served_record
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.state_log import StateLog
from prefixsim.router import Router
from prefixsim.router.protocol import IndexedRouter
from prefixsim.trace import Request
from prefixsim.trace.columns import RequestColumns

ProgressCallback = Callable[[int], None]
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


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the run. The engine makes millions of
    short-lived objects (pages, heap entries, events, rows), freed by reference counting;
    the collector's passes over them found nothing and cost about a tenth of the run. The
    few cycles (a replica and its simpy process) live as long as the run; the previous
    setting is restored after it, and anything cyclic left is collected then as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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


def replay_timed(
    requests: Iterable[Request],
    caches: Sequence[RadixCache],
    cost_model: CostModel,
    scheduler: ContinuousBatching,
    router: Router,
    *,
    time_scale: float = 1.0,
    record_state: bool = True,
    check_invariants: bool = False,
    on_progress: ProgressCallback | None = None,
    progress_every: int = 500,
    max_run_steps: int | None = None,
    rules: CacheRules | None = None,
    tiers: Sequence[TierStack | None] | None = None,
    kv_bytes_per_token: int = 0,
    pool: SharedPool | None = None,
    disaggregation: Disaggregation | None = None,
) -> TimedResult:
    """Serve `requests` (in arrival order; any iterable, read as the arrivals come) on one
    replica per cache; see module docstring. A request's state is dropped once it has its
    record, so memory holds the caches and the requests in flight."""
    env = simpy.Environment()
    emission_s = cost_model.serving_overheads.emission_s
    records = RecordTable(ServedRecord)
    count = {"arrived": 0, "finished": 0, "all_arrived": False}
    all_done = env.event()

    def on_finish(state: RequestState) -> None:
        records.append(served_record(state, emission_s))
        count["finished"] += 1
        finished = count["finished"]
        if on_progress is not None and finished % progress_every == 0:
            on_progress(progress_every)
        if count["all_arrived"] and finished == count["arrived"] and not all_done.triggered:
            all_done.succeed()

    tier_stacks = list(tiers) if tiers is not None else [None] * len(caches)
    log = StateLog() if record_state else None
    links = [] if pool is None else [PoolLink(pool.spec) for _ in caches]
    if pool is not None:
        pool.clock = lambda: env.now
    transfer = None
    if disaggregation is not None:
        if disaggregation.num_replicas != len(caches):
            raise ValueError("disaggregation needs one cache per prefill and decode replica")
        transfer = KVTransfer(disaggregation, kv_bytes_per_token, cost_model.transfer_time_s)

    def replica(i: int, cache: RadixCache) -> Replica:
        args = (i, env, cache, cost_model, scheduler, on_finish, check_invariants,
                max_run_steps, tier_stacks[i], kv_bytes_per_token, log)
        kwargs = {"pool": pool, "link": links[i] if links else None}
        if transfer is not None and i >= disaggregation.prefill_replicas:
            return DecodeReplica(*args, transfer=transfer, **kwargs)
        return Replica(*args, transfer=transfer, **kwargs)

    replicas = [replica(i, cache) for i, cache in enumerate(caches)]
    catch_ups = CatchUps()
    for r in replicas:
        r.catch_ups = catch_ups
    routed = replicas  # the replicas the router chooses among (prefill ones, disaggregated)
    if transfer is not None:
        routed = replicas[:disaggregation.prefill_replicas]
        transfer.decoders = replicas[disaggregation.prefill_replicas:]
    indexed = isinstance(router, IndexedRouter) and not any(cache.block for cache in caches)
    if indexed:
        router.bind_caches([r.cache for r in routed], lambda: env.now)
    # a router reading the caches live expires pages of TTL caches (R11) on every replica it
    # looks at (one following them through an index changes nothing)
    record_all = not indexed and any(cache.ttl is not None for cache in caches)

    frontend_s = cost_model.serving_overheads.frontend_s

    def arrivals():
        for request in _in_blocks(requests):
            arrival_s = request.arrival_s * time_scale
            if arrival_s + frontend_s > env.now:  # the request reaches the scheduler then
                yield env.timeout(arrival_s + frontend_s - env.now)
            state = RequestState(request, env.now - frontend_s)
            if rules is not None:
                state.rule = rules.for_request(request)
            count["arrived"] += 1
            now = env.now
            catch_ups.run_until(now)  # deferred evictions due by now, before the router looks
            chosen = routed[router.route(request, routed, now)]
            chosen.submit(state)
            if log is not None:
                for other in routed if record_all else (chosen,):
                    log.record(other)
        count["all_arrived"] = True
        if count["finished"] == count["arrived"] and not all_done.triggered:
            all_done.succeed()

    env.process(arrivals())
    with _cyclic_gc_paused():
        env.run(until=all_done)
    if on_progress is not None:
        on_progress(count["finished"] % progress_every)
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
    duration = env.now
    state_columns = log.columns() if log is not None else None
    return TimedResult(records, state_columns, figures, itl, duration,
                       sum(r.num_steps for r in replicas) + count["arrived"], links,
                       [] if transfer is None else transfer.links,
                       None if disaggregation is None else disaggregation.prefill_replicas)
