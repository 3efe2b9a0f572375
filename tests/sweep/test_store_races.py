"""Two writers of one run folder at once (docs/input-rules.md: results are written whole):
two processes resuming one tune both re-run its base, so `sweep/store.write_run` must let
the last complete folder win without either writer failing on the other's move, and a
reader (the base's summary in tune.json, the tables) must see one writer's folder whole."""

from __future__ import annotations

import json
import os
import threading
import time

from prefixsim.sweep import store
from prefixsim.sweep.store import (
    STAGING_PREFIX,
    clean_staging,
    read_run,
    read_run_meta,
    run_dir,
    write_run,
)
from prefixsim.sweep.worker import OK, RunOutcome


def _outcome(writer: int, round_: int) -> RunOutcome:
    mark = {"writer": writer, "round": round_}
    return RunOutcome(run_id="base", params=mark, status=OK, summary=mark,
                      config_yaml=f"writer: {writer}\nround: {round_}\n")


def test_concurrent_writers_of_one_run_never_fail_and_leave_one_whole_folder(tmp_path):
    errors: list[BaseException] = []

    def write(writer: int) -> None:
        try:
            for round_ in range(60):
                write_run(tmp_path, _outcome(writer, round_))
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    folder = run_dir(tmp_path, "base")
    assert read_run_meta(folder)["status"] == OK
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["round"] == 59  # the last write of one of the writers
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(STAGING_PREFIX)]


def test_a_reader_beside_two_writers_always_sees_one_whole_folder(tmp_path):
    """Two processes resuming one tune both re-run the base and both read it back; the read
    used to find run.json of the folder being moved aside and then no summary.json (a CI
    failure: "runs/base/summary.json: No such file or directory"). Every read now returns
    run.json, summary.json and config.yaml of the same write."""
    write_run(tmp_path, _outcome(9, 0))
    folder = run_dir(tmp_path, "base")
    stop = threading.Event()
    errors: list[BaseException] = []

    def write(writer: int) -> None:
        try:
            round_ = 0
            while not stop.is_set():
                write_run(tmp_path, _outcome(writer, round_))
                round_ += 1
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(2)]
    for thread in threads:
        thread.start()
    seen = []
    try:
        for _ in range(400):
            found = read_run(folder)
            seen.append(found)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors, errors
    assert all(found is not None for found in seen)
    for found in seen:
        mark = found.meta["params"]
        assert found.summary == mark
        assert found.config_text == f"writer: {mark['writer']}\nround: {mark['round']}\n"
    assert len({(f.meta["params"]["writer"], f.meta["params"]["round"]) for f in seen}) > 1


def test_a_missing_folder_reads_as_none_without_waiting(tmp_path, monkeypatch):
    """No writer of that run (no staging folder): None at once; with one filling its
    staging folder, the read waits for it (here: it never comes, so None after waiting)."""
    naps: list[float] = []
    monkeypatch.setattr(store.time, "sleep", naps.append)
    assert read_run(run_dir(tmp_path, "nothing")) is None
    assert naps == []
    (tmp_path / "runs" / f"{STAGING_PREFIX}nothing.abc").mkdir(parents=True)
    monkeypatch.setattr(store, "REPLACING_WAIT_S", 0.05)
    assert read_run(run_dir(tmp_path, "nothing")) is None
    assert naps


def test_a_shared_tune_folder_keeps_the_staging_another_writer_is_filling(tmp_path):
    """clean_staging(older_than_s): a tune starting on a folder another tune is writing
    removes only litter older than that (a killed writer's), not a folder being filled."""
    runs = tmp_path / "runs"
    runs.mkdir()
    fresh = runs / f"{STAGING_PREFIX}trial-0003.abc"
    old = runs / f"{STAGING_PREFIX}trial-0001.def"
    fresh.mkdir()
    old.mkdir()
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    clean_staging(tmp_path, older_than_s=600)
    assert fresh.is_dir() and not old.exists()
    clean_staging(tmp_path)
    assert not fresh.exists()
