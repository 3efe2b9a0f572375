"""One run from a RunConfig to DataFrames and a summary (the public `simulate`).

Resolves plug-in names through their registries, loads the trace, runs the engine and
summarises. It writes nothing: choosing paths and writing files is the CLI's job.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from prefixsim import __version__
from prefixsim.bounds import bounds_summary, unbounded_hit_rate
from prefixsim.cache import RadixCache, SegmentCache, TTLRule, build_policy, replay_cache
from prefixsim.cache.classes import CacheRules, RequestClass
from prefixsim.config import CacheConfig, RunConfig, TraceConfig
from prefixsim.engine import CacheOnlyRecord, ProgressCallback, replay_cache_only
from prefixsim.engine.cache_samples import cache_only_interval, cache_only_timeseries
from prefixsim.errors import InputError
from prefixsim.metrics import cache_summary, records_frame, request_summary
from prefixsim.pricing import (
    chunk_time_function,
    load_pricing,
    prefill_savings,
    pricing_summary,
)
from prefixsim.serving import (
    build_cost_model,
    build_tiers,
    resolve_gpu,
    resolve_model,
    simulate_timed,
)
from prefixsim.trace import (
    DEFAULT_BLOCK_SIZES,
    ReadOptions,
    Request,
    TraceData,
    detect_format,
    read_trace,
)


@dataclass(frozen=True)
class RunResult:
    """What a run produced: per-request rows, timeseries (may be empty), summary scalars."""

    requests: pd.DataFrame
    summary: dict[str, object]
    timeseries: pd.DataFrame = field(default_factory=pd.DataFrame)


def build_cache(
    config: CacheConfig,
    requests: Sequence[Request] | None = None,
    prefill_time_s: Callable[[int, int], float] | None = None,
    replay_only: bool = False,
    time_scale: float = 1.0,
) -> RadixCache | SegmentCache:
    """A fresh cache for the `cache` section (policy resolved through the registry; an
    offline policy such as belady needs `requests`, the trace in replay order; a
    cost-aware one (gdsf) prices recomputation with `prefill_time_s(new, cached)`).
    `replay_only` (a cache-only replay): a SegmentCache, same results and faster, when the
    section allows it (radix mode, a node-uniform policy, no tiers, no request classes).
    `time_scale`: the timed engine's, so an offline policy reads the trace on its clock."""
    ttl_s = config.ttl_s
    if ttl_s is None and any(c.ttl_s is not None for c in config.classes):
        ttl_s = float("inf")  # classes with a TTL need the rule; the rest never expire
    ttl = None if ttl_s is None else TTLRule(ttl_s, config.ttl_mode)
    policy = build_policy(config.policy, requests, prefill_time_s, time_scale)
    plain = (replay_only and config.host_capacity_tokens is None
             and config.disk_capacity_tokens is None and not config.classes
             and config.min_cacheable_tokens == 0)
    return replay_cache(config.capacity_tokens, policy, ttl, config.mode, plain=plain)


def build_rules(config: CacheConfig, seed: int) -> CacheRules | None:
    """Request classes and the minimum cacheable prompt, or None when neither is set."""
    if not config.classes and config.min_cacheable_tokens == 0:
        return None
    classes = [RequestClass(**c.model_dump()) for c in config.classes]
    return CacheRules(classes, config.min_cacheable_tokens, seed)


def request_ttls(config: CacheConfig, rules: CacheRules | None,
                 requests: Sequence[Request]) -> list[float | None]:
    """Each request's TTL (its class's, else the cache's), which prices its cache writes."""
    if rules is None:
        return [config.ttl_s] * len(requests)
    ttls = (rules.for_request(r).ttl_s for r in requests)
    return [config.ttl_s if ttl is None else ttl for ttl in ttls]


def load_trace_data(config: TraceConfig,
                    on_progress: ProgressCallback | None = None) -> TraceData:
    """The trace named by the `trace` section, with skipped-line count and labels;
    `on_progress(n)` is told of every n requests read."""
    if config.path is None:
        raise InputError("no trace given (pass --trace PATH or set trace.path)",
                         field="trace.path")
    options = ReadOptions(
        block_size=config.block_size, max_requests=config.max_requests,
        skip_bad_lines=config.skip_bad_lines, prefix_model=config.prefix_model,
        session_rate_per_s=config.session_rate_per_s, seed=config.seed,
        on_progress=on_progress,
    )
    return read_trace(config.path, config.format, options)


def load_requests(config: TraceConfig) -> list[Request]:
    """The trace named by the `trace` section, in arrival order."""
    return load_trace_data(config).requests


def resolve_trace_defaults(config: RunConfig) -> RunConfig:
    """The config with the trace format detected and the format's block size filled in,
    so the effective config written beside the results says what was actually used."""
    trace = config.trace
    if trace.path is None:
        raise InputError("no trace given (pass --trace PATH or set trace.path)",
                         field="trace.path")
    fmt = trace.format or detect_format(trace.path)
    block_size = trace.block_size or DEFAULT_BLOCK_SIZES.get(fmt)
    return config.model_copy(
        update={"trace": trace.model_copy(update={"format": fmt, "block_size": block_size})}
    )


def simulate(
    config: RunConfig,
    requests: Sequence[Request] | None = None,
    on_progress: ProgressCallback | None = None,
) -> RunResult:
    """Run `config` (on `requests` if given, else on its trace) and summarise."""
    started = time.perf_counter()
    if requests is None:
        requests = load_requests(config.trace)
    model, gpu = resolve_model(config.model), resolve_gpu(config.hardware)
    cost_model = build_cost_model(config, model, gpu)
    chunk_time = chunk_time_function(cost_model)
    if not config.cache_only:
        rules = build_rules(config.cache, config.trace.seed)
        frame, summary, timeseries = simulate_timed(
            config, requests,
            lambda section: build_cache(section, requests, chunk_time,
                                        time_scale=config.engine.time_scale),
            on_progress, rules)
        if config.cache.pricing is not None:
            summary.update(pricing_summary(frame, load_pricing(config.cache.pricing),
                                           request_ttls(config.cache, rules, requests)))
        unbounded = build_cache(config.cache.model_copy(update={"capacity_tokens": None,
                                                                "policy": "lru"}),
                                replay_only=True)
        summary["cache_unbounded_token_hit_rate"] = unbounded_hit_rate(requests, unbounded, rules)
        summary.update(prefill_savings(frame, cost_model, config.hardware.tp,
                                       config.scheduler.max_batched_tokens))
        return RunResult(requests=frame, summary=summary, timeseries=timeseries)
    pricing = None if config.cache.pricing is None else load_pricing(config.cache.pricing)
    cache = build_cache(config.cache, requests, chunk_time, replay_only=True)
    tiers = build_tiers(cache, config.cache)
    rules = build_rules(config.cache, config.trace.seed)
    duration_s = requests[-1].arrival_s if requests else 0.0
    interval_s = cache_only_interval(duration_s, config.engine.sample_interval_s)
    result = replay_cache_only(requests, cache, on_progress=on_progress, tiers=tiers,
                               rules=rules, sample_interval_s=interval_s)
    frame = records_frame(result.records, CacheOnlyRecord)
    samples, about = cache_only_timeseries(result.states, frame, config.cache.capacity_tokens,
                                           config.engine.sample_interval_s, interval_s,
                                           duration_s)
    summary: dict[str, object] = {"mode": "cache_only"}
    summary.update(request_summary(frame))
    summary.update(cache_summary(frame, result.counters, config.cache.capacity_tokens))
    summary["cache_orphan_tokens_end"] = cache.orphan_tokens()
    hbm_rate = summary["cache_hit_tokens_hbm"] / max(summary["cache_query_tokens"], 1)
    summary.update(bounds_summary(
        requests, hbm_rate, config.cache.bounds, config.cache.capacity_tokens is None,
        lambda policy, unbounded: build_cache(config.cache.model_copy(update={
            "policy": policy,
            "capacity_tokens": None if unbounded else config.cache.capacity_tokens,
        }), requests, replay_only=True),
        rules,
    ))
    if pricing is not None:
        summary.update(pricing_summary(frame, pricing,
                                       request_ttls(config.cache, rules, requests)))
    summary.update(prefill_savings(frame, cost_model,
                                   config.hardware.tp, config.scheduler.max_batched_tokens))
    summary["prefill_model"] = f"{model.name} on {config.hardware.tp} x {gpu.name}"
    summary.update(
        {
            "cache_policy": config.cache.policy,
            "cache_ttl_s": config.cache.ttl_s,
            "num_requests": len(requests),
            "seed": config.seed,
            "prefixsim_version": __version__,
            "wall_time_s": time.perf_counter() - started,
        }
    )
    summary.update(about)
    return RunResult(requests=frame, summary=summary, timeseries=samples)
