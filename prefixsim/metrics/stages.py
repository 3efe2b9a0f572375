"""Per-stage figures of a staged load: the `stages` list of summary.json (docs/load.md).

A stage of `load.stages` runs from its start (the durations before it added up in order)
for `duration_s`; a request belongs to the stage its arrival falls in (`stage_index`; the
`stage` column of requests.parquet). Each stage's figures are the run's own figures
(requests.py, serving.py) computed on the stage's rows; only the ITL distribution and the
cache's eviction counters are left out, as the engine keeps them for the whole run. Pure:
the pipeline adds the column and metrics/summary.py the list.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from prefixsim.cache import CacheCounters
from prefixsim.config.load import StageConfig
from prefixsim.metrics.facts import TIMED, RunFacts
from prefixsim.metrics.kept_up import kept_up_keys
from prefixsim.metrics.requests import cache_summary, request_summary
from prefixsim.metrics.serving import serving_summary

# the cache figures a stage's rows can tell (the counters are the whole run's)
STAGE_CACHE_KEYS = (
    "cache_query_tokens", "cache_hit_tokens", "cache_token_hit_rate", "cache_hit_tokens_hbm",
    "cache_hit_tokens_host", "cache_hit_tokens_disk", "cache_hit_tokens_pool",
    "cache_request_hit_rate", "cache_request_weighted_hit_rate",
)


STAGE_KEPT_UP_KEYS = ("kept_up", "ttft_growth")  # the rule on the stage's rows (kept_up.py)


def stage_starts(durations: Iterable[float]) -> list[float]:
    """Each stage's start and, last, the end of the last stage (seconds; the durations
    added in order)."""
    return list(itertools.accumulate(durations, initial=0.0))


def stage_index(arrivals: np.ndarray, stages: Sequence[StageConfig]) -> np.ndarray:
    """The stage each arrival falls in (a stage owns [start, next start))."""
    ends = np.asarray(stage_starts(stage.duration_s for stage in stages)[1:], dtype=float)
    return np.searchsorted(ends, np.asarray(arrivals, dtype=float), side="right")


def with_stage_column(rows: pd.DataFrame, stages: Sequence[StageConfig]) -> pd.DataFrame:
    """`rows` with a `stage` column (int64) last, from their `arrival_s`."""
    stage = stage_index(rows["arrival_s"].to_numpy(), stages).astype(np.int64)
    return rows.assign(stage=stage)


def stage_summaries(facts: RunFacts) -> list[dict[str, Any]]:
    """One dict per stage of `facts.config.load.stages`: its index, offered rate or users,
    start, duration, requests, and the run's figures on its rows. Timed runs add the
    serving figures over the stage's span: from its start to its last request's finish, or
    its duration when that is longer, and whether the fleet kept up in the stage (`kept_up`,
    and `ttft_growth` for a rate stage: metrics/kept_up.py on the stage's rows)."""
    stages = facts.config.load.stages or []
    requests = facts.requests
    which = stage_index(requests["arrival_s"].to_numpy(), stages)
    starts = stage_starts(stage.duration_s for stage in stages)
    summaries = []
    for index, stage in enumerate(stages):
        rows = requests[which == index]
        figures: dict[str, Any] = {
            "stage": index, "rate": stage.rate, "users": stage.users,
            "start_s": starts[index], "duration_s": stage.duration_s,
            "num_requests": len(rows),
        }
        figures.update(request_summary(rows))
        cache = cache_summary(rows, CacheCounters(), None)
        figures.update({key: cache[key] for key in STAGE_CACHE_KEYS})
        if facts.mode == TIMED:
            figures.update(_serving(rows, starts[index], stage.duration_s, facts))
            kept = kept_up_keys(rows, stage.rate is not None, facts.pool_tokens_per_replica,
                                facts.max_model_len)  # an open-loop stage's queue too
            figures.update({key: kept[key] for key in STAGE_KEPT_UP_KEYS if key in kept})
        summaries.append(figures)
    return summaries


def _serving(rows: pd.DataFrame, start_s: float, duration_s: float, facts: RunFacts
             ) -> dict[str, Any]:
    done = rows[rows["status"] == "completed"]
    finish = (done["arrival_s"] + done["e2el_ms"] / 1e3).max() if len(done) else start_s
    span = max(duration_s, float(finish) - start_s)
    engine = facts.config.engine
    figures = serving_summary(rows, span, [], engine.goodput_ttft_ms, engine.goodput_tpot_ms)
    return {key: value for key, value in figures.items() if not key.endswith("_itl_ms")}
