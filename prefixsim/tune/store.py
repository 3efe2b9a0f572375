"""A tune's folder: the sweep layout (so `prefixsim report` reads it) plus the study's files.

```
DIR/spec.yaml           the spec as given
DIR/study.db            the Optuna study (SQLite), unless --storage named another
DIR/trials.parquet      one row per trial: number, state, feasible, objectives, constraint
                        violations, parameters, run_id, duplicate_of (a trial that asked
                        for an earlier trial's point: told its values, not run), worker,
                        error, duration_s
DIR/pareto.parquet      the feasible Pareto front (rows of trials.parquet; several objectives)
DIR/best.yaml           the best trial's effective config: `prefixsim run --config` repeats it
DIR/tune.json           objectives, constraints, split, trial counts, the best trial(s) with
                        their figures per part (train/test, or all), the base config's too
DIR/sweep.json          kind "tune", name, swept keys and run ids (what the report reads)
DIR/sweep.parquet       one row per run folder: trials, held-out re-runs, the base
DIR/runs/<run_id>/      as a sweep's: trial-0007/, trial-0007-test/, base-train/, ...
```

Run folders are written by the sweep's store (atomically, renamed into place when complete),
the tables and JSON files by an atomic replace. Which trials are best is decided here: the
feasible complete trial with the best value (ties: the lowest number), or for several
objectives the feasible non-dominated ones.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from prefixsim.sweep.spec import SweepPoint, column_name
from prefixsim.sweep.store import sweep_table, write_parquet_atomic, write_text_atomic
from prefixsim.tune.spec import Objective, TuneSpec

STATES = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed", "RUNNING": "running",
          "WAITING": "waiting"}


def trials_frame(trials: Sequence[Any], spec: TuneSpec) -> pd.DataFrame:
    """trials.parquet: one row per Optuna FrozenTrial, in trial-number order."""
    rows = []
    for trial in sorted(trials, key=lambda t: t.number):
        constraints = trial.constraints
        state = STATES.get(trial.state.name, trial.state.name.lower())
        row: dict[str, Any] = {"trial": trial.number, "state": state,
                               "feasible": all(v <= 0 for v in constraints.values())
                               if state in ("complete", "pruned") else None}
        values = trial.values or [None] * len(spec.objectives)
        row.update({o.key: v for o, v in zip(spec.objectives, values, strict=True)})
        for i, constraint in enumerate(spec.constraints):
            row[f"violation_{i}"] = constraints.get(constraint.text)
        for knob in spec.knobs:
            row[column_name(knob.key)] = trial.params.get(knob.key)
        duration = trial.duration.total_seconds() if trial.duration is not None else None
        row.update({"run_id": trial.user_attrs.get("run_id"),
                    "duplicate_of": trial.user_attrs.get("duplicate_of"),
                    "worker": trial.user_attrs.get("worker"),
                    "error": trial.user_attrs.get("error"), "duration_s": duration})
        rows.append(row)
    return _text_where_mixed(pd.DataFrame(rows))


def _text_where_mixed(frame: pd.DataFrame) -> pd.DataFrame:
    for column in frame.columns:
        kinds = {type(v) for v in frame[column] if v is not None and v == v}
        if len(kinds) > 1 and not kinds <= {int, float}:
            frame[column] = [None if v is None or v != v else str(v) for v in frame[column]]
    return frame


def _better(a: float, b: float, direction: str) -> bool:
    return a > b if direction == "maximize" else a < b


def _dominates(a: Sequence[float], b: Sequence[float], objectives: Sequence[Objective]) -> bool:
    no_worse = all(not _better(y, x, o.direction) for x, y, o in zip(a, b, objectives,
                                                                      strict=True))
    return no_worse and any(_better(x, y, o.direction) for x, y, o in zip(a, b, objectives,
                                                                          strict=True))


def best_trials(frame: pd.DataFrame, objectives: Sequence[Objective]) -> list[int]:
    """Trial numbers of the best feasible complete trial(s); see the module docstring."""
    if frame.empty:
        return []
    ok = frame[(frame["state"] == "complete") & (frame["feasible"] == True)]  # noqa: E712
    if "duplicate_of" in frame:  # a repeated point is listed once, as the trial that ran it
        ok = ok[ok["duplicate_of"].isna()]
    keys = [o.key for o in objectives]
    rows = [(int(r["trial"]), [float(r[k]) for k in keys]) for _, r in ok.iterrows()]
    if len(objectives) == 1:
        best: tuple[int, list[float]] | None = None
        for number, values in rows:
            if best is None or _better(values[0], best[1][0], objectives[0].direction):
                best = (number, values)
        return [] if best is None else [best[0]]
    front = [(n, v) for n, v in rows
             if not any(_dominates(w, v, objectives) for _, w in rows)]
    first = objectives[0]
    front.sort(key=lambda item: (-item[1][0] if first.direction == "maximize" else item[1][0],
                                 item[0]))
    return [number for number, _ in front]


def write_tables(out_dir: Path, frame: pd.DataFrame, spec: TuneSpec,
                 points: Sequence[SweepPoint], parts: dict[str, str]) -> None:
    """trials.parquet, pareto.parquet (several objectives), sweep.parquet and sweep.json.

    `points` are the runs to tabulate (trials, re-runs, base); `parts` maps run id -> the
    part of the trace it replayed (train, test or all)."""
    write_parquet_atomic(out_dir / "trials.parquet", frame)
    if len(spec.objectives) > 1:
        front = best_trials(frame, spec.objectives)
        rows = frame.set_index("trial", drop=False).loc[front].reset_index(drop=True)
        write_parquet_atomic(out_dir / "pareto.parquet", rows)
    keys = [k.key for k in spec.knobs]
    table = sweep_table(out_dir, points, keys)
    if not table.empty:
        number = {row["run_id"]: row["trial"] for _, row in frame.iterrows()
                  if isinstance(row["run_id"], str)}
        runs = table["run_id"]
        table.insert(1, "trial", [number.get(r, number.get(str(r).removesuffix("-test")))
                                  for r in runs])
        table.insert(2, "part", [parts.get(r) for r in runs])
        table["trial"] = table["trial"].astype("Int64")
    write_parquet_atomic(out_dir / "sweep.parquet", table)
    meta = {"kind": "tune", "name": spec.name, "swept_keys": keys,
            "swept_columns": [column_name(k) for k in keys],
            "run_ids": [p.run_id for p in points]}
    write_text_atomic(out_dir / "sweep.json", json.dumps(meta, indent=2) + "\n")


def write_summary(out_dir: Path, summary: dict[str, Any]) -> None:
    write_text_atomic(out_dir / "tune.json", json.dumps(summary, indent=2, default=str) + "\n")


def read_tune_meta(out_dir: Path) -> dict[str, Any] | None:
    """DIR/tune.json, or None when the folder holds no tune."""
    try:
        return json.loads((out_dir / "tune.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_best(out_dir: Path, config_yaml: str, header: str) -> None:
    """best.yaml: the best trial's effective config under a comment saying what it is."""
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    write_text_atomic(out_dir / "best.yaml", comment + config_yaml)
