"""One sweep point, run inside a worker process: config in, a picklable outcome out.

The worker never raises: a failing run comes back as an outcome with `status="failed"` and a
one-line `error`, so the sweep goes on. Traces are loaded once per worker process and reused
by every run with the same (resolved) trace section and the same file on disk (the
pipeline's `share_trace`). The worker
writes nothing; the driver stores outcomes (store.py), so remote workers need no shared disk.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from prefixsim.config import config_to_yaml
from prefixsim.errors import InputError
from prefixsim.pipeline import simulate
from prefixsim.sweep.spec import SweepPoint

OK = "ok"
FAILED = "failed"


@dataclass
class RunOutcome:
    """What one point produced (DataFrames empty when the run failed or kept none)."""

    run_id: str
    params: dict[str, Any]
    status: str
    error: str | None = None
    summary: dict[str, object] = field(default_factory=dict)
    config_yaml: str = ""
    requests: pd.DataFrame = field(default_factory=pd.DataFrame)
    timeseries: pd.DataFrame = field(default_factory=pd.DataFrame)
    wall_time_s: float = 0.0
    bad_input: bool = False  # failed on an InputError (the input's fault, the same each run)


def run_point(point: SweepPoint, keep_requests: bool = True) -> RunOutcome:
    """Run one point; failures become outcomes, never exceptions."""
    started = time.perf_counter()
    try:
        result = simulate(point.config, share_trace=True)
    except Exception as exc:  # noqa: BLE001 - a failing run must not stop the sweep
        error = str(exc) if isinstance(exc, InputError) else f"{type(exc).__name__}: {exc}"
        return RunOutcome(run_id=point.run_id, params=point.params, status=FAILED,
                          error=" ".join(error.split()), bad_input=isinstance(exc, InputError),
                          config_yaml=config_to_yaml(point.config),
                          wall_time_s=time.perf_counter() - started)
    return RunOutcome(
        run_id=point.run_id, params=point.params, status=OK,
        summary=result.summary,
        config_yaml=config_to_yaml(result.config),
        requests=result.requests if keep_requests else pd.DataFrame(),
        timeseries=result.timeseries, wall_time_s=time.perf_counter() - started,
    )


# ------------------------------------------------------------- dying with the driver
WATCH_EVERY_S = 1.0
_watched: set[int] = set()


def watch_driver(driver_pid: int) -> None:
    """Make this worker process exit once the driver process `driver_pid` is gone (a killed
    sweep must not leave workers computing for minutes). A daemon thread checks every
    WATCH_EVERY_S; 0 or this process's own pid (a run in the driver) watches nothing."""
    if driver_pid <= 0 or driver_pid == os.getpid() or driver_pid in _watched:
        return
    _watched.add(driver_pid)

    def watch() -> None:
        while True:
            time.sleep(WATCH_EVERY_S)
            if not _alive(driver_pid):
                os._exit(3)

    threading.Thread(target=watch, name="prefixsim-watch-driver", daemon=True).start()


def _alive(pid: int) -> bool:
    if os.getppid() == pid:  # still our parent (local pools): alive without a signal
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True
