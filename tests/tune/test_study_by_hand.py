"""A tune's Optuna study by hand (prefixsim/tune/study.py): its storage and every refusal of
`--storage`, SQLite's settings, joining a study only with the same objectives, settings and
directions, whose worker is dead, the objectives read from a summary, telling a trial's end,
and settling the trials of dead workers."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys

import pytest
from cli_helpers import DEMO
from fakes import refusal

from prefixsim.tune import parse_tune_spec
from prefixsim.tune.spec import Objective
from prefixsim.tune.study import (
    STUDY_FILE,
    _dead,
    _sqlite_connection,
    objective_values,
    open_study,
    settle_stale,
    storage_for,
    tell,
    worker_id,
)

optuna = pytest.importorskip("optuna")

HIT, COST = "cache_token_hit_rate", "cost_total_usd"


def spec(name="t", **objectives):
    return parse_tune_spec({"name": name, "base": {"trace": {"path": str(DEMO)},
                                                   "cache_only": True},
                            "space": {"cache.policy": ["lru", "s3fifo"]},
                            "objectives": objectives or {HIT: "maximize"}, "trials": 2})


# ---------------------------------------------------------------------------- storage
def test_the_default_storage_is_study_db_in_wal_mode(tmp_path):
    storage = storage_for(tmp_path, None)
    study = open_study(spec(), storage, None, {})
    assert (tmp_path / STUDY_FILE).is_file() and study.study_name == "t"
    connection = _sqlite_connection(str(tmp_path / STUDY_FILE))
    assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert connection.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL


def test_storages_by_url(tmp_path):
    url = f"sqlite:///{tmp_path / 'other.db'}"
    assert isinstance(storage_for(tmp_path, url), optuna.storages.RDBStorage)
    journal = storage_for(tmp_path, f"journal:{tmp_path / 'j.log'}")
    assert isinstance(journal, optuna.storages.JournalStorage)


@pytest.mark.parametrize("url, start", [
    ("journal:", "expected journal:PATH"),
    ("nosuch://x", "cannot open the study storage: "),
])
def test_a_bad_storage_is_refused_with_the_option(tmp_path, url, start):
    message = refusal(storage_for, tmp_path, url)
    assert message.startswith(f"--storage: {start}") and "\n" not in message
    assert len(message) <= len("--storage: cannot open the study storage: ") + 200


def test_a_journal_in_a_missing_folder_names_the_path(tmp_path):
    path = tmp_path / "gone" / "j.log"
    assert refusal(storage_for, tmp_path, f"journal:{path}") == (
        f"--storage: cannot open the study storage: {path}: No such file or directory")


# ------------------------------------------------------------------------ joining one
def test_a_study_is_joined_only_as_it_was_started(tmp_path):
    storage = storage_for(tmp_path, None)
    first = open_study(spec(), storage, None, {"split": "time:0.5"})
    assert first.user_attrs == {"objectives": [HIT], "split": "time:0.5"}
    again = open_study(spec(), storage, None, {"split": "time:0.5"})
    assert again.study_name == first.study_name
    assert refusal(open_study, spec(), storage, None, {"split": None}) == (
        "--storage: the study 't' in this storage was started with {'objectives': "
        "['cache_token_hit_rate'], 'split': 'time:0.5'}, not {'objectives': "
        "['cache_token_hit_rate'], 'split': None}")
    assert refusal(open_study, spec(**{HIT: "minimize"}), storage, None,
                   {"split": "time:0.5"}) == (
        "--storage: the study 't' optimises in other directions")
    other = open_study(spec("u", **{HIT: "maximize", COST: "minimize"}), storage, None, {})
    assert other.user_attrs == {"objectives": [HIT, COST]}  # another name: its own study


# ---------------------------------------------------------------------------- workers
def test_which_workers_are_dead():
    host = socket.gethostname()
    assert worker_id() == f"{host}:{os.getpid()}"
    assert not _dead(worker_id())  # this process
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid names no process now
    assert _dead(f"{host}:{child.pid}")
    assert not _dead(f"another-host:{child.pid}")  # not ours to judge
    for odd in (None, "", f"{host}:", f"{host}:x1", "12345"):
        assert not _dead(odd)


# ----------------------------------------------------------------------- objectives
def test_objective_values_from_a_summary():
    objectives = [Objective(HIT, "maximize"), Objective(COST, "minimize")]
    assert objective_values(objectives, {HIT: 0.5, COST: 3}) == [0.5, 3.0]
    for bad in (None, True, "0.5", float("nan"), float("inf")):
        assert objective_values(objectives, {HIT: 0.5, COST: bad}) == (
            f"objective {COST} is {bad!r} in this run's summary (a cache-only run has no "
            "latencies; cost needs cache.pricing)")
    assert objective_values(objectives, {COST: 1.0}).startswith(f"objective {HIT} is None")


# --------------------------------------------------------------------------- telling
def test_telling_a_trials_end(tmp_path):
    study = optuna.create_study(direction="maximize")
    done, pruned, failed = (study.ask() for _ in range(3))
    tell(study, done, [0.7], {"peak <= 10": -3.0})
    tell(study, pruned, None, {"peak <= 10": 5.0}, "pruned")
    tell(study, failed, None, {}, "failed", "it broke")
    trials = study.get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE", "PRUNED", "FAIL"]
    assert trials[0].values == [0.7] and trials[0].constraints == {"peak <= 10": -3.0}
    assert trials[1].constraints == {"peak <= 10": 5.0} and trials[1].values is None
    assert trials[2].user_attrs == {"error": "it broke"}
    assert "error" not in trials[0].user_attrs


def test_stale_trials_of_dead_workers_are_settled(tmp_path):
    storage = storage_for(tmp_path, None)
    study = open_study(spec(), storage, None, {})
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = f"{socket.gethostname()}:{child.pid}"
    recovered, lost, alive = (study.ask() for _ in range(3))
    recovered.set_user_attr("worker", dead)
    recovered.set_user_attr("run_id", "trial-0000")
    lost.set_user_attr("worker", dead)
    alive.set_user_attr("worker", worker_id())
    asked = []

    def recover(frozen):
        asked.append(frozen.number)
        return ([0.6], {"c": -1.0}) if frozen.number == 0 else None

    assert settle_stale(study, storage, recover) == 2
    assert asked == [0, 1]
    trials = study.get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE", "FAIL", "RUNNING"]
    assert trials[0].values == [0.6] and trials[0].constraints == {"c": -1.0}
    assert trials[1].user_attrs["error"] == "worker died before the run finished"
    assert settle_stale(study, storage, recover) == 0  # nothing left to settle


# ------------------------------------------------------------- what the storage is given
def test_sqlite_storages_wait_for_each_others_locks(tmp_path, monkeypatch):
    """What RDBStorage is given: DIR/study.db through `_sqlite_connection`, another SQLite
    URL with a 60 s lock timeout, any other URL as it is."""
    given = []
    monkeypatch.setattr(optuna.storages, "RDBStorage",
                        lambda url, engine_kwargs=None: given.append((url, engine_kwargs)))
    storage_for(tmp_path, None)
    storage_for(tmp_path, "sqlite:///x.db")
    storage_for(tmp_path, "postgresql://host/db")
    (url, default), other, remote = given
    assert url == f"sqlite:///{(tmp_path / STUDY_FILE).resolve()}"
    assert default["creator"].func is _sqlite_connection
    assert default["creator"].args == (str((tmp_path / STUDY_FILE).resolve()),)
    assert other == ("sqlite:///x.db", {"connect_args": {"timeout": 60}})
    assert remote == ("postgresql://host/db", {})


def test_a_storage_error_is_one_line_of_at_most_200_characters(tmp_path, monkeypatch):
    def broken(url, engine_kwargs=None):
        raise RuntimeError("could not\n  connect " + "x" * 300)

    monkeypatch.setattr(optuna.storages, "RDBStorage", broken)
    assert refusal(storage_for, tmp_path, "postgresql://h/db") == (
        "--storage: cannot open the study storage: " + ("could not connect " + "x" * 300)[:200])


def test_the_sqlite_connection_is_shared_across_threads_and_waits(tmp_path, monkeypatch):
    made = []
    connect = sqlite3.connect
    monkeypatch.setattr("sqlite3.connect",
                        lambda *a, **k: made.append((a, k)) or connect(*a, **k))
    _sqlite_connection(str(tmp_path / "s.db"))
    assert made == [((str(tmp_path / "s.db"),), {"timeout": 60, "check_same_thread": False})]


def test_the_default_storage_leaves_study_db_in_wal_mode(tmp_path):
    open_study(spec(), storage_for(tmp_path, None), None, {})
    plain = sqlite3.connect(tmp_path / STUDY_FILE)  # WAL is kept in the file
    assert plain.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_a_worker_id_is_split_at_its_last_colon(monkeypatch):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    monkeypatch.setattr(socket, "gethostname", lambda: "node:7")
    assert _dead(f"node:7:{child.pid}")


def test_a_process_we_may_not_signal_is_alive(monkeypatch):
    def refuse(pid, signal):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "kill", refuse)
    assert not _dead(f"{socket.gethostname()}:1")


def test_a_live_worker_first_does_not_stop_the_settling(tmp_path):
    storage = storage_for(tmp_path, None)
    study = open_study(spec(), storage, None, {})
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    alive, lost = study.ask(), study.ask()
    alive.set_user_attr("worker", worker_id())
    lost.set_user_attr("worker", f"{socket.gethostname()}:{child.pid}")
    assert settle_stale(study, storage, lambda frozen: None) == 1
    assert [t.state.name for t in study.get_trials()] == ["RUNNING", "FAIL"]
