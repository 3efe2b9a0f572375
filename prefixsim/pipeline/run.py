"""One run, end to end: trace -> build -> engine -> summarize, each crossed once.

`simulate(config)` reads the trace (unless given requests or an already read TraceData),
builds the components (pipeline/build.py), runs the engine of the run's mode
(pipeline/cache_only.py or pipeline/timed.py) and hands the facts to metrics/summary.py, the
one place a summary is assembled. It writes nothing: choosing paths and writing files is the
CLI's job (and the sweep driver's).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from prefixsim.config import RunConfig
from prefixsim.engine import ProgressCallback
from prefixsim.metrics.summary import summarize
from prefixsim.pipeline.build import build
from prefixsim.pipeline.cache_only import run_cache_only
from prefixsim.pipeline.inputs import load_trace_data
from prefixsim.pipeline.timed import run_timed
from prefixsim.trace import Request, TraceData
from prefixsim.trace.pages import distinct_prefix_tokens


@dataclass(frozen=True)
class RunResult:
    """What a run produced: per-request rows, summary scalars, timeseries (may be empty)
    and the config it ran (None when not recorded)."""

    requests: pd.DataFrame
    summary: dict[str, object]
    timeseries: pd.DataFrame = field(default_factory=pd.DataFrame)
    config: RunConfig | None = None


def simulate(
    config: RunConfig,
    requests: Sequence[Request] | None = None,
    on_progress: ProgressCallback | None = None,
    *,
    trace: TraceData | None = None,
    command: str | None = None,
) -> RunResult:
    """Run `config` on `requests`, or on `trace` (a TraceData already read: its labels and
    skipped lines join the summary), or else on the trace its config names. `command`, the
    command line, is recorded in the summary when given."""
    started = time.perf_counter()
    if requests is None:
        if trace is None:
            trace = load_trace_data(config.trace)
        requests = trace.requests
    # a figure of the trace alone, counted before the run's memory is taken
    distinct = None if trace is None else distinct_prefix_tokens(trace.requests)
    parts = build(config, requests)
    run_mode = run_cache_only if config.cache_only else run_timed
    facts, samples = run_mode(parts, requests, on_progress)
    facts = dataclasses.replace(facts, trace=trace, command=command,
                                distinct_prefix_tokens=distinct,
                                wall_time_s=time.perf_counter() - started)
    return RunResult(requests=facts.requests, summary=summarize(facts), timeseries=samples,
                     config=config)
