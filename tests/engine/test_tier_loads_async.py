"""Lower-tier loads off the batch (`cache.tier_load: async`, docs/cache-semantics.md R15)
against blocking copies, worked by hand.

Timed runs use `Ticks` (every step 1 s, a decode run of n steps n s), 4-token pages, 1,000
KV bytes per token and a host tier read at 1,600 B/s, so loading one 4-token page takes
L = 4,000 / 1,600 = 2.5 s.
"""

from __future__ import annotations

import pytest
from fakes import Ticks, lru
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefixsim.cache.tiers import TierSpec, TierStack
from prefixsim.config import load_config
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.errors import InputError
from prefixsim.pipeline.build import build
from prefixsim.router import ROUTERS
from prefixsim.trace import Request

P = 4
KV = 1000
HOST_BYTES_S = 1600.0
L = P * KV / HOST_BYTES_S  # one page's load: 2.5 s


def serve(requests, tier_load, *, host_pages=(), hbm=64, host=1000, max_num_seqs=8,
          budget=64):
    """Serve `requests` on one replica whose host tier starts with `host_pages`."""
    cache = lru(hbm)
    tiers = TierStack(cache, [TierSpec("host", host, HOST_BYTES_S)])
    for page_id in host_pages:
        tiers.tiers[0].put(page_id, P)
    fleet = Fleet([cache], Ticks(), ContinuousBatching(budget, max_num_seqs),
                  ROUTERS.build("round_robin"), tiers=[tiers], kv_bytes_per_token=KV,
                  tier_load=tier_load)
    return replay_timed(requests, fleet, Sampling(check_invariants=True))


@pytest.mark.parametrize("tier_load", ["async", "blocking"])
def test_a_lone_request_pays_its_load_before_its_prefill_in_either_mode(tier_load):
    """A (L=8: pages 1, 2) finds page 1 in host, nothing else runs: the copy (2.5 s) then
    its 1 s prefill step, TTFT 3.5 s in both modes (async: the request waits 0 -> 2.5 off
    the batch, then steps 2.5 -> 3.5)."""
    result = serve([Request(0, 0.0, 8, 1, (1, 2), P)], tier_load, host_pages=[1])
    (a,) = result.records
    assert (a.cached_tokens, a.cached_tokens_host) == (4, 4)
    assert a.ttft_ms == pytest.approx((L + 1.0) * 1e3, rel=1e-12)
    assert a.queue_ms == 0.0


# B decodes (1 prefill step 0 -> 1, then 9 decode steps); A arrives at 2.5, mid-step, with
# page 1 in host. Its admission waits for the step in progress (ends at 3).
DECODER_AND_LOADER = [Request(0, 0.0, 4, 10, (9,), P), Request(1, 2.5, 8, 1, (1, 2), P)]


def test_blocking_load_stalls_the_decoding_request():
    """Blocking: at 3 one step runs B's decode and A's chunk after the copy: 1 + 2.5 = 3.5 s
    (3 -> 6.5). A's TTFT 6.5 - 2.5 = 4; B's ITL shows the 3.5 s step and B ends 2.5 s late:
    3 tokens by 3, its 4th at 6.5, 6 more steps -> 12.5."""
    result = serve(DECODER_AND_LOADER, "blocking", host_pages=[1])
    b, a = result.records
    assert a.ttft_ms == 4000.0
    assert b.finish_s == 12.5
    assert max(result.itl_segments.gaps) == 1.0 + L


def test_async_load_leaves_the_decoding_request_stepping():
    """Async: A is admitted at 3, its copy runs 3 -> 5.5 while B's decode steps go on (3 ->
    4 -> 5 -> 6); A joins at the next boundary, 6, and its chunk runs with B's decode 6 -> 7:
    A's TTFT 7 - 2.5 = 4.5. B never waits: every gap is one 1 s step, it ends at 10 as if A
    were not there (10 tokens, 10 steps)."""
    result = serve(DECODER_AND_LOADER, "async", host_pages=[1])
    b, a = result.records
    assert (a.cached_tokens_host, a.ttft_ms) == (4, 4500.0)
    assert b.finish_s == 10.0
    assert set(result.itl_segments.gaps) == {1.0}


@pytest.mark.parametrize(("tier_load", "ttfts"), [("async", [L + 1, 2 * L + 1]),
                                                  ("blocking", [2 * L + 1, 2 * L + 1])])
def test_two_loads_queue_on_the_replicas_host_link(tier_load, ttfts):
    """A1 (pages 1, 2) and A2 (pages 3, 4) arrive together, pages 1 and 3 in host. Async: the
    copies queue on one link, 0 -> 2.5 and 2.5 -> 5; each request steps when its own copy
    is in: TTFTs 3.5 and 6. Blocking: one step pays both copies, 1 + 2 x 2.5: both 6."""
    result = serve([Request(0, 0.0, 8, 1, (1, 2), P), Request(1, 0.0, 8, 1, (3, 4), P)],
                   tier_load, host_pages=[1, 3])
    assert [r.ttft_ms for r in result.records] == [t * 1e3 for t in ttfts]
    assert [r.cached_tokens_host for r in result.records] == [4, 4]


def test_a_load_holds_no_sequence_slot_or_budget_while_it_runs():
    """max_num_seqs 1: A (host hit) is admitted at 0 and loads 0 -> 2.5 off the batch, so C
    (no hit, same arrival) takes the one slot and prefills 0 -> 1 (TTFT 1), decodes to 3;
    A waits at the queue's head until C ends at 3, then 3 -> 4 (TTFT 4)."""
    result = serve([Request(0, 0.0, 8, 1, (1, 2), P), Request(1, 0.0, 4, 3, (7,), P)],
                   "async", host_pages=[1], max_num_seqs=1)
    a, c = result.records
    assert (c.ttft_ms, c.finish_s) == (1000.0, 3.0)
    assert (a.ttft_ms, a.cached_tokens_host) == (4000.0, 4)


def test_a_loaded_request_whose_chunk_outgrows_its_reservation_grows_it():
    """Budget 8 at admission with B decoding: A (L=20, page 1 in host) reserves 4 + 7 (a
    first chunk of 7 = 8 - 1 decode). B finishes before A's copy ends, so A's chunk at
    re-admission is the whole budget, 8 tokens: the extra token is reserved then, and A
    prefills 16 tokens in two steps (8 + 8) after its copy."""
    result = serve([Request(0, 0.0, 4, 2, (9,), P), Request(1, 1.0, 20, 1, (1, 2, 3, 4, 5), P)],
                   "async", host_pages=[1], budget=8)
    b, a = result.records
    assert b.finish_s == 2.0
    assert a.ttft_ms == (L + 2.0) * 1e3  # admitted at 1, copy 1 -> 3.5, steps 3.5 -> 5.5


def test_tier_load_is_a_config_choice_defaulting_to_async():
    assert load_config().cache.tier_load == "async"
    config = load_config(overrides={"cache.tier_load": "blocking", "cache.capacity_tokens": 64})
    requests = [Request(0, 0.0, 8, 1, (1, 2), P)]
    assert build(config, requests).fleet.tier_load == "blocking"
    with pytest.raises(InputError, match="cache.tier_load"):
        load_config(overrides={"cache.tier_load": "sync"})


requests_lists = st.lists(
    st.tuples(st.floats(0, 6), st.integers(0, 3), st.integers(1, 4), st.integers(1, 4)),
    min_size=1, max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests_lists, st.integers(40, 72), st.integers(1, 4))
def test_async_loads_never_stall_the_batch(rows, hbm, max_num_seqs):
    """Random prompts over 4 shared prefixes, a small HBM that demotes to host: with async
    loads (memory invariants checked after every step) every request is served, a request
    that loaded from host waited at least its copy and one step, and when nothing was
    preempted every token gap is one 1 s step (Ticks): no copy ever stretched a step."""
    requests = []
    for i, (arrival, root, shared, own) in enumerate(sorted(rows)):
        ids = tuple(100 * root + k for k in range(shared)) + tuple(1000 + 10 * i + k
                                                                  for k in range(own))
        requests.append(Request(i, arrival, P * len(ids), 1 + own, ids, P))
    result = serve(requests, "async", hbm=hbm, max_num_seqs=max_num_seqs)
    assert all(r.status == "completed" for r in result.records)
    for record in result.records:
        if record.cached_tokens_host:
            load_s = record.cached_tokens_host * KV / HOST_BYTES_S
            assert record.ttft_ms >= (load_s + 1.0) * 1e3 - 1e-6
    if sum(r.preemptions for r in result.records) == 0:
        assert set(result.itl_segments.gaps) <= {1.0}
