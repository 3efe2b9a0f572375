"""Prefill/decode disaggregation (engine/disaggregation.py), worked by hand: 1 s steps,
4-token pages, 1,000 KV bytes per token, a KV link of 1,000 B/s with 0.5 s latency."""

import numpy as np
import pandas as pd
import pytest
from fakes import Ticks, lru
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.cache.pool import PoolSpec, SharedPool
from prefixsim.config import load_config
from prefixsim.engine.disaggregation import Disaggregation
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


def serve(requests, prefill=1, decode=1, capacity=100, max_run_steps=1, pool=None):
    caches = [lru(capacity) for _ in range(prefill + decode)]
    return replay_timed(requests, Fleet(caches, Ticks(), ContinuousBatching(64, 8),
                        ROUTERS.build("round_robin"), kv_bytes_per_token=1000,
                        disaggregation=Disaggregation(prefill, decode, **LINK), pool=pool),
                        Sampling(check_invariants=True, max_run_steps=max_run_steps))


def test_prefill_transfer_decode_known_answer():
    """A (L=8, 3 out) prefills on replica 0, 0 -> 1: its first token at 1 (TTFT 1 s).
    Its 8 tokens of KV (8,000 B) cross the link in 0.5 + 8 = 8.5 s, landing at 9.5 on
    replica 1, which decodes token 2 by 10.5 (an ITL gap of 9.5 s) and token 3 by 11.5.
    TPOT (11.5 - 1) / 2 = 5.25 s. The prefill replica kept A's KV until 9.5."""
    result = serve([Request(0, 0.0, 8, 3, (1, 2), 4)])
    a = result.records[0]
    assert (a.replica, a.decode_replica) == (0, 1)
    assert (a.ttft_ms, a.e2el_ms, a.tpot_ms) == (1000.0, 11500.0, 5250.0)
    assert sorted(result.itl_segments) == [(1.0, 1), (9.5, 1)]
    assert result.transfer_links[0].bytes == 8000


def test_one_token_requests_finish_on_the_prefill_replica():
    result = serve([Request(0, 0.0, 8, 1, (1, 2), 4)])
    assert result.records[0].decode_replica is None
    assert result.transfer_links[0].bytes == 0


def test_two_transfers_contend_on_one_link():
    """A and B (L=8, 2 out each) prefill together 0 -> 1 on the one prefill replica, then
    both go to decode replicas (the least loaded: 1, then 2). Their transfers queue on
    replica 0's link: A lands at 1 + 8.5 = 9.5, B at 9.5 + 8.5 = 18; each decodes its second
    token in the next second (10.5 and 19)."""
    result = serve([Request(0, 0.0, 8, 2, (1, 2), 4), Request(1, 0.0, 8, 2, (3, 4), 4)],
                   prefill=1, decode=2)
    a, b = result.records
    assert (a.decode_replica, b.decode_replica) == (1, 2)
    assert (a.finish_s, b.finish_s) == (10.5, 19.0)
    assert result.transfer_links[0].busy_s == 17.0


def test_a_decode_replica_pulls_only_what_it_can_hold_to_the_end():
    """Decode replica of 24 tokens: A (L=8, 9 out: 8 + 9 = 17 tokens over its life) is
    pulled at 1; B (L=8, 9 out) finishes prefilling at 2 but 17 + 17 > 24, so it queues
    until A finishes (A lands 9.5, decodes 8 tokens 9.5 -> 17.5); B is pulled at 17.5, lands
    at 26, decodes to 34."""
    result = serve([Request(0, 0.0, 8, 9, (1, 2), 4), Request(1, 1.0, 8, 9, (3, 4), 4)],
                   capacity=24)
    a, b = result.records
    assert a.finish_s == 17.5
    assert b.first_token_s == 2.0 and b.finish_s == 34.0


@pytest.mark.parametrize("max_run_steps", [1, None])
def test_a_pull_that_fits_mid_run_starts_at_once(max_run_steps):
    """Decode replica of 32 tokens. A (L=8, 9 out) lands at 9.5 and decodes its 8 tokens
    9.5 -> 17.5. B (L=8, 9 out, arriving at 11) is handed over at 12, mid-step: A's KV and
    the 3 decode tokens reserved so far hold 11, and A will still grow by 5 beyond the
    token its step in progress holds, so B's 8 + 8 fits (16 + 5 <= 32 - 11). B's pull
    starts at 12 and lands at 20.5; B decodes to 28.5. A fit test that counted the step in
    progress twice (reserved and still to grow) would wait for the next boundary, 12.5; one
    that took a whole run's up-front reservation as it stands, for the run's end at 17.5."""
    result = serve([Request(0, 0.0, 8, 9, (1, 2), 4), Request(1, 11.0, 8, 9, (3, 4), 4)],
                   capacity=32, max_run_steps=max_run_steps)
    a, b = result.records
    assert a.finish_s == 17.5
    assert (b.first_token_s, b.finish_s) == (12.0, 28.5)


class OffGrid(Ticks):
    """Step times off the link's half-second grid that grow with the contexts (as a
    roofline's do), so that no step boundary ties an arrival or a landing: at a tie the
    order of simultaneous events decides, which is no difference between the two paths."""

    def step_time_s(self, batch) -> float:
        return 1.0137

    def decode_steps_time_s(self, contexts, num_steps) -> float:
        # sum over the steps of 0.9731 + 1e-4 x (the batch's context tokens at that step)
        grown = num_steps * sum(contexts) + len(contexts) * num_steps * (num_steps - 1) // 2
        return num_steps * 0.9731 + 1e-4 * grown


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
       st.sampled_from([None, 40, "unbounded"]), st.booleans())
def test_every_request_finishes_and_memory_accounts_hold(seed, prefill, decode, capacity,
                                                         max_run_steps, pool_tokens, through):
    """Random workloads, tight memory, with or without a shared pool: no request is lost
    (each completes or is rejected for good), memory accounting holds on every replica and
    the pool after every step (check_invariants), every decode is on a decode replica."""
    requests = workload(seed)
    pool = None if pool_tokens is None else SharedPool(
        lru(None if pool_tokens == "unbounded" else pool_tokens),
        PoolSpec(1000.0, 1000.0, 0.1, through), lambda: 0.0)
    result = serve(requests, prefill, decode, capacity, max_run_steps, pool)
    assert len(result.records) == len(requests)
    for record, request in zip(result.records, requests, strict=True):
        assert record.status in ("completed", "rejected")
        if record.status == "completed":
            assert record.output_tokens == max(1, request.output_tokens)
            assert record.replica < prefill
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
    with pytest.raises(InputError, match="go together"):
        load_config(overrides={**base, "engine.prefill_replicas": 1})
    with pytest.raises(InputError, match="replicas"):
        load_config(overrides={**base, "engine.prefill_replicas": 1,
                               "engine.decode_replicas": 1, "engine.replicas": 4})


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 2), st.integers(1, 2),
       st.sampled_from([60, 200, 1000]))
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
