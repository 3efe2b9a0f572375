"""The timed serving simulation: arrivals, a router, replicas, a sampler, on one simpy clock.

`replay_timed` runs one process for arrivals (trace timestamps x `time_scale`), one per
replica (replica.py) and one sampler that records a timeseries row per replica every
`sample_interval_s`. The router is asked once per arrival. The run ends when every request
has finished (completed or rejected); it emits frozen `ServedRecord`s, the samples and the
per-replica figures. `max_run_steps` caps decode-only runs (1 = one timeout per step, the
naive reference the tests compare the fast path against). `rules` gives each request its
cache class (TTL, priority, cacheable). `tiers` (one TierStack or None per cache) puts
host/disk tiers under each replica's HBM; loads are timed at `kv_bytes_per_token`.
Building caches and cost models from a config is serving.py's job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import simpy

from prefixsim.cache import CacheCounters, RadixCache
from prefixsim.cache.classes import CacheRules
from prefixsim.cache.tiers import TierStack
from prefixsim.costmodel import CostModel
from prefixsim.engine.replica import Replica
from prefixsim.engine.request_state import RequestState, ServedRecord, served_record
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.router import Router
from prefixsim.trace import Request

ProgressCallback = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class TimeseriesSample:
    """One replica's state at one sampling instant (a row of timeseries.parquet)."""

    time_s: float
    replica: int
    running: int
    waiting: int
    cache_usage: float
    cached_tokens: int
    private_tokens: int
    rolling_hit_rate: float
    evictions: int
    preemptions: int


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

    records: list[ServedRecord]
    samples: list[TimeseriesSample]
    replicas: list[ReplicaFigures]
    itl_segments: list[tuple[float, int]]
    duration_s: float
    num_events: int


def replay_timed(
    requests: Sequence[Request],
    caches: Sequence[RadixCache],
    cost_model: CostModel,
    scheduler: ContinuousBatching,
    router: Router,
    time_scale: float = 1.0,
    sample_interval_s: float | None = 1.0,
    check_invariants: bool = False,
    on_progress: ProgressCallback | None = None,
    progress_every: int = 500,
    max_run_steps: int | None = None,
    rules: CacheRules | None = None,
    tiers: Sequence[TierStack | None] | None = None,
    kv_bytes_per_token: int = 0,
) -> TimedResult:
    """Serve `requests` (in arrival order) on one replica per cache; see module docstring."""
    env = simpy.Environment()
    states: list[RequestState] = []
    finished: list[RequestState] = []
    all_done = env.event()
    total = len(requests)

    def on_finish(state: RequestState) -> None:
        finished.append(state)
        if on_progress is not None and len(finished) % progress_every == 0:
            on_progress(progress_every)
        if len(finished) == total and not all_done.triggered:
            all_done.succeed()

    tier_stacks = list(tiers) if tiers is not None else [None] * len(caches)
    replicas = [Replica(i, env, cache, cost_model, scheduler, on_finish, check_invariants,
                        max_run_steps, tier_stacks[i], kv_bytes_per_token)
                for i, cache in enumerate(caches)]

    def arrivals():
        for request in requests:
            arrival_s = request.arrival_s * time_scale
            if arrival_s > env.now:
                yield env.timeout(arrival_s - env.now)
            state = RequestState(request, env.now)
            if rules is not None:
                state.rule = rules.for_request(request)
            states.append(state)
            replicas[router.route(request, replicas, env.now)].submit(state)

    samples: list[TimeseriesSample] = []

    def sampler():
        last = [(0, 0)] * len(replicas)
        while not all_done.triggered:
            for replica in replicas:
                cache = replica.cache
                queried = replica.query_tokens - last[replica.index][0]
                hits = replica.hit_tokens - last[replica.index][1]
                last[replica.index] = (replica.query_tokens, replica.hit_tokens)
                used = cache.resident_tokens + cache.reserved_tokens
                samples.append(TimeseriesSample(
                    time_s=env.now, replica=replica.index, running=len(replica.running),
                    waiting=len(replica.waiting), cache_usage=used / replica.capacity_tokens,
                    cached_tokens=cache.resident_tokens, private_tokens=cache.reserved_tokens,
                    rolling_hit_rate=hits / queried if queried else float("nan"),
                    evictions=cache.counters.evicted_pages, preemptions=replica.num_preemptions,
                ))
            yield env.timeout(sample_interval_s) | all_done

    env.process(arrivals())
    if sample_interval_s:
        env.process(sampler())
    if total:
        env.run(until=all_done)
    if on_progress is not None:
        on_progress(len(finished) % progress_every)
    order = sorted(states, key=lambda s: s.request.request_id)
    records = [served_record(s) for s in order]
    figures = [ReplicaFigures(r.index, r.capacity_tokens, r.num_steps, r.busy_s,
                              r.num_preemptions, r.query_tokens, r.hit_tokens,
                              r.cache.counters) for r in replicas]
    itl = [segment for r in replicas for segment in r.itl_segments]
    duration = env.now
    return TimedResult(records, samples, figures, itl, duration,
                       sum(r.num_steps for r in replicas) + total)
