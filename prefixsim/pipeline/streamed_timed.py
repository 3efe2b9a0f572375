"""A timed run over a streamed trace: the engine reads the trace chunk by chunk as the
arrivals come, so memory holds the replicas, the requests in flight and what the run
records (one row a request, the state log, the ITL segments), not the trace.

`serve_streamed(config, stream)` is the streamed road of `simulate` (pipeline/road.py) for a
timed run whose trace `trace/stream.py` can stream (pipeline/streamed.py: `streamable`). A
first pass over the file takes what the summary needs of the trace alone (pipeline/timed.py:
TraceFigures; distinct prefix tokens; the unbounded bound, from the seen pages or, with a TTL
or request classes, one more pass through an unbounded cache), and meets anything the stream
gives up on before the engine starts: it then raises NotStreamable and `simulate` reads the
trace whole, with the same results (tested request by request). Then the engine pass.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

from prefixsim.config import RunConfig
from prefixsim.engine import ProgressCallback
from prefixsim.metrics.facts import Bounds
from prefixsim.metrics.summary import summarize
from prefixsim.pipeline.build import build, build_unbounded_cache
from prefixsim.pipeline.result import RunResult
from prefixsim.pipeline.streamed import TraceTally, unbounded_pass_rate
from prefixsim.pipeline.timed import TraceFigures, run_timed
from prefixsim.trace import Request, TraceData
from prefixsim.trace.stream import NotStreamable, TraceStream


def serve_streamed(config: RunConfig, stream: TraceStream,
                   on_progress: ProgressCallback | None = None,
                   command: str | None = None) -> RunResult:
    """Run timed `config` (resolved: trace format known) over `stream`. Raises
    NotStreamable, before anything was served, when the trace must be read whole."""
    if config.load.type == "sessions":  # its sessions are found in the whole trace
        raise NotStreamable("a sessions load reads the trace whole (pipeline/closed_loop.py)")
    started = time.perf_counter()
    # no offline policy (streamable): nothing learns the future; the stream checks every
    # chunk's ids chained before it yields the chunk (trace/stream.py)
    parts = build(config, [], chained=True)
    figures, distinct = _first_pass(parts, stream)
    facts, samples = run_timed(parts, _requests(stream), on_progress, figures)
    trace = TraceData([], stream.format, time_shift_s=stream.first_arrival_s())
    facts = dataclasses.replace(facts, trace=trace, command=command,
                                distinct_prefix_tokens=distinct,
                                wall_time_s=time.perf_counter() - started)
    return RunResult(requests=facts.requests, summary=summarize(facts), timeseries=samples,
                     config=config, streamed=True)


def _first_pass(parts, stream: TraceStream) -> tuple[TraceFigures, int]:
    """The trace's figures and distinct prefix tokens, in one pass (two with a TTL or
    request classes: the unbounded bound is then a replay)."""
    seen = build_unbounded_cache(parts.config.cache).ttl is None and parts.rules is None
    tally = TraceTally(parts, with_seen=seen)
    count = 0
    for chunk in stream:
        tally.add(chunk)
        count += len(chunk)
    if tally.seen is not None:
        unbounded = tally.seen_hits / tally.seen_query if tally.seen_query else 0.0
    else:
        unbounded = unbounded_pass_rate(parts, stream)
    return TraceFigures(Bounds(unbounded), count, tally.ttls or []), tally.distinct.total


def _requests(stream: TraceStream) -> Iterator[Request]:
    """The requests of the stream in order, a chunk at a time."""
    for chunk in stream:
        yield from chunk
