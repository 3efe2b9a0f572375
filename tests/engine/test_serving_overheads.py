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


def run_with_tokenizer(requests, replicas):
    overheads = ServingOverheads(frontend_s=0.25, emission_s=0.5, idle_wakeup_s=0.125,
                                 frontend_s_per_prompt_token=0.01)
    assert overheads.frontend_delay_s(100) == pytest.approx(1.25)
    return replay_timed(requests, Fleet([lru(1000) for _ in range(replicas)],
                                        Ticks(overheads), ContinuousBatching(8192, 256),
                                        ROUTERS.build("round_robin")),
                        Sampling(check_invariants=True)).records


def test_prompts_queue_for_the_one_tokenizer_of_a_replica():
    """Frontend 0.25 s after tokenising at 0.01 s per prompt token on one tokenizer. A (100
    tokens) sent at 1.0 is tokenised 1.0 -> 2.0 and reaches the scheduler at 2.25; B (4
    tokens) sent at 1.5 waits for the tokenizer: 2.0 -> 2.04, scheduler at 2.29. The idle
    replica prefills A 2.25 -> 3.375 (1 s + 0.125 s wake-up), seen at 3.875: TTFT 2.875 s;
    B prefills next, 3.375 -> 4.375, seen 4.875: TTFT 3.375 s, queue 1.875 s (tokenizer
    and frontend included). Arrival times stay the sends."""
    a, b = run_with_tokenizer([Request(0, 1.0, 100, 1, (1,), 100),
                               Request(1, 1.5, 4, 1, (2,), 4)], replicas=1)
    assert (a.arrival_s, b.arrival_s) == (1.0, 1.5)
    assert a.ttft_ms == pytest.approx(2875)
    assert b.ttft_ms == pytest.approx(3375) and b.queue_ms == pytest.approx(1875)


def test_with_a_tokenizer_each_a_short_prompt_overtakes_a_long_one():
    """Two replicas, two tokenizers: B is tokenised at once, 1.5 -> 1.54, and reaches the
    scheduler at 1.79, before A (2.25); round robin sends B to replica 0 and A to replica 1,
    both idle: B's prefill 1.79 -> 2.915, seen 3.415 (TTFT 1.915 s); A's 2.25 -> 3.375, seen
    3.875 (TTFT 2.875 s)."""
    a, b = run_with_tokenizer([Request(0, 1.0, 100, 1, (1,), 100),
                               Request(1, 1.5, 4, 1, (2,), 4)], replicas=2)
    assert b.ttft_ms == pytest.approx(1915) and a.ttft_ms == pytest.approx(2875)
