"""A timed run from a RunConfig: presets, KV pools, caches, cost model, router, engine.

Resolves the timed sections (serving_config.py) through their registries and presets, sizes
each replica's KV pool (cache-spec R13: memory x utilisation - weights/tp - activation
reserve, over KV bytes per token), runs `replay_timed` and summarises with vLLM's names.
`cache.capacity_tokens`, when set, replaces the computed pool. Writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import pandas as pd

from prefixsim import __version__
from prefixsim.cache import RadixCache
from prefixsim.cache.classes import CacheRules
from prefixsim.cache.tiers import TierStack, build_tier_stack
from prefixsim.config import CacheConfig, RunConfig
from prefixsim.costmodel import COST_MODELS, CostModel
from prefixsim.engine.request_state import ServedRecord
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import ProgressCallback, replay_timed
from prefixsim.errors import InputError
from prefixsim.metrics import cache_summary, records_frame, request_summary
from prefixsim.presets import (
    GIB,
    GPUSpec,
    ModelSpec,
    get_gpu,
    get_model,
    kv_pool_tokens,
    load_custom_presets,
)
from prefixsim.router import ROUTERS
from prefixsim.serving_config import HardwareConfig, ModelConfig
from prefixsim.serving_metrics import replica_summary, serving_summary, total_counters
from prefixsim.serving_timeseries import timeseries
from prefixsim.trace import Request

CacheFactory = Callable[[CacheConfig], RadixCache]
DTYPE_BYTES = {"bf16": 2, "fp8": 1}


def resolve_model(config: ModelConfig) -> ModelSpec:
    """The model preset, or the custom model of the same name from `presets_file`."""
    if config.presets_file is not None:
        models, _ = load_custom_presets(config.presets_file)
        if config.name in models:
            return models[config.name]
    return get_model(config.name)


def resolve_gpu(config: HardwareConfig) -> GPUSpec:
    """The GPU preset, or the custom GPU of the same name from `presets_file`."""
    if config.presets_file is not None:
        _, gpus = load_custom_presets(config.presets_file)
        if config.gpu in gpus:
            return gpus[config.gpu]
    return get_gpu(config.gpu)


def build_tiers(cache: RadixCache, config: CacheConfig) -> TierStack | None:
    """Host DRAM and disk tiers under `cache` (R15), or None when neither is configured."""
    return build_tier_stack(cache, config.host_capacity_tokens, config.host_bandwidth_gb_s,
                            config.disk_capacity_tokens, config.disk_bandwidth_gb_s,
                            config.tier_min_load_tokens)


def replica_pool_tokens(config: RunConfig, model: ModelSpec, gpu: GPUSpec) -> int:
    """KV pool of one replica in tokens (or cache.capacity_tokens when set)."""
    if config.cache.capacity_tokens is not None:
        return config.cache.capacity_tokens
    hw = config.hardware
    pool = kv_pool_tokens(
        model, gpu, hw.tp, hw.memory_utilization, int(hw.activation_reserve_gib * GIB),
        DTYPE_BYTES[config.model.weight_dtype], DTYPE_BYTES[config.model.kv_dtype])
    if pool <= 0:
        raise InputError(
            f"{model.name} does not fit on {hw.tp} x {gpu.name} with memory_utilization "
            f"{hw.memory_utilization}: no memory left for KV (raise --tp or use "
            "--weight-dtype fp8)", field="hardware.tp")
    return pool


def build_cost_model(config: RunConfig, model: ModelSpec, gpu: GPUSpec) -> CostModel:
    """The configured cost model (registry), with the dtypes of the model section."""
    params = dict(config.cost_model.params)
    if config.cost_model.profile is not None:
        params.setdefault("profile", config.cost_model.profile)
    if config.cost_model.name == "roofline":
        params.setdefault("weight_dtype_bytes", DTYPE_BYTES[config.model.weight_dtype])
        params.setdefault("kv_dtype_bytes", DTYPE_BYTES[config.model.kv_dtype])
    try:
        return COST_MODELS.build(config.cost_model.name, model=model, gpu=gpu,
                                 tp=config.hardware.tp, **params)
    except (TypeError, ValueError) as exc:
        raise InputError(str(exc), field="cost_model.params") from None


def simulate_timed(
    config: RunConfig,
    requests: Sequence[Request],
    build_cache: CacheFactory,
    on_progress: ProgressCallback | None = None,
    rules: CacheRules | None = None,
) -> tuple[pd.DataFrame, dict[str, object], pd.DataFrame]:
    """Run the timed engine; returns (requests frame, summary, timeseries frame)."""
    started = time.perf_counter()
    if getattr(config.cache, "bounds", False):
        raise InputError("bounds are cache-only for now; pass --cache-only",
                         field="cache.bounds")
    model, gpu = resolve_model(config.model), resolve_gpu(config.hardware)
    pool = replica_pool_tokens(config, model, gpu)
    cache_config = config.cache.model_copy(update={"capacity_tokens": pool})
    caches = [build_cache(cache_config) for _ in range(config.engine.replicas)]
    tiers = [build_tiers(cache, config.cache) for cache in caches]
    # each of the tp GPUs moves its share of the KV over its own link, in parallel
    kv_bytes_per_gpu = model.kv_bytes_per_token(DTYPE_BYTES[config.model.kv_dtype]) // max(
        config.hardware.tp, 1)
    cost_model = build_cost_model(config, model, gpu)
    try:
        router = ROUTERS.build(config.router.name, **config.router.params)
    except (TypeError, ValueError) as exc:
        raise InputError(str(exc), field="router.params") from None
    scheduler = ContinuousBatching(config.scheduler.max_batched_tokens,
                                   config.scheduler.max_num_seqs)
    engine = config.engine
    result = replay_timed(requests, caches, cost_model, scheduler, router, engine.time_scale,
                          engine.sample_interval_s is not None, engine.check_invariants,
                          on_progress,
                          rules=rules, tiers=tiers, kv_bytes_per_token=kv_bytes_per_gpu)
    frame = records_frame(result.records, ServedRecord)
    summary: dict[str, object] = {"mode": "timed"}
    summary.update(request_summary(frame))
    summary.update(serving_summary(frame, result.duration_s, result.itl_segments,
                                   engine.goodput_ttft_ms, engine.goodput_tpot_ms))
    summary.update(cache_summary(frame, total_counters(result.replicas),
                                 pool * engine.replicas))
    summary.update(replica_summary(frame, result.replicas, result.duration_s))
    samples, about = timeseries(result, engine.sample_interval_s)
    wall = time.perf_counter() - started
    summary.update({
        "model": model.name, "gpu": gpu.name, "tp": config.hardware.tp,
        "replicas": engine.replicas, "router": config.router.name,
        "cost_model": config.cost_model.name, "kv_pool_tokens_per_replica": pool,
        "cache_policy": config.cache.policy, "cache_ttl_s": config.cache.ttl_s,
        "num_requests": len(requests), "num_events": result.num_events,
        "seed": config.seed, "prefixsim_version": __version__, "wall_time_s": wall,
        "simulated_s_per_wall_s": result.duration_s / wall if wall > 0 else float("nan"),
    })
    describe = getattr(cost_model, "describe", None)  # the fitted model names its profile
    if describe is not None:
        summary.update(describe())
    summary.update(about)
    return frame, summary, samples
