"""Closed-loop loads through the one road (pipeline/closed_loop.py, docs/load.md "Closed
loops"): users in flight, the session columns of requests.parquet, and the invariant that no
turn is released before its previous turn finished plus its think time, on a generated
trace and on every shared real trace that has sessions (skipped where absent)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from prefixsim.analysis.bounds import unbounded_hit_rate
from prefixsim.config import load_config
from prefixsim.errors import InputError
from prefixsim.pipeline import simulate
from prefixsim.pipeline.build import build_unbounded_cache
from prefixsim.pipeline.inputs import load_requests
from prefixsim.trace import Request
from prefixsim.trace.sessions import infer_sessions

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "traces" / "demo_chat.jsonl"
TRACES = ROOT.parent / "shared" / "traces"
# shared traces with sessions (../shared/traces/README.md): named (kv-cache-tester, RAGPulse)
# or inferred (Mooncake); a whole run of each, 8 sessions in flight, took (2 busy cores):
# kv-cache-tester 16-24 s, Mooncake 9-19 s, RAGPulse 6-8 s. Those over ~10 s run whole only
# with `-m slow`; the default run takes their first FIRST_REQUESTS requests
SESSION_TRACES = ["kv-cache-tester", "mooncake/conversation_trace.jsonl", "ragpulse"]
QUICK_WHOLE = {"ragpulse"}
FIRST_REQUESTS = 400
REAL_CASES = [pytest.param(name, None, id=f"{name}-whole") for name in sorted(QUICK_WHOLE)] + [
    case for name in SESSION_TRACES if name not in QUICK_WHOLE
    for case in (pytest.param(name, FIRST_REQUESTS, id=f"{name}-first{FIRST_REQUESTS}"),
                 pytest.param(name, None, id=f"{name}-whole", marks=pytest.mark.slow))]


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
@pytest.mark.parametrize(("name", "first"), REAL_CASES)
@pytest.mark.parametrize("think_time_s", [None, 1.0])
def test_sessions_on_real_traces(request, name, first, think_time_s):
    """Each shared trace with sessions (whole, or its first requests), 8 sessions in
    flight."""
    if request.node.get_closest_marker("slow") and "slow" not in request.config.option.markexpr:
        pytest.skip("a whole trace of ~20 s a run: select it with -m slow")
    config = _config(TRACES / name, **{"load.type": "sessions", "load.users": 8,
                                      "load.think_time_s": think_time_s})
    requests = load_requests(config.trace)
    requests = requests if first is None else requests[:first]
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


@pytest.mark.parametrize("kind", ["concurrency", "sessions"])
def test_staged_closed_loops_count_the_requests_they_sent(kind):
    """Stages of users: rows carry their stage, no request is released after the last
    stage's end, and num_requests counts the requests sent (fewer than the trace's), as the
    stages' own counts add up to."""
    stages = [{"users": 1, "duration_s": 20.0}, {"users": 3, "duration_s": 20.0}]
    result = simulate(_config(DEMO, **{"load.type": kind, "load.stages": stages}))
    frame, summary = result.requests, result.summary
    assert frame["arrival_s"].max() < 40.0 and set(frame["stage"]) == {0, 1}
    assert summary["num_requests"] == len(frame) < len(load_requests(result.config.trace))
    assert sum(stage["num_requests"] for stage in summary["stages"]) == len(frame)
    assert [stage["users"] for stage in summary["stages"]] == [1, 3]
    # the bound is taken over the requests sent (no TTL: their order alone matters)
    requests = load_requests(result.config.trace)
    sent = set(frame["request_id"])
    expected = unbounded_hit_rate([r for r in requests if r.request_id in sent],
                                  build_unbounded_cache(result.config.cache))
    assert summary["cache_unbounded_token_hit_rate"] == expected
    assert expected != unbounded_hit_rate(requests, build_unbounded_cache(result.config.cache))


def test_sessions_stages_cap_the_sessions_in_flight():
    """One session in flight in stage 0, up to 3 in stage 1 (sessions started stay)."""
    stages = [{"users": 1, "duration_s": 30.0}, {"users": 3, "duration_s": 30.0}]
    frame = simulate(_config(DEMO, **{"load.type": "sessions", "load.stages": stages})
                     ).requests
    first = frame[frame["stage"] == 0]
    assert first["session_id"].nunique() == 1 and frame["session_id"].nunique() > 1
    turns = frame.groupby("session_id")["turn"]
    assert (turns.min() == 0).all() and (turns.max() + 1 == turns.count()).all()


@pytest.mark.parametrize("stream", [False, True])
def test_closed_loop_bound_on_the_times_sent(stream):
    """With a TTL the unbounded bound replays the requests sent at their rows' arrival_s
    (the times the closed loop sent them), not at the trace's times."""
    config = _config(DEMO, **{"load.type": "concurrency", "load.users": 2,
                              "cache.ttl_s": 5.0})
    result = simulate(config, stream=stream)
    sent_at = dict(zip(result.requests["request_id"], result.requests["arrival_s"],
                       strict=True))
    requests = load_requests(result.config.trace)
    sent = sorted((dataclasses.replace(r, arrival_s=sent_at[r.request_id]) for r in requests),
                  key=lambda r: r.arrival_s)
    unbounded = build_unbounded_cache(result.config.cache)
    expected = unbounded_hit_rate(sent, unbounded)
    assert result.summary["cache_unbounded_token_hit_rate"] == expected
    on_trace = unbounded_hit_rate(requests, build_unbounded_cache(result.config.cache))
    assert expected != on_trace
