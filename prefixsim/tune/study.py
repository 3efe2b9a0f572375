"""The Optuna study of a tune: storage, opening or joining it, telling trials, stale trials.

The study lives in `DIR/study.db` (SQLite) unless `--storage` names another: an RDB URL
(`sqlite:///...`, `postgresql://...`) or `journal:PATH` (Optuna's journal file, safe for
many processes on one machine or a shared disk). A trial records the worker that runs it
(`host:pid`); a later start on the same host finds the trials of dead workers still
`RUNNING` and settles them (see `settle_stale`). This module neither simulates nor writes
results.
"""

from __future__ import annotations

import functools
import math
import os
import socket
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prefixsim.errors import InputError
from prefixsim.tune.samplers import optuna_module
from prefixsim.tune.spec import Objective, TuneSpec

STUDY_FILE = "study.db"
SQLITE_TIMEOUT_S = 60  # how long a worker waits for another's write lock on study.db


def storage_for(out_dir: Path, url: str | None) -> Any:
    """The study's storage: DIR/study.db, an RDB URL or `journal:PATH`."""
    optuna = optuna_module()
    if url is not None and url.startswith("journal:"):
        path = url.removeprefix("journal:")
        if not path:
            raise InputError("expected journal:PATH", field="--storage")
        journal = optuna.storages.journal
        try:
            return journal.JournalStorage(journal.JournalFileBackend(path))
        except OSError as exc:  # its folder is missing or not writable, or it is a folder
            raise InputError(f"cannot open the study storage: {path}: "
                             f"{exc.strerror or exc}", field="--storage") from None
    kwargs: dict[str, Any] = {}
    if url is None:
        path = (out_dir / STUDY_FILE).resolve()
        url = f"sqlite:///{path}"
        kwargs = {"creator": functools.partial(_sqlite_connection, str(path))}
    elif url.startswith("sqlite"):
        kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}}
    try:
        return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
    except Exception as exc:  # noqa: BLE001 - sqlalchemy raises many kinds for a bad URL
        message = " ".join(str(exc).split())[:200]
        raise InputError(f"cannot open the study storage: {message}", field="--storage") \
            from None


def _sqlite_connection(path: str) -> sqlite3.Connection:
    """A connection to DIR/study.db in WAL mode without an fsync per commit: a commit
    survives the process being killed (it is in the OS's cache), which is what --resume
    needs, and a trial costs milliseconds instead of an fsync per storage call (about 20)."""
    connection = sqlite3.connect(path, timeout=SQLITE_TIMEOUT_S, check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    return connection


def open_study(spec: TuneSpec, storage: Any, sampler: Any, settings: Mapping[str, Any]) -> Any:
    """Create the study named after the spec, or join the one of that name in `storage`
    (its objectives and `settings`, e.g. the split, must match)."""
    optuna = optuna_module()
    directions = [o.direction for o in spec.objectives]
    study = optuna.create_study(storage=storage, sampler=sampler, study_name=spec.name,
                                directions=directions, load_if_exists=True)
    wanted = {"objectives": [o.key for o in spec.objectives], **settings}
    stored = {k: study.user_attrs.get(k) for k in wanted}
    if all(v is None for v in stored.values()):
        for key, value in wanted.items():
            study.set_user_attr(key, value)
    elif stored != wanted:
        raise InputError(f"the study {spec.name!r} in this storage was started with "
                         f"{stored}, not {wanted}", field="--storage")
    if [d.name.lower() for d in study.directions] != directions:
        raise InputError(f"the study {spec.name!r} optimises in other directions",
                         field="--storage")
    return study


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _dead(worker: object) -> bool:
    """True when `worker` ran on this host and that process is gone."""
    host, _, pid = str(worker).rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def objective_values(objectives: Sequence[Objective], summary: Mapping[str, Any]
                     ) -> list[float] | str:
    """The objectives' values from a run's summary, or why they cannot be read."""
    values = []
    for objective in objectives:
        value = summary.get(objective.key)
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            return (f"objective {objective.key} is {value!r} in this run's summary (a "
                    "cache-only run has no latencies; cost needs cache.pricing)")
        values.append(float(value))
    return values


def tell(study: Any, trial: Any, values: list[float] | None, constraints: Mapping[str, float],
         state: str = "complete", error: str | None = None) -> None:
    """Record a trial's end: its constraint violations, then its state and values."""
    optuna = optuna_module()
    for key, violation in constraints.items():
        trial.set_constraint(key, violation)
    if error is not None:
        trial.set_user_attr("error", error)
    states = {"complete": None, "pruned": optuna.trial.TrialState.PRUNED,
              "failed": optuna.trial.TrialState.FAIL}
    if states[state] is None:
        study.tell(trial, values)
    else:
        study.tell(trial, state=states[state])


def settle_stale(study: Any, storage: Any,
                 recover: Callable[[Any], tuple[list[float], dict[str, float]] | None]) -> int:
    """Trials left RUNNING by a dead worker on this host: `recover(frozen_trial)` gives their
    values and constraints when the run had finished (its folder is complete), and they are
    told complete; the others fail. Returns how many trials were settled."""
    optuna = optuna_module()
    running = study.get_trials(deepcopy=False, states=[optuna.trial.TrialState.RUNNING])
    settled = 0
    for frozen in running:
        if not _dead(frozen.user_attrs.get("worker")):
            continue
        study_id = storage.get_study_id_from_name(study.study_name)
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, frozen.number)
        trial = optuna.trial.Trial(study, trial_id)
        found = recover(frozen)
        if found is None:
            tell(study, trial, None, {}, "failed", "worker died before the run finished")
        else:
            tell(study, trial, found[0], found[1])
        settled += 1
    return settled
