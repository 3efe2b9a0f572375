"""SessionAffinity: every request of a session goes where the session's first one went.

A new session (or a request without a session id) goes to the least-loaded replica. The
session map grows with the number of sessions; nothing expires from it.
"""

from __future__ import annotations

from collections.abc import Sequence

from prefixsim.router.protocol import ROUTERS, ReplicaView, least_loaded_index
from prefixsim.trace import Request


@ROUTERS.register("session_affinity")
class SessionAffinity:
    """Sticky sessions; least loaded for a session's first request."""

    reads_caches = False  # the engine may leave deferred evictions to the replicas

    def __init__(self) -> None:
        self._sessions: dict[str, int] = {}

    def route(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        session = request.session_id
        if session is not None and session in self._sessions:
            return self._sessions[session]
        chosen = least_loaded_index(replicas)
        if session is not None:
            self._sessions[session] = chosen
        return chosen
