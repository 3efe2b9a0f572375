"""One run from a config to results, as a one-way road: `simulate` (run.py) is the only
function that runs a run. It reads the trace (inputs.py; streamed chunk by chunk by
streamed.py and streamed_timed.py where asked), builds the components once (build.py), runs
the engine of the run's mode (cache_only.py / timed.py), hands the request rows to the
caller's sink (sinks.py) and the facts to metrics/summary.py. Callers (the CLI, sweeps,
tuning, the public API) import from this package only (`check_trace`: a trace checked
before any run of a sweep, tune or capacity search); `run` (api.py) is the notebook's
way to it, taking a config in any form. See docs/architecture.md.
"""

from prefixsim.pipeline.api import run
from prefixsim.pipeline.result import RunResult
from prefixsim.pipeline.road import ProgressFactory, check_trace, simulate
from prefixsim.pipeline.sinks import FrameRows, ParquetRows, RowSink

__all__ = ["FrameRows", "ParquetRows", "ProgressFactory", "RowSink", "RunResult",
           "check_trace", "run", "simulate"]
