"""Run a sweep: expand the spec, skip finished points on resume, execute, store, tabulate.

Outcomes are stored by the driver as they arrive (in completion order), while the run ids,
seeds and the row order of `sweep.parquet` come from the plan, so results do not depend on
the executor or on which run finished first.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from prefixsim.config import config_to_yaml
from prefixsim.errors import InputError
from prefixsim.pipeline import check_trace
from prefixsim.sweep.executors import LOCAL_WORKERS, Executor, ExecutorOptions
from prefixsim.sweep.renamed import adopt_renamed_runs, foreign_runs
from prefixsim.sweep.spec import SweepPoint, SweepSpec, expand, spec_to_yaml, swept_keys
from prefixsim.sweep.store import (
    check_sweep_folder,
    clean_staging,
    finished_ids,
    lock_sweep_folder,
    read_sweep_meta,
    sweep_table,
    write_parquet_atomic,
    write_run,
    write_sweep_meta,
)
from prefixsim.sweep.worker import FAILED, OK, RunOutcome, run_point

OutcomeCallback = Callable[[RunOutcome], None]
# sweep.parquet is rewritten at most this often while runs finish (so a long sweep can be
# reported on midway), and always at the end.
TABLE_REFRESH_S = 30.0


@dataclass
class SweepResult:
    """What a sweep call did: the plan, what it ran now, what it skipped as finished."""

    points: list[SweepPoint]
    executed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    table_path: Path | None = None
    foreign: list[str] = field(default_factory=list)  # run folders of no point (resume)


def plan(spec: SweepSpec, source: str | None = None) -> list[SweepPoint]:
    """The validated points of `spec` (raises InputError before anything runs)."""
    return expand(spec, source)


def run_sweep(
    spec: SweepSpec,
    out_dir: Path,
    workers: ExecutorOptions = LOCAL_WORKERS,
    *,
    resume: bool = False,
    force: bool = False,
    keep_requests: bool = True,
    source: str | None = None,
    on_start: Callable[[int], None] | None = None,
    on_outcome: OutcomeCallback | None = None,
    command: str | None = None,
) -> SweepResult:
    """Run the points of `spec` not yet finished in `out_dir`; write sweep.parquet.

    `workers` says where the runs execute. Without `resume`, `out_dir` must not hold a sweep
    already; with it, the sweep there must have the same runs unless `force`
    (docs/input-rules.md I14: its finished runs would vanish from sweep.parquet).
    `on_start(n)` is told how many runs will execute; `on_outcome` sees each outcome
    after it is stored. `command`, the command line, is recorded in sweep.json.
    """
    points = plan(spec, source)
    runner = workers.build()
    if workers.address is None:  # remote workers read traces where they run; local ones read ours
        check_traces(points, source)
    check_sweep_folder(out_dir)
    held = read_sweep_meta(out_dir)
    if not resume and held is not None:
        raise InputError("already holds a sweep; pass --resume to finish it or choose another "
                         "-o folder", file=str(out_dir))
    if held is not None and not force:
        check_same_plan(out_dir, held, points)
    runner.open()  # a wrong address or an empty cluster fails here, before any folder
    try:
        with lock_sweep_folder(out_dir):
            return _run(spec, points, out_dir, runner, resume, keep_requests, on_start,
                        on_outcome, command)
    finally:
        runner.close()


def check_same_plan(out_dir: Path, held: dict, points: list[SweepPoint]) -> None:
    """The sweep in `out_dir` (its sweep.json, `held`) plans the same runs as `points`,
    compared by the config hash that ends each run id (the readable part before it may
    differ between releases)."""
    old = held.get("run_ids")
    if not isinstance(old, list):
        return
    held_hashes = {_config_hash(run_id) for run_id in old}
    new_hashes = {_config_hash(p.run_id) for p in points}
    if held_hashes != new_hashes:
        gone = len(held_hashes - new_hashes)
        raise InputError(f"holds a sweep of another spec ({gone} of its {len(held_hashes)} "
                         "runs are not in this one); resume it with its own spec, or pass "
                         "--force", file=str(out_dir))


def _config_hash(run_id: object) -> str:
    return str(run_id).rsplit("-", 1)[-1]


def check_traces(points: list[SweepPoint], source: str | None) -> None:
    """Every trace the points read exists and reads (pipeline/road.py `check_trace`, as a
    capacity search checks its own): given, of a known format, no malformed line; each
    distinct trace section once (a grid may sweep trace.path). Else one InputError before
    any run starts, as every run reading it would fail alike."""
    for path in sorted({str(p.config.trace.path) for p in points
                        if p.config.trace.path is not None}):
        if not Path(path).exists():
            raise InputError(f"trace {path} does not exist (no run was started)", file=source,
                             field="trace.path")
    checked = set()
    for point in points:
        if point.config.trace in checked:
            continue
        checked.add(point.config.trace)
        try:
            check_trace(point.config, read=True)
        except InputError as exc:
            if exc.file is not None:
                raise
            raise InputError(exc.message, file=source, field=exc.field) from None


def _run(spec: SweepSpec, points: list[SweepPoint], out_dir: Path, runner: Executor,
         resume: bool, keep_requests: bool, on_start: Callable[[int], None] | None,
         on_outcome: OutcomeCallback | None, command: str | None) -> SweepResult:
    keys = swept_keys(spec)
    clean_staging(out_dir)
    write_sweep_meta(out_dir, spec.name, keys, points, spec_to_yaml(spec), command)
    if resume:  # runs named by an older release keep their hash part: adopt them
        adopt_renamed_runs(out_dir, points)
    done = finished_ids(out_dir, points) if resume else set()
    todo = [p for p in points if p.run_id not in done]
    result = SweepResult(points=points, skipped=[p.run_id for p in points if p.run_id in done],
                         foreign=foreign_runs(out_dir, points) if resume else [])
    if on_start is not None:
        on_start(len(todo))
    fn = functools.partial(run_point, keep_requests=keep_requests)  # a partial: local pools
    seen: set[int] = set()
    table_path = out_dir / "sweep.parquet"
    refreshed = time.monotonic()
    try:
        for index, outcome in runner.map_unordered(fn, todo):
            seen.add(index)
            if isinstance(outcome, BaseException):
                outcome = _lost(todo[index], outcome)
            _store(out_dir, outcome, result, on_outcome)
            if time.monotonic() - refreshed >= TABLE_REFRESH_S:
                write_parquet_atomic(table_path, sweep_table(out_dir, points, keys))
                refreshed = time.monotonic()
    except (KeyboardInterrupt, InputError):
        raise
    except Exception as exc:  # noqa: BLE001 - the pool broke: the rest are failed runs
        for index, point in enumerate(todo):
            if index not in seen:
                _store(out_dir, _lost(point, exc), result, on_outcome)
    finally:
        result.table_path = table_path
        write_parquet_atomic(table_path, sweep_table(out_dir, points, keys))
    return result


def _lost(point: SweepPoint, exc: BaseException) -> RunOutcome:
    message = " ".join(f"worker lost: {type(exc).__name__}: {exc}".split())
    return RunOutcome(run_id=point.run_id, params=point.params, status=FAILED, error=message,
                      config_yaml=config_to_yaml(point.config))


def _store(out_dir: Path, outcome: RunOutcome, result: SweepResult,
           on_outcome: OutcomeCallback | None) -> None:
    write_run(out_dir, outcome)
    result.executed.append(outcome.run_id)
    if outcome.status != OK:
        result.failed[outcome.run_id] = outcome.error or "failed"
    if on_outcome is not None:
        on_outcome(outcome)
