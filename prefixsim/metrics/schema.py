"""Every key summary.json may hold, with its meaning: the one schema of the summary.

metrics/summary.py assembles the summary; this module says what each key means, so a test
can check that every key a run writes is listed here, that docs/results.md documents every
key listed here, and that the README names only keys that exist. Families of keys are
written with a placeholder: `replica{i}_...` (one per replica) and `trace_*` (labels a
trace reader adds, such as `trace_prefix_model`). Latency figures come as
`{mean,median,std,p50,p90,p95,p99}_{ttft,tpot,itl,e2el}_ms`.
"""

from __future__ import annotations

import re

STATS = ("mean", "median", "std", "p50", "p90", "p95", "p99")
LATENCIES = {
    "ttft": "time to first token (arrival to first output token)",
    "tpot": "time per output token after the first (per request)",
    "itl": "inter-token latency (per output token, over all requests; stalls after a "
           "preemption included)",
    "e2el": "end-to-end latency (arrival to last token)",
}

_RUN = {
    "mode": "cache_only or timed",
    "completed": "requests that finished",
    "failed": "requests that did not finish (rejected included)",
    "total_input_tokens": "prompt tokens of the completed requests",
    "total_output_tokens": "output tokens of the completed requests",
    "num_requests": "requests in the trace replayed",
    "prefixsim_version": "version of prefixsim that wrote the results",
    "wall_time_s": "wall-clock seconds the run took (reading the trace excluded)",
    "code_path": "which code ran: pure (the Python sources), compiled (every hot module from "
                 "its `prefixsim accelerate` copy) or mixed",
    "compiled_modules": "hot modules that ran from compiled copies",
    "command": "the command line (prefixsim run only)",
    "load_type": "how requests arrived (load.type), when not the trace's own times",
    "load_rate_scale": "trace load: arrival times divided by it (load.rate_scale)",
    "load_rate": "poisson/constant load: offered requests per second (load.rate)",
    "load_users": "concurrency/sessions load: users in flight (load.users)",
    "load_think_time_s": "closed loop: seconds a user waits after a reply (load.think_time_s)",
    "load_seed": "poisson load: seed of the gaps (load.seed)",
    "stages": "per-stage figures of a staged load (load.stages): a list of mappings, one "
              "per stage (docs/load.md)",
    "trace_skipped_lines": "malformed trace records skipped (--skip-bad-lines)",
    "trace_span_s": "seconds from the first arrival to the last",
    "trace_distinct_prefix_tokens": "tokens of the trace's distinct pages (unbounded footprint)",
    "trace_time_shift_s": "seconds subtracted from every arrival so the trace starts at t = 0",
    "trace_reordered_rows": "trace records that arrived before an earlier record (sorted)",
    "trace_*": "labels the trace reader adds (e.g. trace_prefix_model, trace_arrival_model)",
}
_CACHE = {
    "cache_query_tokens": "prompt tokens looked up in the cache (sum of L over served "
                          "requests)",
    "cache_hit_tokens": "prompt tokens found in the cache (all tiers)",
    "cache_token_hit_rate": "token-weighted hit rate: cache_hit_tokens / cache_query_tokens",
    "cache_request_hit_rate": "share of requests with at least one hit token",
    "cache_request_weighted_hit_rate": "request-weighted hit rate: mean of cached / input",
    "cache_hit_tokens_hbm": "hit tokens found in GPU memory",
    "cache_hit_tokens_host": "hit tokens loaded from the host DRAM tier",
    "cache_hit_tokens_disk": "hit tokens loaded from the disk tier",
    "cache_hit_tokens_pool": "hit tokens read from the shared KV pool",
    "prefill_replicas": "disaggregated serving: replicas that prefill",
    "decode_replicas": "disaggregated serving: replicas that decode",
    "prefill_busy_fraction": "mean busy share of the prefill replicas",
    "decode_busy_fraction": "mean busy share of the decode replicas",
    "kv_transfer_bytes": "KV bytes moved from prefill to decode replicas (per GPU share)",
    "kv_transfer_busy_share": "busy share of the busiest prefill -> decode link",
    "cache_pool_capacity_tokens": "the shared KV pool's capacity (null: unbounded)",
    "cache_pool_peak_tokens": "most tokens the shared pool held",
    "cache_pool_inserted_tokens": "tokens written into the shared pool (its inserts)",
    "cache_pool_evictions": "pages the shared pool evicted",
    "cache_pool_expirations": "pages of the shared pool that expired",
    "cache_pool_read_tokens": "tokens read from the shared pool into HBM (uncapped)",
    "cache_pool_write_tokens": "tokens written to the shared pool",
    "cache_pool_read_bytes": "bytes read from the pool over the replicas' links (timed)",
    "cache_pool_write_bytes": "bytes written to the pool over the replicas' links (timed)",
    "cache_pool_link_busy_share": "busy share of the busiest link direction (timed)",
    "cache_evictions": "pages evicted (capacity)",
    "cache_evicted_tokens": "tokens evicted (capacity)",
    "cache_expirations": "pages expired (TTL)",
    "cache_expired_tokens": "tokens expired (TTL)",
    "cache_inserted_tokens": "tokens inserted into the cache",
    "cache_peak_tokens": "most tokens resident at once (largest replica in timed mode)",
    "cache_capacity_tokens": "cache capacity in tokens (all replicas; null: unbounded)",
    "cache_orphan_tokens_end": "block mode: tokens left unreachable at the end (cache-only)",
    "cache_policy": "eviction policy",
    "cache_ttl_s": "TTL in seconds (null: none)",
    "cache_unbounded_token_hit_rate": "hit rate of an unbounded cache on the same trace "
                                      "(timed: over the requests a replica accepted)",
    "cache_belady_token_hit_rate": "hit rate of offline belady at the same capacity (--bounds)",
    **{f"cache_{event}_age_p{pct}_s": f"p{pct} of pages' idle age at {what}, s"
       for event, what in (("hit", "a hit"), ("evicted", "eviction"), ("expired", "expiry"))
       for pct in (10, 50, 90)},
}
_SERVING = {
    "duration": "simulated seconds from t = 0 of the trace clock to the last finish",
    "request_throughput": "completed requests per simulated second",
    "output_throughput": "output tokens of completed requests per simulated second",
    "total_token_throughput": "input + output tokens of completed requests per second",
    "request_goodput": "completed requests meeting every --goodput SLO, per second (null "
                       "without an SLO)",
    "rejected": "requests that could never fit a replica's KV pool or max_model_len",
    "num_preemptions": "preemptions (recompute) over all requests",
    "kept_up": "the fleet kept up: >= 98% of the requests completed and, open loop, no "
               "growing queue (docs/load.md)",
    "ttft_growth": "open loop: last quarter's mean TTFT / the first quarter's (arrival order)",
    "kept_up_warning": "present when the fleet did not keep up: what failed and what to try",
    "rejected_warning": "present when requests were rejected: how many, why, the longest",
    "num_events": "engine steps plus requests (how much work the simulation did)",
    "simulated_s_per_wall_s": "simulated seconds per wall-clock second",
    "model": "model preset",
    "gpu": "GPU preset",
    "tp": "tensor-parallel degree",
    "replicas": "number of replicas",
    "router": "router",
    "cost_model": "cost model (roofline or fitted)",
    "cost_model_profile": "fitted profile used (path or name)",
    "cost_model_profile_device": "device the profile was measured on",
    "cost_model_profile_model": "model whose shapes the profile measured",
    "cost_model_warning": "the profile was measured on another device, model or TP",
    "cost_model_borrowed": "parts of the profile borrowed from another GPU or model",
    "kv_pool_tokens_per_replica": "KV pool of one replica in tokens",
    "max_model_len": "longest prompt + output a replica accepts (null: no limit but the pool)",
    "max_model_len_warning": "present when vLLM would not start: max_model_len over the pool",
    "serving_engine": "serving engine whose overheads and limits the run took",
    "max_num_seqs": "running requests per replica (set, or the engine's default on the GPU)",
    "max_batched_tokens": "token budget per step (set, or the engine's default on the GPU)",
    "replica{i}_completed": "requests completed on replica i",
    "replica{i}_kv_pool_tokens": "KV pool of replica i in tokens",
    "replica{i}_busy_fraction": "share of the run replica i was stepping",
    "replica{i}_steps": "batches replica i ran (a decode-only run of many steps counts once)",
    "replica{i}_preemptions": "preemptions on replica i",
    "replica{i}_cache_token_hit_rate": "token hit rate of replica i",
    "replica{i}_cache_evictions": "pages evicted on replica i",
    "timeseries_interval_s": "interval of timeseries.parquet's rows in simulated seconds",
    "timeseries_rows": "rows in timeseries.parquet",
    "timeseries_warning": "the interval was coarsened to keep the row cap",
}
_COST = {
    "cost_pricing": "price list (--pricing)",
    "cost_prices_as_of": "which model's list prices, of which month, from which page",
    "cost_total_usd": "what the run's tokens cost with prompt caching",
    "cost_no_cache_usd": "what they cost with every prompt token uncached",
    "cost_saved_usd": "cost_no_cache_usd - cost_total_usd",
    "cost_cache_read_tokens": "billed cache-read tokens",
    "cost_cache_write_tokens": "billed cache-write tokens",
    "cost_uncached_input_tokens": "billed uncached input tokens",
    "prefill_gpu_s": "GPU seconds of prefill with the cache's hits (cost model)",
    "prefill_gpu_s_no_cache": "GPU seconds of prefill with no cache",
    "prefill_gpu_s_saved": "prefill_gpu_s_no_cache - prefill_gpu_s",
    "prefill_model": "model and GPUs the prefill seconds are priced on (cache-only)",
}

SUMMARY_KEYS: dict[str, str] = {
    **_RUN, **_CACHE, **_SERVING, **_COST,
    **{f"{stat}_{name}_ms": f"{stat} of the {meaning}, ms"
       for name, meaning in LATENCIES.items() for stat in STATS},
}

PRINTED_KEYS: tuple[str, ...] = (
    "completed", "failed", "total_input_tokens", "total_output_tokens",
    "rejected", "num_preemptions", "duration", "request_throughput", "output_throughput",
    "total_token_throughput", "request_goodput", "mean_ttft_ms", "median_ttft_ms",
    "p99_ttft_ms", "mean_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms",
    "mean_e2el_ms", "p99_e2el_ms",
    "cache_policy", "cache_capacity_tokens", "cache_ttl_s",
    "cache_query_tokens", "cache_hit_tokens", "cache_token_hit_rate",
    "cache_request_hit_rate", "cache_request_weighted_hit_rate", "cache_evictions",
    "cache_expirations", "cache_peak_tokens",
    "cache_hit_tokens_host", "cache_hit_tokens_disk", "cache_hit_tokens_pool",
    "cache_pool_link_busy_share", "cache_unbounded_token_hit_rate",
    "cache_belady_token_hit_rate", "prefill_replicas", "decode_replicas",
    "prefill_busy_fraction", "decode_busy_fraction", "kv_transfer_busy_share",
    "cost_total_usd", "cost_no_cache_usd",
    "cost_model", "cost_model_profile", "wall_time_s", "simulated_s_per_wall_s",
)
"""The summary keys `prefixsim run` prints after a run (cli/run_output.py `print_summary`), in
the order printed (vLLM's result block first; those a run has: the pool's and disaggregated
serving's only where the run has them); each is a key of `SUMMARY_KEYS`."""


TEXT_KEYS = frozenset({
    "mode", "prefixsim_version", "code_path", "command", "load_type", "trace_*",
    "cache_policy", "kept_up_warning", "rejected_warning", "model", "gpu", "router",
    "cost_model", "cost_model_profile", "cost_model_profile_device", "cost_model_profile_model",
    "cost_model_warning", "cost_model_borrowed", "max_model_len_warning", "timeseries_warning",
    "cost_pricing", "cost_prices_as_of", "prefill_model", "serving_engine",
})
"""The schema entries whose values are text; `stages` is a list, `kept_up` a boolean, every
other entry a number (or null)."""
NOT_NUMBERS = TEXT_KEYS | {"stages", "kept_up"}


def numeric_key(name: str) -> bool:
    """Whether summary key `name` holds a number (or null) by the schema: False for text,
    lists, booleans and keys the schema does not know."""
    entry = schema_key(name)
    return entry is not None and entry not in NOT_NUMBERS


def _pattern(key: str) -> re.Pattern[str]:
    escaped = re.escape(key).replace(r"\{i\}", r"\d+").replace(r"\*", r"[a-z0-9_]+")
    return re.compile(escaped)


_PATTERNS = [(key, _pattern(key)) for key in SUMMARY_KEYS]


def schema_key(name: str) -> str | None:
    """The schema entry a summary key belongs to (itself, or its family), else None."""
    if name in SUMMARY_KEYS:
        return name
    for key, pattern in _PATTERNS:
        if pattern.fullmatch(name):
            return key
    return None
