"""A timed run of built components: the simpy engine over the trace, then the figures the
summary needs (requests frame, timeseries, bounds). Writes nothing; summarising is
metrics/summary.py's job (pipeline/road.py calls it).

Under a closed loop (docs/load.md "Closed loops") the run decides what it sends and when:
`num_requests` counts the requests it sent (its rows, as an open loop's stages count the
requests they offered), and the unbounded bound is taken over those requests at the times
they were sent (the rows' `arrival_s`, on the engine clock) where a TTL or request classes
make times matter, or where a staged loop sent fewer requests than the trace holds. Without
either, the bound is the trace's own (it does not depend on the times)."""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pandas as pd
import pyarrow as pa

from prefixsim.analysis.bounds import accepted, unbounded_hit_rate
from prefixsim.cache.pool import PoolFigures
from prefixsim.engine import ProgressCallback
from prefixsim.engine.fleet import Sampling
from prefixsim.engine.gc_pause import paused_gc
from prefixsim.engine.request_state import REJECTED, ServedRecord
from prefixsim.engine.timed import replay_timed
from prefixsim.metrics.facts import TIMED, Bounds, RunFacts
from prefixsim.metrics.requests import records_frame
from prefixsim.metrics.serving import total_counters
from prefixsim.metrics.timeseries import timeseries
from prefixsim.pipeline.build import (
    Components,
    accepted_tokens,
    build_unbounded_cache,
    max_model_len,
    request_ttls,
)
from prefixsim.pipeline.closed_loop import with_session_columns
from prefixsim.trace import Request


@dataclass(frozen=True)
class TraceFigures:
    """What a timed run reads off its trace before the engine runs: the unbounded bound,
    the number of requests and, with pricing, each request's TTL class."""

    bounds: Bounds
    num_requests: int
    request_ttls: list[float | None]


def trace_figures(parts: Components, requests: Sequence[Request]) -> TraceFigures:
    """`TraceFigures` of `requests` (the whole trace, in memory)."""
    config = parts.config
    engine = config.engine
    unbounded = build_unbounded_cache(config.cache, chained=parts.chained)
    served = accepted(requests, accepted_tokens(parts))  # a rejected one meets no cache
    on_engine_clock = served
    if engine.time_scale != 1.0 and unbounded.ttl is not None:
        # the bound must see the gaps the run saw: TTLs run on the engine's clock
        on_engine_clock = [dataclasses.replace(r, arrival_s=r.arrival_s * engine.time_scale)
                           for r in served]
    bounds = Bounds(unbounded_hit_rate(on_engine_clock, unbounded, parts.rules))
    return TraceFigures(bounds, len(requests),
                        request_ttls(config.cache, parts.rules, requests)
                        if parts.pricing is not None else [])


def run_timed(parts: Components, requests: Iterable[Request],
              on_progress: ProgressCallback | None = None,
              figures: TraceFigures | None = None) -> tuple[RunFacts, pd.DataFrame]:
    """Serve `requests` on the components' replicas; returns the run's facts (wall time 0:
    the caller stamps it) and its timeseries frame. `figures`: the trace's, taken already
    (a streamed run's first pass; then `requests` may be any iterable, read once as the
    arrivals come), else taken here from `requests`, a sequence."""
    config = parts.config
    engine = config.engine
    assert parts.fleet is not None
    # Arrow's allocator keeps what the trace reader freed (~120 MB at 1M requests read from
    # Parquet) for reuse by Arrow, which the run hardly uses: hand it back first
    pa.default_memory_pool().release_unused()
    if figures is None:  # the bound first: its tables come and go before the run's
        figures = trace_figures(parts, requests)
    kept: list[Request] | None = None
    if _may_resend(parts) and not isinstance(requests, Sequence):  # a streamed trace, read once
        kept = []
        requests = _keeping(requests, kept)
    sampling = Sampling(record_state=engine.sample_interval_s is not None,
                        check_invariants=engine.check_invariants, on_progress=on_progress,
                        sample_interval_s=engine.sample_interval_s)
    with paused_gc():  # the engine's objects are freed by reference counting (gc_pause.py)
        result = replay_timed(requests, parts.fleet, sampling)
    frame = records_frame(result.records, ServedRecord)
    if parts.sessions is not None:  # a sessions load: session ids and turns (closed_loop.py)
        frame = with_session_columns(frame, parts.sessions)
    samples, sampling = timeseries(result, engine.sample_interval_s)
    # the recorded states (80 bytes per engine event) are spent once sampled; the engine's
    # replicas, which hold the state log and their ITL arrays, are a reference cycle (each
    # replica and its simpy process), so they go only when the cyclic collector runs: now,
    # rather than at some later allocation (0.5 GB at 1M requests). They were made while
    # the collector was paused, so they are all in its youngest generation: collecting
    # that one frees them without walking every older object of the process (1 ms
    # instead of 33 ms at the end of a Mooncake run; a few small cycles made before the
    # run wait for the next automatic pass)
    result = dataclasses.replace(result, states=None)
    gc.collect(0)
    pool = parts.pool_tokens_per_replica
    facts = RunFacts(
        mode=TIMED, config=config, requests=frame, counters=total_counters(result.replicas),
        capacity_tokens=None if pool is None else pool * engine.num_replicas,
        cost_model=parts.cost_model, model=parts.model, gpu=parts.gpu,
        bounds=figures.bounds,
        num_requests=figures.num_requests, wall_time_s=0.0, timed=result,
        pool_tokens_per_replica=pool, pricing=parts.pricing,
        max_model_len=max_model_len(config, parts.model),
        request_ttls=figures.request_ttls,
        sampling=sampling,
        pool=None if parts.shared_pool is None else PoolFigures.of(
            parts.shared_pool, result.pool_links, result.duration_s))
    if config.load.closed_loop:
        facts = as_sent(parts, facts, requests if kept is None else kept)
    return facts, samples


def _may_resend(parts: Components) -> bool:
    """Whether `as_sent` may need the requests again after the run."""
    load = parts.config.load
    return load.closed_loop and (load.stages is not None or parts.rules is not None
                                 or build_unbounded_cache(parts.config.cache).ttl is not None)


def _keeping(requests: Iterable[Request], kept: list[Request]) -> Iterator[Request]:
    """`requests`, each kept in `kept` as it is read."""
    for request in requests:
        kept.append(request)
        yield request


def as_sent(parts: Components, facts: RunFacts, requests: Iterable[Request]) -> RunFacts:
    """A closed loop's `facts` over the requests it sent (module docstring): `requests`
    holds them (in trace order) among others."""
    frame = facts.requests
    all_sent = len(frame) == facts.num_requests  # the trace's count until now
    facts = dataclasses.replace(facts, num_requests=len(frame))
    unbounded = build_unbounded_cache(parts.config.cache, chained=parts.chained)
    if not _may_resend(parts) or (all_sent and unbounded.ttl is None and parts.rules is None):
        return facts
    sent_at = dict(zip(frame["request_id"].tolist(), frame["arrival_s"].tolist(), strict=True))
    sent = [dataclasses.replace(r, arrival_s=sent_at[r.request_id])
            for r in requests if r.request_id in sent_at]
    ttls = (request_ttls(parts.config.cache, parts.rules, sent)
            if parts.pricing is not None else [])
    rejected = set(frame.loc[frame["status"] == REJECTED, "request_id"].tolist())
    served = [r for r in sent if r.request_id not in rejected]  # a rejected one meets no cache
    served.sort(key=lambda r: r.arrival_s)  # the order they were sent in (stable: trace order)
    bounds = dataclasses.replace(
        facts.bounds, unbounded_token_hit_rate=unbounded_hit_rate(served, unbounded, parts.rules))
    return dataclasses.replace(facts, bounds=bounds, request_ttls=ttls)
