"""Closed-loop clients of the timed engine (engine/clients.py, docs/load.md "Closed loops").

Every run uses `Ticks` (each step, prefill or decode, takes 1 s), one replica, LRU, distinct
pages per request unless said otherwise, so a request of n output tokens alone on the
replica takes n s: one prefill step (its first token) and n - 1 decode steps.
"""

import numpy as np
import pytest
from fakes import Ticks, lru

from prefixsim.engine.clients import Concurrency, SessionClients
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.router import ROUTERS
from prefixsim.trace import Request
from prefixsim.trace.sessions import infer_sessions

P = 4


def req(rid, arrival, output_tokens, ids=None, session=None, input_tokens=8):
    ids = tuple(ids) if ids is not None else (10 * rid + 1, 10 * rid + 2)
    return Request(rid, arrival, input_tokens, output_tokens, ids, P, session)


def serve(requests, clients, replicas=1, time_scale=1.0):
    fleet = Fleet([lru(100_000) for _ in range(replicas)], Ticks(), ContinuousBatching(8192, 256),
                  ROUTERS.build("round_robin"), time_scale=time_scale, clients=clients)
    return replay_timed(requests, fleet, Sampling(check_invariants=True))


def test_one_user_throughput_is_one_over_service_plus_think():
    """One user, S = 4 s a request (4 output tokens: 1 prefill + 3 decode steps of 1 s),
    think Z = 2 s: request k is released at k (S + Z) = 6k s and finishes at 6k + 4; the
    trace's own arrival times (all 100 s here) are ignored. 50 requests take
    50 S + 49 Z = 298 s, so the throughput 50 / 298 tends to 1 / (S + Z) = 1/6."""
    requests = [req(k, 100.0, 4) for k in range(50)]
    result = serve(requests, Concurrency(users=1, think_time_s=2.0))
    arrivals = [r.arrival_s for r in result.records]
    assert arrivals == [6.0 * k for k in range(50)]
    assert [r.finish_s for r in result.records] == [6.0 * k + 4 for k in range(50)]
    assert result.duration_s == 298.0
    assert all(r.ttft_ms == 1000.0 and r.queue_ms == 0.0 for r in result.records)
    assert 50 / result.duration_s == pytest.approx(1 / 6, rel=0.01)


def test_think_time_runs_on_the_engine_clock():
    """time_scale 2 stretches think times as it stretches arrival times: one user, S = 2 s
    (2 output tokens), Z = 1.5 s x 2 = 3 s: releases at 0, 5, 10."""
    requests = [req(k, 0.0, 2) for k in range(3)]
    result = serve(requests, Concurrency(users=1, think_time_s=1.5), time_scale=2.0)
    assert [r.arrival_s for r in result.records] == [0.0, 5.0, 10.0]


def test_littles_law_on_a_long_closed_loop():
    """8 users and no think time keep 8 requests in the system at all times but the final
    drain (one request's time out of ~250 s of run), so the mean number in the system,
    sum of e2e latencies / duration (Little's law), is 8 within 2%."""
    rng = np.random.default_rng(3)
    outputs = rng.integers(1, 12, size=2000)
    requests = [req(k, 0.0, int(n)) for k, n in enumerate(outputs)]
    result = serve(requests, Concurrency(users=8), replicas=2)
    e2e_s = sum(r.e2el_ms for r in result.records) / 1e3
    assert e2e_s / result.duration_s == pytest.approx(8, rel=0.02)
    assert max_in_flight(result.records) == 8


def max_in_flight(records):
    """The most requests between their arrival and their finish at any time."""
    events = sorted([(r.arrival_s, 1) for r in records] + [(r.finish_s, -1) for r in records],
                    key=lambda e: (e[0], e[1]))
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


def test_more_users_than_requests_and_no_requests():
    """Users beyond the requests stay idle; an empty trace ends at t = 0."""
    result = serve([req(0, 5.0, 3)], Concurrency(users=4))
    assert [(r.arrival_s, r.finish_s) for r in result.records] == [(0.0, 3.0)]
    assert serve([], Concurrency(users=2)).duration_s == 0.0


def test_rejected_request_frees_its_user_at_once():
    """A request that could never fit (capacity 100,000 tokens < its 200,000-token prompt)
    is rejected on arrival at t = 0; the user's next request is released then."""
    big = Request(0, 0.0, 200_000, 1, tuple(range(1, 50_001)), P)
    result = serve([big, req(1, 0.0, 2)], Concurrency(users=1))
    assert [r.status for r in result.records] == ["rejected", "completed"]
    assert result.records[1].arrival_s == 0.0 and result.records[1].finish_s == 2.0


def conversation():
    """Two sessions a, b of the trace: a's turns at 0, 10, 30; b's at 1, 2 (think times
    from the trace's gaps: a 10 then 20, b 1)."""
    return [req(0, 0.0, 4, session="a"), req(1, 1.0, 2, session="b"),
            req(2, 2.0, 3, session="b"), req(3, 10.0, 2, session="a"),
            req(4, 30.0, 1, session="a")]


def test_sessions_release_turns_after_the_reply_plus_think_time():
    """Without users every session starts at its first turn's time. a: turn 0 at 0,
    finishes at 4 (alone for 1 s, then with b's turn; 1 s a step either way); turn 1 at
    4 + 10 = 14, finishes 16; turn 2 at 16 + 20 = 36, finishes 37. b: turn 0 at 1 joins a's
    run: its prefill step 1->2 ... finishes at 3 (2 tokens: steps ending 2 and 3); turn 1
    at 3 + 1 = 4 finishes 7 (3 tokens)."""
    requests = conversation()
    result = serve(requests, SessionClients(requests, infer_sessions(requests)))
    got = {r.request_id: (r.arrival_s, r.finish_s) for r in result.records}
    assert got[0] == (0.0, 4.0) and got[3] == (14.0, 16.0) and got[4] == (36.0, 37.0)
    assert got[1][0] == 1.0 and got[2][0] == got[1][1] + 1.0
    assert_turns_wait(requests, result.records, infer_sessions(requests))


def test_sessions_users_cap_and_fixed_think_time():
    """users=1: one session in flight, sessions in order of their first turn. a's turns at
    0 (4 s), 4 + 0.5, finishing 6.5, 7 -> 8; then b at 8 -> 10, 10.5 -> 13.5."""
    requests = conversation()
    sessions = infer_sessions(requests)
    result = serve(requests, SessionClients(requests, sessions, users=1, think_time_s=0.5))
    got = [(r.arrival_s, r.finish_s) for r in result.records]
    assert got == [(0.0, 4.0), (8.0, 10.0), (10.5, 13.5), (4.5, 6.5), (7.0, 8.0)]
    assert_turns_wait(requests, result.records, sessions, think_time_s=0.5)


def assert_turns_wait(requests, records, sessions, think_time_s=None, time_scale=1.0):
    """No turn released before its previous turn finished plus its think time."""
    by_id = {r.request_id: r for r in records}
    for position, following in enumerate(sessions.next_turn.tolist()):
        if following < 0:
            continue
        before, after = by_id[requests[position].request_id], by_id[requests[following].request_id]
        think = sessions.think_s[following] if think_time_s is None else think_time_s
        finished = before.finish_s if before.status == "completed" else before.arrival_s
        assert after.arrival_s >= finished + think * time_scale - 1e-9


def test_infer_sessions_by_the_extension_rule():
    """No session ids: 1 = [1, 2] extends 0 = [1]; 2 = [1, 2, 3] extends 1; 3 has the same
    ids as 2, the session's latest turn, so it continues it (equal ids count); 4 = [1, 5]
    would extend 0, which is no longer a session's latest turn: a session of its own.
    Think times are the gaps between the turns' arrivals (no service time in the trace)."""
    requests = [req(0, 0.0, 1, ids=[1], input_tokens=4),
                req(1, 1.0, 1, ids=[1, 2]), req(2, 3.0, 1, ids=[1, 2, 3], input_tokens=12),
                req(3, 6.0, 1, ids=[1, 2, 3], input_tokens=12), req(4, 7.0, 1, ids=[1, 5])]
    sessions = infer_sessions(requests)
    assert sessions.inferred
    assert sessions.session.tolist() == [0, 0, 0, 0, 1]
    assert sessions.turn.tolist() == [0, 1, 2, 3, 0]
    assert sessions.next_turn.tolist() == [1, 2, 3, -1, -1]
    assert sessions.think_s.tolist() == [0.0, 1.0, 2.0, 3.0, 0.0]
    assert sessions.names == ["s0", "s4"]


def test_concurrency_stages_change_the_users_in_flight():
    """Stages (1 user, 10 s) then (2 users, 10 s), 2-token requests (S = 2 s alone), no
    think time. Stage 0: releases at 0, 2, 4, 6, 8; at 10 stage 1 adds a user, and two
    users send until 20 (the second request released at 10 queues behind the first's
    step); nothing is released at or after 20, the last stage's end."""
    requests = [req(k, 0.0, 2) for k in range(30)]
    result = serve(requests, Concurrency(1, stages=[(1, 10.0), (2, 10.0)]))
    arrivals = sorted(r.arrival_s for r in result.records)
    assert arrivals[:7] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 10.0]
    assert max(arrivals) < 20.0 and len(arrivals) < 30
    assert max_in_flight(result.records) == 2


def test_sessions_stages_cap_the_sessions_in_flight():
    """Stages (2 users, 5 s) then (1 user, 4 s): the last stage ends at 9. Sessions a, b, c,
    e have two turns, d one; every turn has 2 output tokens (2 s, alone or batched) and no
    think time. 0: a0, b0 -> 2: a1, b1 -> 4: a and b end, c0 and d0 start -> 5: stage 1
    caps the sessions at 1, but c and d are in flight and stay -> 6: c1 follows c0, d ends
    and starts nothing (2 sessions were in flight, over the cap of 1) -> 8: c ends, e0
    starts -> 10: e1 would be released at 10 >= 9, after the last stage: e stops there.
    8 of the 9 requests are sent."""
    names = ["a", "b", "c", "d", "e", "a", "b", "c", "e"]
    requests = [req(k, 0.1 * k, 2, session=name) for k, name in enumerate(names)]
    clients = SessionClients(requests, infer_sessions(requests), think_time_s=0.0,
                             stages=[(2, 5.0), (1, 4.0)])
    result = serve(requests, clients)
    got = {names[r.request_id] + str(int(r.request_id > 4)): (r.arrival_s, r.finish_s)
           for r in result.records}
    assert got == {"a0": (0.0, 2.0), "b0": (0.0, 2.0), "a1": (2.0, 4.0), "b1": (2.0, 4.0),
                   "c0": (4.0, 6.0), "d0": (4.0, 6.0), "c1": (6.0, 8.0), "e0": (8.0, 10.0)}
    assert max_in_flight(result.records) == 2
    assert result.duration_s == 10.0


def test_a_user_stopped_early_does_not_end_the_later_stages():
    """Stages (1 user, 10 s) twice and a think time of 100 s: the user's second request
    would go at 102 >= 20, so it stops at 2; stage 1 still starts a user at 10."""
    requests = [req(k, 0.0, 2) for k in range(5)]
    result = serve(requests, Concurrency(1, 100.0, stages=[(1, 10.0), (1, 10.0)]))
    assert [(r.arrival_s, r.finish_s) for r in result.records] == [(0.0, 2.0), (10.0, 12.0)]
