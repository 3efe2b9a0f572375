"""Open-loop loads: the trace's requests, in trace order, with their arrivals re-timed.

`load.type` (config/load.py; docs/load.md) `trace` divides each arrival by `rate_scale`;
`constant` and `poisson` keep the requests' order and contents and give request i of a
stage the arrival `start + offset_i`: constant `offset_i = i / rate`; poisson `offset_0 = 0`,
`offset_i = offset_(i-1) + gap_i` with `gap_i` numpy's `default_rng(load.seed)
.exponential(1 / rate)` draw for request i (one draw per request of the trace, used or
not, so the times do not depend on how the trace is cut into chunks). Without stages there
is one stage from t = 0 without end. With stages, a request whose arrival would reach its
stage's end starts the next stage (at offset 0, at that stage's rate); requests left when
the last stage ends are not offered. Closed loops (concurrency, sessions) are the engine's
(engine/); their requests pass through here unchanged.

`ArrivalClock` re-times a chunk at a time; `retime_requests` does a trace read whole,
`RetimedStream` a streamed one (every pass over it sees the same times). Owned here: the
arrival times. Left out: stage boundaries and figures (metrics/stages.py), the run itself.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

from prefixsim.config.load import RATE_TYPES, LoadConfig, StageConfig
from prefixsim.metrics.stages import stage_starts, with_stage_column
from prefixsim.pipeline.result import RunResult
from prefixsim.pipeline.sinks import RowSink
from prefixsim.trace import Request
from prefixsim.trace.columns import RequestColumns
from prefixsim.trace.stream import TraceStream


def retimes(load: LoadConfig) -> bool:
    """Whether `load` changes the trace's arrival times (else the run is as without it)."""
    return load.type in RATE_TYPES or (load.type == "trace" and load.rate_scale != 1.0)


class ArrivalClock:
    """The arrival times of a trace's requests under an open-loop `load`, chunk by chunk
    (see the module docstring); `ended` once the last stage is over."""

    def __init__(self, load: LoadConfig) -> None:
        self.load = load
        if load.type not in RATE_TYPES:
            self._rates, durations = [], []
        elif load.stages is None:  # one stage without end
            self._rates, durations = [load.rate], [math.inf]
        else:
            self._rates = [stage.rate for stage in load.stages]
            durations = [stage.duration_s for stage in load.stages]
        self._bounds = stage_starts(durations)
        self._rng = np.random.default_rng(load.seed)
        self._stage = 0
        self._in_stage = 0  # requests given this stage so far
        self._offset = 0.0  # the last of them, from the stage's start
        self.ended = False

    def times(self, trace_arrivals: np.ndarray) -> np.ndarray:
        """The next requests' arrivals (float64), given their arrivals in the trace; fewer
        than given (the first ones) when the last stage ends among them."""
        if self.load.type not in RATE_TYPES:
            return np.asarray(trace_arrivals, dtype=np.float64) / self.load.rate_scale
        count = len(trace_arrivals)
        unit_gaps = (self._rng.standard_exponential(count) if self.load.type == "poisson"
                     else None)
        times = np.empty(count, dtype=np.float64)
        done = 0
        while done < count and not self.ended:
            done += self._fill(times, done, unit_gaps)
        return times[:done]

    def _fill(self, times: np.ndarray, first: int, unit_gaps: np.ndarray | None) -> int:
        """Time requests from `first` in the current stage; how many it took (moving to the
        next stage, or ending, when it took fewer than were left)."""
        rate = self._rates[self._stage]
        start, end = self._bounds[self._stage], self._bounds[self._stage + 1]
        left = len(times) - first
        if unit_gaps is None:
            offsets = (self._in_stage + np.arange(left, dtype=np.float64)) / rate
        else:
            steps = unit_gaps[first:] * (1.0 / rate)  # numpy's exponential(1 / rate)
            if self._in_stage == 0:
                steps[0] = 0.0
            offsets = np.cumsum(np.concatenate(([self._offset], steps)))[1:]
        arrivals = start + offsets
        taken = int(np.searchsorted(arrivals, end, side="left"))  # arrivals < end
        times[first:first + taken] = arrivals[:taken]
        if taken:
            self._in_stage += taken
            self._offset = float(offsets[taken - 1])
        if taken < left:
            self._stage += 1
            self._in_stage, self._offset = 0, 0.0
            self.ended = self._stage == len(self._rates)
        return taken


def retime_columns(chunk: RequestColumns, clock: ArrivalClock) -> RequestColumns:
    """`chunk` with its arrivals from `clock` (its first requests only, once it ends)."""
    times = clock.times(chunk.arrival_s)
    kept = chunk if len(times) == len(chunk) else chunk.take(np.arange(len(times)))
    return RequestColumns(kept.request_ids, times, kept.input_tokens, kept.output_tokens,
                          kept.page_size_tokens, kept.page_start, kept.page_ids,
                          kept.sessions, kept.namespaces)


def retime_requests(requests: Sequence[Request], load: LoadConfig) -> Sequence[Request]:
    """A trace read whole (in trace order) with its arrivals under `load`."""
    clock = ArrivalClock(load)
    if isinstance(requests, RequestColumns):
        return retime_columns(requests, clock)
    times = clock.times(np.fromiter((r.arrival_s for r in requests), dtype=np.float64,
                                    count=len(requests))).tolist()
    return [dataclasses.replace(request, arrival_s=time)
            for request, time in zip(requests, times, strict=False)]


@dataclasses.dataclass(frozen=True)
class RetimedStream:
    """A streamed trace (trace/stream.py) whose chunks come re-timed under `load`; what a
    run reads of a TraceStream, with the same answers for the re-timed arrivals."""

    inner: TraceStream
    load: LoadConfig

    @property
    def format(self) -> str:
        return self.inner.format

    @property
    def total(self) -> int | None:
        return None if self.load.stages else self.inner.total

    def first_arrival_s(self) -> float:
        """The trace's own first arrival (its time shift), as the inner stream's."""
        return self.inner.first_arrival_s()

    def last_arrival_s(self, start_s: float) -> float:
        """The last re-timed arrival (a pass over the file, but for a scaled trace)."""
        if self.load.type == "trace":
            return float(np.float64(self.inner.last_arrival_s(start_s)) / self.load.rate_scale)
        last = 0.0
        for chunk in self:
            last = float(chunk.arrival_s[-1])
        return last

    def __iter__(self) -> Iterator[RequestColumns]:
        clock = ArrivalClock(self.load)
        for chunk in self.inner:
            retimed = retime_columns(chunk, clock)
            if len(retimed):
                yield retimed
            if clock.ended:
                return


class StagedRows:
    """A row sink that adds the `stage` column (metrics/stages.py) to every frame it passes
    on to `sink`."""

    def __init__(self, sink: RowSink, stages: Sequence[StageConfig]) -> None:
        self.sink = sink
        self.stages = stages

    @property
    def scratch_dir(self):
        return self.sink.scratch_dir

    def write(self, rows: pd.DataFrame) -> None:
        self.sink.write(with_stage_column(rows, self.stages))

    def close(self) -> None:
        self.sink.close()

    def discard(self) -> None:
        self.sink.discard()


def loaded_requests(requests: Sequence[Request], load: LoadConfig) -> Sequence[Request]:
    """A trace read whole as the run offers it: `requests` themselves when `load` keeps the
    trace's times."""
    return retime_requests(requests, load) if retimes(load) else requests


def loaded_stream(stream: TraceStream, load: LoadConfig) -> TraceStream | RetimedStream:
    """A streamed trace as the run offers it: `stream` itself when `load` keeps its times."""
    return RetimedStream(stream, load) if retimes(load) else stream


def staged_rows(sink: RowSink | None, load: LoadConfig) -> RowSink | None:
    """`sink`, adding the `stage` column when `load` has stages."""
    return sink if sink is None or load.stages is None else StagedRows(sink, load.stages)


def staged_result(result: RunResult, load: LoadConfig) -> RunResult:
    """`result`, its requests with the `stage` column when `load` has stages."""
    if load.stages is None:
        return result
    return dataclasses.replace(result, requests=with_stage_column(result.requests,
                                                                  load.stages))
