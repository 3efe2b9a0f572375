"""Closed-loop loads through the one road (pipeline/closed_loop.py, docs/load.md "Closed
loops"): users in flight, the session columns of requests.parquet, and the invariant that no
turn is released before its previous turn finished plus its think time, on a generated
trace and on every shared real trace that has sessions (skipped where absent)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from prefixsim.config import load_config
from prefixsim.errors import InputError
from prefixsim.pipeline import simulate
from prefixsim.pipeline.inputs import load_requests
from prefixsim.trace import Request
from prefixsim.trace.sessions import infer_sessions

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "traces" / "demo_chat.jsonl"
TRACES = ROOT.parent / "shared" / "traces"
SESSION_TRACES = {  # shared traces with sessions: named (kv-cache-tester) or inferred
    "kv-cache-tester": 400, "mooncake/conversation_trace.jsonl": 400,
}


def _config(path: Path, **overrides):
    return load_config(None, {"trace.path": str(path), "model.name": "llama-3.1-8b",
                              "hardware.gpu": "h100-sxm", "engine.sample_interval_s": None,
                              **overrides})


def test_no_load_section_keeps_the_columns():
    """Without `load:` requests.parquet has no `turn` column (the open loop as before)."""
    result = simulate(_config(DEMO))
    assert "turn" not in result.requests.columns


def test_concurrency_keeps_users_in_flight():
    """4 users: never more than 4 requests between arrival and finish; the first 4 arrive
    at t = 0."""
    result = simulate(_config(DEMO, **{"load.type": "concurrency", "load.users": 4}))
    frame = result.requests
    assert (frame["arrival_s"] == 0.0).sum() == 4
    events = sorted([(t, 1) for t in frame["arrival_s"]] + [(t, -1) for t in frame["finish_s"]])
    assert max(np.cumsum([step for _, step in events])) <= 4
    assert "turn" not in frame.columns


def test_sessions_on_a_trace_without_any_is_refused():
    """Distinct pages and no session ids: no session information and no rule applies."""
    requests = [Request(i, float(i), 16, 4, (100 + i,), 16) for i in range(5)]
    with pytest.raises(InputError) as raised:
        simulate(_config(DEMO, **{"load.type": "sessions"}), requests)
    assert raised.value.field == "load.type"


def generated_trace() -> list[Request]:
    """Three sessions of four turns, interleaved; each turn extends its previous turn's pages
    (ids chained per session), arrivals 0.3 s apart: no session ids, so they are inferred."""
    requests = []
    for turn in range(4):
        for session in range(3):
            rid = len(requests)
            ids = tuple(1000 * (session + 1) + page for page in range(2 * turn + 2))
            requests.append(Request(rid, 0.3 * rid, 16 * len(ids), 8, ids, 16))
    return requests


def test_sessions_inferred_on_a_generated_trace():
    requests = generated_trace()
    frame = simulate(_config(DEMO, **{"load.type": "sessions"}), requests).requests
    assert frame["turn"].tolist() == [t for t in range(4) for _ in range(3)]
    assert frame["session_id"].tolist()[:3] == ["s0", "s1", "s2"]
    assert_turns_wait(frame, requests, None)


def assert_turns_wait(frame, requests, think_time_s):
    """No turn released before its previous turn finished plus its think time (the
    trace's, trace/sessions.py, unless set)."""
    sessions = infer_sessions(requests)
    rows = frame.set_index("request_id")
    for position, following in enumerate(sessions.next_turn.tolist()):
        if following < 0:
            continue
        before = rows.loc[requests[position].request_id]
        after = rows.loc[requests[following].request_id]
        think = sessions.think_s[following] if think_time_s is None else think_time_s
        seen = before["finish_s"] if before["status"] == "completed" else before["arrival_s"]
        assert after["arrival_s"] >= seen + think - 1e-9


@pytest.mark.skipif(not TRACES.is_dir(), reason=f"the public traces are not at {TRACES}")
@pytest.mark.parametrize("name", sorted(SESSION_TRACES))
@pytest.mark.parametrize("think_time_s", [None, 1.0])
def test_sessions_on_real_traces(name, think_time_s):
    """The first requests of each shared trace with sessions, 8 sessions in flight."""
    config = _config(TRACES / name, **{"load.type": "sessions", "load.users": 8,
                                      "load.think_time_s": think_time_s})
    requests = load_requests(config.trace)[:SESSION_TRACES[name]]
    frame = simulate(config, requests).requests
    assert (frame["turn"] > 0).any()
    assert frame["session_id"].notna().all()
    assert_turns_wait(frame, requests, think_time_s)


@pytest.mark.parametrize("load", [{"load.type": "concurrency", "load.users": 3},
                                  {"load.type": "sessions", "load.users": 3}])
def test_streamed_and_whole_runs_agree(load):
    """A concurrency load streams the trace; a sessions load reads it whole (its sessions
    are found in the whole trace): either way the rows are those of a run read whole."""
    config = _config(DEMO, **load)
    whole = simulate(config).requests
    streamed = simulate(config, stream=True).requests
    assert streamed.equals(whole)


def test_concurrency_stages_and_sessions_stages_refused():
    """A staged concurrency load runs (rows carry their stage); sessions take no stages."""
    stages = [{"users": 1, "duration_s": 20.0}, {"users": 3, "duration_s": 20.0}]
    frame = simulate(_config(DEMO, **{"load.type": "concurrency", "load.stages": stages})
                     ).requests
    assert frame["arrival_s"].max() < 40.0 and set(frame["stage"]) <= {0, 1}
    with pytest.raises(InputError) as raised:
        simulate(_config(DEMO, **{"load.type": "sessions", "load.stages": stages}))
    assert raised.value.field == "load.stages"
