"""Two writers of one run folder at once (docs/input-rules.md: results are written whole):
two processes resuming one tune both re-run its base, so `sweep/store.write_run` must let
the last complete folder win without either writer failing on the other's move."""

from __future__ import annotations

import json
import threading

from prefixsim.sweep.store import STAGING_PREFIX, read_run_meta, run_dir, write_run
from prefixsim.sweep.worker import OK, RunOutcome


def _outcome(writer: int, round_: int) -> RunOutcome:
    return RunOutcome(run_id="base", params={}, status=OK,
                      summary={"writer": writer, "round": round_}, config_yaml="x: 1\n")


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
