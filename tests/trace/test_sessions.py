"""Sessions of a trace read whole (trace/sessions.py) by hand: named sessions (a request
without a name a session of its own), the extension rule, turn numbers, think times and
the arrays' types (the closed loop and the `turn` column read them as integers)."""

from __future__ import annotations

import numpy as np

from prefixsim.trace import Request
from prefixsim.trace.sessions import NO_TURN, infer_sessions


def request(i: int, t: float, ids: tuple[int, ...], session: str | None = None) -> Request:
    return Request(request_id=i, arrival_s=t, input_tokens=4 * len(ids), output_tokens=1,
                   page_ids=ids, page_size_tokens=4, session_id=session)


def test_named_sessions_by_hand():
    # a and b are named; request 2 names none: a session of its own, named by its id;
    # a's second turn comes 0.25 s after its first: that gap is its think time
    trace = [request(0, 0.0, (1,), "a"), request(1, 0.5, (2,), "b"), request(2, 0.6, (3,)),
             request(3, 0.75, (1, 4), "a"), request(4, 2.0, (9,), "a")]
    sessions = infer_sessions(trace)
    assert not sessions.inferred and sessions.multi_turn
    assert sessions.names == ["a", "b", "s2"]
    assert sessions.session.tolist() == [0, 1, 2, 0, 0]
    assert sessions.turn.tolist() == [0, 0, 0, 1, 2]
    assert sessions.next_turn.tolist() == [3, NO_TURN, NO_TURN, 4, NO_TURN]
    assert sessions.think_s.tolist() == [0.0, 0.0, 0.0, 0.75, 1.25]
    assert sessions.first_turns.tolist() == [0, 1, 2] and sessions.num_sessions == 3
    for array in (sessions.request_ids, sessions.session, sessions.turn,
                  sessions.next_turn, sessions.first_turns):
        assert array.dtype == np.int64
    assert sessions.think_s.dtype == np.float64


def test_the_extension_rule_by_hand():
    # 1 -> (1, 2) extends it -> (1, 2, 3) extends that; (1, 2) again 0.5 s later extends
    # nothing (its turn is taken: a session is a chain), so it starts a session; (7,) too
    trace = [request(0, 0.0, (1,)), request(1, 0.5, (1, 2)), request(2, 1.0, (1, 2, 3)),
             request(3, 1.5, (1, 2)), request(4, 1.6, (7,))]
    sessions = infer_sessions(trace)
    assert sessions.inferred
    assert sessions.session.tolist() == [0, 0, 0, 1, 2]
    assert sessions.turn.tolist() == [0, 1, 2, 0, 0]
    assert sessions.names == ["s0", "s3", "s4"]
    assert sessions.think_s.tolist() == [0.0, 0.5, 0.5, 0.0, 0.0]


def test_single_turn_sessions_are_not_multi_turn():
    sessions = infer_sessions([request(0, 0.0, (1,), "a"), request(1, 1.0, (2,), "b")])
    assert not sessions.multi_turn and sessions.num_sessions == 2
