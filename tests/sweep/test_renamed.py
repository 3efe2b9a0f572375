"""Adopting run folders named by an older release, and naming runs of another config
(prefixsim/sweep/renamed.py), on folders laid out by hand."""

import json

from prefixsim.config import RunConfig
from prefixsim.sweep.renamed import adopt_renamed_runs, foreign_runs
from prefixsim.sweep.spec import SweepPoint

CONFIG = RunConfig()


def points(*run_ids):
    return [SweepPoint(run_id=run_id, params={}, config=CONFIG) for run_id in run_ids]


def run_folder(out, name, meta=None):
    folder = out / "runs" / name
    folder.mkdir(parents=True)
    if meta is not None:
        (folder / "run.json").write_text(meta if isinstance(meta, str) else json.dumps(meta))
    return folder


def test_nothing_to_adopt_without_a_runs_folder(tmp_path):
    assert adopt_renamed_runs(tmp_path, points("lru-aaaaaaaa")) == []
    assert foreign_runs(tmp_path, points("lru-aaaaaaaa")) == []
    (tmp_path / "elsewhere" / "none-aaaaaaaa").mkdir(parents=True)
    (tmp_path / "runs").symlink_to(tmp_path / "elsewhere")
    assert adopt_renamed_runs(tmp_path, points("lru-aaaaaaaa")) == []
    assert foreign_runs(tmp_path, points("lru-aaaaaaaa")) == []
    assert (tmp_path / "elsewhere" / "none-aaaaaaaa").is_dir()


def test_an_old_name_with_one_planned_hash_is_renamed_with_its_run_json(tmp_path):
    run_folder(tmp_path, "none-10-aaaaaaaa", {"run_id": "none-10-aaaaaaaa", "status": "ok"})
    run_folder(tmp_path, "old-bbbbbbbb")  # no run.json: renamed all the same
    planned = points("lru-unbounded-ttl10-aaaaaaaa", "fifo-bbbbbbbb", "lru-cccccccc")
    assert adopt_renamed_runs(tmp_path, planned) == [
        ("none-10-aaaaaaaa", "lru-unbounded-ttl10-aaaaaaaa"), ("old-bbbbbbbb", "fifo-bbbbbbbb")]
    runs = tmp_path / "runs"
    assert sorted(p.name for p in runs.iterdir()) == ["fifo-bbbbbbbb",
                                                      "lru-unbounded-ttl10-aaaaaaaa"]
    meta = runs / "lru-unbounded-ttl10-aaaaaaaa" / "run.json"
    assert meta.read_text() == json.dumps(
        {"run_id": "lru-unbounded-ttl10-aaaaaaaa", "status": "ok"}, indent=2) + "\n"
    assert not (runs / "fifo-bbbbbbbb" / "run.json").exists()
    assert foreign_runs(tmp_path, planned) == []
    assert adopt_renamed_runs(tmp_path, planned) == []  # a second pass finds nothing


def test_ambiguous_taken_planned_hidden_and_odd_folders_stay(tmp_path):
    run_folder(tmp_path, "old-aaaaaaaa")         # its hash is two planned points'
    run_folder(tmp_path, "old-bbbbbbbb")         # the new name exists already
    run_folder(tmp_path, "new-bbbbbbbb")
    run_folder(tmp_path, ".partial-cccccccc")    # a run being written
    (tmp_path / "runs" / "file-dddddddd").write_text("x")       # not a folder
    run_folder(tmp_path, "target")
    (tmp_path / "runs" / "link-eeeeeeee").symlink_to(tmp_path / "runs" / "target")
    run_folder(tmp_path, "other-ffffffff")       # a run of another config
    planned = points("p-aaaaaaaa", "q-aaaaaaaa", "new-bbbbbbbb", "c-cccccccc", "d-dddddddd",
                     "e-eeeeeeee", "old-gggggggg")
    run_folder(tmp_path, "old-gggggggg")         # planned under its own name
    before = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert adopt_renamed_runs(tmp_path, planned) == []
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == before
    assert foreign_runs(tmp_path, planned) == ["old-aaaaaaaa", "old-bbbbbbbb",
                                               "other-ffffffff", "target"]


def test_a_damaged_or_odd_run_json_moves_unchanged(tmp_path):
    run_folder(tmp_path, "a-aaaaaaaa", "{not json")
    run_folder(tmp_path, "b-bbbbbbbb", json.dumps(["a", "list"]))
    planned = points("new-aaaaaaaa", "new-bbbbbbbb")
    assert len(adopt_renamed_runs(tmp_path, planned)) == 2
    assert (tmp_path / "runs" / "new-aaaaaaaa" / "run.json").read_text() == "{not json"
    assert (tmp_path / "runs" / "new-bbbbbbbb" / "run.json").read_text() == '["a", "list"]'


def test_a_folder_left_alone_does_not_stop_the_ones_after_it(tmp_path):
    run_folder(tmp_path, ".partial-aaaaaaaa")
    run_folder(tmp_path, "a-other-cccccccc")
    run_folder(tmp_path, "z-old-bbbbbbbb")
    assert adopt_renamed_runs(tmp_path, points("new-bbbbbbbb")) == [
        ("z-old-bbbbbbbb", "new-bbbbbbbb")]
