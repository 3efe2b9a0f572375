"""Run a tune: ask the study for trials, run them as sweep points, tell it the results.

The driver owns the study and asks it for as many trials at a time as it has workers (`-j`,
or the cluster's), turns each trial's parameters into a sweep point on top of the train
part's base (`make_point`: validated, its id from the parameters) with the run id
`trial-NNNN`, skips a trial that breaks a constraint over config keys (told `pruned`, not
simulated), runs the rest on a sweep executor (`run_point`, the sweep's worker), stores
every outcome as a run folder (the sweep's atomic `write_run`), and only then tells the
study, so a finished trial is never lost: a worker killed between the two leaves a
complete folder that the next start recovers (`settle_stale`). With one worker, the same
spec, seed and storage give the same trials. Several drivers (`--storage`, or `--resume` on
one folder from another shell) share a study; each stops when the study holds `trials`
finished trials. The held-out part and the tables are `heldout.py`'s and `store.py`'s.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from prefixsim.errors import InputError
from prefixsim.sweep import OK, RunOutcome, run_point
from prefixsim.sweep.executors import LOCAL_WORKERS, ExecutorOptions
from prefixsim.sweep.runner import TABLE_REFRESH_S
from prefixsim.sweep.spec import SweepPoint
from prefixsim.sweep.store import (
    STALE_STAGING_S,
    clean_staging,
    read_run,
    read_sweep_meta,
    run_dir,
    write_run,
    write_text_atomic,
)
from prefixsim.tune.heldout import (
    WHOLE_TRACE,
    PartOptions,
    Parts,
    check_traces,
    finish,
    parts_for,
    trial_point,
)
from prefixsim.tune.samplers import build_sampler, optuna_module
from prefixsim.tune.space import grid_points, needs_step, suggest
from prefixsim.tune.spec import TuneSpec
from prefixsim.tune.study import (
    objective_values,
    open_study,
    settle_stale,
    storage_for,
    tell,
    worker_id,
)


@dataclass(frozen=True)
class TrialReport:
    """What the progress bar is told after each trial: its end and the best so far."""

    number: int
    state: str
    values: list[float] | None
    best: list[float] | None
    error: str | None = None


@dataclass
class TuneResult:
    """What a tune call did, and what it found (tune.json holds the same)."""

    out_dir: Path
    ran: int = 0
    summary: dict[str, Any] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)


def run_tune(
    spec: TuneSpec, out_dir: Path, *, held_out: PartOptions = WHOLE_TRACE,
    workers: ExecutorOptions = LOCAL_WORKERS, storage_url: str | None = None,
    resume: bool = False, trials: int | None = None, keep_requests: bool = True,
    on_start: Callable[[int], None] | None = None,
    on_trial: Callable[[TrialReport], None] | None = None,
) -> TuneResult:
    """Tune `spec` into `out_dir` (see the module docstring and docs/results.md): trials on
    the part of the trace that `held_out` leaves (heldout.py), run where `workers` say
    (sweep/executors.py)."""
    optuna_module()
    parts = parts_for(spec, held_out)
    check_traces(parts)
    sampler = build_sampler(spec.sampler.name, spec.sampler.seed, spec.sampler.options)
    grid = _grid(spec) if spec.sampler.name == "grid" else None
    budget = trials or spec.trials
    if grid is not None:
        budget = min(budget, len(grid))
    runner = workers.build()
    _check_folder(out_dir, spec, resume, storage_url)
    # a --storage that cannot be opened is refused before the folder is made
    storage = None if storage_url is None else storage_for(out_dir, storage_url)
    out_dir.mkdir(parents=True, exist_ok=True)
    clean_staging(out_dir, older_than_s=STALE_STAGING_S)  # others may be writing here
    write_text_atomic(out_dir / "spec.yaml", spec.text)
    if read_sweep_meta(out_dir) is None:
        write_text_atomic(out_dir / "sweep.json", json.dumps({"kind": "tune", "name": spec.name}))
    if storage is None:  # DIR/study.db, in the folder made above
        storage = storage_for(out_dir, None)
    study = open_study(spec, storage, sampler, {"split": parts.label})
    settle_stale(study, storage, functools.partial(_recover, out_dir, spec, parts))
    if grid is not None:
        _enqueue_grid(study, grid, budget)
    result = TuneResult(out_dir=out_dir)
    if on_start is not None:
        on_start(max(0, budget - len(_finished(study))))
    try:
        _optimise(study, spec, parts, out_dir, runner, budget, keep_requests, result, on_trial)
        result.summary = finish(study, spec, parts, out_dir, runner=runner,
                                keep_requests=keep_requests)
    finally:
        runner.close()
    return result


def _finished(study: Any) -> list[Any]:
    states = optuna_module().trial.TrialState
    return study.get_trials(deepcopy=False, states=(states.COMPLETE, states.PRUNED,
                                                    states.FAIL))


def _optimise(study: Any, spec: TuneSpec, parts: Parts, out_dir: Path, runner: Any,
              budget: int, keep_requests: bool, result: TuneResult,
              on_trial: Callable[[TrialReport], None] | None) -> None:
    """Rounds of ask (as many as the workers), run, store, tell, until the study holds
    `budget` finished trials (counting the ones other workers are running)."""
    running_state = optuna_module().trial.TrialState.RUNNING
    jobs = max(1, getattr(runner, "n_jobs", 1))
    worker = worker_id()
    fn = functools.partial(run_point, keep_requests=keep_requests)
    refreshed = time.monotonic()
    while True:
        running = len(study.get_trials(deepcopy=False, states=(running_state,)))
        room = budget - len(_finished(study)) - running
        if room <= 0:
            return
        batch: list[tuple[Any, SweepPoint]] = []
        copies: list[tuple[Any, int]] = []  # a trial asking for a point of this batch again
        for asked in (_ask(study, spec, parts, worker, result, on_trial)
                      for _ in range(min(jobs, room))):
            if asked is not None:
                twin = next((t.number for t, _ in batch if t.params == asked[0].params), None)
                if twin is None:
                    batch.append(asked)
                else:
                    copies.append((asked[0], twin))
        for index, outcome in runner.map_unordered(fn, [point for _, point in batch]):
            trial, point = batch[index]
            if isinstance(outcome, BaseException):
                outcome = RunOutcome(run_id=point.run_id, params=point.params, status="failed",
                                     error=f"worker lost: {type(outcome).__name__}: {outcome}")
            write_run(out_dir, outcome)
            _finish_trial(study, spec, trial, point, outcome, result, on_trial)
        for trial, twin in copies:
            _tell_copy(study, spec, trial, study.trials[twin], result, on_trial)
        if time.monotonic() - refreshed >= TABLE_REFRESH_S:
            finish(study, spec, parts, out_dir, runner=None, keep_requests=keep_requests)
            refreshed = time.monotonic()


def _check_folder(out_dir: Path, spec: TuneSpec, resume: bool, storage_url: str | None) -> None:
    meta = read_sweep_meta(out_dir)
    held = meta is not None or (out_dir / "study.db").exists()
    if held and not resume:
        raise InputError("already holds a tune or sweep; pass --resume to continue it or "
                         "choose another -o folder", file=str(out_dir))
    if resume and not held and storage_url is None:
        raise InputError("holds no tune to resume", file=str(out_dir))
    if meta is not None and (meta.get("kind") != "tune" or meta.get("name") != spec.name):
        raise InputError(f"holds the {meta.get('kind', 'sweep')} {meta.get('name')!r}, not "
                         f"the tune {spec.name!r} (the spec's name:)", file=str(out_dir))


def _grid(spec: TuneSpec) -> list[dict[str, Any]]:
    missing = needs_step(spec.knobs)
    if missing:
        raise InputError(f"the grid sampler needs choices or an int/float range with step: "
                         f"(no log:) for every knob; {missing[0]} has neither",
                         field=f"space.{missing[0]}")
    points = grid_points(spec.knobs)
    order = np.random.default_rng(spec.sampler.seed).permutation(len(points))
    return [points[i] for i in order]


def _enqueue_grid(study: Any, grid: list[dict[str, Any]], budget: int) -> None:
    """Enqueue the grid's points (seeded order) that the study has not seen, up to
    `budget` trials in all; waiting trials are handed out once each, to any worker."""
    seen = [t.params or t.system_attrs.get("fixed_params", {}) for t in study.trials]
    room = budget - len(seen)
    for params in grid:
        if room <= 0:
            break
        if params not in seen:
            study.enqueue_trial(params)
            room -= 1


def _ask(study: Any, spec: TuneSpec, parts: Parts, worker: str, result: TuneResult,
         on_trial: Callable[[TrialReport], None] | None) -> tuple[Any, SweepPoint] | None:
    """A new trial and its point, or None when it ended before running (invalid, or
    infeasible by its config alone)."""
    trial = study.ask()
    trial.set_user_attr("worker", worker)
    params = suggest(trial, spec.knobs)
    try:
        point = trial_point(spec, parts.train, params, trial.number)
    except InputError as exc:
        tell(study, trial, None, {}, "failed", str(exc))
        _report(study, spec, trial.number, "failed", None, str(exc), result, on_trial)
        return None
    config = point.config.model_dump(mode="json")
    before = {c.text: c.violation(config, None) for c in spec.constraints if c.before_run}
    if any(v > 0 for v in before.values()):
        broken = next(text for text, v in before.items() if v > 0)
        tell(study, trial, None, before, "pruned", f"infeasible before the run: {broken}")
        _report(study, spec, trial.number, "pruned", None, None, result, on_trial)
        return None
    complete = optuna_module().trial.TrialState.COMPLETE
    twin = next((t for t in study.get_trials(deepcopy=False, states=(complete,))
                 if t.params == trial.params and t.number != trial.number), None)
    if twin is not None:
        _tell_copy(study, spec, trial, twin, result, on_trial)
        return None
    trial.set_user_attr("run_id", point.run_id)
    return trial, point


def _tell_copy(study: Any, spec: TuneSpec, trial: Any, twin: Any, result: TuneResult,
               on_trial: Callable[[TrialReport], None] | None) -> None:
    """`trial` asks for the point that trial `twin` ran (NSGA-II's offspring and TPE on a
    small grid repeat points): it is told `twin`'s end instead of being run again, and
    marked `duplicate_of` so that the front lists the point once (store.py)."""
    trial.set_user_attr("duplicate_of", twin.number)
    if twin.state == optuna_module().trial.TrialState.COMPLETE:
        tell(study, trial, list(twin.values), dict(twin.constraints))
        _report(study, spec, trial.number, "complete", list(twin.values), None, result,
                on_trial)
    else:
        error = f"the point of trial {twin.number}, which did not complete"
        tell(study, trial, None, {}, "failed", error)
        _report(study, spec, trial.number, "failed", None, error, result, on_trial)


def _finish_trial(study: Any, spec: TuneSpec, trial: Any, point: SweepPoint,
                  outcome: RunOutcome, result: TuneResult,
                  on_trial: Callable[[TrialReport], None] | None) -> None:
    result.ran += 1
    if outcome.status != OK:
        tell(study, trial, None, {}, "failed", outcome.error)
        _report(study, spec, trial.number, "failed", None, outcome.error, result, on_trial)
        return
    values = objective_values(spec.objectives, outcome.summary)
    if isinstance(values, str):
        tell(study, trial, None, {}, "failed", values)
        raise InputError(values, field="objectives")
    config = point.config.model_dump(mode="json")
    violations = {c.text: c.violation(config, outcome.summary) for c in spec.constraints}
    tell(study, trial, values, violations)
    _report(study, spec, trial.number, "complete", values, None, result, on_trial)


def _report(study: Any, spec: TuneSpec, number: int, state: str, values: list[float] | None,
            error: str | None, result: TuneResult,
            on_trial: Callable[[TrialReport], None] | None) -> None:
    if error is not None:
        result.failed[number] = error
    if on_trial is not None:
        on_trial(TrialReport(number, state, values, best_so_far(study, spec), error))


def best_so_far(study: Any, spec: TuneSpec) -> list[float] | None:
    """The best feasible value of one objective so far (None for several, or none yet)."""
    if len(spec.objectives) != 1:
        return None
    states = optuna_module().trial.TrialState
    values = [t.values[0] for t in study.get_trials(deepcopy=False, states=[states.COMPLETE])
              if all(v <= 0 for v in t.constraints.values())]
    if not values:
        return None
    pick = max if spec.objectives[0].direction == "maximize" else min
    return [pick(values)]


def _recover(out_dir: Path, spec: TuneSpec, parts: Parts, frozen: Any
             ) -> tuple[list[float], dict[str, float]] | None:
    """A stale trial's values and constraints from its complete run folder, if any."""
    run_id = frozen.user_attrs.get("run_id")
    if run_id is None:
        return None
    found = read_run(run_dir(out_dir, run_id))
    if found is None or found.summary is None or found.config_text is None:
        return None
    summary = found.summary
    config = yaml.safe_load(found.config_text)
    values = objective_values(spec.objectives, summary)
    if isinstance(values, str):
        return None
    return values, {c.text: c.violation(config, summary) for c in spec.constraints}

