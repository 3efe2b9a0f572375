"""What a run's summary is made of (`RunFacts`), its reference bounds (`Bounds`) and the two
run modes (`CACHE_ONLY`, `TIMED`): the inputs of metrics/summary.py's `summarize`, kept apart
so that the parts computing them (analysis/bounds.py, pipeline/) need not import the
summary builder.

Leaves out turning them into summary keys (summary.py) and computing them (pipeline/).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from prefixsim.cache import CacheCounters
from prefixsim.cache.pool import PoolFigures
from prefixsim.config import RunConfig
from prefixsim.costmodel import CostModel
from prefixsim.engine.timed import TimedResult
from prefixsim.metrics.pricing import Pricing
from prefixsim.metrics.timeseries import SamplingInfo
from prefixsim.presets import GPUSpec, ModelSpec
from prefixsim.trace import TraceData

CACHE_ONLY = "cache_only"
TIMED = "timed"


@dataclass(frozen=True)
class Bounds:
    """Reference token hit rates of a run: the unbounded cache and (when asked for) belady
    at the run's capacity (computed by analysis/bounds.py)."""

    unbounded_token_hit_rate: float
    belady_token_hit_rate: float | None = None


@dataclass(frozen=True)
class RunFacts:
    """Everything a summary is made of, as the pipeline computed it.

    `capacity_tokens`: the whole run's HBM cache (all replicas; None: unbounded).
    `timed`: the timed engine's result (None in cache-only mode), whose replicas each held
    `pool_tokens_per_replica`. `orphan_tokens`: block-mode pages left unreachable at the end
    (cache-only). `request_ttls`: each request's TTL, which prices its cache writes.
    `trace`: the trace as read (its labels and skipped lines go in the summary).
    `pool`: the shared KV pool's figures (R18), None without one.
    `distinct_prefix_tokens`: the trace's, when counted as it streamed (else from `trace`).
    `max_model_len`: the longest prompt plus output a replica accepted (timed; None: no
    limit but its KV pool).
    """

    mode: str
    config: RunConfig
    requests: pd.DataFrame
    counters: CacheCounters
    capacity_tokens: int | None
    cost_model: CostModel
    model: ModelSpec
    gpu: GPUSpec
    bounds: Bounds
    num_requests: int
    wall_time_s: float
    timed: TimedResult | None = None
    pool_tokens_per_replica: int | None = None
    orphan_tokens: int | None = None
    pricing: Pricing | None = None
    request_ttls: list[float | None] = field(default_factory=list)
    sampling: SamplingInfo | None = None
    trace: TraceData | None = None
    command: str | None = None
    pool: PoolFigures | None = None
    max_model_len: int | None = None
    distinct_prefix_tokens: int | None = None
