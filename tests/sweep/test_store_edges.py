"""sweep/store.py by hand, without running a simulation: the table a sweep folder's run
folders give (plan order, damaged and failed runs, swept values from the params or the
config, summary scalars that never override, mixed columns as text), the sweep's own
metadata, the folder checks and the staging clean-up, each refusal word for word.
Written from a mutation pass (README, "Mutation testing")."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd
import pytest

from prefixsim._version import __version__
from prefixsim.config import RunConfig
from prefixsim.errors import InputError
from prefixsim.sweep.spec import SweepPoint
from prefixsim.sweep.store import (
    check_sweep_folder,
    clean_staging,
    read_sweep_meta,
    run_dir,
    sweep_table,
    write_run,
    write_sweep_meta,
)
from prefixsim.sweep.worker import FAILED, OK, RunOutcome


def point(run_id: str, **params) -> SweepPoint:
    return SweepPoint(run_id, params, RunConfig())


def test_sweep_table_by_hand(tmp_path):
    """a: ok; b: failed; c: never started (no folder); d: ok but its summary.json lost;
    e: ok, whose `note` is text where a's is a number; f: its run.json is a JSON list."""
    out = tmp_path / "sweep"
    points = [point("a", **{"cache.capacity_tokens": 1000, "cache.ttl_s": [1, "two"]}),
              point("b", **{"cache.capacity_tokens": 2000}), point("c"), point("d"),
              point("e", **{"cache.capacity_tokens": 5000}), point("f")]
    write_run(out, RunOutcome("a", {}, OK, summary={
        "token_hit_rate": 0.5, "series": [1, 2], "status": "not this", "run_id": "nor this",
        "cache_capacity_tokens": 7, "note": 1, "flag": True}, config_yaml="a: 1\n"))
    write_run(out, RunOutcome("b", {}, FAILED, error="boom"))
    write_run(out, RunOutcome("d", {}, OK, summary={"token_hit_rate": 0.25}))
    (run_dir(out, "d") / "summary.json").unlink()
    write_run(out, RunOutcome("e", {}, OK, summary={"note": "text", "flag": False}))
    write_run(out, RunOutcome("f", {}, OK, summary={"token_hit_rate": 0.75}))
    (run_dir(out, "f") / "run.json").write_text("[1, 2]\n")
    keys = ["cache.capacity_tokens", "cache.ttl_s", "cache.policy", "cache.nope.deeper"]
    table = sweep_table(out, points, keys)
    assert table["run_id"].tolist() == ["a", "b", "d", "e"]
    assert table["status"].tolist() == [OK, FAILED, "damaged", OK]
    assert table["error"].tolist()[1:3] == ["boom", "summary.json missing or unreadable"]
    assert table["error"].isna().tolist() == [True, False, False, True]
    # params win over the summary; a key no point sets reads the config (the base's value)
    assert table["cache_capacity_tokens"].tolist()[::3] == [1000, 5000]
    assert table["cache_capacity_tokens"].isna().tolist() == [False, False, True, False]
    assert table["cache_ttl_s"].tolist()[0] == '[1, "two"]'  # not a scalar: as JSON
    assert table["cache_policy"].tolist() == ["lru"] * 4
    assert table["cache_nope_deeper"].isna().all()
    assert table.loc[0, "token_hit_rate"] == 0.5 and "series" not in table
    # a column of numbers and text (1 and "text") becomes text, its missing cells missing
    # (once written as the text "nan"); a column of one kind stays as it was
    note, flag = table["note"].tolist(), table["flag"].tolist()
    assert (note[0], note[3], flag[0], flag[3]) == ("1", "text", True, False)
    assert table["note"].isna().tolist() == table["flag"].isna().tolist() == [
        False, True, True, False]
    table.to_parquet(tmp_path / "t.parquet")
    assert pd.read_parquet(tmp_path / "t.parquet")["note"].isna().sum() == 2


def test_sweep_meta_round_trip_and_unreadable(tmp_path):
    out = tmp_path / "sweep"
    points = [point("r1"), point("r2")]
    write_sweep_meta(out, "demo", ["cache.policy", "cache.ttl_s"], points, "base: {}\n",
                     command="prefixsim sweep s.yaml")
    assert (out / "spec.yaml").read_text() == "base: {}\n"
    assert json.loads((out / "sweep.json").read_text()) == read_sweep_meta(out) == {
        "name": "demo", "swept_keys": ["cache.policy", "cache.ttl_s"],
        "swept_columns": ["cache_policy", "cache_ttl_s"], "run_ids": ["r1", "r2"],
        "prefixsim_version": __version__, "command": "prefixsim sweep s.yaml"}
    assert (out / "sweep.json").read_text() == json.dumps(read_sweep_meta(out), indent=2) + "\n"
    (out / "sweep.json").write_text("{broken")
    assert read_sweep_meta(out) is None
    assert read_sweep_meta(tmp_path / "absent") is None
    (out / "sweep.json").write_bytes('{"name": "caf\u00e9"}'.encode())
    assert read_sweep_meta(out) == {"name": "caf\u00e9"}


def test_folder_checks_word_for_word(tmp_path):
    check_sweep_folder(tmp_path / "absent")
    check_sweep_folder(tmp_path)
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(InputError) as caught:
        check_sweep_folder(a_file)
    assert (caught.value.file, caught.value.message) == (
        str(a_file), "exists and is not a folder")
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text("{}")
    with pytest.raises(InputError) as caught:
        check_sweep_folder(run)
    assert (caught.value.file, caught.value.message) == (str(run), (
        "holds a run's results (summary.json); a sweep's would mix with them: choose another "
        "-o folder"))
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "runs").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InputError) as caught:
        check_sweep_folder(linked)
    assert (caught.value.file, caught.value.message) == (
        str(linked), "runs/ is a symlink; a sweep folder's runs/ must be a real folder")
    with pytest.raises(InputError) as caught:
        clean_staging(linked)
    assert (caught.value.file, caught.value.message) == (
        str(linked), "runs/ is a symlink; refusing to clean inside it")


def test_clean_staging_removes_litter_by_age(tmp_path):
    out = tmp_path / "sweep"
    clean_staging(out)  # no runs/ yet: nothing to do
    runs = out / "runs"
    (runs / ".tmp-a.x").mkdir(parents=True)
    (runs / ".tmp-a.x" / "summary.json").write_text("{}")
    (runs / ".tmp-file").write_text("half")
    (runs / "kept").mkdir()
    (runs / "kept" / ".tmp-inner").write_text("not at the top")
    old = time.time() - 1000
    os.utime(runs / ".tmp-file", (old, old))
    clean_staging(out, older_than_s=600)  # a tune's rule: the fresh folder stays
    assert sorted(p.name for p in runs.iterdir()) == [".tmp-a.x", "kept"]
    clean_staging(out)
    assert sorted(p.name for p in runs.iterdir()) == ["kept"]
    assert (runs / "kept" / ".tmp-inner").exists()


def test_clean_staging_by_age_goes_through_every_entry(tmp_path):
    """Fresh and old entries in any directory order: every old one goes, every fresh one
    stays, whatever comes first; a limit under a second still keeps a fresh entry; with no
    limit even an entry stamped in the future (a skewed clock) goes."""
    out = tmp_path / "sweep"
    runs = out / "runs"
    runs.mkdir(parents=True)
    old = time.time() - 1000
    for i in range(12):
        (runs / f".tmp-fresh{i}").write_text("")
        (runs / f".tmp-old{i}").write_text("")
        os.utime(runs / f".tmp-old{i}", (old, old))
    clean_staging(out, older_than_s=600)
    assert sorted(p.name for p in runs.iterdir()) == sorted(f".tmp-fresh{i}" for i in range(12))
    clean_staging(out, older_than_s=0.5)
    assert len(list(runs.iterdir())) == 12
    ahead = time.time() + 1000
    os.utime(runs / ".tmp-fresh0", (ahead, ahead))
    clean_staging(out)
    assert list(runs.iterdir()) == []


def test_a_run_folder_written_replaces_the_old_one(tmp_path):
    out = tmp_path / "sweep"
    first = write_run(out, RunOutcome("x", {"k": 1}, FAILED, error="first"))
    assert first == out / "runs" / "x"
    write_run(out, RunOutcome("x", {"k": 1}, OK, summary={"v": 2}, config_yaml="c: 1\n"))
    assert json.loads((first / "run.json").read_text())["status"] == OK
    assert json.loads((first / "summary.json").read_text()) == {"v": 2}
    assert (first / "config.yaml").read_text() == "c: 1\n"
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["x"]
    assert isinstance(first, Path)
