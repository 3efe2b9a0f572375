"""The answer box (report/answers.py) and capacity in GiB (report/units.py): known answers
on small synthetic result frames, worked by hand in each docstring."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from prefixsim.report.answers import (
    belady_headroom,
    best_policy,
    capacity_answer,
    lowest_ttft,
    most_saved,
    shortest_ttl,
    smallest_capacity,
)
from prefixsim.report.units import kv_geometry

SWEPT = ["cache_policy", "cache_capacity_tokens", "cache_ttl_s"]
NAN = float("nan")


def frame(rows: list[tuple]) -> pd.DataFrame:
    """Rows of (run id, policy, capacity, TTL, hit rate, Belady, unbounded, GPU-s saved)."""
    return pd.DataFrame(rows, columns=[
        "run_id", "cache_policy", "cache_capacity_tokens", "cache_ttl_s",
        "cache_token_hit_rate", "cache_belady_token_hit_rate",
        "cache_unbounded_token_hit_rate", "prefill_gpu_s_saved"])


SWEEP = frame([
    ("lru-1k", "lru", 1000, NAN, 0.20, 0.40, 0.80, 10.0),
    ("s3-1k", "s3fifo", 1000, NAN, 0.26, 0.40, 0.80, 13.0),
    ("lru-4k", "lru", 4000, NAN, 0.70, 0.78, 0.80, 35.0),
    ("s3-4k", "s3fifo", 4000, NAN, 0.68, 0.78, 0.80, 34.0),
    ("lru-16k", "lru", 16000, NAN, 0.77, 0.80, 0.80, 38.5),
    ("s3-16k", "s3fifo", 16000, NAN, 0.78, 0.80, 0.80, 39.0),
    ("ttl-none", "lru", NAN, NAN, 0.80, NAN, 0.80, 40.0),
    ("ttl-10", "lru", NAN, 10.0, 0.60, NAN, 0.80, 30.0),
    ("ttl-60", "lru", NAN, 60.0, 0.795, NAN, 0.80, 39.7),
    ("ttl-600", "lru", NAN, 600.0, 0.80, NAN, 0.80, 40.0),
])


def test_best_policy_per_capacity_and_its_gain_over_lru():
    """1k: s3fifo 26% against LRU's 20% = +6.0 pp, 13 - 10 = 3.0 GPU-s more saved; 4k: LRU
    (70% > 68%); 16k: s3fifo 78% - 77% = +1.0 pp, 39 - 38.5 = 0.5 s. The unbounded TTL
    runs have no second policy and no answer; the winners' hit-rate cells are marked."""
    answer = best_policy(SWEEP, SWEPT)
    assert answer.answer == (
        "1k tokens: s3fifo +6.0 pp over LRU, saving 3.0 s more prefill GPU time than LRU; "
        "4k tokens: LRU (no policy beats it); "
        "16k tokens: s3fifo +1.0 pp over LRU, saving 0.5 s more prefill GPU time than LRU")
    assert answer.cells == (("s3-1k", "cache_token_hit_rate"), ("lru-4k", "cache_token_hit_rate"),
                            ("s3-16k", "cache_token_hit_rate"))


def test_one_policy_gives_no_best_policy_answer():
    assert best_policy(SWEEP[SWEEP["cache_policy"] == "lru"], SWEPT) is None


def test_smallest_capacity_reaching_95_percent_of_unbounded():
    """95% of 80% is 76%: LRU first reaches it at 16k (77%; 4k has 70%), and so does
    s3fifo (78%)."""
    answer = smallest_capacity(SWEEP, SWEPT)
    assert answer.answer == ("policy=lru: 16k tokens (77.0% of 80.0%); "
                             "policy=s3fifo: 16k tokens (78.0% of 80.0%)")
    assert answer.cells == (("lru-16k", "cache_capacity_tokens"),
                            ("s3-16k", "cache_capacity_tokens"))


def test_no_capacity_reaching_it_is_said():
    low = SWEEP[SWEEP["cache_capacity_tokens"] < 10000]
    answer = smallest_capacity(low, SWEPT)
    assert "policy=lru: not within the swept capacities (at 4k: 70.0%)" in answer.answer
    assert answer.cells == ()


def test_shortest_ttl_within_one_point_of_no_ttl():
    """No TTL: 80%. 10 s: 60% (20 pp short); 60 s: 79.5% (0.5 pp, within 1 pp): 60 s."""
    answer = shortest_ttl(SWEEP, SWEPT)
    assert answer.answer == ("policy=lru, capacity=unbounded: 60 s (79.5% against 80.0% "
                             "without a TTL)")
    assert answer.cells == (("ttl-60", "cache_ttl_s"),)
    assert shortest_ttl(SWEEP[SWEEP["cache_ttl_s"].isna()], SWEPT) is None


def test_headroom_to_belady():
    """Best online policy against Belady: 1k 40 - 26 = 14 pp, 4k 78 - 70 = 8 pp, 16k
    80 - 78 = 2 pp: at most 14.0 pp at 1k, at least 2.0 pp."""
    answer = belady_headroom(SWEEP, SWEPT)
    assert answer.answer == ("at most 14.0 pp, at 1k (s3fifo 26.0% against 40.0%); "
                             "at least 2.0 pp elsewhere")



def test_headroom_to_belady_where_a_policy_matches_it_or_one_capacity_is_swept():
    """A policy reaching Belady at 16k read 'at least 0.0 pp elsewhere': it says none now;
    with one capacity there is no elsewhere."""
    matched = SWEEP.copy()
    matched.loc[matched["run_id"] == "s3-16k", "cache_token_hit_rate"] = 0.80
    assert belady_headroom(matched, SWEPT).answer == (
        "at most 14.0 pp, at 1k (s3fifo 26.0% against 40.0%); "
        "none elsewhere: the best policy matches Belady at some capacity")
    one = SWEEP[SWEEP["cache_capacity_tokens"] == 1000]
    assert belady_headroom(one, SWEPT).answer == \
        "at most 14.0 pp, at 1k (s3fifo 26.0% against 40.0%)"


def test_a_priced_best_policy_is_cheaper_or_dearer_than_lru():
    """Both caches cost more than none ($-27.75 for s3fifo, $-29.69 for LRU): 'saving $1.94
    more than LRU' read as a saving; it is $1.94 cheaper than LRU. A best hit rate that
    costs more (its writes) is dearer."""
    frame = pd.DataFrame({"run_id": ["l", "s"], "cache_policy": ["lru", "s3fifo"],
                          "cache_capacity_tokens": [1000.0, 1000.0],
                          "cache_token_hit_rate": [0.2, 0.3],
                          "cost_saved_usd": [-29.69, -27.75]})
    swept = ["cache_policy", "cache_capacity_tokens"]
    assert best_policy(frame, swept).answer == \
        "1k tokens: s3fifo +10.0 pp over LRU, $1.94 cheaper than LRU"
    frame["cost_saved_usd"] = [1.0, 0.5]
    assert best_policy(frame, swept).answer == \
        "1k tokens: s3fifo +10.0 pp over LRU, $0.50 dearer than LRU"


def test_lowest_p99_ttft():
    timed = pd.DataFrame({"run_id": ["a", "b"], "router_name": ["round_robin", "prefix_aware"],
                          "p50_ttft_ms": [50.0, 40.0], "p99_ttft_ms": [300.0, 120.0]})
    answer = lowest_ttft(timed, ["router_name"])
    assert answer.answer == "router=prefix_aware: 120 ms, p50 40 ms"
    assert answer.cells == (("b", "p99_ttft_ms"),)



def test_lowest_p99_ttft_among_the_runs_that_kept_up_and_its_ties():
    """A sweep where least_loaded and session_affinity ran the same (no session ids) and
    prefix_aware fell behind: the lowest of those that kept up, its twin named; where no run
    kept up, the lowest anyway, said so (the answer named an overloaded run as if it were a
    choice)."""
    frame = pd.DataFrame({
        "run_id": ["a", "b", "c", "d"],
        "router_name": ["round_robin", "least_loaded", "session_affinity", "prefix_aware"],
        "p99_ttft_ms": [900.0, 400.0, 400.0, 100.0], "kept_up": [True, True, True, False]})
    answer = lowest_ttft(frame, ["router_name"])
    assert answer.answer == ("router=least_loaded: 400 ms (tied with "
                             "router=session_affinity) (of the 3 runs that kept up)")
    assert answer.cells == (("b", "p99_ttft_ms"),)
    frame["kept_up"] = False
    assert lowest_ttft(frame, ["router_name"]).answer == (
        "none kept up with its load (every queue grew); the lowest anyway, "
        "router=prefix_aware: 100 ms")
    frame["kept_up"] = [False, True, False, False]
    assert lowest_ttft(frame, ["router_name"]).answer == \
        "router=least_loaded: 400 ms (the one run that kept up)"
    frame["p99_ttft_ms"] = 5.0
    frame["kept_up"] = None  # unknown: not counted as falling behind
    assert lowest_ttft(frame, ["router_name"]).answer == \
        "router=round_robin: 5.0 ms (tied with 3 other runs)"


def test_most_saved_against_no_cache():
    """Priced: a 5-min TTL saves $1.25, a 1-h one (its writes at twice the price) $0.50, no
    TTL $0.75: the 5-min run. Where every run's cache costs more (-$1.29, -$2.86), the one
    losing least, said so; unpriced runs give no answer."""
    priced = pd.DataFrame({"run_id": ["a", "b", "c"], "cache_ttl_s": [300.0, 3600.0, NAN],
                           "cost_saved_usd": [1.25, 0.5, 0.75]})
    answer = most_saved(priced, ["cache_ttl_s"])
    assert answer.answer == "ttl=300 s: saves $1.25"
    assert answer.cells == (("a", "cost_saved_usd"),)
    losing = pd.DataFrame({"run_id": ["a", "b"], "cache_ttl_s": [60.0, 300.0],
                           "cost_saved_usd": [-2.86, -1.29]})
    assert most_saved(losing, ["cache_ttl_s"]).answer == \
        "none: every run's cache costs more than none; least, ttl=300 s: $1.29 more"
    assert most_saved(priced.assign(cost_saved_usd=NAN), ["cache_ttl_s"]) is None
    # Belady (offline: no server can run it) saves more, but is no answer
    bound = pd.concat([priced.assign(cache_policy="lru"), pd.DataFrame(
        {"run_id": ["d"], "cache_ttl_s": [NAN], "cost_saved_usd": [3.0],
         "cache_policy": ["belady"]})], ignore_index=True)
    assert most_saved(bound, ["cache_ttl_s"]).cells == (("a", "cost_saved_usd"),)
    assert most_saved(priced.drop(columns="cost_saved_usd"), ["cache_ttl_s"]) is None



def test_most_saved_by_a_run_without_a_ttl_names_the_best_with_one_too():
    """No TTL saves $2.00 against the 5-min TTL's $1.25: billed at 5-minute writes (R17), it
    keeps prefixes as no provider sells, so the answer gives the best run with a TTL too,
    both cells highlighted. Where no run has a TTL, nothing is added."""
    priced = pd.DataFrame({"run_id": ["a", "b", "c"], "cache_ttl_s": [300.0, 3600.0, NAN],
                           "cost_saved_usd": [1.25, 0.5, 2.0]})
    answer = most_saved(priced, ["cache_ttl_s"])
    assert answer.answer == ("ttl=none: saves $2.00; no TTL is priced at 5-minute writes, a "
                             "retention no provider sells; of the runs with a TTL, ttl=300 s: "
                             "saves $1.25")
    assert answer.cells == (("c", "cost_saved_usd"), ("a", "cost_saved_usd"))
    alone = priced.assign(cache_ttl_s=NAN, cache_policy=["lru", "fifo", "s3fifo"])
    assert most_saved(alone, ["cache_policy"]).answer == "policy=s3fifo: saves $2.00"


def test_capacity_in_gib_and_shares():
    """llama-3.1-8b keeps 32 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes = 131,072
    bytes a token: 80,000 tokens are 80,000 x 131,072 / 2^30 = 9.766 GiB, and on one 80 GiB
    H100 (TP 1) 9.766 / 80 = 12.2% of its HBM; at TP 2 each GPU holds half the heads (6.1%),
    and fp8 halves the bytes."""
    config = {"model": {"name": "llama-3.1-8b", "kv_dtype": "bf16"},
              "hardware": {"gpu": "h100-sxm", "tp": 1}}
    geometry = kv_geometry(config)
    assert geometry.gib(80000) == pytest.approx(80000 * 131072 / 2**30)
    assert geometry.hbm_share(80000) == pytest.approx(80000 * 131072 / (80 * 2**30))
    assert geometry.describe() == "llama-3.1-8b, bf16 KV, TP 1"
    tp2 = kv_geometry({**config, "hardware": {"gpu": "h100-sxm", "tp": 2}})
    assert tp2.hbm_share(80000) == pytest.approx(geometry.hbm_share(80000) / 2)
    fp8 = kv_geometry({**config, "model": {"name": "llama-3.1-8b", "kv_dtype": "fp8"}})
    assert fp8.gib(80000) == pytest.approx(geometry.gib(80000) / 2)
    assert math.isclose(geometry.tokens(geometry.gib(1234)), 1234)
    assert kv_geometry({"model": {"name": "no-such-model"}, "hardware": {}}) is None


def test_a_capacity_answer_worked_by_hand():
    """capacity.json's answer first in the box: the count, the SLOs it held, the neighbour
    that failed and why; the answer's probe's SLO cell highlighted."""
    found = {"search": "replicas", "knob": "engine.replicas", "answer": 5,
             "answer_run_id": "replicas5-21f1ec07", "offered_rate": 18.7,
             "first_failing": 4, "first_failing_reasons": "p99_ttft_ms 202.9 > 150",
             "slos": {"p99_ttft_ms": 150.0, "p99_tpot_ms": 25.0}, "goodput_share": None}
    answer = capacity_answer(found)
    assert answer.question == "Capacity: fewest replicas"
    assert answer.parts == ("5 replicas held p99_ttft_ms <= 150 ms and p99_tpot_ms <= 25 ms "
                            "and kept up", "4 replicas failed: p99_ttft_ms 202.9 > 150")
    assert answer.cells == (("replicas5-21f1ec07", "p99_ttft_ms"),)
    rate = capacity_answer({"search": "rate", "knob": "load.rate", "answer": 12.34567,
                            "answer_run_id": "r", "offered_rate": 12.1, "first_failing": None,
                            "slos": {}, "goodput_share": 0.9,
                            "note": "no probe failed within the knob's range (the answer "
                                    "is its limit)"})
    assert rate.question == "Capacity: highest rate"
    assert rate.parts == ("load.rate = 12.35 held goodput share >= 0.9 and kept up (offered "
                          "12.1 requests/s)", "no probe failed within the knob's range (the "
                          "answer is its limit)")
    assert rate.cells == (("r", "p99_ttft_ms"),)  # no SLO: the p99 TTFT cell


def test_a_capacity_search_without_an_answer_says_why():
    found = {"search": "replicas", "answer": None, "answer_run_id": None,
             "first_failing": 64, "slos": {"p99_ttft_ms": 2000.0},
             "note": "stopped: p99_ttft_ms stays 7,459 ms (SLO 2,000) at engine.replicas 16 "
                     "to 64; ..."}
    answer = capacity_answer(found)
    assert answer.parts == ("none: p99_ttft_ms stays 7,459 ms (SLO 2,000) at "
                            "engine.replicas 16 to 64; ...",)
    assert answer.cells == ()
    bare = capacity_answer({"search": "rate", "answer": None})
    assert bare.parts == ("none: no probe passed",)
