"""Timed engine known answers: one request's prefill/TTFT/decode, a cached prefix, queueing.

Times are worked from the roofline formulas of docs/cost-models.md (llama-3.1-8b, one h100-sxm,
ηG 0.65, ηA 0.5, ηB 0.8, 0.2 ms step overhead); see test_costmodel_roofline.py for the
arithmetic of a single step.
"""

import pytest

from prefixsim.cache import POLICIES, SegmentCache
from prefixsim.costmodel import PrefillChunk, StepBatch, StepRoofline
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.presets import get_gpu, get_model
from prefixsim.router import ROUTERS
from prefixsim.trace import Request

# each test runs on the package's cache and on the per-page reference (conftest: each_cache)
pytestmark = pytest.mark.usefixtures("each_cache")
Cache = SegmentCache


LLAMA = get_model("llama-3.1-8b")
H100 = get_gpu("h100-sxm")
COST = StepRoofline(LLAMA, H100)
P = 16

PEAK, BW = 989e12, 3.35e12
LINEAR = 2 * LLAMA.linear_params_per_token
LOGITS = 2 * 4096 * 128256
PAIR = 32 * 4 * 32 * 128
KV = 131072
WEIGHTS = 16.06e9


def prefill_s(n, c):
    """One prefill chunk alone, by the formula."""
    compute = (LINEAR * n + LOGITS) / (PEAK * 0.65) + PAIR * (n * c + n * (n + 1) / 2) / (
        PEAK * 0.5)
    memory = (WEIGHTS + KV * (c + n)) / (BW * 0.8)
    return max(compute, memory) + 0.0002


def decode_s(context):
    """One decode step of one sequence attending to `context` tokens, by the formula."""
    compute = (LINEAR + LOGITS) / (PEAK * 0.65) + PAIR * context / (PEAK * 0.5)
    memory = (WEIGHTS + KV * context) / (BW * 0.8)
    return max(compute, memory) + 0.0002


def request(rid, arrival, input_tokens, output_tokens, ids=None, session=None):
    pages = -(-input_tokens // P)
    ids = tuple(ids) if ids is not None else tuple(rid * 1000 + i for i in range(pages))
    assert len(ids) == pages
    return Request(rid, arrival, input_tokens, output_tokens, ids, P, session)


def run(requests, replicas=1, capacity=400_000, router="round_robin", **kwargs):
    caches = [Cache(capacity, POLICIES.build("lru")) for _ in range(replicas)]
    scheduler = kwargs.pop("scheduler", ContinuousBatching(8192, 256))
    return replay_timed(requests, Fleet(caches, COST, scheduler, ROUTERS.build(router)),
                        Sampling(check_invariants=True, **kwargs))


def test_one_request_by_hand():
    """1,000-token prompt at t=2 s, 4 output tokens: TTFT = prefill(1000, 0) = 22.4466 ms
    (compute bound); then 3 decode steps at contexts 1001, 1002, 1003 (memory bound,
    ≈ 6.24 ms each); finish = 2 + TTFT + Σ decode."""
    result = run([request(0, 2.0, 1000, 4)])
    rec = result.records[0]
    ttft = prefill_s(1000, 0)
    assert ttft == pytest.approx(0.0224466, rel=1e-4)
    assert rec.status == "completed"
    assert rec.queue_ms == 0
    assert rec.first_token_s == pytest.approx(2.0 + ttft, rel=1e-12)
    assert rec.ttft_ms == pytest.approx(ttft * 1e3, rel=1e-9)
    decode = decode_s(1001) + decode_s(1002) + decode_s(1003)
    assert rec.finish_s == pytest.approx(2.0 + ttft + decode, rel=1e-11)
    assert rec.tpot_ms == pytest.approx(decode / 3 * 1e3, rel=1e-9)
    assert rec.output_tokens == 4 and rec.cached_tokens == 0


def test_cached_prefix_shrinks_ttft_by_the_formula():
    """Request B shares A's first 40 pages (640 tokens) and arrives after A finished:
    its TTFT is prefill(1000 - 640 new, 640 cached), which is shorter than the uncached
    prefill by exactly the formula's difference."""
    a = request(0, 0.0, 1000, 2)
    b = request(1, 5.0, 1000, 2, ids=[*a.page_ids[:40], *range(5000, 5023)])
    rec_a, rec_b = run([a, b]).records
    assert rec_b.cached_tokens == 640
    assert rec_b.ttft_ms == pytest.approx(prefill_s(360, 640) * 1e3, rel=1e-9)
    saved = (prefill_s(1000, 0) - prefill_s(360, 640)) * 1e3
    assert rec_a.ttft_ms - rec_b.ttft_ms == pytest.approx(saved, rel=1e-9)


def test_fully_cached_prompt_still_computes_one_token():
    """Edge case 3 at P=1: hit 999 of 1000, TTFT = prefill(1, 999)."""
    a = Request(0, 0.0, 1000, 2, tuple(range(1000)), 1)
    b = Request(1, 5.0, 1000, 2, a.page_ids, 1)
    rec_b = run([a, b]).records[1]
    assert rec_b.cached_tokens == 999
    assert rec_b.ttft_ms == pytest.approx(prefill_s(1, 999) * 1e3, rel=1e-9)


def test_fully_cached_prompt_hit_is_page_aligned():
    """P=16, L=1000 (62 full pages and an 8-token tail): the L - 1 cap is page-aligned
    (R3), so B hits 62 pages = 992 tokens and computes the 8-token tail again."""
    a = request(0, 0.0, 1000, 2)
    b = request(1, 5.0, 1000, 2, ids=a.page_ids)
    rec_b = run([a, b]).records[1]
    assert rec_b.cached_tokens == 992
    assert rec_b.ttft_ms == pytest.approx(prefill_s(8, 992) * 1e3, rel=1e-9)


def test_queueing_adds_to_ttft():
    """max_num_seqs=1: B (same arrival) waits for A to finish; TTFT_B = queue + prefill."""
    a = request(0, 0.0, 500, 3)
    b = request(1, 0.0, 300, 2)
    rec_a, rec_b = run([a, b], scheduler=ContinuousBatching(8192, 1)).records
    assert rec_b.queue_ms == pytest.approx(rec_a.e2el_ms, rel=1e-12)
    assert rec_b.ttft_ms == pytest.approx(rec_b.queue_ms + prefill_s(300, 0) * 1e3, rel=1e-9)


def test_chunked_prefill_splits_by_the_token_budget():
    """Budget 512: a 1,000-token prompt is prefilled as chunks (512, 0) then (488, 512)."""
    rec = run([request(0, 0.0, 1000, 1)], scheduler=ContinuousBatching(512, 4)).records[0]
    assert rec.ttft_ms == pytest.approx((prefill_s(512, 0) + prefill_s(488, 512)) * 1e3,
                                        rel=1e-9)


def test_two_requests_batch_into_one_mixed_step():
    """A and B arrive together: one step prefills both (budget 8192), so both get their
    first token at the end of that step."""
    a, b = request(0, 0.0, 800, 2), request(1, 0.0, 600, 2)
    rec_a, rec_b = run([a, b]).records
    step = COST.step_time_s(StepBatch((PrefillChunk(800, 0), PrefillChunk(600, 0))))
    assert rec_a.ttft_ms == pytest.approx(step * 1e3) and rec_b.ttft_ms == rec_a.ttft_ms


def test_arrival_during_a_decode_run_joins_at_the_next_step_boundary():
    """A decodes alone (50 steps of ~6.2 ms); B arrives at 0.1 s, mid-step: it is admitted
    at the end of the step in progress and prefilled in the next (mixed) step."""
    a = request(0, 0.0, 1000, 50)
    b = request(1, 0.1, 200, 2)
    rec_a, rec_b = run([a, b]).records
    start = prefill_s(1000, 0)
    elapsed = 0.1 - start
    steps, t = 0, 0.0
    while t < elapsed:
        t += decode_s(1001 + steps)
        steps += 1
    boundary = start + t
    mixed = COST.step_time_s(StepBatch((PrefillChunk(200, 0),), (1001 + steps,)))
    assert rec_b.first_token_s == pytest.approx(boundary + mixed, rel=1e-9)
    assert rec_b.queue_ms == pytest.approx((boundary - 0.1) * 1e3, rel=1e-6)
