"""The one road every run takes: trace -> build -> engine -> summarize, each crossed once.

`simulate(config)` is the only function that runs a run; the CLI, sweeps, tuning and the
Python API all call it (docs/architecture.md "One run: a one-way road"). Its input is a
stream of request chunks: the trace streamed chunk by chunk where the run asks for it and
the trace allows (pipeline/streamed.py cache-only, pipeline/streamed_timed.py timed), else
read whole as one chunk (pipeline/cache_only.py, pipeline/timed.py); both give the same
results. Request rows go to the sink the caller supplies (pipeline/sinks.py: a Parquet
file, frames in memory, or nothing); the summary is assembled by metrics/summary.py alone.
The engine returns records and writes no file; this module writes nothing itself either.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from prefixsim.config import RunConfig
from prefixsim.engine.gc_pause import paused_gc
from prefixsim.metrics.summary import summarize
from prefixsim.pipeline.build import build
from prefixsim.pipeline.cache_only import run_cache_only
from prefixsim.pipeline.inputs import (
    check_trace_exists,
    load_trace_data,
    resolve_trace_defaults,
    shared_trace_data,
)
from prefixsim.pipeline.load import loaded_requests, loaded_stream, staged_result, staged_rows
from prefixsim.pipeline.result import RunResult
from prefixsim.pipeline.sinks import RowSink
from prefixsim.pipeline.streamed import open_trace_stream, replay_streamed
from prefixsim.pipeline.streamed_timed import serve_streamed
from prefixsim.pipeline.timed import run_timed
from prefixsim.trace import Request, TraceData
from prefixsim.trace.pages import distinct_prefix_tokens
from prefixsim.trace.stream import NotStreamable, TraceStream


class ProgressBar(Protocol):
    def update(self, n: int = 1) -> None: ...


# `progress(desc, total)`: a bar for one phase of the run ("read", "replay"), entered while
# the phase runs; tqdm and the CLI's Progress both fit
ProgressFactory = Callable[[str, int | None], AbstractContextManager[ProgressBar]]


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass


@contextlib.contextmanager
def _no_progress(_desc: str, _total: int | None) -> Iterator[ProgressBar]:
    yield _NoBar()


def simulate(
    config: RunConfig,
    trace: TraceData | Sequence[Request] | None = None,
    *,
    sink: RowSink | None = None,
    progress: ProgressFactory | None = None,
    command: str | None = None,
    stream: bool = False,
    share_trace: bool = False,
) -> RunResult:
    """Run `config` and return its result.

    `trace`: the requests to replay (a TraceData already read: its labels and skipped lines
    join the summary; or a sequence of requests); None reads the trace the config names,
    with its format and block size resolved first (`result.config` is then the resolved
    config). `stream`: stream that trace chunk by chunk where it can (same results, bounded
    memory); `share_trace`: read it at most once per process and file version (sweep
    workers; runs share the data and must not change it). `sink` takes the request rows as
    they are made. `progress(desc, total)` makes a bar per phase. `command`, the command
    line, is recorded in the summary when given. The cyclic garbage collector is paused
    for the run (engine/gc_pause.py: the replays free what they make by reference counting).
    """
    with paused_gc():
        return _run(config, trace, sink, progress or _no_progress, command, stream,
                    share_trace)


def check_trace(config: RunConfig, *, read: bool = False) -> None:
    """The trace of `config`, checked before the runs that all read it start (a capacity
    search's probes, a sweep's points, a tune's trials): one that is not given, does not
    exist or is of no known format is an InputError (check_trace_exists). With `read` it is
    also read through as a run of `config` reads it, so a malformed line is refused with its
    file and line before any run: chunk by chunk where the run would stream it (nothing
    kept), else whole, into the process's shared copy that its in-process runs then reuse
    (inputs.shared_trace_data)."""
    resolved = check_trace_exists(config)
    if not read:
        return
    stream = open_trace_stream(resolved)
    if stream is not None:
        try:
            for _chunk in stream:
                pass
            return
        except NotStreamable:
            pass  # the whole reader then says what is wrong, if anything
    shared_trace_data(resolved.trace)


def _run(config: RunConfig, trace: TraceData | Sequence[Request] | None,
         sink: RowSink | None, progress: ProgressFactory, command: str | None,
         stream: bool, share_trace: bool) -> RunResult:
    not_streamed = None
    if trace is None:
        config = resolve_trace_defaults(config)
        opened = open_trace_stream(config) if stream else None
        if opened is not None:
            streamed = _streamed(config, loaded_stream(opened, config.load),
                                 staged_rows(sink, config.load), progress, command)
            if isinstance(streamed, RunResult):
                return staged_result(streamed, config.load)
            not_streamed = streamed
        if share_trace:
            trace = shared_trace_data(config.trace)
        else:
            with progress("read", None) as bar:
                trace = load_trace_data(config.trace, on_progress=bar.update)
    result = staged_result(_whole(config, trace, progress, command), config.load)
    if not_streamed is not None:
        result = dataclasses.replace(result, not_streamed=not_streamed)
    if sink is not None:
        sink.write(result.requests)
        sink.close()
    return result


def _streamed(config: RunConfig, stream: TraceStream, sink: RowSink | None,
              progress: ProgressFactory, command: str | None) -> RunResult | str:
    """The run over `stream`, or why the trace must be read whole (nothing kept in `sink`,
    the bar's count taken back)."""
    told = [0]
    with progress("replay", stream.total) as bar:

        def update(count: int) -> None:
            told[0] += count
            bar.update(count)

        try:
            if config.cache_only:
                return replay_streamed(config, stream, sink or _Discard(), update, command)
            result = serve_streamed(config, stream, update, command)
        except NotStreamable as reason:
            if sink is not None:
                sink.discard()
            if told[0]:
                bar.update(-told[0])
            return str(reason)
    if sink is not None:
        sink.write(result.requests)
        sink.close()
    return result


def _whole(config: RunConfig, trace: TraceData | Sequence[Request],
           progress: ProgressFactory, command: str | None) -> RunResult:
    """The run over a trace read whole: one chunk."""
    data = trace if isinstance(trace, TraceData) else None
    requests = loaded_requests(trace.requests if isinstance(trace, TraceData) else trace,
                               config.load)  # open-loop loads re-time it (docs/load.md)
    with progress("replay", len(requests)) as bar:
        started = time.perf_counter()
        # a figure of the trace alone, counted before the run's memory is taken
        distinct = None if data is None else distinct_prefix_tokens(requests)
        parts = build(config, requests)
        run_mode = run_cache_only if config.cache_only else run_timed
        facts, samples = run_mode(parts, requests, bar.update)
        facts = dataclasses.replace(facts, trace=data, command=command,
                                    distinct_prefix_tokens=distinct,
                                    wall_time_s=time.perf_counter() - started)
    return RunResult(requests=facts.requests, summary=summarize(facts), timeseries=samples,
                     config=config)


class _Discard:
    """A sink that keeps nothing (a streamed run with no sink of its caller's)."""

    scratch_dir = None

    def write(self, rows) -> None:
        pass

    def close(self) -> None:
        pass

    def discard(self) -> None:
        pass
