"""Known answers for the per-request figures of a summary (metrics/requests.py): the
latency distributions' statistics, the hit rates over served requests, hits by tier."""

import math

import numpy as np
import pandas as pd
import pytest

from prefixsim.cache import CacheCounters
from prefixsim.engine.records import CacheOnlyRecord, RecordTable
from prefixsim.metrics.requests import cache_summary, distribution, records_frame, tier_hits

STATS = ("mean", "median", "std", "p50", "p90", "p95", "p99")


def test_distribution_of_1_to_101():
    # linear interpolation between order statistics: the k-th percentile of 1..101 is k + 1;
    # the population std of n consecutive integers is sqrt((n^2 - 1) / 12) = sqrt(850)
    got = distribution(range(1, 102), "ttft_ms")
    assert got == {"mean_ttft_ms": 51.0, "median_ttft_ms": 51.0,
                   "std_ttft_ms": pytest.approx(math.sqrt(850)), "p50_ttft_ms": 51.0,
                   "p90_ttft_ms": 91.0, "p95_ttft_ms": 96.0, "p99_ttft_ms": 100.0}


def test_distribution_of_nothing_is_nan_under_every_name():
    got = distribution([], "e2el_ms")
    assert list(got) == [f"{stat}_e2el_ms" for stat in STATS]
    assert all(math.isnan(value) for value in got.values())


def frame(**columns):
    n = len(columns["input_tokens"])
    return pd.DataFrame({"status": columns.pop("status", ["completed"] * n), **columns})


def test_hit_rates_over_served_requests():
    rows = frame(input_tokens=[100, 2, 300, 1000], cached_tokens=[50, 1, 0, 999],
                 status=["completed", "completed", "completed", "rejected"])
    got = cache_summary(rows, CacheCounters(), 5000)
    # the rejected request counts in no rate: 51 of 402 tokens; 2 of 3 requests hit (a
    # 1-token hit too); the mean of 0.5, 0.5 and 0
    assert (got["cache_query_tokens"], got["cache_hit_tokens"]) == (402, 51)
    assert got["cache_token_hit_rate"] == pytest.approx(51 / 402)
    assert got["cache_request_hit_rate"] == pytest.approx(2 / 3)
    assert got["cache_request_weighted_hit_rate"] == pytest.approx(1 / 3)
    assert got["cache_capacity_tokens"] == 5000


def test_a_run_with_nothing_served_has_zero_rates():
    rows = frame(input_tokens=[100], cached_tokens=[0], status=["rejected"])
    got = cache_summary(rows, CacheCounters(), None)
    assert (got["cache_token_hit_rate"], got["cache_request_hit_rate"],
            got["cache_request_weighted_hit_rate"]) == (0.0, 0.0, 0.0)


def test_hits_by_tier():
    assert tier_hits(frame(input_tokens=[10], cached_tokens=[9])) == {
        "cache_hit_tokens_hbm": 9, "cache_hit_tokens_host": 0, "cache_hit_tokens_disk": 0,
        "cache_hit_tokens_pool": 0}
    rows = frame(input_tokens=[100, 100], cached_tokens=[80, 40], cached_tokens_host=[30, 0],
                 cached_tokens_pool=[0, 25])
    assert tier_hits(rows) == {"cache_hit_tokens_hbm": 65, "cache_hit_tokens_host": 30,
                               "cache_hit_tokens_disk": 0, "cache_hit_tokens_pool": 25}


def test_a_record_table_becomes_a_frame_without_a_copy():
    table = RecordTable(CacheOnlyRecord)
    table.append((0, "s1", "completed", 0.0, 100, 5, 50, 0, 0, 0))
    table.append((1, None, "completed", 1.0, 200, 5, 0, 0, 0, 0))
    got = records_frame(table, CacheOnlyRecord)
    assert list(got.columns) == list(CacheOnlyRecord._fields)
    assert np.shares_memory(got["input_tokens"].to_numpy(), table.columns()["input_tokens"])
    assert isinstance(got["status"].dtype, pd.ArrowDtype)  # strings stay Arrow-backed
    assert got["session_id"].tolist()[0] == "s1" and pd.isna(got["session_id"].tolist()[1])
    rows = records_frame([CacheOnlyRecord(*row) for row in [
        (0, None, "completed", 0.0, 100, 5, 50, 0, 0, 0)]], CacheOnlyRecord)
    assert rows["cached_tokens"].tolist() == [50]
