"""Metrics as vLLM defines them, worked by hand with 1 s steps and 4-token pages:
per-chunk KV allocation, ITL stalls after a preemption, a resumed request's decode context,
rejected requests outside token totals and hit rates, goodput only with an SLO."""

from fakes import Ticks, lru

from prefixsim.cache import CacheCounters
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.request_state import ServedRecord
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.metrics.requests import cache_summary, records_frame, request_summary
from prefixsim.metrics.serving import serving_summary, weighted_distribution
from prefixsim.router import ROUTERS
from prefixsim.trace import Request


class RecordsContexts(Ticks):
    """Every step takes 1 s; records the decode contexts of every step."""

    def __init__(self) -> None:
        super().__init__()
        self.contexts: list[tuple[int, ...]] = []

    def step_time_s(self, batch) -> float:
        self.contexts.append(tuple(batch.decode_contexts))
        return super().step_time_s(batch)

    def decode_steps_time_s(self, contexts, num_steps) -> float:
        self.contexts += [tuple(c + k for c in contexts) for k in range(num_steps)]
        return super().decode_steps_time_s(contexts, num_steps)


def serve(requests, capacity, budget, cost=None):
    return replay_timed(requests, Fleet([lru(capacity)],
                        cost or RecordsContexts(), ContinuousBatching(budget, 4),
                        ROUTERS.build("round_robin")), Sampling(check_invariants=True,
                        max_run_steps=1))


def test_kv_is_allocated_per_scheduled_chunk():
    """Pool 40 tokens, budget 16. A (L=24, 8 out) and B (L=24, 4 out) arrive at 0.
    0->1: A's first chunk (16 tokens reserved, not 24). 1->2: A's last chunk (8 more) and,
    in the 8 tokens of budget left, B's first chunk: 8 + no decode room <= 40 - 24 free, so B
    is admitted at t=1 (reserving its whole prompt, B would wait for A's finish at t=9).
    B's next chunk (16) never fits beside A's decodes; A finishes at 9 (8 outputs: 1 + 7
    steps), B's last 16 tokens run 9->10 (first token at 10), 3 decodes to 13."""
    a, b = serve([Request(0, 0.0, 24, 8, tuple(range(1, 7)), 4),
                  Request(1, 0.0, 24, 4, tuple(range(10, 16)), 4)], 40, 16).records
    assert (a.first_token_s, a.finish_s) == (2.0, 9.0)
    assert b.queue_ms == 1000.0
    assert (b.first_token_s, b.finish_s) == (10.0, 13.0)


def test_itl_includes_the_stall_after_a_preemption_and_context_counts_once():
    """Pool 24 tokens, budget 16. A and B (L=8, 8 out each) prefill 0->1 and decode 1->5,
    when the pool is full: B (newest) is preempted after 5 tokens. A decodes 5->8. B resumes
    at 8 (its 2 pages still cached: hit 8 of its 13-token prompt, 5 recomputed), its next
    token at 9, two more by 11. ITL: A 7 gaps of 1 s; B 4 of 1 s, the stall 9 - 5 = 4 s,
    2 of 1 s. So p99 ITL (4 s) is not below B's TPOT (11 - 1) / 7 = 1.43 s. B's decode steps
    after resuming attend to 8 + 6 and 8 + 7 tokens: its input and what it generated, the
    5 generated before the preemption counted once (not 13 + 6)."""
    cost = RecordsContexts()
    result = serve([Request(0, 0.0, 8, 8, (1, 2), 4), Request(1, 0.0, 8, 8, (3, 4), 4)],
                   24, 16, cost)
    a, b = result.records
    assert (b.preemptions, b.recomputed_tokens, b.finish_s) == (1, 5, 11.0)
    assert b.tpot_ms == (11 - 1) / 7 * 1e3
    gaps = sorted(g for g, n in result.itl_segments for _ in range(n))
    assert gaps == [1.0] * 13 + [4.0]
    itl = weighted_distribution(result.itl_segments, "itl_ms")
    assert itl["p99_itl_ms"] == 4000.0 >= b.tpot_ms
    assert cost.contexts[-2:] == [(14,), (15,)]


def rows(*records):
    return records_frame(list(records), ServedRecord)


def record(rid, status, input_tokens, cached, output):
    nan = float("nan")
    done = status == "completed"
    return ServedRecord(rid, None, status, 0, 0.0, 1.0 if done else nan, 2.0 if done else nan,
                        input_tokens, cached, output, 0.0, 1000.0 if done else nan,
                        1000.0 if done and output > 1 else nan, 2000.0 if done else nan, 0, 0)


def test_rejected_requests_stay_out_of_token_totals_and_hit_rates():
    """Two served requests (100 tokens, 40 cached, 5 out; 300, 0, 1) and a rejected one of
    10,000 tokens: totals 400 in / 6 out, hit rate 40 / 400, not 40 / 10,400; failed 1."""
    frame = rows(record(0, "completed", 100, 40, 5), record(1, "completed", 300, 0, 1),
                 record(2, "rejected", 10_000, 0, 0))
    totals = request_summary(frame)
    assert totals == {"completed": 2, "failed": 1, "total_input_tokens": 400,
                      "total_output_tokens": 6}
    cache = cache_summary(frame, CacheCounters(), 1000)
    assert cache["cache_query_tokens"] == 400 and cache["cache_token_hit_rate"] == 0.1
    assert cache["cache_request_hit_rate"] == 0.5


def test_goodput_is_null_without_an_slo():
    frame = rows(record(0, "completed", 100, 0, 5))
    assert serving_summary(frame, 2.0, [(1.0, 4)])["request_goodput"] is None
    with_slo = serving_summary(frame, 2.0, [(1.0, 4)], goodput_ttft_ms=1500)
    assert with_slo["request_goodput"] == 0.5 == with_slo["request_throughput"]
