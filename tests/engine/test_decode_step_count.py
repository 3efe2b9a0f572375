"""A decode run woken before any of its steps ends (here: at its own start time) ran no step,
so it must not count in the replica's steps or the run's events."""

from fakes import Ticks, lru

from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.router import ROUTERS
from prefixsim.trace import Request


def req(rid, arrival, input_tokens, output_tokens, ids):
    return Request(rid, arrival, input_tokens, output_tokens, tuple(ids), 4)


def test_decode_run_woken_at_its_start_counts_no_step():
    """Round robin over two replicas, every step 1 s. Replica 0: A (L=4, 3 out) prefills
    t=0->1. B (t=0.5) goes to replica 1 and only then does the arrival process schedule C
    (t=1), so at t=1 replica 0 first starts A's decode run, then C arrives and wakes it at its
    start (0 steps done). Then C's prefill + A's decode t=1->2, and one decode step of both
    t=2->3: 3 steps, 3 s busy (the bug counted 4). Replica 1: B's prefill, 1 step.
    Events = steps (3 + 1) + requests (3)."""
    result = replay_timed([req(0, 0.0, 4, 3, [1]), req(1, 0.5, 4, 1, [2]), req(2, 1.0, 4, 2, [3])],
                          Fleet([lru(100), lru(100)], Ticks(), ContinuousBatching(8192, 256),
                          ROUTERS.build("round_robin")), Sampling(check_invariants=True))
    assert [(f.num_steps, f.busy_s) for f in result.replicas] == [(3, 3.0), (1, 1.0)]
    assert result.num_events == 7
    assert [r.finish_s for r in result.records] == [3.0, 1.5, 3.0]
