"""Train/test parts of a tune, the held-out re-runs, and what a tune reports at its end.

`--split time:F` tunes on the first F of the trace's time span (`trace.time_window: [0, F]`
in the base) and holds out the rest (`[F, 1]`); `--train PATH --test PATH` tunes on one
trace and holds out another (`--test` alone holds out that trace, tuning on the spec's). At
the end the best trial(s) run again on the held-out part (`trial-NNNN-test`) and the base
config runs on every part (`base-train`, `base-test`; `base` without a split), so tune.json
sets side by side, per objective, the base and the best on the part tuned on and on the
held-out part, and how much of the train gain survives on the test part (`retained`). Each
figure is filed under the part it comes from (`train`, `test`, or `all` without a split).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefixsim.config import config_to_yaml
from prefixsim.errors import InputError
from prefixsim.pipeline import check_trace
from prefixsim.sweep import RunOutcome, run_point
from prefixsim.sweep.spec import SweepPoint, make_point
from prefixsim.sweep.store import read_run, run_dir, write_run
from prefixsim.tune.spec import TuneSpec, with_base
from prefixsim.tune.store import (
    best_trials,
    trials_frame,
    write_best,
    write_summary,
    write_tables,
)
from prefixsim.tune.study import objective_values


@dataclass(frozen=True)
class Parts:
    """The part the trials run on and the held-out one (None without a split)."""

    label: str | None
    train: TuneSpec
    test: TuneSpec | None

    @property
    def tuned_on(self) -> str:
        return "all" if self.test is None else "train"


@dataclass(frozen=True)
class PartOptions:
    """How the trace is parted: `--split time:F`, or `--train PATH` and `--test PATH`; none
    of them: tune on the spec's trace and hold nothing out."""

    split: str | None = None
    train: str | None = None
    test: str | None = None


WHOLE_TRACE = PartOptions()


def parts_for(spec: TuneSpec, options: PartOptions) -> Parts:
    """The parts of `--split time:F` or `--train/--test` (see the module docstring)."""
    split, train, test = options.split, options.train, options.test
    if split is not None and (train is not None or test is not None):
        raise InputError("give --split or --train/--test, not both", field="--split")
    if split is not None:
        kind, _, value = split.partition(":")
        try:
            fraction = float(value)
        except ValueError:
            fraction = -1.0
        if kind != "time" or not 0.0 < fraction < 1.0:
            raise InputError(f"expected time:F with 0 < F < 1, got {split!r}", field="--split")
        if (spec.base.get("trace") or {}).get("time_window") is not None:
            raise InputError("the base sets trace.time_window; --split sets it per part",
                             field="--split")
        return Parts(split, with_base(spec, "trace.time_window", [0.0, fraction]),
                     with_base(spec, "trace.time_window", [fraction, 1.0]))
    if train is None and test is None:
        return Parts(None, spec, None)
    for option, path in (("--train", train), ("--test", test)):
        if path is not None and not Path(path).is_file():
            raise InputError("no such file", file=path, field=option)
    tuned = spec if train is None else with_base(spec, "trace.path", os.path.abspath(train))
    held = None if test is None else with_base(spec, "trace.path", os.path.abspath(test))
    if held is None:
        raise InputError("--train needs --test (the held-out trace)", field="--test")
    return Parts(f"traces:{train or '(spec)'}:{test}", tuned, held)


def check_traces(parts: Parts) -> None:
    """Every part's trace exists and reads through (pipeline/road.py `check_trace`, as a
    capacity search checks its own): the held-out one too, whose failure would otherwise
    come only after every trial. Before anything is written."""
    for part in (parts.train, parts.test):
        if part is None:
            continue
        config = make_point(part.base, {}, None, part.root).config
        if config.trace.path is None:
            raise InputError("no trace given", field="base.trace.path")
        if not config.trace.path.exists():
            raise InputError("no such file", file=str(config.trace.path), field="trace.path")
        check_trace(config, read=True)


def trial_point(spec: TuneSpec, part: TuneSpec, params: dict[str, Any], number: int,
                suffix: str = "") -> SweepPoint:
    """Trial `number`'s point on `part`'s base, with run id `trial-NNNN[suffix]`."""
    point = make_point(part.base, params, None, spec.root)
    return dataclasses.replace(point, run_id=f"trial-{number:04d}{suffix}")


def _base_points(parts: Parts) -> dict[str, SweepPoint]:
    named = {"all": parts.train} if parts.test is None else {"train": parts.train,
                                                            "test": parts.test}
    return {part: dataclasses.replace(make_point(s.base, {}, None, s.root),
                                      run_id="base" if part == "all" else f"base-{part}")
            for part, s in named.items()}


def _summary(out_dir: Path, run_id: str) -> dict[str, Any] | None:
    found = read_run(run_dir(out_dir, run_id))
    return None if found is None else found.summary


def finish(study: Any, spec: TuneSpec, parts: Parts, out_dir: Path, runner: Any,
           keep_requests: bool) -> dict[str, Any]:
    """Write the tables and tune.json; with a `runner` (the end of a tune) first re-run the
    best on the held-out part and the base on every part, and write best.yaml too (without
    one, midway, tune.json says `finished: false`)."""
    trials = study.get_trials(deepcopy=False)
    frame = trials_frame(trials, spec)
    best = best_trials(frame, spec.objectives)
    params = {int(t.number): dict(t.params) for t in trials}
    bases = _base_points(parts)
    tests = ({n: trial_point(spec, parts.test, params[n], n, "-test") for n in best}
             if parts.test is not None else {})
    if runner is not None:
        todo = [*bases.values(), *tests.values()]
        fn = functools.partial(run_point, keep_requests=keep_requests)
        for index, outcome in runner.map_unordered(fn, todo):
            if isinstance(outcome, BaseException):
                point = todo[index]
                outcome = RunOutcome(run_id=point.run_id, params=point.params, status="failed",
                                     error=f"worker lost: {type(outcome).__name__}")
            write_run(out_dir, outcome)
    points: list[SweepPoint] = []
    where: dict[str, str] = {}
    for trial in sorted(trials, key=lambda t: t.number):
        run_id = trial.user_attrs.get("run_id")
        if run_id is not None and run_dir(out_dir, run_id).is_dir():
            points.append(trial_point(spec, parts.train, params[trial.number], trial.number))
            where[run_id] = parts.tuned_on
    for point in tests.values():
        points.append(point)
        where[point.run_id] = "test"
    for part, point in bases.items():
        points.append(point)
        where[point.run_id] = part
    write_tables(out_dir, frame, spec, points, where)
    summary = _tune_summary(spec, parts, out_dir, frame, best, bases, tests, params)
    summary["finished"] = runner is not None
    write_summary(out_dir, summary)
    if runner is None:
        return summary
    if best:
        number = best[0]
        folder = run_dir(out_dir, f"trial-{number:04d}") / "config.yaml"
        config = folder.read_text(encoding="utf-8") if folder.is_file() else config_to_yaml(
            trial_point(spec, parts.train, params[number], number).config)
        figures = summary["best"][0][parts.tuned_on] or {}
        shown = ", ".join(f"{k}={v:.6g}" for k, v in figures.items())
        write_best(out_dir, config, f"best trial {number} of the tune {spec.name!r} (on the "
                   f"{parts.tuned_on} part): {shown}\n"
                   "prefixsim run --config best.yaml repeats it")
    else:
        (out_dir / "best.yaml").unlink(missing_ok=True)
    return summary


def _figures(spec: TuneSpec, summary: dict[str, Any] | None) -> dict[str, float] | None:
    if summary is None:
        return None
    values = objective_values(spec.objectives, summary)
    if isinstance(values, str):
        return None
    return {o.key: v for o, v in zip(spec.objectives, values, strict=True)}


def _tune_summary(spec: TuneSpec, parts: Parts, out_dir: Path, frame: Any, best: list[int],
                  bases: dict[str, SweepPoint], tests: dict[int, SweepPoint],
                  params: dict[int, dict[str, Any]]) -> dict[str, Any]:
    counts = frame["state"].value_counts().to_dict() if not frame.empty else {}
    base_summaries = {part: _summary(out_dir, p.run_id) for part, p in bases.items()}
    base = {part: _figures(spec, found) for part, found in base_summaries.items()}
    base_feasible = {part: None if found is None else _feasible(spec, bases[part], found)
                     for part, found in base_summaries.items()}
    rows = []
    for number in best:
        run_id = f"trial-{number:04d}"
        entry: dict[str, Any] = {"trial": number, "run_id": run_id, "params": params[number],
                                 parts.tuned_on: _figures(spec, _summary(out_dir, run_id))}
        if number in tests:
            test_id = tests[number].run_id
            entry["test_run_id"] = test_id
            test_summary = _summary(out_dir, test_id)
            entry["test"] = _figures(spec, test_summary)
            entry["test_feasible"] = None if test_summary is None else _feasible(
                spec, tests[number], test_summary)
            entry["retained"] = _retained(spec, entry.get("train"), entry["test"], base)
        rows.append(entry)
    return {
        "kind": "tune", "name": spec.name,
        "objectives": [{"key": o.key, "direction": o.direction} for o in spec.objectives],
        "constraints": [c.text for c in spec.constraints],
        "sampler": {"name": spec.sampler.name, "seed": spec.sampler.seed},
        "split": parts.label, "tuned_on": parts.tuned_on,
        "trials": {"total": int(len(frame)), **{str(k): int(v) for k, v in counts.items()}},
        "best": rows, "base": base, "base_feasible": base_feasible,
    }


def _feasible(spec: TuneSpec, point: SweepPoint, summary: dict[str, Any]) -> bool:
    config = point.config.model_dump(mode="json")
    return all(c.violation(config, summary) <= 0 for c in spec.constraints)


def _retained(spec: TuneSpec, train: dict[str, float] | None, test: dict[str, float] | None,
              base: dict[str, dict[str, float] | None]) -> dict[str, float | None]:
    """Per objective: (best - base) on the test part over (best - base) on the train part;
    None where the best does not improve on the base on the train part (no gain to keep)."""
    if train is None or test is None or base.get("train") is None or base.get("test") is None:
        return {}
    retained: dict[str, float | None] = {}
    for objective in spec.objectives:
        key = objective.key
        gain = train[key] - base["train"][key]
        improves = gain > 0 if objective.direction == "maximize" else gain < 0
        retained[key] = (test[key] - base["test"][key]) / gain if improves else None
    return retained
