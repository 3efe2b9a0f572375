"""Records -> pandas DataFrames -> flat summary scalars (pure functions, no I/O).

Summary keys follow vLLM's benchmark names where they exist (`completed`, `failed`,
`total_input_tokens`, ...); cache keys are prefixed `cache_`. Plotting lives in report/.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields

import numpy as np
import pandas as pd
import pyarrow as pa

from prefixsim.cache import CacheCounters
from prefixsim.cache.idle_ages import AgeHistogram
from prefixsim.cache.pool import PoolFigures
from prefixsim.engine.records import RecordTable

AGE_QUANTILES = ((10, 0.1), (50, 0.5), (90, 0.9))


def records_frame(records: Sequence[object], record_type: type) -> pd.DataFrame:
    """One row per record; columns are the record's field names, in declaration order
    (a frozen dataclass or a named tuple). A RecordTable's columns go in without a copy,
    its strings as Arrow-backed columns, and the frame keeps them apart (no block of all
    the numbers copied together: a 1M-request timed run's records are ~170 MB)."""
    names = list(getattr(record_type, "_fields", None) or [f.name for f in fields(record_type)])
    if isinstance(records, RecordTable):
        columns = {name: pd.array(values, dtype=pd.ArrowDtype(values.type))
                   if isinstance(values, pa.Array) else values
                   for name, values in records.columns().items()}
        return pd.DataFrame(columns, columns=names, copy=False)
    columns = {name: [getattr(r, name) for r in records] for name in names}
    return pd.DataFrame(columns, columns=names)


def cache_summary(
    requests: pd.DataFrame, counters: CacheCounters, capacity_tokens: int | None
) -> dict[str, float | int | None]:
    """Hit rates and cache activity of a replay (docs/cache-semantics.md Part A figures).
    Rejected requests (never served) count in no hit rate."""
    requests = served(requests)
    query = int(requests["input_tokens"].sum())
    hits = int(requests["cached_tokens"].sum())
    num = len(requests)
    return {
        "cache_query_tokens": query,
        "cache_hit_tokens": hits,
        "cache_token_hit_rate": hits / query if query else 0.0,
        **tier_hits(requests),
        "cache_request_hit_rate": float((requests["cached_tokens"] > 0).mean()) if num else 0.0,
        "cache_request_weighted_hit_rate": request_weighted_hit_rate(requests),
        "cache_evictions": counters.evicted_pages,
        "cache_evicted_tokens": counters.evicted_tokens,
        "cache_expirations": counters.expired_pages,
        "cache_expired_tokens": counters.expired_tokens,
        "cache_inserted_tokens": counters.inserted_tokens,
        "cache_peak_tokens": counters.peak_tokens,
        "cache_capacity_tokens": capacity_tokens,
        **age_quantiles("hit", counters.hit_ages),
        **age_quantiles("evicted", counters.evicted_ages),
        **age_quantiles("expired", counters.expired_ages),
    }


def request_weighted_hit_rate(requests: pd.DataFrame) -> float:
    """The mean over requests of cached_tokens / input_tokens (each request counts once,
    however long), beside the token-weighted `cache_token_hit_rate`."""
    inputs = requests["input_tokens"].to_numpy(dtype=float)
    if not len(inputs):
        return 0.0
    cached = requests["cached_tokens"].to_numpy(dtype=float)
    return float(np.mean(np.divide(cached, inputs, out=np.zeros_like(cached),
                                   where=inputs > 0)))


def age_quantiles(event: str, histogram: AgeHistogram) -> dict[str, float | None]:
    """`cache_{event}_age_p{10,50,90}_s`: idle ages of pages at `event` (cache/idle_ages.py;
    None when no page had that event)."""
    return {f"cache_{event}_age_p{pct}_s": histogram.quantile(q) for pct, q in AGE_QUANTILES}


def tier_hits(requests: pd.DataFrame) -> dict[str, int]:
    """Hit tokens by the tier they were found in (R15, R18); all HBM without lower tiers."""
    hits = int(requests["cached_tokens"].sum())
    below = {name: int(requests[f"cached_tokens_{name}"].sum())
             if f"cached_tokens_{name}" in requests else 0 for name in ("host", "disk", "pool")}
    return {
        "cache_hit_tokens_hbm": hits - sum(below.values()),
        **{f"cache_hit_tokens_{name}": tokens for name, tokens in below.items()},
    }


def served(requests: pd.DataFrame) -> pd.DataFrame:
    """The requests that were served (every status but `rejected`)."""
    return requests[requests["status"] != "rejected"]


def request_summary(requests: pd.DataFrame) -> dict[str, float | int]:
    """Counts over every request and token totals over the completed ones (as vLLM's
    benchmark counts them: a rejected request's tokens were never processed)."""
    status = requests["status"]
    done = requests[status == "completed"]
    return {
        "completed": int((status == "completed").sum()),
        "failed": int((status != "completed").sum()),
        "total_input_tokens": int(done["input_tokens"].sum()),
        "total_output_tokens": int(done["output_tokens"].sum()),
    }


def distribution(values: Sequence[float] | np.ndarray, name: str) -> dict[str, float]:
    """mean/median/std/p50/p90/p95/p99 of `values` as `{stat}_{name}` keys."""
    array = np.asarray(values, dtype=float)
    if array.size == 0:
        return {f"{stat}_{name}": float("nan") for stat in
                ("mean", "median", "std", "p50", "p90", "p95", "p99")}
    p50, p90, p95, p99 = np.percentile(array, [50, 90, 95, 99])
    return {
        f"mean_{name}": float(array.mean()),
        f"median_{name}": float(np.median(array)),
        f"std_{name}": float(array.std()),
        f"p50_{name}": float(p50),
        f"p90_{name}": float(p90),
        f"p95_{name}": float(p95),
        f"p99_{name}": float(p99),
    }


def pool_summary(figures: PoolFigures | None) -> dict[str, float | int | None]:
    """`cache_pool_*` figures of the shared KV pool (R18); none without one."""
    if figures is None:
        return {}
    counters = figures.counters
    return {
        "cache_pool_capacity_tokens": figures.capacity_tokens,
        "cache_pool_peak_tokens": counters.peak_tokens,
        "cache_pool_inserted_tokens": counters.inserted_tokens,
        "cache_pool_evictions": counters.evicted_pages,
        "cache_pool_expirations": counters.expired_pages,
        "cache_pool_read_tokens": figures.read_tokens,
        "cache_pool_write_tokens": figures.write_tokens,
        "cache_pool_read_bytes": figures.read_bytes,
        "cache_pool_write_bytes": figures.write_bytes,
        "cache_pool_link_busy_share": figures.busiest_link_share,
    }
