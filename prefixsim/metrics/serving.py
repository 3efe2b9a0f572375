"""Serving figures of a timed run, named as vLLM's benchmarks name them (pure functions).

From the requests frame (one row per ServedRecord) and the engine's per-replica figures:
`duration`, `request_throughput`, `output_throughput`, `total_token_throughput`,
`request_goodput` (null without an SLO),
`{mean,median,std,p50,p90,p95,p99}_{ttft,tpot,itl,e2el}_ms`, and
`replica{i}_*` figures. Latency distributions are over completed requests. ITL comes from
the engine's segments (gap, tokens produced): each step with its time and the tokens it
produced, each decode-only run with its mean step time (exact for mixed steps, within a run's
context growth for decode runs), and the stall of a resumed request, from its last token
before a preemption to its next one, as one gap (vLLM's ITL includes it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields

import numpy as np
import pandas as pd

from prefixsim.cache import CacheCounters
from prefixsim.metrics.requests import distribution

STATS = ("mean", "median", "std", "p50", "p90", "p95", "p99")


def weighted_distribution(segments: Sequence[tuple[float, int]], name: str,
                          scale: float = 1e3) -> dict[str, float]:
    """`distribution` of values given as (value, count) pairs, values times `scale` (an
    ItlSegments, engine/itl.py, hands over its arrays without building the pairs)."""
    if not len(segments):
        return {f"{stat}_{name}": float("nan") for stat in STATS}
    arrays = getattr(segments, "arrays", None)  # engine/itl.py's ItlSegments: by column
    if arrays is not None:
        gaps, tokens = arrays()
        values = gaps * scale
        weights = tokens.astype(float)
    else:
        values = np.array([v for v, _ in segments], dtype=float) * scale
        weights = np.array([w for _, w in segments], dtype=float)
    order = np.argsort(values, kind="stable")
    values, weights = values[order], weights[order]
    cumulative = np.cumsum(weights)
    total = cumulative[-1]
    mean = float(np.sum(values * weights) / total)

    def pct(q: float) -> float:  # the lower value at rank q (numpy's "inverted_cdf")
        return float(values[np.searchsorted(cumulative, q / 100 * total, side="left")])

    std = float(np.sqrt(np.sum(weights * (values - mean) ** 2) / total))
    return {
        f"mean_{name}": mean, f"median_{name}": pct(50), f"std_{name}": std,
        f"p50_{name}": pct(50), f"p90_{name}": pct(90), f"p95_{name}": pct(95),
        f"p99_{name}": pct(99),
    }


def _completed(requests: pd.DataFrame) -> np.ndarray:
    """Which rows completed, as a numpy mask: the figures select columns with it rather
    than copying the whole frame (a frame of 1M requests is ~200 MB)."""
    return (requests["status"] == "completed").to_numpy(dtype=bool)


def serving_summary(
    requests: pd.DataFrame,
    duration_s: float,
    itl_segments: Sequence[tuple[float, int]],  # or an ItlSegments
    goodput_ttft_ms: float | None = None,
    goodput_tpot_ms: float | None = None,
) -> dict[str, float | int | None]:
    """Throughputs, goodput and latency distributions (vLLM benchmark keys)."""
    completed = _completed(requests)

    def done(column: str) -> np.ndarray:  # a column over completed requests (no frame copy)
        return requests[column].to_numpy()[completed]

    num_done = int(np.count_nonzero(completed))
    duration = duration_s if duration_s > 0 else float("nan")
    output = int(done("output_tokens").sum())
    total = int(done("input_tokens").sum()) + output
    slo = goodput_ttft_ms is not None or goodput_tpot_ms is not None
    good = np.ones(num_done, dtype=bool)
    if goodput_ttft_ms is not None:
        good &= done("ttft_ms") <= goodput_ttft_ms
    if goodput_tpot_ms is not None:
        tpot = done("tpot_ms")
        good &= np.isnan(tpot) | (tpot <= goodput_tpot_ms)
    summary: dict[str, float | int | None] = {
        "duration": duration_s,
        "request_throughput": num_done / duration,
        "output_throughput": output / duration,
        "total_token_throughput": total / duration,
        "request_goodput": int(good.sum()) / duration if slo else None,
        "rejected": int((requests["status"] == "rejected").sum()),
        "num_preemptions": int(requests["preemptions"].sum()),
    }
    for name in ("ttft", "tpot", "e2el"):
        values = done(f"{name}_ms").astype(float, copy=False)
        summary.update(distribution(values[~np.isnan(values)], f"{name}_ms"))
    summary.update(weighted_distribution(itl_segments, "itl_ms"))
    return summary


def replica_summary(requests: pd.DataFrame, figures: Sequence, duration_s: float
                    ) -> dict[str, float | int]:
    """Per-replica figures as flat `replica{i}_*` keys."""
    summary: dict[str, float | int] = {}
    done = requests["replica"].to_numpy()[_completed(requests)]
    for fig in figures:
        prefix = f"replica{fig.replica}_"
        summary[prefix + "completed"] = int(np.count_nonzero(done == fig.replica))
        summary[prefix + "kv_pool_tokens"] = fig.capacity_tokens
        summary[prefix + "busy_fraction"] = fig.busy_s / duration_s if duration_s else 0.0
        summary[prefix + "steps"] = fig.num_steps
        summary[prefix + "preemptions"] = fig.preemptions
        summary[prefix + "cache_token_hit_rate"] = (
            fig.hit_tokens / fig.query_tokens if fig.query_tokens else 0.0)
        summary[prefix + "cache_evictions"] = fig.counters.evicted_pages
    return summary


def total_counters(figures: Sequence) -> CacheCounters:
    """The replicas' cache counters added up (peak: the largest single replica)."""
    total = CacheCounters()
    for fig in figures:
        for f in fields(CacheCounters):
            mine, theirs = getattr(total, f.name), getattr(fig.counters, f.name)
            merged = max(mine, theirs) if f.name.startswith("peak") else mine + theirs
            setattr(total, f.name, merged)
    return total


def disaggregation_summary(result) -> dict[str, float | int]:
    """Disaggregated serving's pools (engine/disaggregation.py): replicas per role, their
    mean busy share, and the prefill -> decode KV links' bytes and busiest busy share."""
    prefill = result.num_prefill_replicas
    if prefill is None:
        return {}
    duration = result.duration_s
    share = [fig.busy_s / duration if duration else 0.0 for fig in result.replicas]
    links = result.transfer_links
    return {
        "prefill_replicas": prefill,
        "decode_replicas": len(result.replicas) - prefill,
        "prefill_busy_fraction": float(np.mean(share[:prefill])),
        "decode_busy_fraction": float(np.mean(share[prefill:])),
        "kv_transfer_bytes": sum(link.bytes for link in links),
        "kv_transfer_busy_share": max(link.busy_s for link in links) / duration
        if duration else 0.0,
    }
