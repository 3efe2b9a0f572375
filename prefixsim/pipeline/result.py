"""`RunResult`: what one run produced (pipeline/road.py `simulate` returns it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from prefixsim.config import RunConfig


@dataclass(frozen=True)
class RunResult:
    """What a run produced: per-request rows, summary scalars, timeseries (may be empty),
    the config it ran (None when not recorded) and whether its trace was streamed (then a
    cache-only run's `requests` holds only the columns the summary needs: the rows went to
    the run's sink, pipeline/sinks.py). `not_streamed`: why a run asked to stream read its
    trace whole instead (trace/stream.py's reason: arrivals out of order, ids not chained...),
    None when it streamed or was not asked to."""

    requests: pd.DataFrame
    summary: dict[str, object]
    timeseries: pd.DataFrame = field(default_factory=pd.DataFrame)
    config: RunConfig | None = None
    streamed: bool = False
    not_streamed: str | None = None
