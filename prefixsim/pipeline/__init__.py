"""One run from a config to results, as a one-way road: inputs.py (the trace), build.py
(components, built once), cache_only.py / timed.py (the engine of the run's mode), then
metrics/summary.py; run.py ties them together as `simulate`. Writes nothing. See
docs/architecture.md.
"""

from prefixsim.pipeline.build import Components, build
from prefixsim.pipeline.inputs import load_trace_data, resolve_trace_defaults
from prefixsim.pipeline.run import RunResult, simulate

__all__ = ["Components", "RunResult", "build", "load_trace_data", "resolve_trace_defaults",
           "simulate"]
