"""Sweeps: many runs from one spec (grid of dotted keys), on local processes, Dask or Ray.

`load_spec` reads a spec, `plan` expands it into validated points with derived run ids,
`run_sweep` executes the missing ones and writes the sweep folder (see store.py).
"""

from prefixsim.sweep.executors import EXECUTORS, Executor, ExecutorOptions, default_jobs
from prefixsim.sweep.runner import SweepResult, plan, run_sweep
from prefixsim.sweep.spec import (
    SweepPoint,
    SweepSpec,
    column_name,
    expand,
    load_spec,
    parse_spec,
    swept_keys,
)
from prefixsim.sweep.store import read_sweep_meta, sweep_table
from prefixsim.sweep.worker import FAILED, OK, RunOutcome, run_point

__all__ = [
    "EXECUTORS",
    "FAILED",
    "OK",
    "Executor",
    "ExecutorOptions",
    "RunOutcome",
    "SweepPoint",
    "SweepResult",
    "SweepSpec",
    "column_name",
    "default_jobs",
    "expand",
    "load_spec",
    "parse_spec",
    "plan",
    "read_sweep_meta",
    "run_point",
    "run_sweep",
    "sweep_table",
    "swept_keys",
]
