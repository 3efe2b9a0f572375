"""summary.json: the one place a run's summary is assembled.

The pipeline (pipeline/) computes the parts of a run (the requests frame, the engine's
result, bounds, pricing, how the timeseries was sampled, the trace's labels) and hands them
over as one `RunFacts` (facts.py); `summarize` turns them into flat scalars with vLLM's names for
serving figures, `cache_*` for the cache, `cost_*` for prices and metadata last. Every key
is listed and explained in schema.py (and docs/results.md, which a test keeps in step).
Pure: no I/O, no clock (the pipeline measures wall time).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from prefixsim._version import __version__
from prefixsim.accel import code_path
from prefixsim.config.load import LoadConfig
from prefixsim.metrics.facts import CACHE_ONLY, TIMED, Bounds, RunFacts
from prefixsim.metrics.kept_up import KEPT_UP_KEYS, kept_up_keys, with_stages
from prefixsim.metrics.pricing import prefill_savings, pricing_summary
from prefixsim.metrics.requests import cache_summary, pool_summary, request_summary
from prefixsim.metrics.serving import (
    disaggregation_summary,
    replica_summary,
    serving_summary,
    total_counters,
)
from prefixsim.metrics.stages import stage_summaries
from prefixsim.metrics.timeseries import SamplingInfo
from prefixsim.trace.pages import distinct_prefix_tokens


def summarize(facts: RunFacts) -> dict[str, Any]:
    """The flat summary of a run (key order: figures first, metadata after)."""
    if facts.mode == TIMED:
        summary = _timed_figures(facts)
    else:
        summary = _cache_only_figures(facts)
    summary.update(_trace_keys(facts))
    summary.update(load_keys(facts.config.load))
    if facts.config.load.stages is not None:  # docs/load.md, stages
        summary["stages"] = stage_summaries(facts)
        if facts.mode == TIMED:
            summary.update(with_stages({k: summary[k] for k in KEPT_UP_KEYS if k in summary},
                                       summary["stages"]))
    return summary


def _cache_only_figures(facts: RunFacts) -> dict[str, Any]:
    config = facts.config
    summary: dict[str, Any] = {"mode": CACHE_ONLY}
    summary.update(request_summary(facts.requests))
    summary.update(cache_summary(facts.requests, facts.counters, facts.capacity_tokens))
    summary.update(pool_summary(facts.pool))
    summary["cache_orphan_tokens_end"] = facts.orphan_tokens
    summary.update(_bounds_keys(facts.bounds))
    summary.update(_pricing_keys(facts))
    summary.update(_savings_keys(facts))
    summary["prefill_model"] = f"{facts.model.name} on {config.hardware.tp} x {facts.gpu.name}"
    summary.update({
        "cache_policy": config.cache.policy,
        "cache_ttl_s": config.cache.ttl_s,
        "num_requests": facts.num_requests,
        "prefixsim_version": __version__,
        "wall_time_s": facts.wall_time_s,
        **code_path(),
    })
    summary.update(sampling_keys(facts.sampling))
    return summary


def _timed_figures(facts: RunFacts) -> dict[str, Any]:
    config, result = facts.config, facts.timed
    assert result is not None, "a timed summary needs the engine's result"
    engine = config.engine
    summary: dict[str, Any] = {"mode": TIMED}
    summary.update(request_summary(facts.requests))
    summary.update(serving_summary(facts.requests, result.duration_s, result.itl_segments,
                                   engine.goodput_ttft_ms, engine.goodput_tpot_ms))
    summary.update(cache_summary(facts.requests, total_counters(result.replicas),
                                 facts.capacity_tokens))
    summary.update(pool_summary(facts.pool))
    summary.update(replica_summary(facts.requests, result.replicas, result.duration_s))
    summary.update(disaggregation_summary(result))
    load = config.load
    summary.update(kept_up_keys(facts.requests, not load.closed_loop and load.stages is None,
                                facts.pool_tokens_per_replica, facts.max_model_len))
    summary.update(_context_keys(facts))
    wall = facts.wall_time_s
    summary.update({
        "model": facts.model.name, "gpu": facts.gpu.name, "tp": config.hardware.tp,
        "replicas": engine.num_replicas, "router": config.router.name,
        "cost_model": config.cost_model.name,
        "kv_pool_tokens_per_replica": facts.pool_tokens_per_replica,
        "max_model_len": facts.max_model_len,
        "serving_engine": config.serving.engine,
        **dataclasses.asdict(config.scheduler.limits(config.serving.engine, facts.gpu,
                                                     facts.model.max_model_len)),
        "cache_policy": config.cache.policy, "cache_ttl_s": config.cache.ttl_s,
        "num_requests": facts.num_requests, "num_events": result.num_events,
        "prefixsim_version": __version__, "wall_time_s": wall,
        "simulated_s_per_wall_s": result.duration_s / wall if wall > 0 else float("nan"),
        **code_path(),
    })
    summary.update(facts.cost_model.describe())  # a fitted model names its profile
    summary.update(sampling_keys(facts.sampling))
    summary.update(_pricing_keys(facts))
    summary["cache_unbounded_token_hit_rate"] = facts.bounds.unbounded_token_hit_rate
    summary.update(_savings_keys(facts))
    return summary


def _context_keys(facts: RunFacts) -> dict[str, Any]:
    """`max_model_len_warning` when vLLM would refuse to start a replica: one request of
    max_model_len must fit its KV pool (docs/cost-models.md "Models"). Only for a pool
    derived from the GPU's memory (not `cache.capacity_tokens`)."""
    limit, pool = facts.max_model_len, facts.pool_tokens_per_replica
    if limit is None or pool is None or facts.config.cache.capacity_tokens is not None:
        return {}
    longest = facts.model.longest_context(pool)
    if longest is None or longest >= limit:
        return {}
    return {"max_model_len_warning": (
        f"vLLM would not start this replica: one request of max_model_len {limit:,} tokens "
        f"needs more KV than its pool of {pool:,} tokens holds; it starts with "
        f"--max-model-len {longest:,} or less, which serves the same requests as this run "
        "(longer ones are rejected either way), or with more GPUs per replica (--tp), a "
        "larger GPU or FP8 weights or KV")}


def _bounds_keys(bounds: Bounds) -> dict[str, float]:
    keys = {"cache_unbounded_token_hit_rate": bounds.unbounded_token_hit_rate}
    if bounds.belady_token_hit_rate is not None:
        keys["cache_belady_token_hit_rate"] = bounds.belady_token_hit_rate
    return keys


def _pricing_keys(facts: RunFacts) -> dict[str, Any]:
    if facts.pricing is None:
        return {}
    return pricing_summary(facts.requests, facts.pricing, facts.request_ttls)


def _savings_keys(facts: RunFacts) -> dict[str, Any]:
    config = facts.config
    budget = config.scheduler.limits(config.serving.engine, facts.gpu,
                                     facts.model.max_model_len).max_batched_tokens
    return prefill_savings(facts.requests, facts.cost_model, config.hardware.tp, budget)


def sampling_keys(info: SamplingInfo | None) -> dict[str, Any]:
    """timeseries_interval_s, timeseries_rows and, when the row cap coarsened the interval,
    timeseries_warning."""
    if info is None:
        return {}
    keys: dict[str, Any] = {"timeseries_interval_s": info.used_s, "timeseries_rows": info.rows}
    if info.coarsened:
        span = f"{info.duration_s:,.0f} simulated s"
        if info.num_replicas is not None:
            span += f" x {info.num_replicas} replicas"
        keys["timeseries_warning"] = (
            f"timeseries sampled every {info.used_s:g} s instead of {info.requested_s:g} s "
            f"to stay under {info.max_rows:,} rows ({span})")
    return keys


LOAD_KEYS = ("type", "rate_scale", "rate", "users", "think_time_s", "seed")


def load_keys(load: LoadConfig) -> dict[str, Any]:
    """`load_type` and the load's set figures (`load_rate`, `load_users`, ...), for a run
    whose load is not the trace's own times (docs/load.md); none otherwise, so a run with
    no `load` section has the summary it always had."""
    if load == LoadConfig():
        return {}
    set_keys = load.model_dump(include=set(LOAD_KEYS), exclude_none=True)
    if load.type != "poisson":
        set_keys.pop("seed", None)
    if load.type != "trace":
        set_keys.pop("rate_scale", None)
    return {f"load_{key}": set_keys[key] for key in LOAD_KEYS if key in set_keys}


def _trace_keys(facts: RunFacts) -> dict[str, Any]:
    """The command line and the trace's skipped lines and labels (format, detected
    settings), when the pipeline read the trace itself."""
    keys: dict[str, Any] = {}
    if facts.command is not None:
        keys["command"] = facts.command
    arrivals = facts.requests["arrival_s"]
    keys["trace_span_s"] = float(arrivals.max() - arrivals.min()) if len(arrivals) else 0.0
    if facts.trace is not None:
        keys["trace_distinct_prefix_tokens"] = (
            distinct_prefix_tokens(facts.trace.requests)
            if facts.distinct_prefix_tokens is None else facts.distinct_prefix_tokens)
        keys["trace_skipped_lines"] = facts.trace.skipped_lines
        keys["trace_time_shift_s"] = facts.trace.time_shift_s
        keys["trace_reordered_rows"] = facts.trace.reordered_rows
        keys.update({f"trace_{k}": v for k, v in facts.trace.labels.items()})
    return keys
