"""build(config, requests) -> Components: every plug-in of a run, resolved once.

Resolves the model and GPU presets (or a presets file), the cost model, the request rules
(classes, minimum cacheable prompt), the price list, and the caches: one per replica in
timed mode, sized to the replica's KV pool (docs/cache-semantics.md R13: memory x
utilisation - weights/tp - activation reserve, over KV bytes per token; `cache.capacity_tokens`
replaces it when set), with their lower tiers, and the timed engine's `Fleet` (those caches
and tiers, the router, the step planner, the shared pool, disaggregation, the clock and
the clients of a closed-loop load, pipeline/closed_loop.py); one cache in cache-only mode
(a SegmentCache where it gives the same results faster). Plug-in names come from the
registries; a bad parameter is a one-line InputError naming its key. Runs nothing and
writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prefixsim.cache import (
    EvictionPolicy,
    SegmentCache,
    TTLRule,
    build_policy,
    replay_cache,
)
from prefixsim.cache.classes import CacheRules, RequestClass
from prefixsim.cache.pool import PoolSpec, SharedPool
from prefixsim.cache.tiers import TierStack, build_tier_stack
from prefixsim.config import CacheConfig, EngineConfig, HardwareConfig, ModelConfig, RunConfig
from prefixsim.costmodel import COST_MODELS, CostModel, chunk_time_function
from prefixsim.engine.disaggregation import Disaggregation
from prefixsim.engine.fleet import Fleet
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.errors import InputError
from prefixsim.metrics.pricing import Pricing, load_pricing
from prefixsim.pipeline.closed_loop import build_clients
from prefixsim.presets import (
    GIB,
    GPUSpec,
    ModelSpec,
    check_tensor_parallel,
    get_gpu,
    get_model,
    kv_pool_tokens,
    load_custom_presets,
    load_hf_config,
)
from prefixsim.router import ROUTERS
from prefixsim.trace import Request
from prefixsim.trace.chains import requests_chained
from prefixsim.trace.sessions import Sessions

DTYPE_BYTES = {"bf16": 2, "fp8": 1}


@dataclass(frozen=True)
class Components:
    """What a run is made of, built once from its config.

    `caches[i]` and `tiers[i]` belong to replica i (timed) or are the one replayed cache
    (cache-only). `pool_tokens_per_replica` is each replica's KV pool (timed only);
    `kv_bytes_per_token_per_gpu` times lower-tier and pool transfers (each of the tp GPUs
    moves its share over its own link). `shared_pool`: the KV pool every replica shares (R18),
    None without `cache.pool`. `fleet`: what the timed engine serves with (the caches and
    tiers above, cost model, step planner, router, pool, disaggregation and clock; the
    engine's `Fleet`, with the clients of a closed-loop load), None in cache-only mode.
    `sessions`: the trace's sessions under a `sessions` load (pipeline/closed_loop.py).
    `chained`: the trace's page ids are checked chained (build): the caches built for it,
    the run's and its bounds', keep no resident-id set (cache/segment_tree.py).
    """

    config: RunConfig
    model: ModelSpec
    gpu: GPUSpec
    cost_model: CostModel
    rules: CacheRules | None
    pricing: Pricing | None
    caches: list[SegmentCache]
    tiers: list[TierStack | None]
    pool_tokens_per_replica: int | None = None
    kv_bytes_per_token_per_gpu: int = 0
    shared_pool: SharedPool | None = None
    fleet: Fleet | None = None
    sessions: Sessions | None = None
    chained: bool = False  # the page ids are known chained: caches built keep no id set


def build(config: RunConfig, requests: Sequence[Request],
          policy: EvictionPolicy | None = None, chained: bool = False) -> Components:
    """Every component of a run of `config` over `requests` (in replay order: offline
    policies such as belady learn the future from them). `policy`: a cache-only run's
    policy, built already (a streamed run's belady learns the future otherwise).
    `chained`: the page ids are checked chained already (a stream checks every chunk);
    otherwise `requests` are checked here, at once (trace/chains.py: `requests_chained`)."""
    model, gpu = resolve_model(config.model), resolve_gpu(config.hardware)
    check_tensor_parallel(model, config.hardware.tp)  # a custom model's heads (presets: config)
    cost_model = build_cost_model(config, model, gpu)
    chunk_time = chunk_time_function(cost_model)
    pricing = None if config.cache.pricing is None else load_pricing(config.cache.pricing)
    rules = build_rules(config.cache, config.trace.seed)
    # ids known chained cannot conflict in a cache, which then keeps no resident-id set (7%
    # of a timed run, a fifth of a cache-only LRU replay); ids not chained keep it, and a
    # conflict is found where a page goes in (the input error naming the request)
    chained = chained or requests_chained(requests)
    shared = build_shared_pool(config.cache, requests, chunk_time, config.engine.time_scale,
                               chained)
    if config.cache_only:
        cache = build_cache(config.cache, requests, chunk_time, replay_only=True,
                            policy=policy, chained=chained)
        return Components(config, model, gpu, cost_model, rules, pricing, [cache],
                          [build_tiers(cache, config.cache)], shared_pool=shared,
                          chained=chained)
    if config.cache.bounds:
        raise InputError("bounds are cache-only for now; pass --cache-only",
                         field="cache.bounds")
    pool = replica_pool_tokens(config, model, gpu)
    section = config.cache.model_copy(update={"capacity_tokens": pool})
    caches = [build_cache(section, requests, chunk_time, time_scale=config.engine.time_scale,
                          chained=chained)
              for _ in range(config.engine.num_replicas)]
    kv_bytes_per_gpu = model.kv_bytes_per_token_per_gpu(config.hardware.tp,
                                                        DTYPE_BYTES[config.model.kv_dtype])
    try:
        router = ROUTERS.build(config.router.name, **config.router.params)
    except (TypeError, ValueError) as exc:
        raise InputError(str(exc), field="router.params") from None
    split = build_disaggregation(config.engine)
    decode_router = None if split is None else ROUTERS.build(config.router.decode_router)
    tiers = [build_tiers(cache, config.cache) for cache in caches]
    limits = config.scheduler.limits(config.serving.engine, gpu, model.max_model_len)
    scheduler = ContinuousBatching(limits.max_batched_tokens, limits.max_num_seqs,
                                   config.scheduler.chunked_prefill,
                                   max_model_len(config, model))
    clients, sessions = build_clients(config.load, requests)
    fleet = Fleet(caches, cost_model, scheduler, router, config.engine.time_scale, rules,
                  tiers, kv_bytes_per_gpu, shared, split, clients, decode_router,
                  tier_load=config.cache.tier_load)
    return Components(config, model, gpu, cost_model, rules, pricing, caches, tiers,
                      pool_tokens_per_replica=pool, kv_bytes_per_token_per_gpu=kv_bytes_per_gpu,
                      shared_pool=shared, fleet=fleet, sessions=sessions, chained=chained)


def resolve_model(config: ModelConfig) -> ModelSpec:
    """The model of a config.json (`config_path`), else the custom model of the same name
    from `presets_file`, else the preset."""
    if config.config_path is not None:
        return load_hf_config(config.config_path, config.name)
    return _custom_or_preset(config.presets_file, 0, config.name, get_model)


def resolve_gpu(config: HardwareConfig) -> GPUSpec:
    """The GPU preset, or the custom GPU of the same name from `presets_file`."""
    return _custom_or_preset(config.presets_file, 1, config.gpu, get_gpu)


def _custom_or_preset(presets_file, table: int, name: str, preset: Callable):
    """`name` from table `table` (0: models, 1: GPUs) of a presets file, else the preset."""
    if presets_file is not None:
        custom = load_custom_presets(presets_file)[table]
        if name in custom:
            return custom[name]
    return preset(name)


def build_disaggregation(engine: EngineConfig) -> Disaggregation | None:
    """Prefill/decode disaggregation (engine/disaggregation.py), None unless configured."""
    if engine.prefill_replicas is None:
        return None
    return Disaggregation(engine.prefill_replicas, engine.decode_replicas,
                          engine.kv_transfer_gb_s * 1e9, engine.kv_transfer_latency_s,
                          engine.disaggregation.local_prefill_max_tokens)


def build_cost_model(config: RunConfig, model: ModelSpec, gpu: GPUSpec) -> CostModel:
    """The configured cost model (registry), with the dtypes of the model section."""
    params = dict(config.cost_model.params)
    if config.cost_model.profile is not None:
        params.setdefault("profile", config.cost_model.profile)
    if config.cost_model.name in ("roofline", "fitted"):
        params.setdefault("engine", config.serving.engine)
    if config.hardware.expert_parallel:
        if config.cost_model.name != "roofline":
            raise InputError("expert parallelism is priced by the roofline cost model only",
                             field="hardware.expert_parallel")
        if model.num_experts is None or model.num_experts % config.hardware.tp:
            raise InputError(f"splits the experts over the tp {config.hardware.tp} GPUs: "
                             f"{model.name} has {model.num_experts or 'no'} experts",
                             field="hardware.expert_parallel")
        params.setdefault("expert_parallel", True)
    if config.cost_model.name in ("roofline", "step_roofline"):
        params.setdefault("weight_dtype_bytes", DTYPE_BYTES[config.model.weight_dtype])
        params.setdefault("kv_dtype_bytes", DTYPE_BYTES[config.model.kv_dtype])
    try:
        return COST_MODELS.build(config.cost_model.name, model=model, gpu=gpu,
                                 tp=config.hardware.tp, **params)
    except (TypeError, ValueError) as exc:
        raise InputError(str(exc), field="cost_model.params") from None


def max_model_len(config: RunConfig, model: ModelSpec) -> int | None:
    """The longest prompt plus output a replica accepts: `scheduler.max_model_len`, else
    the model's context length (None: no limit but its KV pool)."""
    return config.scheduler.max_model_len or model.max_model_len


def accepted_tokens(parts: Components) -> int | None:
    """The longest prompt plus output a replica of a timed run accepts: its KV pool, and the
    model's context (`max_model_len`); a longer request is rejected on arrival. None in
    cache-only mode (no request is rejected there)."""
    pool = parts.pool_tokens_per_replica
    if pool is None:
        return None
    limit = max_model_len(parts.config, parts.model)
    return pool if limit is None else min(pool, limit)


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


def build_cache(
    config: CacheConfig,
    requests: Sequence[Request] | None = None,
    prefill_time_s: Callable[[int, int], float] | None = None,
    replay_only: bool = False,
    time_scale: float = 1.0,
    policy: EvictionPolicy | None = None,
    chained: bool = False,
) -> SegmentCache:
    """A fresh cache for the `cache` section (policy resolved through the registry; an
    offline policy such as belady needs `requests`, the trace in replay order; a
    cost-aware one (gdsf) prices recomputation with `prefill_time_s(new, cached)`).
    `replay_only` (a cache-only replay): a SegmentCache, same results and faster, when the
    section allows it (cache/factory.py: radix mode, or block mode but with gdsf or a
    per-page policy; with lower tiers, a shared pool, request classes or a minimum
    cacheable prompt too).
    `time_scale`: the timed engine's, so an offline policy reads the trace on its clock.
    `policy`: one built already, instead of the section's (its params then unused).
    `chained`: the replay's page ids are checked chained already (a streamed trace's
    readers check them chunk by chunk): a compressed cache then keeps no resident-id set."""
    ttl_s = config.ttl_s
    if ttl_s is None and any(c.ttl_s is not None for c in config.classes):
        ttl_s = float("inf")  # classes with a TTL need the rule; the rest never expire
    ttl = None if ttl_s is None else TTLRule(ttl_s, config.ttl_mode)
    if policy is None:
        policy = build_policy(config.policy, requests, prefill_time_s, time_scale,
                              config.policy_params)
    # every replay runs on SegmentCache: a cache-only one (its request classes, lower tiers
    # and shared pool included; engine/cache_only.py drives the step-by-step ones) or a
    # timed replica's. Belady keys pages by request up front in a cache-only replay whose
    # arrivals are in order, else from each page's last access (`by_access`: a timed
    # recency counts steps)
    by_access = not (replay_only and getattr(policy, "page_keyed", False) is True)
    return replay_cache(config.capacity_tokens, policy, ttl, config.mode, chained=chained,
                        by_access=by_access, whole_paths=replay_only)


def build_unbounded_cache(config: CacheConfig, chained: bool = False) -> SegmentCache:
    """The cache `cache_unbounded_token_hit_rate` is read from: the section's TTL and mode
    with no capacity limit, LRU (no policy matters when nothing is evicted), no pool.
    `chained`: as build_cache's."""
    return build_cache(config.model_copy(update={"capacity_tokens": None, "policy": "lru",
                                                 "policy_params": {}, "pool": None}),
                       replay_only=True, chained=chained)


def build_shared_pool(config: CacheConfig, requests: Sequence[Request] | None = None,
                      prefill_time_s: Callable[[int, int], float] | None = None,
                      time_scale: float = 1.0, chained: bool = False) -> SharedPool | None:
    """The KV pool of `cache.pool` (R18): its own tree, policy and TTL (sliding, as the
    cache's mode), and the link figures; its clock is set by the engine that runs it. The
    tree is a SegmentCache, a page-keyed policy's keys read from a page's last access
    (belady: its recency is the pool's own count of reads and writes). `chained`: as
    build_cache's."""
    section = config.pool
    if section is None:
        return None
    ttl = None if section.ttl_s is None else TTLRule(section.ttl_s, config.ttl_mode)
    policy = build_policy(section.policy, requests, prefill_time_s, time_scale)
    spec = PoolSpec(section.read_gb_s * 1e9, section.write_gb_s * 1e9, section.latency_s,
                    section.write == "through", section.replicas, section.lookup_s)
    cache = replay_cache(section.capacity_tokens, policy, ttl, chained=chained,
                         by_access=True)
    return SharedPool(cache, spec, lambda: 0.0)


def build_tiers(cache: SegmentCache, config: CacheConfig) -> TierStack | None:
    """Host DRAM and disk tiers under `cache` (R15), or None when neither is configured."""
    return build_tier_stack(cache, config.host_capacity_tokens, config.host_bandwidth_gb_s,
                            config.disk_capacity_tokens, config.disk_bandwidth_gb_s,
                            config.tier_min_load_tokens)


def build_rules(config: CacheConfig, seed: int) -> CacheRules | None:
    """Request classes and the minimum cacheable prompt (every prompt bypasses the cache
    when prefix caching is off), or None when none of these is set."""
    if not config.classes and config.min_cacheable_tokens == 0 and config.prefix_caching:
        return None
    classes = [RequestClass(**c.model_dump()) for c in config.classes]
    return CacheRules(classes, config.min_cacheable_tokens, seed,
                      enabled=config.prefix_caching)


def request_ttls(config: CacheConfig, rules: CacheRules | None,
                 requests: Sequence[Request]) -> list[float | None]:
    """Each request's TTL (its class's, else the cache's), which prices its cache writes."""
    if rules is None:
        return [config.ttl_s] * len(requests)
    ttls = (rules.for_request(r).ttl_s for r in requests)
    return [config.ttl_s if ttl is None else ttl for ttl in ttls]
