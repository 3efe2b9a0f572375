"""Known answers and naive references for the edges of analysis/: the SHARDS hash and
sample, the sampled curve against a list-based LRU stack, the policy-curve front door's
refusals and method names, progress counts, the unbounded bound's switch from its id table
to its sorted array, next uses read mid-trace, and the trace figures of `trace inspect`.
Written from a mutation pass (README, "Mutation testing")."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from radix_reference import RadixCache

from prefixsim.analysis import seen_pages
from prefixsim.analysis.bounds import (
    accepted,
    reference_bounds,
    replay_hit_rate,
    unbounded_hit_rate,
)
from prefixsim.analysis.characterize import characterize, token_hit_rate
from prefixsim.analysis.curve import (
    CurvePoint,
    _hash64,
    _sampled,
    lru_curve,
    lru_curve_sampled,
    replay_curve,
    stack_distances,
)
from prefixsim.analysis.next_uses import NextUses
from prefixsim.analysis.policy_curves import curve_work, parse_policies, policy_curves
from prefixsim.analysis.seen_pages import SeenPages, unbounded_hit_tokens
from prefixsim.cache import POLICIES, TTLRule, build_policy, replay_cache
from prefixsim.cache.classes import CacheRules
from prefixsim.engine import replay_cache_only
from prefixsim.errors import InputError
from prefixsim.metrics.facts import Bounds
from prefixsim.trace import Request
from prefixsim.trace.columns import RequestColumns, as_columns
from prefixsim.trace.stream import NotStreamable

INF = float("inf")


# --- the hash and the sample ---------------------------------------------------------------

def test_hash_is_splitmix64():
    """splitmix64's first three outputs from state 0 (Vigna's reference splitmix64.c): the
    hash of id 0 at seed s is the (s + 1)th."""
    assert _hash64(0) == 0xE220A8397B1DCDAF
    assert _hash64(0, 1) == 0x6E789E6AA1B965F4
    assert _hash64(0, 2) == 0x06C45D188009454F
    # the id adds to the state: id GOLDEN at seed 0 starts from 2 x GOLDEN, the 2nd output
    assert _hash64(0x9E3779B97F4A7C15) == _hash64(0, 1)


def test_sampled_keeps_ids_strictly_under_the_threshold():
    for page_id in (0, 7, 123_456):
        h = _hash64(page_id)
        assert not _sampled(page_id, h) and _sampled(page_id, h + 1)
        assert _sampled(page_id, h + 1, 0) and (_sampled(page_id, h + 1, 5)
                                                == (_hash64(page_id, 5) < h + 1))


def sampled_reference(requests: list[Request], capacities: list[int], rate: float,
                      seed: int) -> list[CurvePoint]:
    """The docstring's estimator written out with a Python list as the LRU stack: sampled
    ids by the seeded hash, distances over the sample (sizes as first seen), scaled by the
    token share of distinct ids the hash kept; misses estimated, hits the rest."""
    threshold = int(rate * 2**64)
    size_of: dict[int, int] = {}
    kept: dict[int, bool] = {}
    stack: list[int] = []  # least recent first
    accesses: list[tuple[float, int]] = []  # (distance, counted tokens)
    total_counted = 0
    for request in requests:
        tokens = request.page_tokens()
        total_counted += sum(tokens) - 1
        last = len(tokens) - 1
        mine = []
        for depth in range(last, -1, -1):
            page_id = request.page_ids[depth]
            if page_id not in kept:
                kept[page_id] = _hash64(page_id, seed) < threshold
                size_of[page_id] = tokens[depth]
            if kept[page_id]:
                mine.append(page_id)
                if page_id in stack:
                    at = stack.index(page_id)
                    distance = float(sum(size_of[p] for p in stack[at:]))
                else:
                    distance = INF
                accesses.append((distance, tokens[depth] - (depth == last)))
        for page_id in mine:
            if page_id in stack:
                stack.remove(page_id)
            stack.append(page_id)
    actual = (sum(size_of[p] for p in kept if kept[p]) / sum(size_of.values()))
    query = sum(r.input_tokens for r in requests)
    points = []
    for capacity in capacities:
        misses = sum(c for d, c in accesses if not d / actual <= capacity) / actual
        hit = min(max(total_counted - misses, 0.0), float(total_counted))
        points.append(CurvePoint(capacity, int(round(hit)), query))
    return points


def mixed_trace(seed: int, n: int) -> list[Request]:
    """Sessions over shared roots with pages of 4 tokens and partial last pages whose ids
    recur with another size (a private tail id reused as a full page later)."""
    rng = random.Random(seed)
    sessions: list[list[int]] = [[0], [1, 2]]
    out, fresh = [], 100
    for i in range(n):
        path = list(rng.choice(sessions)) + list(range(fresh, fresh + rng.randint(0, 3)))
        fresh += 3
        if rng.random() < 0.5:
            sessions.append(path)
        tail = rng.randint(1, 4)
        tokens = 4 * (len(path) - 1) + tail
        out.append(Request(i, float(i), tokens, 1, tuple(path), 4))
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 40),
       rate=st.sampled_from([0.25, 0.5, 0.75, 1.0]), sample_seed=st.integers(0, 3))
def test_sampled_curve_equals_a_list_based_reference(seed, n, rate, sample_seed):
    requests = mixed_trace(seed, n)
    total = sum(r.input_tokens for r in requests)
    caps = sorted({0, 3, 4, 9, total // 3, total})
    try:
        got = lru_curve_sampled(requests, caps, rate, sample_seed)
    except InputError:  # nothing sampled: the reference would divide by zero
        assert not any(_hash64(p, sample_seed) < int(rate * 2**64)
                       for r in requests for p in r.page_ids)
        return
    assert got == sampled_reference(requests, caps, rate, sample_seed)


def test_the_seed_and_the_rate_choose_the_sample():
    """Half the ids at rate 0.5 (not all: a threshold past 2**64 keeps every id), another
    half at another seed, so another estimate; seed 0 is the default."""
    requests = [Request(i, float(i), 8, 1, (i % 400, 1000 + i), 4) for i in range(2000)]
    kept = sum(_sampled(p, 2**63) for p in range(400))
    assert 160 <= kept <= 240
    caps = [400, 1600]
    a = lru_curve_sampled(requests, caps, 0.5)
    assert a == lru_curve_sampled(requests, caps, 0.5, 0)
    assert a != lru_curve_sampled(requests, caps, 0.5, 1)
    assert a != lru_curve(requests, caps)


@pytest.mark.parametrize("rate", [0.0, -0.1, 1.5])
def test_sample_rate_outside_zero_to_one_is_refused(rate):
    with pytest.raises(ValueError) as caught:
        lru_curve_sampled([Request(0, 0.0, 8, 1, (1, 2), 4)], [8], rate)
    assert str(caught.value) == f"sample rate must be in (0, 1], got {rate}"


def test_an_empty_sample_names_the_option():
    requests = [Request(i, float(i), 8, 1, (1000 + i,), 8) for i in range(20)]
    with pytest.raises(InputError) as caught:
        lru_curve_sampled(requests, [8], rate=0.001)
    assert caught.value.field == "--sample-rate"
    assert caught.value.message == (
        "no page id was sampled at rate 0.001 (of 20 distinct ids); raise --sample-rate so "
        "rate x distinct ids is in the thousands")


# --- the front door: policies, methods, progress -------------------------------------------

def small_trace() -> list[Request]:
    return [Request(i, float(i), 8, 1, (i % 3, 10 + i), 4) for i in range(12)]


def test_parse_policies_keeps_order_once_and_refuses_nothing():
    assert parse_policies(" lru , fifo,lru,, s3fifo ") == ["lru", "fifo", "s3fifo"]
    with pytest.raises(InputError) as caught:
        parse_policies(" , ")
    assert (caught.value.field, caught.value.message) == (
        "--policy", "expected one or more policy names")
    with pytest.raises(InputError) as caught:
        parse_policies("lru,lur2")
    assert caught.value.field == "--policy" and "'lur2'" in caught.value.message


@pytest.mark.parametrize("policies, rate", [
    (["lru", "fifo"], 0.5), (["fifo"], 0.5), (["lru"], 0.0), (["lru"], 1.5)])
def test_a_sample_rate_needs_lru_alone_and_a_rate_in_zero_to_one(policies, rate):
    with pytest.raises(InputError) as caught:
        policy_curves(small_trace(), [8], policies, sample_rate=rate)
    assert (caught.value.field, caught.value.message) == (
        "--sample-rate", "needs --policy lru (alone) and 0 < rate <= 1")


def test_methods_named_and_lru_by_the_stack_pass_by_default():
    requests = small_trace()
    caps = [8, 40]
    curves = policy_curves(requests, caps, ["lru", "fifo"])
    assert [(c.policy, c.method) for c in curves] == [("lru", "stack"), ("fifo", "replay")]
    assert curves[0].points == lru_curve(requests, caps)
    forced = policy_curves(requests, caps, ["lru"], force_replay=True)
    assert (forced[0].method, forced[0].points) == ("replay", curves[0].points)
    sampled = policy_curves(requests, caps, ["lru"], sample_rate=1.0)
    assert (sampled[0].policy, sampled[0].method) == ("lru", "shards@1")
    inexact = [Request(0, 0.0, 3, 1, (1,), 4), Request(1, 1.0, 8, 1, (1, 2), 4)]
    assert policy_curves(inexact, [8], ["lru"])[0].method == (
        "stack (approximate: page sizes vary per id)")
    assert curve_work(requests, caps, ["lru", "fifo"]) == 12 + 2 * 12
    assert curve_work(requests, caps, ["lru"], force_replay=True) == 2 * 12


def test_progress_is_told_in_ten_thousands_then_the_rest():
    requests = [Request(i, float(i), 4, 1, (i % 50,), 4) for i in range(25_000)]
    told: list[int] = []
    stack_distances(requests, told.append)
    assert told == [10_000, 10_000]
    by_policy: list[tuple[str, int]] = []
    policy_curves(requests, [4], ["lru"], on_progress=lambda p, n: by_policy.append((p, n)))
    assert by_policy == [("lru", 10_000), ("lru", 10_000), ("lru", 5_000)]
    sampled: list[tuple[str, int]] = []
    policy_curves(requests, [4], ["lru"], sample_rate=1.0,
                  on_progress=lambda p, n: sampled.append((p, n)))
    assert sampled == [("lru", 25_000)]


def test_replay_curve_points_carry_the_query():
    requests = small_trace()
    points = replay_curve(requests, [0, 8, 1000], "lru")
    assert [p.query_tokens for p in points] == [96] * 3
    assert [p.capacity_tokens for p in points] == [0, 8, 1000]
    # 12 prompts of 2 full pages: the root pages 0, 1, 2 are reused by 9 requests (4 tokens
    # each) once the cache holds them; capacity 8 holds one request's two pages only
    assert points[2].hit_tokens == 9 * 4 and points[0].hit_tokens == 0


# --- the unbounded bound: table, sorted array, switch ---------------------------------------

def replayed(requests: list[Request]) -> list[int]:
    return [r.cached_tokens for r in
            replay_cache_only(requests, RadixCache(None, POLICIES.build("lru"))).records]


def test_a_negative_id_moves_the_table_to_the_sorted_array_keeping_what_it_saw():
    """Chunk 1 fills the table with ids 3 and 5; chunk 2 names id -4, so the seen ids move
    to the sorted array: 3 and 5 must still count as seen there."""
    first = [Request(0, 0.0, 8, 1, (3, 5), 4), Request(1, 1.0, 8, 1, (3, 5), 4)]
    second = [Request(2, 2.0, 12, 1, (3, 5, -4), 4), Request(3, 3.0, 9, 1, (3, 5, -4), 4)]
    seen = SeenPages()
    assert seen.hit_tokens(first).tolist() == [0, 7]
    assert seen.first is not None
    assert seen.hit_tokens(second).tolist() == [8, 8]  # 3rd page new, then cap L - 1 = 8
    assert seen.first is None and seen.ids.tolist() == [-4, 3, 5] and len(seen) == 3
    assert [0, 7, 8, 8] == replayed(first + second)


def test_a_huge_id_switches_too_and_the_chunks_sum():
    requests = [Request(i, float(i), 8, 1, (1, (1 << 40) + i % 2), 4) for i in range(6)]
    hits, query = unbounded_hit_tokens([requests[:2], requests[2:4], requests[4:]])
    assert (hits, query) == (sum(replayed(requests)), 48)
    assert hits == 4 * 7 + 4  # r1 hits its first page only; r2-r5 their whole prompt less 1


def test_table_requests_limit_switches_before_it_overflows(monkeypatch):
    monkeypatch.setattr(seen_pages, "TABLE_REQUESTS", 3)
    requests = [Request(i, float(i), 8, 1, (1, 2 + i % 2), 4) for i in range(5)]
    seen = SeenPages()
    got = seen.hit_tokens(requests[:2]).tolist()
    assert seen.first is not None
    got += seen.hit_tokens(requests[2:]).tolist()
    assert seen.first is None and got == replayed(requests)


# --- next uses read mid-trace --------------------------------------------------------------

def test_next_uses_chunk_in_the_middle(tmp_path):
    pages = [(1, 2), (1,), (1, 3), (2,), (3,)]
    reqs = [Request(i, float(i), 16 * len(p), 1, p, 16) for i, p in enumerate(pages)]
    uses = NextUses.build([as_columns(reqs)], tmp_path)
    values, offsets = uses.chunk(1, 2)
    assert values.tolist() == [2, -1, 4] and offsets == [0, 1, 3]
    values, offsets = uses.chunk(0, 1)
    assert values.tolist() == [1, 3] and offsets == [0, 2]
    assert uses.path == tmp_path / "next-uses.bin"
    assert np.fromfile(uses.path, dtype=np.int32).tolist() == [1, 3, 2, -1, 4, -1, -1]


# --- the figures of `trace inspect` ----------------------------------------------------------

def test_characterize_by_hand():
    """Pages of 4 tokens. r0 t=0 (1, 2) 8 in 3 out, session a; r1 t=2 (1, 2, 3) 12 in 5 out,
    session a; r2 t=6 (1,) 4 in 1 out; r3 t=100 (1, 2, 3, 4) 16 in 7 out, session b.
    Unbounded: r1 hits 8, r2 3 (its one page, capped at L - 1), r3 12: 23 of 40 tokens.
    A sliding TTL of 10 s or 1 min loses r3's hit (page 1 last used at 6 s): 11 of 40; 5 min
    and 1 h keep it. Inputs sorted 4, 8, 12, 16: p90 at rank 2.7 is 14.8, p99 at 2.97 is
    15.88; outputs 1, 3, 5, 7: 6.4 and 6.94."""
    requests = [Request(0, 0.0, 8, 3, (1, 2), 4, session_id="a"),
                Request(1, 2.0, 12, 5, (1, 2, 3), 4, session_id="a"),
                Request(2, 6.0, 4, 1, (1,), 4),
                Request(3, 100.0, 16, 7, (1, 2, 3, 4), 4, session_id="b")]
    replays: list[None] = []
    for trace in (requests, as_columns(requests)):
        figures = characterize(trace, on_replay=lambda: replays.append(None))
        stats_in, stats_out = figures.pop("input_tokens"), figures.pop("output_tokens")
        assert figures == {
            "requests": 4, "sessions": 2, "time_span_s": 100.0, "arrival_rate_per_s": 0.04,
            "page_size_tokens": 4, "total_input_tokens": 40, "total_output_tokens": 16,
            "pages": 10, "distinct_pages": 4, "unbounded_token_hit_rate": 23 / 40,
            "ttl_token_hit_rate": {"10s": 11 / 40, "1min": 11 / 40, "5min": 23 / 40,
                                   "1h": 23 / 40}}
        assert stats_in == pytest.approx(
            {"mean": 10.0, "median": 10.0, "p90": 14.8, "p99": 15.88, "min": 4, "max": 16})
        assert stats_out == pytest.approx(
            {"mean": 4.0, "median": 4.0, "p90": 6.4, "p99": 6.94, "min": 1, "max": 7})
        assert type(stats_in["min"]) is int and type(stats_in["mean"]) is float
        assert type(stats_in["median"]) is float
    assert len(replays) == 2 * 5


@pytest.mark.parametrize("columns", [False, True])
def test_arrival_rate_of_a_short_span_and_of_one_instant(columns):
    def made(times):
        requests = [Request(i, t, 4, 1, (10 + i,), 4) for i, t in enumerate(times)]
        return as_columns(requests) if columns else requests
    short = characterize(made([3.0, 3.5]))
    assert (short["time_span_s"], short["arrival_rate_per_s"]) == (0.5, 4.0)
    assert short["sessions"] is None and short["unbounded_token_hit_rate"] == 0.0
    instant = characterize(made([7.0, 7.0]))
    assert (instant["time_span_s"], instant["arrival_rate_per_s"]) == (0.0, None)


# --- the reference bounds --------------------------------------------------------------------

def revisit() -> list[Request]:
    """r0 (1, 2), r1 (3, 4), r2 (1, 2), 8 tokens each in pages of 4, a second apart:
    unbounded, r2 hits 7 of 24 tokens; LRU in 8 tokens has lost r0's pages by then."""
    return [Request(0, 0.0, 8, 1, (1, 2), 4), Request(1, 1.0, 8, 1, (3, 4), 4),
            Request(2, 2.0, 8, 1, (1, 2), 4)]


def test_accepted_at_the_limit_counts_an_empty_output_as_one_token():
    fits = [Request(0, 0.0, 9, 0, (1, 2, 3), 4), Request(1, 1.0, 8, 2, (1, 2), 4)]
    assert accepted(fits, 10) is fits and accepted(fits, None) is fits
    columns = as_columns(fits)
    assert accepted(columns, 10) is columns
    over = [*fits, Request(2, 2.0, 10, 0, (1, 2, 3), 4), Request(3, 3.0, 9, 2, (1, 2, 3), 4)]
    assert [r.request_id for r in accepted(over, 10)] == [0, 1]
    kept = accepted(as_columns(over), 10)
    assert isinstance(kept, RequestColumns) and kept.request_ids.tolist() == [0, 1]


def test_unbounded_hit_rate_replays_whatever_the_id_set_cannot_answer():
    requests = revisit()
    assert unbounded_hit_rate(requests, replay_cache(None, POLICIES.build("lru"))) == 7 / 24
    assert unbounded_hit_rate(as_columns(requests),
                              replay_cache(None, POLICIES.build("lru"))) == 7 / 24
    bounded = replay_cache(8, POLICIES.build("lru"))
    assert unbounded_hit_rate(requests, bounded) == 0.0
    off = CacheRules(enabled=False)
    assert unbounded_hit_rate(requests, replay_cache(None, POLICIES.build("lru")), off) == 0.0
    short_ttl = replay_cache(None, POLICIES.build("lru"), TTLRule(1.5))
    assert unbounded_hit_rate(requests, short_ttl) == 0.0  # r0's pages died at 1.5 s
    for empty in ([], as_columns([])):
        assert unbounded_hit_rate(empty, replay_cache(None, POLICIES.build("lru"))) == 0.0
    assert replay_hit_rate([], replay_cache(8, POLICIES.build("lru"))) == 0.0


def test_reference_bounds_asks_for_the_caches_it_needs():
    requests = revisit()
    asked: list[tuple[str, bool]] = []

    def make(policy: str, unbounded: bool):
        asked.append((policy, unbounded))
        return replay_cache(None if unbounded else 12, build_policy(policy, requests))

    # in 12 tokens r1 takes one of r0's pages: r2 hits its first page, 4 of 24 tokens
    belady = replay_hit_rate(requests, replay_cache(12, build_policy("belady", requests)))
    assert belady == 4 / 24
    assert reference_bounds(requests, 0.0, True, False, make) == Bounds(7 / 24, belady)
    assert asked == [("lru", True), ("belady", False)]
    asked.clear()
    assert reference_bounds(requests, 0.5, False, True, make) == Bounds(0.5, None)
    assert asked == []
    off = CacheRules(enabled=False)
    assert reference_bounds(requests, 0.0, True, False, make, off) == Bounds(0.0, 0.0)


# --- second round: what the first round's rerun left ------------------------------------------

def test_progress_of_a_pass_just_past_ten_thousand():
    """10,001 requests: the pass tells 10,000 at request 10,000, the front door the 1 left."""
    requests = [Request(i, float(i), 4, 1, (i % 50,), 4) for i in range(10_001)]
    told: list[tuple[str, int]] = []
    policy_curves(requests, [4], ["lru"], on_progress=lambda p, n: told.append((p, n)))
    assert told == [("lru", 10_000), ("lru", 1)]


def test_exact_is_a_bool():
    assert stack_distances([Request(0, 0.0, 8, 1, (1, 2), 4)]).exact is True
    conflict = [Request(0, 0.0, 3, 1, (1,), 4), Request(1, 1.0, 8, 1, (1, 2), 4)]
    assert stack_distances(conflict).exact is False


def test_curves_of_no_requests_and_of_a_request_without_pages():
    assert lru_curve([], [0, 8]) == [CurvePoint(0, 0, 0), CurvePoint(8, 0, 0)]
    # a request naming no page (kept apart by the curve: it hits nothing) last in the trace
    requests = [Request(0, 0.0, 8, 1, (1, 2), 4), Request(1, 1.0, 8, 1, (1, 2), 4),
                Request(2, 2.0, 1, 1, (), 4)]
    caps = [0, 4, 8, 100]
    assert lru_curve(requests, caps) == replay_curve(requests, caps)
    assert [p.hit_tokens for p in lru_curve(requests, caps)] == [0, 4, 7, 7]


def test_ids_outside_the_table_say_why_they_do_not_stream(tmp_path):
    reqs = [Request(0, 0.0, 16, 1, (1 << 28,), 16)]
    with pytest.raises(NotStreamable) as caught:
        NextUses.build([as_columns(reqs)], tmp_path)
    assert str(caught.value) == "page ids too large for the next-use table"


def test_columns_whose_pages_start_past_zero():
    """Columns may index into a larger id array: request 0's pages begin at position 2."""
    columns = RequestColumns(
        np.array([0, 1]), np.array([0.0, 1.0]), np.array([8, 8]), np.array([1, 1]),
        np.array([4, 4]), np.array([2, 4, 6]), np.array([98, 99, 1, 2, 1, 3]))
    figures = characterize(columns)
    assert (figures["pages"], figures["distinct_pages"]) == (4, 3)
    assert figures == characterize(list(columns))


def test_hit_rate_of_no_requests():
    assert token_hit_rate([]) == 0.0
    assert token_hit_rate(as_columns([])) == 0.0
    assert token_hit_rate([], ttl_s=60.0) == 0.0
