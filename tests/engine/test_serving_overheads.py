"""The cost model's serving overheads in the timed engine (docs/cost-models.md "Serving
overheads"), worked by hand with 1 s steps: frontend 0.25 s, emission 0.5 s, idle wake-up
0.125 s."""

import pytest
from fakes import Ticks, lru

from prefixsim.costmodel import ServingOverheads
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.router import ROUTERS
from prefixsim.trace import Request

OVERHEADS = ServingOverheads(frontend_s=0.25, emission_s=0.5, idle_wakeup_s=0.125)


def run(requests):
    return replay_timed(requests, Fleet([lru(1000)], Ticks(OVERHEADS),
                        ContinuousBatching(8192, 256), ROUTERS.build("round_robin")),
                        Sampling(check_invariants=True)).records


def test_overheads_add_to_ttft_and_e2e_not_tpot():
    """A arrives at 1.0, reaches the scheduler at 1.25; the idle replica's first step takes
    1 + 0.125 s: A's first token at 2.375 reaches the client at 2.875 (TTFT 1.875 s); two
    decode steps end at 4.375, seen at 4.875 (E2E 3.875 s); TPOT (4.875 - 2.875) / 2 = 1 s,
    as without overheads. B arrives at 2.0 (scheduled 2.25) while A prefills: no wake-up;
    it joins A's first decode step 2.375 -> 3.375, seen 3.875 (TTFT 1.875 s). C arrives at
    10 after the replica went idle at 4.375: it pays the wake-up again (TTFT 1.875 s)."""
    a, b, c = run([Request(0, 1.0, 4, 3, (1,), 4), Request(1, 2.0, 4, 1, (2,), 4),
                   Request(2, 10.0, 4, 1, (3,), 4)])
    assert a.arrival_s == 1.0 and a.first_token_s == pytest.approx(2.875)
    assert a.ttft_ms == pytest.approx(1875) and a.e2el_ms == pytest.approx(3875)
    assert a.tpot_ms == pytest.approx(1000)
    assert a.queue_ms == pytest.approx(250)
    assert b.ttft_ms == pytest.approx(1875)
    assert c.ttft_ms == pytest.approx(250 + 1125 + 500)


def test_frontend_time_grows_with_the_prompt_and_a_short_request_overtakes():
    """Frontend 0.25 s + 0.01 s per prompt token. A (100 tokens) is sent at 1.0 and reaches
    the scheduler at 1.0 + 0.25 + 1.0 = 2.25; B (4 tokens) is sent at 1.5 and reaches it at
    1.5 + 0.25 + 0.04 = 1.79, first: the idle replica's first step (B's prefill, 1 s + 0.125
    s wake-up) ends at 2.915, seen at 3.415 (B's TTFT 1.915 s). A waits for that step, then
    prefills 2.915 -> 3.915, seen 4.415: TTFT 3.415 s, its queue 1.915 s (the frontend
    included). The arrival times stay the sends."""
    overheads = ServingOverheads(frontend_s=0.25, emission_s=0.5, idle_wakeup_s=0.125,
                                 frontend_s_per_prompt_token=0.01)
    assert overheads.frontend_delay_s(100) == pytest.approx(1.25)
    a, b = replay_timed([Request(0, 1.0, 100, 1, (1,), 100), Request(1, 1.5, 4, 1, (2,), 4)],
                        Fleet([lru(1000)], Ticks(overheads), ContinuousBatching(8192, 256),
                              ROUTERS.build("round_robin")),
                        Sampling(check_invariants=True)).records
    assert (a.arrival_s, b.arrival_s) == (1.0, 1.5)
    assert b.ttft_ms == pytest.approx(1915)
    assert a.ttft_ms == pytest.approx(3415)
    assert a.queue_ms == pytest.approx(1915)
