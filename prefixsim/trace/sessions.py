"""Sessions of a trace read whole: which requests are turns of one conversation, in which
order, and the think time between turns (docs/load.md "Sessions").

`infer_sessions(requests)` makes one pass over the requests in arrival order. A trace that
names sessions (`Request.session_id`: kv-cache-tester, RAGPulse, Bailian) keeps them; a
request without one is a session of its own. A trace that names none (Mooncake) has them
inferred by the extension rule: a request whose page ids extend an earlier request's ids
(the earlier request's ids are a prefix of its own, equal ids included) continues that
request's session, as its next turn. Page ids are chained, so the earlier request's last id
at the same position is enough to tell; the longest such prefix wins, and only a session's
latest turn can be extended (a session is a chain of turns, never a tree; a second request
extending the same turn starts a session of its own).

Think time from the trace: the recorded gap between the two turns' arrivals minus the
earlier turn's service time as the trace tells it, never below 0. No reader keeps a service
time (a `Request` holds none), so that time is 0 and the think time is the whole gap: an
upper bound of the think time, which the closed loop then adds after the simulated reply.

Owned here: the grouping, turn numbers and think times. Left out: releasing turns
(engine/clients.py), the `turn` column (pipeline/), refusing a trace with no sessions
(pipeline/build.py names the config key).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from prefixsim.trace.record import Request

NO_TURN = -1  # `next_turn` of a session's last turn


@dataclass(frozen=True)
class Sessions:
    """Sessions of a trace, by request position (the order of the trace's sequence).

    `session[i]`: request i's session, numbered in the order of their first turn's arrival;
    `turn[i]`: its 0-based turn; `next_turn[i]`: the position of the session's next turn
    (NO_TURN: none); `think_s[i]`: the trace's think time before turn i (0 for a first
    turn); `first_turns`: the position of every session's first turn, in session order;
    `names[s]`: session s's id (the trace's, or "s<first request id>" when inferred);
    `request_ids[i]`: request i's id."""

    request_ids: np.ndarray
    session: np.ndarray
    turn: np.ndarray
    next_turn: np.ndarray
    think_s: np.ndarray
    first_turns: np.ndarray
    names: list[str]
    inferred: bool

    @property
    def num_sessions(self) -> int:
        return len(self.first_turns)

    @property
    def multi_turn(self) -> bool:
        """Whether any session has a second turn."""
        return bool(np.any(self.next_turn != NO_TURN))


def infer_sessions(requests: Sequence[Request]) -> Sessions:
    """The sessions of `requests` (a whole trace, in arrival order); see module docstring."""
    named = any(r.session_id is not None for r in requests)
    previous = _previous_by_name(requests) if named else _previous_by_extension(requests)
    n = len(requests)
    session = np.empty(n, dtype=np.int64)
    turn = np.zeros(n, dtype=np.int64)
    next_turn = np.full(n, NO_TURN, dtype=np.int64)
    think_s = np.zeros(n, dtype=np.float64)
    first_turns: list[int] = []
    names: list[str] = []
    for i, request in enumerate(requests):
        before = previous[i]
        if before == NO_TURN:
            session[i] = len(first_turns)
            first_turns.append(i)
            names.append(request.session_id if named and request.session_id is not None
                         else f"s{request.request_id}")
            continue
        session[i], turn[i], next_turn[before] = session[before], turn[before] + 1, i
        think_s[i] = max(0.0, request.arrival_s - requests[before].arrival_s)
    ids = np.fromiter((r.request_id for r in requests), dtype=np.int64, count=n)
    return Sessions(ids, session, turn, next_turn, think_s, np.asarray(first_turns, np.int64),
                    names, inferred=not named)


def _previous_by_name(requests: Sequence[Request]) -> list[int]:
    """The position of each request's previous turn (NO_TURN: first) by its session id."""
    latest: dict[str, int] = {}
    previous = []
    for i, request in enumerate(requests):
        name = request.session_id
        previous.append(NO_TURN if name is None else latest.get(name, NO_TURN))
        if name is not None:
            latest[name] = i
    return previous


def _previous_by_extension(requests: Sequence[Request]) -> list[int]:
    """The position of each request's previous turn by the extension rule: the latest turn
    of a session whose ids are the longest prefix of the request's own."""
    tips: dict[int, tuple[int, int]] = {}  # last page id -> (position, number of pages)
    previous = []
    for i, request in enumerate(requests):
        ids = request.page_ids
        before = NO_TURN
        for length in range(len(ids), 0, -1):
            tip = tips.get(ids[length - 1])
            if tip is not None and tip[1] == length:
                before = tip[0]
                del tips[ids[length - 1]]
                break
        previous.append(before)
        if ids:
            tips[ids[-1]] = (i, len(ids))
    return previous
