"""Prefill/decode disaggregation (engine/disaggregation.py) at its edges, worked by hand:
1 s steps (`Ticks`), 4-token pages, 1,000 KV bytes per token, a KV link of 1,000 B/s with
0.5 s latency (n tokens cross in 0.5 + n s), caches of 100 tokens, one prefill replica
(replica 0) and one decode replica (replica 1) unless said."""

from __future__ import annotations

from bisect import bisect_right

import pytest
from fakes import Ticks, lru

from prefixsim.cache.classes import CacheRules, RequestClass
from prefixsim.cache.idle_ages import EDGES_S
from prefixsim.cache.ttl import TTLRule
from prefixsim.costmodel import ServingOverheads
from prefixsim.engine.disaggregation import Disaggregation
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.router import ROUTERS
from prefixsim.trace import Request

LINK = {"link_bytes_s": 1000.0, "link_latency_s": 0.5}


def serve(requests, *, local=None, max_num_seqs=8, decode_router=None, ttl=None, rules=None,
          prefill=1, decode=1, capacity=100, decode_capacity=None, cost_model=None, budget=64,
          caches=None, max_run_steps=1):
    if caches is None:
        caches = [lru(capacity if i < prefill or decode_capacity is None else decode_capacity,
                      ttl) for i in range(prefill + decode)]
    split = Disaggregation(prefill, decode, **LINK, local_prefill_max_tokens=local)
    router = None if decode_router is None else ROUTERS.build(decode_router[0],
                                                               **decode_router[1])
    fleet = Fleet(caches, cost_model or Ticks(), ContinuousBatching(budget, max_num_seqs),
                  ROUTERS.build("round_robin"), kv_bytes_per_token=1000, disaggregation=split,
                  rules=rules,
                  decode_router=router)
    return replay_timed(requests, fleet, Sampling(check_invariants=True,
                                                  max_run_steps=max_run_steps))


@pytest.mark.parametrize("c_out", [1, 2])
def test_a_landed_requests_first_token_in_a_local_prefill_step_ends_no_itl_gap(c_out):
    """Threshold 8. A (L=12, 3 out) lacks 12 > 8 on the decode replica: prefilled 0 -> 1
    on replica 0, its 12 tokens land at 1 + 12.5 = 13.5 on replica 1, which is then busy
    with C's local prefill (L=8, arriving 13.25: 13.25 -> 14.25). E (L=8, 2 out, local)
    arrives at 13.75 and waits. At 14.25 one step runs E's prefill with A's first decode
    (and C's second token when C wants 2): A's first token at 15.25 (TTFT 15.25 s) ends
    no ITL gap, C's token does (1 s). Then A and E decode 15.25 -> 16.25 (E done), A alone
    to 17.25."""
    result = serve([Request(0, 0.0, 12, 3, (1, 2, 3), 4),
                    Request(1, 13.25, 8, c_out, (7, 8), 4),
                    Request(2, 13.75, 8, 2, (9, 10), 4)], local=8)
    a, c, e = result.records
    assert (a.replica, a.decode_replica, c.replica, e.replica) == (0, 1, 1, 1)
    assert (a.first_token_s, a.finish_s, a.ttft_ms) == (15.25, 17.25, 15250.0)
    assert (c.first_token_s, c.finish_s) == (14.25, 14.25 + c_out - 1)
    assert (e.first_token_s, e.finish_s) == (15.25, 16.25)
    gaps = [(1.0, 1)] if c_out == 2 else []
    assert list(result.itl_segments) == gaps + [(1.0, 2), (1.0, 1)]


def test_a_local_prefill_waits_for_a_sequence_slot_that_pulls_hold():
    """max_num_seqs 2, threshold 8. A (L=12, 20 out) and B (L=12, 2 out, at 1) lack 12 on
    the decode replica: prefilled on replica 0 (0 -> 1, 1 -> 2), both pulled at once, their
    transfers queued on replica 0's link: A lands at 13.5, B at 26. C (L=8, 2 out, local)
    arrives at 5: the two pulls hold both slots, then A and B running do. A decodes 13.5 ->
    33.5; B, landing mid-step, joins at 26.5 and ends at 28.5. C prefills 28.5 -> 29.5
    beside A's decode: TTFT 24.5 s."""
    result = serve([Request(0, 0.0, 12, 20, (1, 2, 3), 4),
                    Request(1, 1.0, 12, 2, (4, 5, 6), 4),
                    Request(2, 5.0, 8, 2, (7, 8), 4)], local=8, max_num_seqs=2)
    a, b, c = result.records
    assert (a.decode_replica, b.decode_replica, c.replica) == (1, 1, 1)
    assert (a.first_token_s, a.finish_s) == (14.5, 33.5)
    assert (b.first_token_s, b.finish_s) == (27.5, 28.5)
    assert (c.first_token_s, c.finish_s, c.ttft_ms) == (29.5, 30.5, 24500.0)


@pytest.mark.parametrize("decode_router", [("least_loaded", {}), ("prefix_aware", {}),
                                           ("prefix_aware", {"staleness_s": 5.0})])
def test_an_uncacheable_prompt_never_counts_the_decode_replicas_cache(decode_router):
    """Threshold 10, prompts under 12 tokens uncacheable, caches with a 1,000 s TTL. A (L=12,
    pages 1-3, 3 out) lacks 12 > 10: prefilled remotely, it lands at 13.5 and its 3 whole
    pages join the decode replica's cache. At 20 B (L=11, pages 1-3, 2 out) is uncacheable:
    12 cached tokens do not count, it lacks all 11 > 10 and prefills on replica 0 (20 ->
    21), then pulls all 11 (0.5 + 11 s), landing at 32.5. C (L=16, pages 1-4, 2 out, at 20)
    finds 12 cached there and lacks 4 <= 10: it prefills on the decode replica, 20 -> 21."""
    result = serve([Request(0, 0.0, 12, 3, (1, 2, 3), 4),
                    Request(1, 20.0, 11, 2, (1, 2, 3), 4),
                    Request(2, 20.0, 16, 2, (1, 2, 3, 4), 4)],
                   local=10, decode_router=decode_router, ttl=TTLRule(1000.0),
                   rules=CacheRules(min_cacheable_tokens=12))
    a, b, c = result.records
    assert (a.replica, a.decode_replica, a.finish_s) == (0, 1, 16.5)
    assert (b.replica, b.decode_replica, b.first_token_s) == (0, 1, 33.5)
    assert (c.replica, c.decode_replica, c.cached_tokens, c.ttft_ms) == (1, 1, 12, 1000.0)
    assert result.transfer_links[0].bytes == (12 + 11) * 1000


class DoubledTransfers(Ticks):
    """Every transfer takes twice bytes / bandwidth."""

    def transfer_time_s(self, num_bytes, bandwidth_bytes_s) -> float:
        return 2 * num_bytes / bandwidth_bytes_s


def test_the_kv_transfer_is_timed_by_the_cost_model():
    """A (L=8, 2 out): its 8 tokens cross in 0.5 + 2 * 8 = 16.5 s when the cost model
    doubles transfers: landing at 17.5, tokens at 18.5 and 19.5."""
    result = serve([Request(0, 0.0, 8, 2, (1, 2), 4)], cost_model=DoubledTransfers())
    (a,) = result.records
    assert (a.first_token_s, a.finish_s) == (18.5, 19.5)
    assert result.transfer_links[0].busy_s == 16.5


def test_pulls_wait_for_a_sequence_slot():
    """max_num_seqs 2. A (L=4, 10 out) and B (L=4, 2 out) prefill 0 -> 1, X (L=4, 2 out)
    1 -> 2 (2 sequences a step on replica 0 too). A and B are pulled at 1, their 4 tokens
    crossing one after another (4.5 s each): A lands at 5.5 and decodes 6.5 -> 15.5, B
    lands at 10, joins at A's step boundary 10.5 and ends at 12.5. Only then is there a
    slot for X: its pull starts at 12.5 and lands at 17, after A ended: tokens at 18, 19."""
    result = serve([Request(0, 0.0, 4, 10, (1,), 4), Request(1, 0.0, 4, 2, (2,), 4),
                    Request(2, 0.0, 4, 2, (3,), 4)], max_num_seqs=2)
    a, b, x = result.records
    assert (a.first_token_s, a.finish_s) == (6.5, 15.5)
    assert (b.first_token_s, b.finish_s) == (11.5, 12.5)
    assert (x.first_token_s, x.finish_s) == (18.0, 19.0)


def test_a_decode_replica_too_small_for_a_request_says_so():
    """The decode replica holds 10 tokens; A (L=8, 4 out) needs 8 + 4 there."""
    with pytest.raises(RuntimeError, match=r"^decode replica 1 can never hold request 0$"):
        serve([Request(0, 0.0, 8, 4, (1, 2), 4)], decode_capacity=10)


def test_a_pull_that_does_not_fit_unlocks_the_run_it_found_and_waits():
    """Decode replica of 24 tokens, caches with a 1,000 s TTL. A (L=8, pages 1, 2; 9 out)
    lands at 9.5 and decodes 9.5 -> 18.5; its pages stay in the decode cache. B (L=12,
    pages 1-3; 9 out, at 10) prefills 10 -> 11; the decode replica holds its 8 first
    tokens, but 4 lacking + 9 to generate do not fit beside A: B waits, the run it found
    unlocked. When A ends B is pulled (4 tokens, 4.5 s), landing at 23: tokens 24 -> 32."""
    caches = [lru(100, TTLRule(1000.0)), lru(24, TTLRule(1000.0))]
    result = serve([Request(0, 0.0, 8, 9, (1, 2), 4), Request(1, 10.0, 12, 9, (1, 2, 3), 4)],
                   caches=caches)
    a, b = result.records
    assert a.finish_s == 18.5
    assert (b.first_token_s, b.finish_s) == (24.0, 32.0)
    assert result.transfer_links[0].bytes == (8 + 4) * 1000


def test_a_pull_refreshes_the_run_it_finds_with_the_requests_class():
    """Caches with a 1,000 s TTL; prompts of 11 tokens or more are class gold (TTL 50 s,
    priority 2), the others silver (TTL 20 s). A (L=8, pages 1, 2; 2 out; silver) lands at
    9.5: the decode replica inserts its 2 pages (its recency 1: deadline 29.5). B (L=11,
    pages 1-3, the last partial; 2 out, gold) arrives at 20, prefills 20 -> 21 and is
    pulled at 21: the decode cache's pages 1, 2 are refreshed (recency 2, deadline 71,
    priority 2); B's 3 lacking tokens land at 24.5 (first token 25.5), and its partial
    page 3 is never inserted."""
    caches = [lru(100, TTLRule(1000.0)), lru(100, TTLRule(1000.0))]
    rules = CacheRules([RequestClass("gold", ttl_s=50.0, priority=2, min_input_tokens=11),
                        RequestClass("silver", ttl_s=20.0)])
    result = serve([Request(0, 0.0, 8, 2, (1, 2), 4), Request(1, 20.0, 11, 2, (1, 2, 3), 4)],
                   caches=caches, rules=rules)
    assert result.records[1].first_token_s == 25.5
    decode = caches[1]
    assert [(decode.get(i).recency, decode.get(i).deadline_s, decode.get(i).priority)
            for i in (1, 2)] == [(2, 71.0, 2), (2, 71.0, 2)]
    assert decode.get(3) is None



def test_each_idle_wake_up_of_the_decode_replica_is_charged_once():
    """Idle wake-up 0.25 s, threshold 8. A (L=12, 2 out) prefills 0 -> 1.25 (the prefill
    replica woke too), lands at 13.75 on the idle decode replica: wake-up to 14, tokens at
    15 and 16. B (L=12, 2 out, at 30) the same, 30 -> 31.25, landing 43.75: tokens at 45
    and 46. C (L=8, 2 out, local) arrives at 45.5, mid-step: the replica, busy, wakes for
    nothing; C prefills 46 -> 47 and decodes 47 -> 48. The decode replica was busy 2 *
    (0.25 + 2) + 2 = 6.5 s."""
    wakeup = Ticks(ServingOverheads(idle_wakeup_s=0.25))
    result = serve([Request(0, 0.0, 12, 2, (1, 2, 3), 4),
                    Request(1, 30.0, 12, 2, (11, 12, 13), 4),
                    Request(2, 45.5, 8, 2, (7, 8), 4)], local=8, cost_model=wakeup)
    a, b, c = result.records
    assert (a.first_token_s, a.finish_s, b.first_token_s, b.finish_s) == (15.0, 16.0, 45.0,
                                                                          46.0)
    assert (c.replica, c.first_token_s, c.finish_s) == (1, 47.0, 48.0)
    assert result.replicas[1].busy_s == 6.5


@pytest.mark.parametrize(("prefill", "decode"), [(0, 1), (1, 0), (0, 0)])
def test_a_split_needs_a_replica_on_each_side(prefill, decode):
    with pytest.raises(ValueError, match=r"^disaggregation needs >= 1 prefill and >= 1 decode "
                                         r"replica$"):
        Disaggregation(prefill, decode)


def test_a_local_prefill_threshold_may_be_0_but_not_negative():
    assert Disaggregation(1, 1, local_prefill_max_tokens=0).local_prefill_max_tokens == 0
    assert Disaggregation(2, 3).num_replicas == 5
    with pytest.raises(ValueError, match=r"^local_prefill_max_tokens must be >= 0$"):
        Disaggregation(1, 1, local_prefill_max_tokens=-1)


@pytest.mark.parametrize(("capacity", "b_first", "b_finish"), [(33, 28.0, 36.0),
                                                               (34, 19.5, 27.5)])
def test_a_pull_beside_a_pull_in_flight_needs_both_whole_futures(capacity, b_first,
                                                                 b_finish):
    """A (L=8, 9 out) is pulled at 1 (8 tokens reserved, landing at 9.5, tokens 10.5 ->
    18.5). B (L=8, 9 out, at 1) is handed over at 2, the decode replica idle: B needs 8 + 9
    beside A's 9 still to generate, 26 of the 34 - 8 left. With 34 tokens it is pulled at
    once (behind A on the link: lands at 18, joins at 18.5: 19.5 -> 27.5); with 33 it waits
    until A ends at 18.5 (lands at 27: 28 -> 36)."""
    result = serve([Request(0, 0.0, 8, 9, (1, 2), 4), Request(1, 1.0, 8, 9, (3, 4), 4)],
                   decode_capacity=capacity)
    a, b = result.records
    assert (a.first_token_s, a.finish_s) == (10.5, 18.5)
    assert (b.first_token_s, b.finish_s) == (b_first, b_finish)


@pytest.mark.parametrize(("capacity", "b_first", "b_finish"), [(50, 28.0, 36.0),
                                                               (51, 21.5, 29.5)])
def test_a_pull_mid_step_counts_the_step_in_progress_of_every_decoder(capacity, b_first,
                                                                      b_finish):
    """2P1D: A1 and A2 (L=8, 9 out) prefill on replicas 0 and 1 (0 -> 1), land together
    at 9.5 on replica 2 and decode 10.5 -> 18.5. B (L=8, 9 out, at 11) is handed over at 12,
    mid-step: A1 and A2 hold 8 + 3 each (2 tokens and the step in progress) and will grow
    by 14 - 2 = 12 more, so B's 8 + 9 fits exactly in 51 - 22 = 29: pulled at 12, landing at
    20.5 (21.5 -> 29.5). With 50 it waits until they end at 18.5 (lands at 27: 28 -> 36)."""
    result = serve([Request(0, 0.0, 8, 9, (1, 2), 4), Request(1, 0.0, 8, 9, (3, 4), 4),
                    Request(2, 11.0, 8, 9, (5, 6), 4)], prefill=2, decode_capacity=capacity)
    a1, a2, b = result.records
    assert (a1.decode_replica, a1.finish_s, a2.finish_s) == (2, 18.5, 18.5)
    assert (b.replica, b.first_token_s, b.finish_s) == (0, b_first, b_finish)


def test_a_pull_mid_run_finds_the_unstarted_steps_reservation_freed():
    """Decode replica of 46 tokens, whole decode runs in one timeout. X (L=12, pages 1-3,
    2 out; class gold, priority 5) lands at 13.5, its 3 pages inserted then, and ends at
    15.5: they stay cached, unlocked. A (L=8, 20 out, at 16) lands at 25.5; after its
    first step its run (26.5 on) reserves a token for each of its 19 steps. B (L=8, 2 out,
    at 28) is handed over at 29, 3 steps into A's run: those 3 tokens stay reserved, the
    16 others are freed, so B's 8 tokens fit in the 46 - 12 - 8 - 4 = 22 free, evicting
    nothing (the whole run reserved up front would leave 6 free and evict page 3 then, 15.5 s
    after its last use). The decode cache evicts page 3 only when B's landing and A's growth
    fill it, at 37.5: one page, 24 s idle."""
    caches = [lru(100), lru(46)]
    rules = CacheRules([RequestClass("gold", priority=5, min_input_tokens=12)])
    result = serve([Request(0, 0.0, 12, 2, (1, 2, 3), 4), Request(1, 16.0, 8, 20, (4, 5), 4),
                    Request(2, 28.0, 8, 2, (6, 7), 4)], caches=caches, rules=rules,
                   max_run_steps=None)
    x, a, b = result.records
    assert (x.finish_s, a.first_token_s, b.first_token_s) == (15.5, 26.5, 38.5)
    counters = caches[1].counters
    assert counters.evicted_pages == 1 and caches[1].get(3) is None
    assert counters.evicted_ages.counts[bisect_right(EDGES_S, 24.0)] == 1


def test_a_landed_request_preempted_before_its_first_token_gets_it_from_its_prefill():
    """Threshold 24, budget 8, decode replica of 53 tokens. A (L=28, 7 pages, 4 out)
    prefills on replica 0 in 4 chunks (0 -> 4) and is pulled at once (28 + 4 fit): its 28
    tokens land at 4 + 28.5 = 32.5. C (L=24, 2 out, at 30) prefills locally in 3 chunks,
    30 -> 33, its 6 pages joining the tree. At 33 both decode, but only 53 - 28 - 24 = 1
    token is free: A, the newest, is preempted before its first token. It is admitted
    again at once (6 pages hit, 4 tokens recomputed, its 7th page evicted) and prefills
    33 -> 34 beside C's last token: A's first token comes from that prefill, at 34, then
    35, 36, 37; every ITL gap is 1 s (C's one, A's three)."""
    result = serve([Request(0, 0.0, 28, 4, tuple(range(1, 8)), 4),
                    Request(1, 30.0, 24, 2, tuple(range(101, 107)), 4)],
                   local=24, decode_capacity=53, budget=8)
    a, c = result.records
    assert (a.replica, a.decode_replica, c.replica) == (0, 1, 1)
    assert (a.preemptions, a.recomputed_tokens, a.cached_tokens) == (1, 4, 0)
    assert (a.first_token_s, a.finish_s, c.first_token_s, c.finish_s) == (34.0, 37.0, 33.0,
                                                                          34.0)
    assert list(result.itl_segments) == [(1.0, 1)] * 4
