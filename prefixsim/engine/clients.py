"""Closed-loop clients of the timed engine: users who send their next request when an
earlier one has finished (docs/load.md "Closed loops").

A `Clients` object replaces the open-loop arrivals process of engine/timed.py: `start` is
called once at t = 0 with the run (`ClientRun`: the clock, `release`, `arrivals_over`) and
the requests, and `finished(state, seen_s)` whenever a request ends (completed or
rejected; `seen_s`: when the client saw its last token or the refusal). A request is
released at a time (`ClientRun.release`): it reaches the scheduler the frontend's time
later, and its record's `arrival_s` is the release time, so TTFT is measured as a real
client measures it.

- `Concurrency(users, think_time_s)`: `users` users, all starting at t = 0; each sends the
  next unsent request of the trace (in trace order) `think_time_s` after its previous one
  finished (vLLM `bench serve --max-concurrency`, inference-perf's concurrency load).
- `SessionClients(requests, sessions, users, think_time_s)`: one user per conversation
  (trace/sessions.py); turn i+1 is released the think time after turn i finished (the
  trace's, trace/sessions.py, unless `think_time_s` is set). Without `users` each session
  starts at its first turn's arrival in the trace; with `users`, that many sessions are in
  flight from t = 0, and a new one starts (in the order of their first turn's arrival) as
  soon as one ends.

Both take `stages`, (users, duration_s) pairs run back to back from t = 0 (docs/load.md
"Stages"): a stage's start adds users (sessions) up to its count; a user whose request (a
session that) ends while more than the stage's count are active stops, so a session in
flight when a stage with fewer users begins runs to its end; nothing is released at or
after the last stage's end.

Owned here: who sends what when. Left out: routing and serving (engine/timed.py,
replica.py), finding sessions (trace/sessions.py), building clients from a config
(pipeline/build.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from prefixsim.engine.request_state import RequestState
from prefixsim.trace import Request
from prefixsim.trace.sessions import NO_TURN, Sessions


class ClientRun(Protocol):
    """What clients see of a timed run (engine/timed.py's `_Run`)."""

    @property
    def now(self) -> float: ...

    @property
    def time_scale(self) -> float:
        """The fleet's clock stretch: think times from a trace or a config are multiplied
        by it, as arrival times are."""

    def release(self, request: Request, at_s: float) -> None:
        """Send `request` at `at_s` (>= now); it counts as arrived from now on."""

    def arrivals_over(self) -> None:
        """No request will be released any more (may be told more than once)."""

    def call_at(self, at_s: float, action: Callable[[], None]) -> None:
        """Run `action` at `at_s` (>= now), through the event queue."""


class Clients(Protocol):
    """A closed loop (module docstring)."""

    def start(self, run: ClientRun, requests: Iterable[Request]) -> None: ...

    def finished(self, state: RequestState, seen_s: float) -> None: ...


class Concurrency:
    """`users` users sending the trace's requests in order, `think_time_s` after their
    previous request finished (engine clock: stretched by the fleet's time_scale).
    `stages`: (users, duration_s) pairs run back to back from t = 0 instead (docs/load.md
    "Stages"): a stage's start adds users up to its count; a user whose request finishes
    while more users than the stage's are active stops; nothing is released once the last
    stage has ended."""

    def __init__(self, users: int, think_time_s: float = 0.0,
                 stages: Sequence[tuple[int, float]] | None = None) -> None:
        if users < 1 or any(count < 1 for count, _ in stages or ()):
            raise ValueError(f"users must be >= 1, got {users}")
        self.users, self.think_time_s = users, think_time_s
        self.stages = list(stages or [(users, math.inf)])
        self._cap = self._active = 0
        self._last_begun = False  # whether the last stage has begun (no user will start)
        self._end_s = sum(duration for _, duration in self.stages)
        self._pending: Iterable[Request] | None = None
        self._run: ClientRun | None = None

    def start(self, run: ClientRun, requests: Iterable[Request]) -> None:
        self._run, self._pending = run, iter(requests)
        start_s = 0.0
        for index, (count, duration) in enumerate(self.stages):
            last = index == len(self.stages) - 1
            run.call_at(start_s, lambda count=count, last=last: self._begin_stage(count, last))
            start_s += duration

    def _begin_stage(self, users: int, last: bool) -> None:
        self._cap, self._last_begun = users, last
        while self._active < self._cap and self._send_next(self._run.now):
            self._active += 1

    def finished(self, state: RequestState, seen_s: float) -> None:
        at_s = seen_s + self.think_time_s * self._run.time_scale
        if self._active > self._cap or at_s >= self._end_s or not self._send_next(at_s):
            self._active -= 1  # this user stops
            if self._active == 0 and at_s >= self._end_s and self._last_begun:  # all over
                self._run.arrivals_over()

    def _send_next(self, at_s: float) -> bool:
        request = next(self._pending, None)
        if request is None:
            self._run.arrivals_over()
            return False
        self._run.release(request, at_s)
        return True


class SessionClients:
    """One user per session of `sessions` (over `requests`, the same sequence); `users` or
    `stages` cap the sessions in flight (module docstring)."""

    def __init__(self, requests: Sequence[Request], sessions: Sessions,
                 users: int | None = None, think_time_s: float | None = None,
                 stages: Sequence[tuple[int, float]] | None = None) -> None:
        if (users is not None and users < 1) or any(count < 1 for count, _ in stages or ()):
            raise ValueError(f"users must be >= 1, got {users}")
        self.requests, self.sessions = requests, sessions
        self.users, self.think_time_s = users, think_time_s
        self.stages = (list(stages) if stages
                       else None if users is None else [(users, math.inf)])
        self._end_s = (math.inf if self.stages is None
                       else sum(duration for _, duration in self.stages))
        self._cap = self._active = 0  # sessions allowed and in flight (with a cap)
        self._last_begun = False  # whether the last stage has begun
        self._position = {r.request_id: i for i, r in enumerate(requests)}
        self._next_session = 0  # the next session not started yet
        self._unreleased = len(requests)
        self._run: ClientRun | None = None

    def start(self, run: ClientRun, requests: Iterable[Request]) -> None:
        self._run = run
        firsts = self.sessions.first_turns
        if self.stages is None:  # every session at its first turn's time in the trace
            for position in firsts.tolist():
                self._release(position, self.requests[position].arrival_s * run.time_scale)
            self._next_session = len(firsts)
        else:
            self._begin_stage(self.stages[0][0], len(self.stages) == 1)
            start_s = 0.0
            for index, (count, _) in enumerate(self.stages[1:], start=1):
                start_s += self.stages[index - 1][1]
                last = index == len(self.stages) - 1
                run.call_at(start_s, lambda count=count, last=last: self._begin_stage(count, last))
        if self._unreleased == 0:
            run.arrivals_over()

    def _begin_stage(self, users: int, last: bool) -> None:
        self._cap, self._last_begun = users, last
        while self._active < self._cap and self._start_session(self._run.now):
            pass
        self._over_if_idle()

    def finished(self, state: RequestState, seen_s: float) -> None:
        position = self._position[state.request.request_id]
        following = int(self.sessions.next_turn[position])
        if following == NO_TURN:
            if self.stages is not None:
                self._session_ended(seen_s)
        else:
            think = self.think_time_s
            if think is None:
                think = float(self.sessions.think_s[following])
            at_s = seen_s + think * self._run.time_scale
            if at_s < self._end_s:
                self._release(following, at_s)
            else:  # past the last stage's end: the session stops
                self._session_ended(at_s)
        if self._unreleased == 0:
            self._run.arrivals_over()

    def _session_ended(self, at_s: float) -> None:
        """A session ended (or stopped at the last stage's end): start the next one if the
        stage's count allows."""
        self._active -= 1
        if self._active < self._cap and at_s < self._end_s:
            self._start_session(at_s)
        self._over_if_idle()

    def _over_if_idle(self) -> None:
        """With no session in flight once the last stage has begun, none starts again."""
        if self._active == 0 and self._last_begun:
            self._run.arrivals_over()

    def _start_session(self, at_s: float) -> bool:
        if self._next_session >= self.sessions.num_sessions:
            return False
        position = int(self.sessions.first_turns[self._next_session])
        self._next_session += 1
        self._active += 1
        self._release(position, at_s)
        return True

    def _release(self, position: int, at_s: float) -> None:
        self._unreleased -= 1
        self._run.release(self.requests[position], at_s)
