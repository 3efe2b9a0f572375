"""A cache-only run of built components: the replay (docs/cache-semantics.md Part A), its
timeseries and its reference bounds. Writes nothing; summarising is metrics/summary.py's
job (pipeline/road.py calls it)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from prefixsim.analysis.bounds import reference_bounds
from prefixsim.cache import CacheCounters
from prefixsim.cache.pool import PoolFigures
from prefixsim.engine import CacheOnlyRecord, ProgressCallback, replay_cache_only
from prefixsim.metrics.facts import CACHE_ONLY, Bounds, RunFacts
from prefixsim.metrics.requests import records_frame, tier_hits
from prefixsim.metrics.timeseries import (
    SamplingInfo,
    cache_only_interval,
    cache_only_timeseries,
)
from prefixsim.pipeline.build import Components, build_cache, request_ttls
from prefixsim.trace import Request


def run_cache_only(parts: Components, requests: Sequence[Request],
                   on_progress: ProgressCallback | None = None
                   ) -> tuple[RunFacts, pd.DataFrame]:
    """Replay `requests` through the components' cache; returns the run's facts (wall time
    0: the caller stamps it) and its timeseries frame."""
    config = parts.config
    cache, tiers = parts.caches[0], parts.tiers[0]
    duration_s = requests[-1].arrival_s if requests else 0.0
    interval_s = cache_only_interval(duration_s, config.engine.sample_interval_s)
    result = replay_cache_only(requests, cache, on_progress=on_progress, tiers=tiers,
                               rules=parts.rules, sample_interval_s=interval_s,
                               pool=parts.shared_pool)
    frame = records_frame(result.records, CacheOnlyRecord)
    samples, sampling = cache_only_timeseries(result.states, frame,
                                              config.cache.capacity_tokens,
                                              config.engine.sample_interval_s, interval_s,
                                              duration_s)
    query = int(frame["input_tokens"].sum())
    hbm_rate = tier_hits(frame)["cache_hit_tokens_hbm"] / max(query, 1)
    bounds = reference_bounds(
        requests, hbm_rate, config.cache.bounds, config.cache.capacity_tokens is None,
        lambda policy, unbounded: build_cache(config.cache.model_copy(update={
            "policy": policy, "policy_params": {}, "pool": None,
            "capacity_tokens": None if unbounded else config.cache.capacity_tokens,
        }), requests, replay_only=True, chained=parts.chained),
        parts.rules,
    )
    ttls = (request_ttls(config.cache, parts.rules, requests)
            if parts.pricing is not None else [])
    facts = cache_only_facts(parts, frame, result.counters, bounds, sampling, ttls,
                             num_requests=len(requests))
    return facts, samples


def cache_only_facts(parts: Components, frame: pd.DataFrame, counters: CacheCounters,
                     bounds: Bounds, sampling: SamplingInfo | None,
                     ttls: list[float | None], orphan_tokens: int | None = None,
                     **more) -> RunFacts:
    """The RunFacts of a cache-only run (this module's and pipeline/streamed.py's), wall
    time 0; `orphan_tokens`: block mode's unreachable tokens at the end, read from the
    cache when not given (a caller that clears the cache first reads them before); `more`
    sets further fields (num_requests, the trace, ...)."""
    config = parts.config
    if orphan_tokens is None:
        orphan_tokens = parts.caches[0].orphan_tokens()
    return RunFacts(
        mode=CACHE_ONLY, config=config, requests=frame, counters=counters,
        capacity_tokens=config.cache.capacity_tokens, cost_model=parts.cost_model,
        model=parts.model, gpu=parts.gpu, bounds=bounds, wall_time_s=0.0,
        orphan_tokens=orphan_tokens, pricing=parts.pricing,
        request_ttls=ttls, sampling=sampling,
        pool=None if parts.shared_pool is None else PoolFigures.of(parts.shared_pool),
        **more)
