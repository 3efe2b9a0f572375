"""Edges of engine/clients.py worked by hand against a run driven by the test (`HandRun`):
the test says when each request finishes, and reads which request was released when,
when the clients said arrivals are over and which stage starts they asked for. Boundaries:
a release at exactly a stage's or the last stage's end, a user or session ending while the
count in flight is at or over the stage's cap, and when `arrivals_over` comes first.

Concurrency and SessionClients against the real engine: tests/engine/test_closed_loop.py.
"""

import heapq
import math

import pytest

from prefixsim.engine.clients import Concurrency, SessionClients
from prefixsim.engine.request_state import RequestState
from prefixsim.trace import Request
from prefixsim.trace.sessions import infer_sessions


class HandRun:
    """A ClientRun moved by hand: `released` holds (request id, at_s, now at the call),
    `over` the time of every `arrivals_over`, `calls` the times `call_at` was asked for;
    `advance(t)` runs the actions due by t in time order (now at each one's time)."""

    def __init__(self, time_scale: float = 1.0) -> None:
        self.now = 0.0
        self.time_scale = time_scale
        self.released: list[tuple[int, float, float]] = []
        self.over: list[float] = []
        self.calls: list[float] = []
        self._due: list = []

    def release(self, request, at_s):
        assert at_s >= self.now
        self.released.append((request.request_id, at_s, self.now))

    def arrivals_over(self):
        self.over.append(self.now)

    def call_at(self, at_s, action):
        assert at_s >= self.now
        self.calls.append(at_s)
        heapq.heappush(self._due, (at_s, len(self.calls), action))

    def advance(self, t):
        while self._due and self._due[0][0] <= t:
            at_s, _, action = heapq.heappop(self._due)
            self.now = at_s
            action()
        self.now = t

    def releases(self):
        """(request id, at_s) of every release so far."""
        return [(rid, at_s) for rid, at_s, _ in self.released]


def req(rid, arrival=0.0, session=None):
    return Request(rid, arrival, 8, 2, (10 * rid + 1,), 4, session)


def finish(run, clients, request, seen_s):
    """`request` ends and its client sees it at `seen_s` (the engine's now)."""
    run.advance(seen_s)
    clients.finished(RequestState(request, 0.0), seen_s)


# ------------------------------------------------------------------ Concurrency


@pytest.mark.parametrize("users, stages", [(0, None), (-1, None), (0, [(1, 5.0)]),
                                           (1, [(0, 5.0)]), (2, [(1, 5.0), (0, 5.0)])])
def test_concurrency_refuses_no_users(users, stages):
    with pytest.raises(ValueError, match=f"^users must be >= 1, got {users}$"):
        Concurrency(users, stages=stages)


def test_concurrency_takes_one_user_and_one_user_stages():
    clients = Concurrency(1, stages=[(1, 5.0), (1, 5.0)])
    assert clients.users == 1 and clients.think_time_s == 0.0
    assert clients.stages == [(1, 5.0), (1, 5.0)]
    assert Concurrency(3).stages == [(3, math.inf)]


def test_concurrency_users_send_in_trace_order_after_their_think_time():
    """2 users, think 1.5 s x time_scale 2 = 3 s, 4 requests: 0 and 1 at t = 0 (through
    the event queue: nothing before the start is run); 1 seen at 5 -> 2 at 8; 0 seen at
    6 -> 3 at 9; then the trace is empty: the next user to finish ends the arrivals."""
    run = HandRun(time_scale=2.0)
    requests = [req(k) for k in range(4)]
    clients = Concurrency(2, think_time_s=1.5)
    clients.start(run, iter(requests))
    assert run.released == [] and run.calls == [0.0]
    run.advance(0.0)
    assert run.releases() == [(0, 0.0), (1, 0.0)]
    finish(run, clients, requests[1], 5.0)
    finish(run, clients, requests[0], 6.0)
    assert run.releases()[2:] == [(2, 8.0), (3, 9.0)]
    assert [now for _, _, now in run.released] == [0.0, 0.0, 5.0, 6.0]
    assert run.over == []
    finish(run, clients, requests[2], 10.0)
    assert run.over == [10.0]
    assert len(run.released) == 4


def test_concurrency_default_think_time_is_none():
    run = HandRun(time_scale=3.0)
    requests = [req(0), req(1)]
    clients = Concurrency(1)
    clients.start(run, requests)
    run.advance(0.0)
    finish(run, clients, requests[0], 2.5)
    assert run.releases() == [(0, 0.0), (1, 2.5)]


def test_concurrency_more_users_than_requests_end_at_the_start():
    run = HandRun()
    clients = Concurrency(3)
    clients.start(run, [req(0)])
    run.advance(0.0)
    assert run.releases() == [(0, 0.0)] and run.over == [0.0]
    empty = HandRun()
    Concurrency(2).start(empty, [])
    empty.advance(0.0)
    assert empty.released == [] and empty.over == [0.0]


def test_concurrency_nothing_is_released_at_the_last_stages_end():
    """One stage of 1 user for 4 s: request 0 at 0 is seen at 4 = the end (think 0): the
    user stops there, the last one: arrivals are over at 4."""
    run = HandRun()
    requests = [req(k) for k in range(3)]
    clients = Concurrency(1, stages=[(1, 4.0)])
    clients.start(run, requests)
    run.advance(0.0)
    finish(run, clients, requests[0], 3.999)
    assert run.releases() == [(0, 0.0), (1, 3.999)] and run.over == []
    finish(run, clients, requests[1], 4.0)
    assert run.releases() == [(0, 0.0), (1, 3.999)]
    assert run.over == [4.0]


def test_concurrency_stages_start_back_to_back_and_cap_the_users():
    """Stages (2, 5 s), (1, 5 s), (3, 5 s): starts asked for at 0, 5, 10; the run ends
    at 15. At 0 two users send 0, 1. 0 seen at 1: 2 users = the cap, the user goes on
    (2 at 1). At 5 the cap drops to 1 and nobody new starts. 1 seen at 6: 2 active > 1,
    the user stops; 2 seen at 7: 1 active, at the cap, goes on (3 at 7). At 10 the cap is
    3: two users join (4, 5 at 10). 4 seen at 15 = the end: stops, arrivals not over (two
    others in flight); 3 and 5 seen at 16 and 20 stop too: over at 20, when none is left."""
    run = HandRun()
    requests = [req(k) for k in range(9)]
    clients = Concurrency(2, stages=[(2, 5.0), (1, 5.0), (3, 5.0)])
    clients.start(run, requests)
    assert run.calls == [0.0, 5.0, 10.0]
    run.advance(0.0)
    assert run.releases() == [(0, 0.0), (1, 0.0)]
    finish(run, clients, requests[0], 1.0)
    assert run.releases()[2:] == [(2, 1.0)]
    run.advance(5.0)
    assert len(run.released) == 3
    finish(run, clients, requests[1], 6.0)
    assert len(run.released) == 3
    finish(run, clients, requests[2], 7.0)
    assert run.releases()[3:] == [(3, 7.0)]
    run.advance(10.0)
    assert run.releases()[4:] == [(4, 10.0), (5, 10.0)]
    finish(run, clients, requests[4], 15.0)
    finish(run, clients, requests[3], 16.0)
    assert run.over == [] and len(run.released) == 6
    finish(run, clients, requests[5], 20.0)
    assert run.over == [20.0] and len(run.released) == 6


def test_concurrency_a_user_stopped_before_the_last_stage_does_not_end_arrivals():
    """Stages (1, 10 s) twice, think 100 s: 0 seen at 2 would go at 102 >= 20, the user
    stops, but the last stage has not begun: not over. At 10 a user starts (1 at 10);
    seen at 12 it stops too, the last: over at 12."""
    run = HandRun()
    requests = [req(k) for k in range(5)]
    clients = Concurrency(1, 100.0, stages=[(1, 10.0), (1, 10.0)])
    clients.start(run, requests)
    run.advance(0.0)
    finish(run, clients, requests[0], 2.0)
    assert run.over == []
    run.advance(10.0)
    assert run.releases() == [(0, 0.0), (1, 10.0)] and run.over == []
    finish(run, clients, requests[1], 12.0)
    assert run.over == [12.0] and len(run.released) == 2


def test_concurrency_a_user_that_found_no_request_stops():
    """2 users, 3 requests: 0 seen at 1 takes 2; 1 seen at 2 finds none (over at 2, the
    user stops); 2 seen at 3 finds none either."""
    run = HandRun()
    requests = [req(k) for k in range(3)]
    clients = Concurrency(2)
    clients.start(run, requests)
    run.advance(0.0)
    finish(run, clients, requests[0], 1.0)
    finish(run, clients, requests[1], 2.0)
    assert run.over == [2.0]
    finish(run, clients, requests[2], 3.0)
    assert run.releases() == [(0, 0.0), (1, 0.0), (2, 1.0)]
    assert run.over[0] == 2.0


def test_concurrency_stage_of_more_users_after_a_stop_at_the_cap():
    """Stages (1, 3 s), (2, 10 s): one user; 0 seen at 1 -> 1 at 1. At 3 one user joins
    (2 at 3). 1 seen at 4 -> 3 at 4 (2 active, cap 2: both go on)."""
    run = HandRun()
    requests = [req(k) for k in range(6)]
    clients = Concurrency(1, stages=[(1, 3.0), (2, 10.0)])
    clients.start(run, requests)
    run.advance(0.0)
    finish(run, clients, requests[0], 1.0)
    run.advance(3.0)
    finish(run, clients, requests[1], 4.0)
    finish(run, clients, requests[2], 5.0)
    assert run.releases() == [(0, 0.0), (1, 1.0), (2, 3.0), (3, 4.0), (4, 5.0)]
    assert run.over == []


# ------------------------------------------------------------------ SessionClients


def three_sessions():
    """Sessions a (turns 0, 3, think 4 s), b (turn 1 alone), c (turns 2, 4, think 3 s)."""
    requests = [req(0, 1.0, "a"), req(1, 2.0, "b"), req(2, 3.0, "c"), req(3, 5.0, "a"),
                req(4, 6.0, "c")]
    return requests, infer_sessions(requests)


@pytest.mark.parametrize("users, stages", [(0, None), (-2, None), (None, [(0, 5.0)]),
                                           (1, [(1, 5.0), (0, 5.0)])])
def test_sessions_refuse_no_users(users, stages):
    requests, sessions = three_sessions()
    with pytest.raises(ValueError, match=f"^users must be >= 1, got {users}$"):
        SessionClients(requests, sessions, users, stages=stages)


def test_sessions_stages_from_users():
    requests, sessions = three_sessions()
    assert SessionClients(requests, sessions).stages is None
    assert SessionClients(requests, sessions, users=1).stages == [(1, math.inf)]
    clients = SessionClients(requests, sessions, 5, 0.5, stages=[(1, 2.0)])
    assert clients.stages == [(1, 2.0)]
    assert (clients.users, clients.think_time_s) == (5, 0.5)
    assert clients.requests is requests and clients.sessions is sessions


def test_sessions_without_users_start_at_their_trace_times():
    """time_scale 2: firsts of a, b, c at 2, 4, 6 (released at the start). a0 seen at 3:
    a1 at 3 + 4 x 2 = 11; c0 seen at 7: c1 at 7 + 3 x 2 = 13, the last request: over at 7.
    b0 and the last turns end nothing more."""
    requests, sessions = three_sessions()
    run = HandRun(time_scale=2.0)
    clients = SessionClients(requests, sessions)
    clients.start(run, requests)
    assert run.releases() == [(0, 2.0), (1, 4.0), (2, 6.0)] and run.calls == []
    finish(run, clients, requests[0], 3.0)
    finish(run, clients, requests[1], 4.5)
    assert run.releases()[3:] == [(3, 11.0)] and run.over == []
    finish(run, clients, requests[2], 7.0)
    assert run.releases()[4:] == [(4, 13.0)] and run.over == [7.0]
    finish(run, clients, requests[3], 12.0)
    assert len(run.released) == 5 and run.over[0] == 7.0


def test_sessions_fixed_think_time_overrides_the_traces_even_zero():
    requests, sessions = three_sessions()
    run = HandRun(time_scale=2.0)
    clients = SessionClients(requests, sessions, think_time_s=0.0)
    clients.start(run, requests)
    finish(run, clients, requests[0], 3.0)
    assert run.releases()[3:] == [(3, 3.0)]
    run2 = HandRun(time_scale=2.0)
    clients2 = SessionClients(requests, sessions, think_time_s=0.25)
    clients2.start(run2, requests)
    finish(run2, clients2, requests[2], 7.0)
    assert run2.releases()[3:] == [(4, 7.5)]


def test_single_turn_sessions_are_over_at_the_start():
    requests = [req(0, 1.0), req(1, 2.0)]
    run = HandRun()
    SessionClients(requests, infer_sessions(requests)).start(run, requests)
    assert run.releases() == [(0, 1.0), (1, 2.0)] and run.over == [0.0]


def test_sessions_users_start_at_once_in_first_turn_order():
    """users=2, think 1 s: a0 and b0 at 0, during the start itself. b0 seen at 2: b ends,
    c0 at 2. a0 seen at 3: a1 at 4. c0 seen at 5: c1 at 6, the last: over at 5."""
    requests, sessions = three_sessions()
    run = HandRun()
    clients = SessionClients(requests, sessions, users=2, think_time_s=1.0)
    clients.start(run, requests)
    assert run.releases() == [(0, 0.0), (1, 0.0)] and run.calls == []
    finish(run, clients, requests[1], 2.0)
    assert run.releases()[2:] == [(2, 2.0)]
    finish(run, clients, requests[0], 3.0)
    assert run.releases()[3:] == [(3, 4.0)] and run.over == []
    finish(run, clients, requests[2], 5.0)
    assert run.releases()[4:] == [(4, 6.0)] and run.over == [5.0]


def test_sessions_stages_start_back_to_back():
    """Stages (1, 2 s), (2, 3 s), (1, 4 s): the first begins during the start, the others
    are asked for at 2 and 5; the run ends at 9. a0 at 0; at 2 b0 joins. b0 seen at 2.5:
    b ends, 2 sessions allowed, c0 at 2.5."""
    requests, sessions = three_sessions()
    run = HandRun()
    clients = SessionClients(requests, sessions, think_time_s=1.0,
                             stages=[(1, 2.0), (2, 3.0), (1, 4.0)])
    clients.start(run, requests)
    assert run.calls == [2.0, 5.0]
    assert run.releases() == [(0, 0.0)]
    run.advance(2.0)
    assert run.releases()[1:] == [(1, 2.0)]
    finish(run, clients, requests[1], 2.5)
    assert run.releases()[2:] == [(2, 2.5)]
    assert run.over == []


def test_a_turn_due_at_the_last_stages_end_is_not_sent():
    """One stage (1, 4 s), think 0: a0 seen at 4 = the end: a1 is not sent, a stops there,
    b never starts, and arrivals are over at 4."""
    requests, sessions = three_sessions()
    run = HandRun()
    clients = SessionClients(requests, sessions, think_time_s=0.0, stages=[(1, 4.0)])
    clients.start(run, requests)
    finish(run, clients, requests[0], 4.0)
    assert run.releases() == [(0, 0.0)] and run.over == [4.0]


def test_a_session_ending_at_the_last_stages_end_starts_none():
    """One stage (1, 4 s), think 0: sessions start in first-turn order, a first: a0 seen
    at 1 -> a1 at 1; a1 seen at 4 = the end: a ends, b is not started, over at 4. Seen at
    3.5 instead, b0 would start then."""
    requests, sessions = three_sessions()
    for end_seen, expected in ((4.0, []), (3.5, [(1, 3.5)])):
        run = HandRun()
        clients = SessionClients(requests, sessions, think_time_s=0.0, stages=[(1, 4.0)])
        clients.start(run, requests)
        finish(run, clients, requests[0], 1.0)
        finish(run, clients, requests[3], end_seen)
        assert run.releases() == [(0, 0.0), (3, 1.0), *expected]
        assert run.over == ([4.0] if not expected else [])


def test_a_session_ending_at_the_cap_starts_none():
    """Stages (2, 1 s), (1, 10 s): a0, b0 at 0; at 1 the cap drops to 1. b0 seen at 2:
    b ends with 2 in flight: 1 left = the cap, c does not start. a0 seen at 3 -> a1 at 3;
    a1 seen at 4: a ends, 0 < 1, c0 at 4."""
    requests, sessions = three_sessions()
    run = HandRun()
    clients = SessionClients(requests, sessions, think_time_s=0.0, stages=[(2, 1.0), (1, 10.0)])
    clients.start(run, requests)
    run.advance(1.0)
    finish(run, clients, requests[1], 2.0)
    assert run.releases() == [(0, 0.0), (1, 0.0)]
    finish(run, clients, requests[0], 3.0)
    finish(run, clients, requests[3], 4.0)
    assert run.releases()[2:] == [(3, 3.0), (2, 4.0)]
    assert run.over == []
    finish(run, clients, requests[2], 5.0)
    assert run.releases()[4:] == [(4, 5.0)] and run.over == [5.0]


def test_sessions_over_when_the_last_stage_begins_with_none_in_flight():
    """Stages (1, 3 s), (1, 3 s), think 10 s: a0 seen at 1 would send a1 at 11 >= 6: a
    stops, nothing in flight, but a later stage will start sessions: not over. At 3 the
    last stage starts b; b0 seen at 4: b ends, c would start at 4 < 6: c0 at 4; c0 seen
    at 5: c1 at 15 >= 6, c stops; nothing in flight in the last stage: over at 5."""
    requests, sessions = three_sessions()
    run = HandRun()
    clients = SessionClients(requests, sessions, think_time_s=10.0,
                             stages=[(1, 3.0), (1, 3.0)])
    clients.start(run, requests)
    finish(run, clients, requests[0], 1.0)
    assert run.over == []
    run.advance(3.0)
    assert run.releases() == [(0, 0.0), (1, 3.0)]
    finish(run, clients, requests[1], 4.0)
    assert run.releases()[2:] == [(2, 4.0)] and run.over == []
    finish(run, clients, requests[2], 5.0)
    assert run.over == [5.0] and len(run.released) == 3


def test_a_stage_that_begins_with_no_session_left_ends_arrivals():
    """Stages (1, 3 s), (1, 3 s), think 10 s, one two-turn session: a0 seen at 1 stops a
    (a1 due at 11 >= 6); at 3 the last stage finds no session to start and none in
    flight: over at 3."""
    requests = [req(0, 0.0, "a"), req(1, 1.0, "a")]
    run = HandRun()
    clients = SessionClients(requests, infer_sessions(requests), think_time_s=10.0,
                             stages=[(1, 3.0), (1, 3.0)])
    clients.start(run, requests)
    finish(run, clients, requests[0], 1.0)
    assert run.over == []
    run.advance(3.0)
    assert run.over == [3.0] and run.releases() == [(0, 0.0)]
