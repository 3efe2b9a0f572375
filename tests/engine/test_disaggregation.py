"""Prefill/decode disaggregation (engine/disaggregation.py), worked by hand: 1 s steps,
4-token pages, 1,000 KV bytes per token, a KV link of 1,000 B/s with 0.5 s latency."""

import numpy as np
import pandas as pd
import pytest
from fakes import Ticks, lru
from hypothesis import example, given, settings
from hypothesis import strategies as st

from prefixsim.cache.pool import PoolSpec, SharedPool
from prefixsim.config import load_config
from prefixsim.costmodel import ServingOverheads
from prefixsim.engine.disaggregation import Disaggregation, KVTransfer
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.request_state import ServedRecord
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.errors import InputError
from prefixsim.metrics.requests import records_frame
from prefixsim.pipeline import simulate
from prefixsim.router import ROUTERS
from prefixsim.trace import Request

LINK = {"link_bytes_s": 1000.0, "link_latency_s": 0.5}


def serve(requests, prefill=1, decode=1, capacity=100, max_run_steps=1, pool=None,
          local=None):
    caches = [lru(capacity) for _ in range(prefill + decode)]
    split = Disaggregation(prefill, decode, **LINK, local_prefill_max_tokens=local)
    return replay_timed(requests, Fleet(caches, Ticks(), ContinuousBatching(64, 8),
                        ROUTERS.build("round_robin"), kv_bytes_per_token=1000,
                        disaggregation=split, pool=pool),
                        Sampling(check_invariants=True, max_run_steps=max_run_steps))


def serve_with(requests, cost_model, prefill=1, decode=1, capacity=100, max_run_steps=1):
    caches = [lru(capacity) for _ in range(prefill + decode)]
    return replay_timed(requests, Fleet(caches, cost_model, ContinuousBatching(64, 8),
                        ROUTERS.build("round_robin"), kv_bytes_per_token=1000,
                        disaggregation=Disaggregation(prefill, decode, **LINK)),
                        Sampling(check_invariants=True, max_run_steps=max_run_steps))


def test_prefill_transfer_decode_known_answer():
    """A (L=8, 3 out) prefills on replica 0, 0 -> 1; its prefill's token is not the
    client's (vLLM's P/D proxy drops it). Its 8 tokens of KV (8,000 B) cross the link in
    0.5 + 8 = 8.5 s, landing at 9.5 on replica 1, which generates its 3 tokens by 10.5 (the
    first: TTFT 10.5 s, transfer and admission included), 11.5 and 12.5: TPOT
    (12.5 - 10.5) / 2 = 1 s, two ITL gaps of 1 s. The prefill replica kept A's KV until
    9.5."""
    result = serve([Request(0, 0.0, 8, 3, (1, 2), 4)])
    a = result.records[0]
    assert (a.replica, a.decode_replica) == (0, 1)
    assert (a.ttft_ms, a.e2el_ms, a.tpot_ms, a.output_tokens) == (10500.0, 12500.0, 1000.0, 3)
    assert sorted(result.itl_segments) == [(1.0, 1), (1.0, 1)]
    assert result.transfer_links[0].bytes == 8000


def test_one_request_colocated_against_1p1d():
    """One request (L=8, 2 out), idle wake-up 0.25 s, 1 s steps. Colocated: the wake-up and
    the prefill step give the first token at 1.25 (TTFT 1.25 s), the decode step the second
    at 2.25. 1P1D: the prefill ends at 1.25; 8 tokens cross in 0.5 + 8 = 8.5 s, landing at
    9.75 on the idle decode replica, which wakes (0.25 s) and steps (1 s): first token at
    11 (TTFT 11 s = prefill 1.25 + transfer 8.5 + wake-up 0.25 + its first step 1), second
    at 12 (TPOT 1 s)."""
    wakeup = Ticks(ServingOverheads(idle_wakeup_s=0.25))
    request = Request(0, 0.0, 8, 2, (1, 2), 4)
    colocated = replay_timed([request], Fleet([lru(100)], wakeup, ContinuousBatching(64, 8),
                                              ROUTERS.build("round_robin"),
                                              kv_bytes_per_token=1000)).records[0]
    assert (colocated.ttft_ms, colocated.tpot_ms) == (1250.0, 1000.0)
    split = serve_with([request], wakeup).records[0]
    assert (split.ttft_ms, split.tpot_ms, split.e2el_ms) == (11000.0, 1000.0, 12000.0)


def test_a_later_turn_pulls_only_what_the_decode_replica_lacks():
    """1P1D. A (L=8, pages 1, 2; 2 out) lacks all 8 tokens on the decode replica: 0.5 + 8 s
    of link, landing at 9.5; its whole pages join the decode replica's cache. B, the next
    turn (L=12, pages 1, 2, 3; 2 out, arriving at 20), finishes its prefill at 21 (its
    prefix hits the prefill replica's cache too); the decode replica holds pages 1 and 2
    (8 tokens; R3's cap leaves page 3, the prompt's last), so 4 tokens move: 0.5 + 4 s,
    landing at 25.5, first token at 26.5 (TTFT 6.5 s)."""
    result = serve([Request(0, 0.0, 8, 2, (1, 2), 4), Request(1, 20.0, 12, 2, (1, 2, 3), 4)])
    a, b = result.records
    assert b.decode_replica == a.decode_replica == 1
    assert b.ttft_ms == 6500.0 and b.cached_tokens == 8
    assert result.transfer_links[0].bytes == (8 + 4) * 1000


@pytest.mark.parametrize(("threshold", "local"), [(4, True), (3, False)])
def test_selective_disaggregation_below_and_at_the_threshold(threshold, local):
    """1P1D with local_prefill_max_tokens. A (L=8, pages 1, 2; 2 out): the decode replica
    lacks all 8 tokens, above either threshold: prefilled remotely, pulled (8 tokens),
    landing at 9.5. B, the next turn (L=12, pages 1, 2, 3; 2 out, at 20): the decode
    replica holds pages 1 and 2, so 4 tokens are uncached there. Threshold 4: B prefills on
    the decode replica (1 s, first token at 21, TTFT 1 s; second at 22), nothing moves for
    it. Threshold 3: B prefills on replica 0 (20 -> 21) and pulls 4 tokens (0.5 + 4 s),
    landing at 25.5, first token at 26.5 (TTFT 6.5 s)."""
    result = serve([Request(0, 0.0, 8, 2, (1, 2), 4), Request(1, 20.0, 12, 2, (1, 2, 3), 4)],
                   local=threshold)
    a, b = result.records
    assert (a.replica, a.decode_replica) == (0, 1)
    if local:
        assert (b.replica, b.decode_replica, b.cached_tokens) == (1, 1, 8)
        assert (b.ttft_ms, b.finish_s) == (1000.0, 22.0)
        assert result.transfer_links[0].bytes == 8 * 1000
    else:
        assert (b.replica, b.decode_replica) == (0, 1)
        assert b.ttft_ms == 6500.0
        assert result.transfer_links[0].bytes == (8 + 4) * 1000


def test_one_token_requests_finish_on_the_prefill_replica():
    result = serve([Request(0, 0.0, 8, 1, (1, 2), 4)])
    assert result.records[0].decode_replica is None
    assert result.transfer_links[0].bytes == 0


def test_two_transfers_contend_on_one_link():
    """A and B (L=8, 2 out each) prefill together 0 -> 1 on the one prefill replica, then
    both go to decode replicas (the least loaded: 1, then 2). Their transfers queue on
    replica 0's link: A lands at 1 + 8.5 = 9.5, B at 9.5 + 8.5 = 18; each generates its two
    tokens in the next two seconds (finishing at 11.5 and 20)."""
    result = serve([Request(0, 0.0, 8, 2, (1, 2), 4), Request(1, 0.0, 8, 2, (3, 4), 4)],
                   prefill=1, decode=2)
    a, b = result.records
    assert (a.decode_replica, b.decode_replica) == (1, 2)
    assert (a.finish_s, b.finish_s) == (11.5, 20.0)
    assert result.transfer_links[0].busy_s == 17.0


def test_a_decode_replica_pulls_only_what_it_can_hold_to_the_end():
    """Decode replica of 24 tokens: A (L=8, 9 out: 8 + 9 = 17 tokens over its life) is
    pulled at 1; B (L=8, 9 out) finishes prefilling at 2 but 17 + 17 > 24, so it queues
    until A finishes (A lands 9.5, generates 9 tokens 9.5 -> 18.5); B is pulled at 18.5,
    lands at 27, generates to 36 (its first token at 28)."""
    result = serve([Request(0, 0.0, 8, 9, (1, 2), 4), Request(1, 1.0, 8, 9, (3, 4), 4)],
                   capacity=24)
    a, b = result.records
    assert a.finish_s == 18.5
    assert b.first_token_s == 28.0 and b.finish_s == 36.0


@pytest.mark.parametrize("max_run_steps", [1, None])
def test_a_pull_that_fits_mid_run_starts_at_once(max_run_steps):
    """Decode replica of 34 tokens. A (L=8, 9 out) lands at 9.5 and generates its 9 tokens
    9.5 -> 18.5. B (L=8, 9 out, arriving at 11) is handed over at 12, mid-step: A's KV and
    the 3 decode tokens reserved so far hold 11, and A will still grow by 6 beyond the
    token its step in progress holds, so B's 8 + 9 fits (17 + 6 <= 34 - 11). B's pull
    starts at 12 and lands at 20.5; B generates to 29.5. A fit test that counted the step in
    progress twice (reserved and still to grow) would wait for the next boundary, 12.5; one
    that took a whole run's up-front reservation as it stands, for the run's end at 18.5."""
    result = serve([Request(0, 0.0, 8, 9, (1, 2), 4), Request(1, 11.0, 8, 9, (3, 4), 4)],
                   capacity=34, max_run_steps=max_run_steps)
    a, b = result.records
    assert a.finish_s == 18.5
    assert (b.first_token_s, b.finish_s) == (21.5, 29.5)


class OffGrid(Ticks):
    """Step times off the link's half-second grid that grow with the contexts (as a
    roofline's do), so that no step boundary ties an arrival or a landing: at a tie the
    order of simultaneous events decides, which is no difference between the two paths.
    (Incommensurate constants: sums of round ones meet the link's grid by chance. Ties
    that come from the engine's own clocks, a landing booked at a step's end, remain.)"""

    def step_time_s(self, batch) -> float:
        return 1.01370731

    def decode_steps_time_s(self, contexts, num_steps) -> float:
        # sum over the steps of 0.97310419 + 1.0731e-4 x (the batch's context tokens then)
        grown = num_steps * sum(contexts) + len(contexts) * num_steps * (num_steps - 1) // 2
        return num_steps * 0.97310419 + 1.0731e-4 * grown


def workload(seed, n=40):
    rng = np.random.default_rng(seed)
    system = (900, 901, 902)
    out, fresh, t = [], 10_000, 0.0
    for i in range(n):
        t += float(rng.exponential(0.3))
        extra = tuple(range(fresh, fresh + int(rng.integers(1, 6))))
        fresh += 10
        ids = system[:int(rng.integers(0, 4))] + extra
        tokens = 4 * (len(ids) - 1) + int(rng.integers(1, 5))
        out.append(Request(i, t, tokens, int(rng.integers(1, 30)), ids, 4))
    return out


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 3), st.integers(1, 3),
       st.sampled_from([60, 200, 1000]), st.sampled_from([None, 1]),
       st.sampled_from([None, 40, "unbounded"]), st.booleans(), st.sampled_from([None, 6]))
# a local prefill waiting for its pool load (async, R15) holds KV the queue head may need:
# the decode replica once took that head as one it could never hold
@example(seed=410, prefill=1, decode=1, capacity=60, max_run_steps=None, pool_tokens=40,
         through=True, local=6)
def test_every_request_finishes_and_memory_accounts_hold(seed, prefill, decode, capacity,
                                                         max_run_steps, pool_tokens, through,
                                                         local):
    """Random workloads, tight memory, with or without a shared pool: no request is lost
    (each completes or is rejected for good), memory accounting holds on every replica and
    the pool after every step (check_invariants), every decode is on a decode replica."""
    requests = workload(seed)
    pool = None if pool_tokens is None else SharedPool(
        lru(None if pool_tokens == "unbounded" else pool_tokens),
        PoolSpec(1000.0, 1000.0, 0.1, through), lambda: 0.0)
    result = serve(requests, prefill, decode, capacity, max_run_steps, pool, local)
    assert len(result.records) == len(requests)
    for record, request in zip(result.records, requests, strict=True):
        assert record.status in ("completed", "rejected")
        if record.status == "completed":
            assert record.output_tokens == max(1, request.output_tokens)
            assert record.first_token_s <= record.finish_s
            if record.replica >= prefill:  # prefilled on its decode replica (selective)
                assert local is not None and record.decode_replica == record.replica
                continue
            assert (record.decode_replica is None) == (record.output_tokens == 1)
            if record.decode_replica is not None:
                assert record.decode_replica >= prefill


def test_config_runs_disaggregated_and_checks_its_keys():
    base = {"trace.path": "traces/demo_chat.jsonl"}
    config = load_config(overrides={**base, "trace.max_requests": 40,
                                    "engine.prefill_replicas": 1,
                                    "engine.decode_replicas": 2})
    summary = simulate(config).summary
    assert summary["completed"] == 40 and summary["replicas"] == 3
    assert summary["prefill_replicas"] == 1 and summary["decode_replicas"] == 2
    assert summary["kv_transfer_bytes"] > 0 and 0 < summary["decode_busy_fraction"] < 1
    local = simulate(load_config(overrides={
        **base, "trace.max_requests": 40, "engine.prefill_replicas": 1,
        "engine.decode_replicas": 2,
        "engine.disaggregation.local_prefill_max_tokens": 10**9})).summary
    assert local["completed"] == 40 and local["kv_transfer_bytes"] == 0  # all prefill locally
    aware = simulate(load_config(overrides={
        **base, "trace.max_requests": 40, "engine.prefill_replicas": 1,
        "engine.decode_replicas": 2, "router.decode_router": "prefix_aware"})).summary
    assert aware["completed"] == 40 and 0 < aware["kv_transfer_bytes"]
    with pytest.raises(InputError, match="decode_router"):
        load_config(overrides={**base, "router.decode_router": "nearest"})
    with pytest.raises(InputError, match="needs prefill_replicas"):
        load_config(overrides={**base, "engine.disaggregation.local_prefill_max_tokens": 8})
    with pytest.raises(InputError, match="go together"):
        load_config(overrides={**base, "engine.prefill_replicas": 1})
    with pytest.raises(InputError, match="replicas"):
        load_config(overrides={**base, "engine.prefill_replicas": 1,
                               "engine.decode_replicas": 1, "engine.replicas": 4})


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 2), st.integers(1, 2),
       st.sampled_from([60, 200, 1000]))
# a pull landing exactly on a decode step's end (165.83537698 + 20.5 = 185.35959004 +
# 0.97578694: the pull was booked at a step's end too), the two paths a float's last bit
# apart there: decode_steps.BOUNDARY_TIE_S puts it on the boundary in both
@example(seed=1562, prefill=2, decode=1, capacity=60)
def test_whole_decode_runs_equal_step_by_step_when_disaggregated(seed, prefill, decode,
                                                                 capacity):
    """Disaggregated serving, whole decode runs against one step per timeout: the same
    records (times to float rounding: a run's time is one product, stepping a sum)."""
    requests = workload(seed)

    def frame(max_run_steps):
        caches = [lru(capacity)
                  for _ in range(prefill + decode)]
        result = replay_timed(requests, Fleet(caches, OffGrid(), ContinuousBatching(64, 8),
                              ROUTERS.build("round_robin"), kv_bytes_per_token=1000,
                              disaggregation=Disaggregation(prefill, decode, **LINK)),
                              Sampling(max_run_steps=max_run_steps))
        return records_frame(result.records, ServedRecord)

    fast, slow = frame(None), frame(1)
    floats = fast.select_dtypes("float").columns
    pd.testing.assert_frame_equal(fast.drop(columns=floats), slow.drop(columns=floats))
    pd.testing.assert_frame_equal(fast[floats], slow[floats], rtol=1e-9, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 2), st.integers(1, 3))
def test_kv_transfer_counts_exactly_what_the_decode_replica_lacked(seed, prefill, decode):
    """Request by request, against a brute-force model: with room for everything (nothing
    evicted), a decode replica holds the whole pages of every prompt that landed on it
    before; a pull moves the prompt less its longest run of such pages (R3's cap), and
    `kv_transfer_bytes` is the sum of those pulls."""
    pulls = []
    book = KVTransfer.book

    def spy(self, source, state, num_tokens, now):
        wait = book(self, source, state, num_tokens, now)
        pulls.append((now, now + wait, state.decode_replica, state.request, num_tokens))
        return wait

    requests = workload(seed)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(KVTransfer, "book", spy)
        result = serve_with(requests, OffGrid(), prefill, decode, capacity=100_000)
    assert len(pulls) == sum(r.output_tokens > 1 for r in requests)
    for now, _, replica, request, moved in pulls:
        held = set()
        for _, landed, other_replica, other, _ in pulls:
            if other_replica == replica and landed < now:
                whole = other.num_pages - (other.input_tokens % other.page_size_tokens != 0)
                held.update(other.page_ids[:whole])
        run = 0
        for page_id in request.page_ids[:request.matchable_pages(request.input_tokens)]:
            if page_id not in held:
                break
            run += 1
        assert moved == request.input_tokens - request.prefix_tokens(run)
    assert sum(link.bytes for link in result.transfer_links) == 1000 * sum(
        moved for *_, moved in pulls)


@pytest.mark.parametrize(("decode_router", "replica", "moved"),
                         [("least_loaded", 1, 44), ("prefix_aware", 2, 4)])
def test_the_decode_router_picks_the_decode_replica(decode_router, replica, moved):
    """1P2D, 1 KV byte per token (transfers take 0.5 s + 1 ms a token). X (L=8, 3 out) and
    A (L=40, pages 1-10, 30 out) prefill together 0 -> 1; X goes to decode replica 1, A to
    the less loaded 2 (which then holds A's 10 pages). B, A's next turn (L=44, pages 1-11,
    2 out, at 10), is handed over at 11: replica 1 is idle (X done by 5), replica 2 still
    has about 20 of A's tokens to generate. least_loaded (the default) picks 1, which lacks
    all 44 tokens; prefix_aware scores 2 at 40 cached - ~20 load > 0 and moves 4."""
    caches = [lru(100) for _ in range(3)]
    requests = [Request(0, 0.0, 8, 3, (70, 71), 4),
                Request(1, 0.0, 40, 30, tuple(range(1, 11)), 4),
                Request(2, 10.0, 44, 2, tuple(range(1, 12)), 4)]
    result = replay_timed(requests, Fleet(
        caches, Ticks(), ContinuousBatching(64, 8), ROUTERS.build("round_robin"),
        kv_bytes_per_token=1, disaggregation=Disaggregation(1, 2, **LINK),
        decode_router=ROUTERS.build(decode_router)), Sampling(check_invariants=True))
    x, a, b = result.records
    assert (x.decode_replica, a.decode_replica, b.decode_replica) == (1, 2, replica)
    assert result.transfer_links[0].bytes == 8 + 40 + moved
