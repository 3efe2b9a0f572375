"""The summary puts each figure together from what the run produced (metrics/summary.py):
checked against the run's own requests frame and settings, so a key computed from the
wrong input, or left out, fails here."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from prefixsim.config import load_config
from prefixsim.config.load import LoadConfig
from prefixsim.metrics.pricing import PRESETS, pricing_summary
from prefixsim.metrics.summary import _context_keys, _trace_keys, load_keys, sampling_keys
from prefixsim.metrics.timeseries import SamplingInfo
from prefixsim.pipeline import simulate
from prefixsim.presets import get_model
from prefixsim.trace import Request

DEMO = "traces/demo_chat.jsonl"


def run(**overrides):
    config = load_config(None, {"trace.path": DEMO, "trace.max_requests": 80,
                                "engine.sample_interval_s": None, **overrides})
    return simulate(config)


def test_timed_figures_from_the_run():
    result = run(**{"engine.replicas": 2, "engine.goodput_ttft_ms": 60.0,
                    "engine.goodput_tpot_ms": 7.5})
    summary, rows = result.summary, result.requests
    done = rows[rows["status"] == "completed"]
    ttft_ok = done["ttft_ms"] <= 60.0
    tpot_ok = done["tpot_ms"].isna() | (done["tpot_ms"] <= 7.5)
    # both SLOs bind on this run: each alone would count more requests
    assert (ttft_ok & tpot_ok).sum() < min(ttft_ok.sum(), tpot_ok.sum())
    assert summary["request_goodput"] == pytest.approx(
        (ttft_ok & tpot_ok).sum() / summary["duration"])
    # the prefix-aware router keeps this light load on the replica that holds its prefixes
    busy = [summary[f"replica{i}_busy_fraction"] for i in range(2)]
    assert 0 < max(busy) <= 1 and min(busy) >= 0
    assert sum(summary[f"replica{i}_completed"] for i in range(2)) == len(done)
    assert summary["simulated_s_per_wall_s"] == pytest.approx(
        summary["duration"] / summary["wall_time_s"])
    assert summary["cache_capacity_tokens"] == 2 * summary["kv_pool_tokens_per_replica"]
    unbounded = summary["cache_unbounded_token_hit_rate"]
    assert isinstance(unbounded, float)
    assert summary["cache_token_hit_rate"] <= unbounded <= 1


def test_rejections_name_the_pool_of_the_run():
    summary = run(**{"cache.capacity_tokens": 3000}).summary
    assert "longer than a replica's KV pool of 3,000 tokens" in summary["rejected_warning"]


def test_cache_only_figures_from_the_run():
    result = run(**{"cache_only": True, "cache.capacity_tokens": 50_000,
                    "model.name": "llama-3.1-8b", "hardware.tp": 2})
    summary = result.summary
    assert summary["cache_capacity_tokens"] == 50_000
    assert summary["prefill_model"] == "llama-3.1-8b on 2 x h100-sxm"
    assert summary["cache_orphan_tokens_end"] == 0  # no block-mode orphans
    assert summary["cache_hit_tokens"] == int(np.sum(result.requests["cached_tokens"]))


# ------------------------------------------------------------------------- keys by hand
def test_load_keys_name_only_what_the_load_sets():
    assert load_keys(LoadConfig()) == {}  # the trace's own times: the summary as always
    assert load_keys(LoadConfig(rate_scale=2.0)) == {"load_type": "trace",
                                                     "load_rate_scale": 2.0}
    assert load_keys(LoadConfig(type="poisson", rate=3.0, seed=7)) == \
        {"load_type": "poisson", "load_rate": 3.0, "load_seed": 7}
    # a seed only draws poisson gaps; a scale only stretches the trace's own times
    assert load_keys(LoadConfig(type="constant", rate=3.0, seed=7)) == \
        {"load_type": "constant", "load_rate": 3.0}
    assert load_keys(LoadConfig(type="sessions", users=4, think_time_s=1.5)) == \
        {"load_type": "sessions", "load_users": 4, "load_think_time_s": 1.5}
    staged = LoadConfig(type="poisson", stages=[{"rate": 1, "duration_s": 5}])
    assert load_keys(staged) == {"load_type": "poisson", "load_seed": 0}


def _facts(**fields):
    base = {"max_model_len": 131_072, "pool_tokens_per_replica": 27_843,
            "config": load_config(None, {"trace.path": DEMO}),
            "model": get_model("llama-3.1-70b"), "command": None, "trace": None,
            "requests": pd.DataFrame({"arrival_s": [3.0, 10.0, 4.5]}),
            "distinct_prefix_tokens": None}
    return SimpleNamespace(**{**base, **fields})


def test_the_start_warning_word_for_word():
    assert _context_keys(_facts()) == {"max_model_len_warning": (
        "vLLM would not start this replica: one request of max_model_len 131,072 tokens "
        "needs more KV than its pool of 27,843 tokens holds; it starts with "
        "--max-model-len 27,843 or less, which serves the same requests as this run "
        "(longer ones are rejected either way), or with more GPUs per replica (--tp), a "
        "larger GPU or FP8 weights or KV")}
    assert _context_keys(_facts(max_model_len=27_843)) == {}  # exactly fits
    assert _context_keys(_facts(max_model_len=None)) == {}
    assert _context_keys(_facts(pool_tokens_per_replica=None)) == {}
    set_pool = load_config(None, {"trace.path": DEMO, "cache.capacity_tokens": 27_843})
    assert _context_keys(_facts(config=set_pool)) == {}  # the user chose that pool


def test_trace_keys_from_the_run_and_the_trace():
    assert _trace_keys(_facts()) == {"trace_span_s": 7.0}
    assert _trace_keys(_facts(requests=pd.DataFrame({"arrival_s": []}))) == \
        {"trace_span_s": 0.0}
    assert _trace_keys(_facts(command="prefixsim run x"))["command"] == "prefixsim run x"
    requests = [Request(0, 0.0, 96, 1, (1, 2, 3), 32), Request(1, 1.0, 64, 1, (1, 2), 32),
                Request(2, 2.0, 32, 1, (7,), 32)]
    trace = SimpleNamespace(requests=requests, skipped_lines=2, time_shift_s=-5.0,
                            reordered_rows=1, labels={"format": "mooncake"})
    keys = _trace_keys(_facts(trace=trace))
    # pages 1, 2, 3 and 7 hold 32 tokens each: 128 distinct prefix tokens
    assert keys == {"trace_span_s": 7.0, "trace_distinct_prefix_tokens": 128,
                    "trace_skipped_lines": 2, "trace_time_shift_s": -5.0,
                    "trace_reordered_rows": 1, "trace_format": "mooncake"}
    counted = _trace_keys(_facts(trace=trace, distinct_prefix_tokens=999))
    assert counted["trace_distinct_prefix_tokens"] == 999  # as counted while streaming


def test_sampling_keys_and_the_coarsened_warning():
    assert sampling_keys(None) == {}
    kept = SamplingInfo(requested_s=1.0, used_s=1.0, rows=300, max_rows=200_000,
                        duration_s=299.5, num_replicas=4)
    assert sampling_keys(kept) == {"timeseries_interval_s": 1.0, "timeseries_rows": 300}
    timed = SamplingInfo(requested_s=0.5, used_s=2.0, rows=90_001, max_rows=100_000,
                         duration_s=45_000.0, num_replicas=4)
    assert sampling_keys(timed)["timeseries_warning"] == (
        "timeseries sampled every 2 s instead of 0.5 s to stay under 100,000 rows "
        "(45,000 simulated s x 4 replicas)")
    cache_only = SamplingInfo(requested_s=0.5, used_s=2.0, rows=22_501, max_rows=100_000,
                              duration_s=45_000.0)
    assert sampling_keys(cache_only)["timeseries_warning"] == (
        "timeseries sampled every 2 s instead of 0.5 s to stay under 100,000 rows "
        "(45,000 simulated s)")


@pytest.mark.parametrize("cache_only", [True, False])
def test_pool_figures_reach_the_summary(cache_only):
    result = simulate(load_config(None, {
        "trace.path": DEMO, "engine.sample_interval_s": None, "cache_only": cache_only,
        "cache.capacity_tokens": 40_000, "cache.pool.capacity_tokens": 300_000}))
    summary, rows = result.summary, result.requests
    assert summary["cache_pool_capacity_tokens"] == 300_000
    read = int(rows["cached_tokens_pool"].sum())
    assert read > 0 and summary["cache_pool_read_tokens"] == read
    assert summary["cache_hit_tokens_pool"] == read
    # written through and never evicted: every page written is held at the end
    written = summary["cache_pool_write_tokens"]
    assert written == summary["cache_pool_inserted_tokens"] == summary["cache_pool_peak_tokens"]
    assert summary["cache_pool_evictions"] == summary["cache_pool_expirations"] == 0
    if not cache_only:  # llama-3.1-8b in bf16: 131,072 KV bytes a token cross the link
        assert summary["cache_pool_read_bytes"] == read * 131_072
        assert summary["cache_pool_write_bytes"] == written * 131_072
        assert 0 < summary["cache_pool_link_busy_share"] < 1


def test_writes_are_priced_by_the_runs_ttl():
    """An hour's TTL bills Anthropic's 1-hour write price (6.00 against 3.75 $/Mtok)."""
    result = run(**{"cache_only": True, "cache.pricing": "anthropic", "cache.ttl_s": 3600.0})
    summary, rows = result.summary, result.requests
    hour = pricing_summary(rows, PRESETS["anthropic"], 3600.0)["cost_total_usd"]
    five = pricing_summary(rows, PRESETS["anthropic"], None)["cost_total_usd"]
    assert summary["cost_cache_write_tokens"] > 0 and hour > five
    assert summary["cost_total_usd"] == pytest.approx(hour)
