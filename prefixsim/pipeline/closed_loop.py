"""Closed-loop loads of a timed run: the clients built from `load:` (docs/load.md "Closed
loops") and the session columns of requests.parquet.

`build_clients(load, requests)` gives the engine's clients (engine/clients.py) for a
`concurrency` or `sessions` load, None for any other (open loops are pipeline/load.py's).
A `sessions` load finds the sessions of the trace read whole (trace/sessions.py): the
streamed road does not take it (pipeline/streamed_timed.py reads such a trace whole); a
`concurrency` load reads the trace in order and streams like an open loop. With sessions,
`with_session_columns` fills `session_id` (inferred sessions are named "s<first request
id>") and adds `turn` (0-based); with no `load:` section the columns stay as they were.
Owned here: that choice and those columns. Left out: releasing requests (engine/), finding
sessions (trace/sessions.py), checking the keys (config/load.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from prefixsim.config.load import LoadConfig
from prefixsim.engine.clients import Clients, Concurrency, SessionClients
from prefixsim.errors import InputError
from prefixsim.trace import Request
from prefixsim.trace.sessions import Sessions, infer_sessions


def build_clients(load: LoadConfig, requests: Sequence[Request]
                  ) -> tuple[Clients | None, Sessions | None]:
    """The clients of a closed-loop `load` over `requests` (in trace order) and, for a
    `sessions` load, the trace's sessions; (None, None) for an open loop."""
    if not load.closed_loop:
        return None, None
    stages = (None if load.stages is None
              else [(stage.users, stage.duration_s) for stage in load.stages])
    if load.type == "concurrency":
        users = load.users if stages is None else stages[0][0]
        return Concurrency(users, load.think_time_s or 0.0, stages), None
    sessions = infer_sessions(requests)
    if sessions.inferred and not sessions.multi_turn:
        raise InputError("a sessions load needs sessions: the trace names none and no request "
                         "extends an earlier one's hash ids (docs/load.md)", field="load.type")
    return (SessionClients(requests, sessions, load.users, load.think_time_s, stages),
            sessions)


def with_session_columns(frame: pd.DataFrame, sessions: Sessions) -> pd.DataFrame:
    """`frame` (rows of requests.parquet) with `session_id` filled from `sessions` and a
    `turn` column (int64) after it."""
    order = np.argsort(sessions.request_ids, kind="stable")
    positions = order[np.searchsorted(sessions.request_ids, frame["request_id"].to_numpy(),
                                      sorter=order)]
    names = np.asarray(sessions.names, dtype=object)[sessions.session[positions]]
    frame = frame.assign(session_id=pd.array(names, dtype=pd.ArrowDtype(pa.string())))
    frame.insert(frame.columns.get_loc("session_id") + 1, "turn",
                 sessions.turn[positions].astype(np.int64))
    return frame
