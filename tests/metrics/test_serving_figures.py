"""Known answers and run differentials for the serving figures (metrics/serving.py): ITL
percentiles, the goodput SLOs' edges, a zero-length run, per-replica keys against the
run's own frame, and the disaggregated pools' shares."""

import math

import numpy as np
import pandas as pd
import pytest

from prefixsim.config import load_config
from prefixsim.engine.itl import ItlSegments
from prefixsim.metrics.serving import serving_summary, weighted_distribution
from prefixsim.pipeline import simulate

DEMO = "traces/demo_chat.jsonl"


def test_itl_percentiles_of_1_to_100_ms():
    # one token at each of 1..100 ms: the lower value at each rank (inverted CDF)
    pairs = [(k / 1000, 1) for k in range(100, 0, -1)]
    want = {"mean_itl_ms": 50.5, "median_itl_ms": 50.0, "p50_itl_ms": 50.0,
            "p90_itl_ms": 90.0, "p95_itl_ms": 95.0, "p99_itl_ms": 99.0}
    for segments in (pairs, ItlSegments(pairs)):  # the pairs, or an ItlSegments' arrays
        got = weighted_distribution(segments, "itl_ms")
        assert {k: got[k] for k in want} == pytest.approx(want)
        assert got["std_itl_ms"] == pytest.approx(math.sqrt((100 ** 2 - 1) / 12))
    # weights count tokens: 3 tokens at 10 ms outweigh 1 at 40 ms
    assert weighted_distribution([(0.04, 1), (0.01, 3)], "itl_ms")["p50_itl_ms"] == 10.0
    assert weighted_distribution([(0.04, 1), (0.01, 3)], "itl_ms")["mean_itl_ms"] == \
        pytest.approx(17.5)
    empty = weighted_distribution(ItlSegments(), "itl_ms")
    assert len(empty) == 7 and all(math.isnan(v) for v in empty.values())


def frame(ttft, tpot):
    n = len(ttft)
    return pd.DataFrame({"status": ["completed"] * n, "input_tokens": [10] * n,
                         "output_tokens": [5] * n, "ttft_ms": ttft, "tpot_ms": tpot,
                         "e2el_ms": [1.0] * n, "preemptions": [0] * n})


def test_a_latency_at_its_goodput_slo_meets_it():
    rows = frame([100.0, 100.1, 50.0], [20.0, 10.0, 20.1])
    assert serving_summary(rows, 1.0, [], 100.0, 20.0)["request_goodput"] == 1.0
    assert serving_summary(rows, 1.0, [], 100.0, None)["request_goodput"] == 2.0
    assert serving_summary(rows, 1.0, [], None, 20.0)["request_goodput"] == 2.0
    assert serving_summary(rows, 1.0, [])["request_goodput"] is None


def test_a_run_of_no_length_has_no_rates():
    got = serving_summary(frame([1.0], [1.0]), 0.0, [])
    assert got["duration"] == 0.0 and math.isnan(got["request_throughput"])
    assert math.isnan(got["output_throughput"])


def test_replica_keys_from_the_run():
    config = load_config(None, {"trace.path": DEMO, "trace.max_requests": 81,
                                "engine.sample_interval_s": None, "engine.replicas": 2,
                                "router.name": "round_robin", "cache.capacity_tokens": 24_000})
    result = simulate(config)
    summary, rows = result.summary, result.requests
    pool = summary["kv_pool_tokens_per_replica"]
    assert pool == 24_000  # cache.capacity_tokens is each replica's
    for i in range(2):
        mine = rows[(rows["replica"] == i) & (rows["status"] == "completed")]
        assert summary[f"replica{i}_completed"] == len(mine) > 0
        assert summary[f"replica{i}_kv_pool_tokens"] == pool
        assert summary[f"replica{i}_steps"] > 0
        assert 0 < summary[f"replica{i}_busy_fraction"] <= 1
        served = rows[(rows["replica"] == i) & (rows["status"] != "rejected")]
        assert summary[f"replica{i}_cache_token_hit_rate"] == pytest.approx(
            served["cached_tokens"].sum() / served["input_tokens"].sum())
    assert sum(summary[f"replica{i}_preemptions"] for i in range(2)) == \
        summary["num_preemptions"]
    assert sum(summary[f"replica{i}_cache_evictions"] for i in range(2)) == \
        summary["cache_evictions"] > 0
    # the fleet's peak is its fullest replica's, not the two added: each filled its pool
    assert pool / 2 < summary["cache_peak_tokens"] <= pool
    # 81 requests in turn: 41 and 40 (each replica's own count, not the other's)
    assert [summary[f"replica{i}_completed"] for i in range(2)] == [41, 40]


def test_a_replica_that_got_nothing():
    config = load_config(None, {"trace.path": DEMO, "trace.max_requests": 2,
                                "engine.sample_interval_s": None, "engine.replicas": 3,
                                "router.name": "round_robin"})
    summary = simulate(config).summary
    assert summary["replica2_completed"] == 0 and summary["replica2_steps"] == 0
    assert summary["replica2_cache_token_hit_rate"] == 0.0
    assert summary["replica2_busy_fraction"] == 0.0


def test_disaggregated_pools_from_the_run():
    config = load_config(None, {"trace.path": DEMO, "trace.max_requests": 60,
                                "engine.sample_interval_s": None,
                                "engine.prefill_replicas": 1, "engine.decode_replicas": 2})
    summary = simulate(config).summary
    assert (summary["prefill_replicas"], summary["decode_replicas"]) == (1, 2)
    busy = [summary[f"replica{i}_busy_fraction"] for i in range(3)]
    assert summary["prefill_busy_fraction"] == pytest.approx(busy[0])  # prefill first
    assert summary["decode_busy_fraction"] == pytest.approx(np.mean(busy[1:]))
    # whole tokens of llama-3.1-8b's KV (131,072 bytes each) crossed the link
    sent = summary["kv_transfer_bytes"]
    assert sent > 0 and sent % 131_072 == 0
    assert 0 < summary["kv_transfer_busy_share"] < 1
