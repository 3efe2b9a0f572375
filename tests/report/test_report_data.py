"""What report/data.py makes of a folder, worked by hand: the gaps line, swept values as
labels show them, short names, labels among a panel's runs, capacity per replica, and a
run's config and summary read whole or counted as damaged."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from prefixsim.errors import InputError
from prefixsim.report import load_report_data
from prefixsim.report.data import (
    ReportData,
    misread_number,
    per_replica_capacity,
    short_name,
    show_swept,
)


def data(table: pd.DataFrame, meta: dict | None = None, run_dirs=None, swept=()) -> ReportData:
    return ReportData(title="t", kind="sweep", table=table, swept=list(swept),
                      run_dirs=run_dirs or {}, meta=meta or {})


@pytest.mark.parametrize(("meta", "statuses", "damaged", "line"), [
    ({"run_ids": ["a", "b", "c"]}, ["ok", "ok"], set(),
     "1 of 3 runs missing, 0 damaged; the report draws the rest"),
    ({"run_ids": ["a", "b"]}, ["ok", "damaged"], set(),
     "0 of 2 runs missing, 1 damaged; the report draws the rest"),
    ({"run_ids": ["a", "b"]}, ["ok", "ok"], {"a"},
     "0 of 2 runs missing, 1 damaged; the report draws the rest"),
    ({"run_ids": ["a", "b", "c"]}, ["damaged", "ok"], {"a", "b"},
     "1 of 3 runs missing, 2 damaged; the report draws the rest"),
    ({}, ["ok", "damaged"], set(), "0 of 2 runs missing, 1 damaged; the report draws the rest"),
    ({"run_ids": ["a", "b"]}, ["ok", "ok"], set(), None),
    ({"run_ids": "a,b"}, ["ok", "ok"], set(), None),  # not a list: nothing counted missing
])
def test_the_gaps_line(meta, statuses, damaged, line):
    """Missing: planned ids with no row; damaged: rows so marked plus runs whose files
    failed to read (a set, so a run both ways counts once); the total is the plan's, or the
    rows' without one."""
    table = pd.DataFrame({"run_id": ["a", "b"], "status": statuses})
    report = data(table, meta)
    report.damaged |= damaged
    assert report.gaps() == line


def test_gaps_of_a_table_without_ids_or_statuses():
    assert data(pd.DataFrame(), {"run_ids": ["a"]}).gaps() == \
        "1 of 1 runs missing, 0 damaged; the report draws the rest"
    assert data(pd.DataFrame({"run_id": ["a"]}), {"run_ids": ["a"]}).gaps() is None


@pytest.mark.parametrize(("column", "value", "shown"), [
    ("cache_capacity_tokens", 5000.0, "5k"), ("cache_capacity_tokens", None, "unbounded"),
    ("cache_capacity_tokens", math.nan, "unbounded"),
    ("cache_ttl_s", 10.0, "10 s"), ("cache_ttl_s", 0.1234567, "0.123457 s"),
    ("cache_ttl_s", None, "none"),
    ("cache_only", True, "cache-only"), ("cache_only", "true", "cache-only"),
    ("cache_only", 1.0, "cache-only"), ("cache_only", False, "timed"),
    ("cache_only", None, "none"),
    ("cache_pool", {"capacity_tokens": None}, "unbounded"),
    ("cache_pool", {"capacity_tokens": 20000}, "20k"),
    ("cache_pool", '{"capacity_tokens": 20000}', "20k"),
    ("cache_pool", '{"capacity_tokens": "big"}', "{capacity_tokens: big}"),
    ("cache_pool", '{"capacity_tokens": null, "link": "rdma"}',
     "{capacity_tokens: unbounded, link: rdma}"),
    ("cache_pool", "{not json: null}", "{not json: null}"),
    ("cache_pool", '["capacity_tokens"]', '["capacity_tokens"]'),  # not a mapping
    ("router_name", "prefix_aware", "prefix_aware"), ("engine_replicas", 4.0, "4"),
    ("engine_replicas", 2.5, "2.5"),
    # other token counts read as capacities do (a label showed host_capacity=2000000)
    ("cache_host_capacity_tokens", 2000000.0, "2M"), ("cache_host_capacity_tokens", None, "none"),
    ("engine_max_num_batched_tokens", 8192, "8192"), ("trace_max_requests", 3000, "3000"),
    ("cache_disk_capacity_tokens", 250000, "250k"),
])
def test_swept_values_as_labels_show_them(column, value, shown):
    assert show_swept(column, value) == shown


@pytest.mark.parametrize(("column", "short"), [
    ("cache_only", "mode"), ("cache_capacity_tokens", "capacity"), ("router_name", "router"),
    ("cache_ttl_s", "ttl"), ("engine_prefill_replicas", "prefill_replicas"),
    ("cache_policy", "policy"), ("trace_s", "trace"), ("_s", "_s"),
])
def test_short_names(column, short):
    assert short_name(column) == short


def test_labels_name_what_varies_among_a_panels_runs():
    table = pd.DataFrame({"run_id": ["a", "b", "c"], "cache_policy": ["lru", "lru", "fifo"],
                          "cache_ttl_s": [10.0, 20.0, 10.0]})
    report = data(table, swept=["cache_policy", "cache_ttl_s"])
    assert report.label("a") == "policy=lru, ttl=10 s"
    assert report.label("a", omit=("cache_policy",)) == "ttl=10 s"
    assert report.label("a", among=["a", "b"]) == "ttl=10 s"  # both lru: left out
    assert report.label("a", among=["a", "c"]) == "policy=lru"
    assert report.label("a", among=["a"]) == "policy=lru, ttl=10 s"  # alone: everything
    assert report.label("a", among=["a", "a"]) == "policy=lru, ttl=10 s"  # nothing varies
    nan = pd.DataFrame({"run_id": ["a", "b"], "cache_ttl_s": [math.nan, 10.0],
                        "cache_policy": ["lru", "fifo"]})
    both = data(nan, swept=["cache_policy", "cache_ttl_s"])  # no TTL differs from 10 s
    assert both.label("a", among=["a", "b"]) == "policy=lru, ttl=none"
    assert data(table, swept=["cache_ttl_s", "gone"]).label("b") == "ttl=20 s"
    assert data(table).label("b") == "b"  # nothing swept: the id


def test_capacity_per_replica():
    """A summary's capacity counts every replica; a missing or zero count is one."""
    table = pd.DataFrame({"cache_capacity_tokens": [8000, "x", 9000, 6000],
                          "replicas": [4, 2, None, 0]})
    out = per_replica_capacity(table, [])
    assert out["cache_capacity_tokens"].tolist()[0] == 2000
    assert math.isnan(out["cache_capacity_tokens"].tolist()[1])  # not a number
    assert out["cache_capacity_tokens"].tolist()[2:] == [9000, 6000]
    assert per_replica_capacity(table, ["cache_capacity_tokens"]) is table  # swept: per replica
    assert per_replica_capacity(table[["replicas"]], []) is not None
    odd = per_replica_capacity(pd.DataFrame({"cache_capacity_tokens": [8000],
                                             "replicas": ["two"]}), [])
    assert odd["cache_capacity_tokens"].tolist() == [8000]  # an unreadable count is one


def test_a_run_folders_table_holds_its_summarys_scalars(tmp_path):
    """A run folder's one row: the summary's numbers, strings, booleans and nulls; its
    lists (stages) stay in the summary."""
    from prefixsim.report.data import load_report_data

    (tmp_path / "summary.json").write_text(
        '{"mode": "timed", "p99_ttft_ms": 12.5, "kept_up": true, "request_goodput": null,'
        ' "stages": [{"rate": 1}], "num_requests": 3}')
    row = load_report_data(tmp_path).table.iloc[0].to_dict()
    assert row["mode"] == "timed" and row["p99_ttft_ms"] == 12.5 and row["kept_up"]
    assert row["num_requests"] == 3 and "request_goodput" in row
    assert "stages" not in row


def test_a_runs_config_and_summary_read_or_counted_damaged(tmp_path):
    good, bad, empty, listed, absent = (tmp_path / n for n in ("g", "b", "e", "l", "a"))
    for folder in (good, bad, empty, listed, absent):
        folder.mkdir()
    (good / "config.yaml").write_text("trace: {path: x.jsonl}\n", encoding="utf-8")
    (good / "summary.json").write_text('{"stages": [1, 2], "mode": "timed"}')
    (bad / "config.yaml").write_text("a: [unclosed\n")
    (bad / "summary.json").write_text("{not json")
    (empty / "config.yaml").write_text("")
    (listed / "config.yaml").write_text("- a\n- b\n")
    (listed / "summary.json").write_text("[1, 2]")
    dirs = {"g": good, "b": bad, "e": empty, "l": listed, "a": absent}
    report = data(pd.DataFrame({"run_id": list(dirs)}), run_dirs=dirs)
    assert report.config("g") == {"trace": {"path": "x.jsonl"}}
    assert report.summary("g") == {"stages": [1, 2], "mode": "timed"}
    assert report.config("b") is None and report.summary("b") == {}
    assert report.config("e") is None and report.config("l") is None
    assert report.summary("l") == {} and report.summary("a") == {}
    assert report.config("a") is None
    assert report.damaged == {"b", "l"}  # an unreadable file; an absent or empty one is not


def test_unreadable_json_and_odd_run_ids_are_refused_by_name(tmp_path):
    """Each refusal names its file (and field) word for word (docs/input-rules.md)."""
    from prefixsim.errors import InputError
    from prefixsim.report.data import _read_json, _read_text, _run_dir

    def refusal(call):
        with pytest.raises(InputError) as caught:
            call()
        return caught.value.message, caught.value.file, caught.value.field

    broken, listed = tmp_path / "broken.json", tmp_path / "list.json"
    broken.write_bytes(b"{\xff")
    listed.write_text("[1]")
    assert refusal(lambda: _read_json(broken)) == ("not a readable JSON file", str(broken), None)
    assert refusal(lambda: _read_json(listed)) == ("expected a JSON object", str(listed), None)
    accented = tmp_path / "ok.json"
    accented.write_bytes('{"a": "caf\u00e9"}'.encode("utf-8"))
    assert _read_json(accented) == {"a": "caf\u00e9"}  # read as UTF-8 whatever the locale
    for run_id in ("../x", "a/b", 7, "..", "a..b"):
        assert refusal(lambda r=run_id: _run_dir(tmp_path, r)) == (
            f"not a run id: {run_id!r}", str(tmp_path / "sweep.parquet"), "run_id")
    assert _run_dir(tmp_path, "r-1_x.y") == tmp_path / "runs" / "r-1_x.y"
    (tmp_path / "runs").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "runs" / "linked").symlink_to(tmp_path / "elsewhere")
    assert refusal(lambda: _run_dir(tmp_path, "linked")) == (
        "is a symlink; a results folder's runs must be real folders",
        str(tmp_path / "runs" / "linked"), None)
    other = tmp_path / "other"
    other.mkdir()
    (other / "runs").symlink_to(tmp_path / "elsewhere")
    assert refusal(lambda: _run_dir(other, "r")) == (
        "is a symlink; a results folder's runs must be real folders", str(other / "runs"), None)
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(b"name: caf\xc3\xa9 \xff")
    assert _read_text(spec) == "name: caf\u00e9 \ufffd"  # damaged bytes replaced
    assert _read_text(tmp_path / "absent.yaml") == ""
    assert _read_text(tmp_path) == ""  # a folder: nothing to show


# -------------------------------------------------- a sweep folder read without its table
def write_json(path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value if isinstance(value, str) else json.dumps(value))


def killed_sweep(tmp_path, **meta):
    """A sweep killed before its first sweep.parquet: sweep.json and the run folders.
    a: ok with a summary; b: run.json unreadable; c: ok, summary.json missing; d: failed;
    e: planned, never started; f: ok, summary.json not JSON."""
    folder = tmp_path / "sweep"
    write_json(folder / "sweep.json", {"run_ids": ["a", "b", "c", "d", "e", "f"], **meta})
    runs = folder / "runs"
    write_json(runs / "a" / "run.json", {"status": "ok", "error": None, "params": {
        "cache.policy": "lru", "cache.capacity_tokens": 5000, "load.stages": [{"rate": 1}]}})
    write_json(runs / "a" / "summary.json", {
        "cache_token_hit_rate": 0.5, "status": "overridden?", "cache_policy": "fifo",
        "cache_capacity_tokens": 10000, "replicas": 2, "histogram": [1, 2], "note": None})
    write_json(runs / "b" / "run.json", "{not json")
    write_json(runs / "c" / "run.json", {"status": "ok", "params": {}})
    write_json(runs / "d" / "run.json", {"status": "failed", "error": "boom",
                                         "params": "not a mapping"})
    write_json(runs / "f" / "run.json", {"status": "ok", "params": {"x": 1}})
    write_json(runs / "f" / "summary.json", "[1, 2")
    return folder


def test_a_sweep_killed_before_its_table_is_read_from_its_run_folders(tmp_path):
    """Rows in the plan's order, one per run folder with a run.json (e never started: none);
    an unreadable run.json or an ok run's missing or broken summary.json marks the run
    damaged with why; params keep their dotted names as underscores, a non-scalar one as
    JSON; the summary adds its scalars but never overrides a param or the status."""
    report = load_report_data(killed_sweep(tmp_path, swept_columns=[
        "cache_policy", "cache_capacity_tokens", "not_a_column"], name="demo"))
    table = report.table
    assert table["run_id"].tolist() == ["a", "b", "c", "d", "f"]
    assert table["status"].tolist() == ["ok", "damaged", "damaged", "failed", "damaged"]
    errors = table["error"].tolist()
    assert errors[1:4] == ["run.json unreadable", "summary.json missing or unreadable", "boom"]
    assert errors[4] == "summary.json missing or unreadable" and pd.isna(errors[0])
    a = table.iloc[0]
    assert (a["cache_policy"], a["cache_capacity_tokens"]) == ("lru", 5000)  # params win
    assert a["load_stages"] == '[{"rate": 1}]'
    assert a["cache_token_hit_rate"] == 0.5 and a["replicas"] == 2
    assert "histogram" not in table and pd.isna(a["note"])
    assert table.iloc[4]["x"] == 1
    assert report.swept == ["cache_policy", "cache_capacity_tokens"]
    assert report.title == "prefixsim sweep: demo" and report.kind == "sweep"
    assert list(report.run_dirs) == ["a", "b", "c", "d", "f"]
    assert report.run_dirs["a"] == tmp_path / "sweep" / "runs" / "a"


def test_a_killed_sweeps_capacity_is_per_replica_unless_swept(tmp_path):
    """cache_capacity_tokens from a summary counts all replicas (10,000 over 2: 5,000 per
    replica); as a swept param it is the config's, per replica already."""
    report = load_report_data(killed_sweep(tmp_path))  # not swept: from the summary
    a = report.table.iloc[0]
    assert a["cache_capacity_tokens"] == 2500.0  # the param's 5,000 over 2 replicas
    swept = load_report_data(killed_sweep(tmp_path / "2", swept_columns=[
        "cache_capacity_tokens"]))
    assert swept.table.iloc[0]["cache_capacity_tokens"] == 5000


def test_a_tune_folder_and_a_folder_without_a_name(tmp_path):
    folder = killed_sweep(tmp_path, kind="tune")
    assert load_report_data(folder).title == "prefixsim tune: sweep"
    (folder / "spec.yaml").write_text("base: {}\n")
    assert load_report_data(folder).config_text == "base: {}\n"


def test_a_killed_sweep_with_no_finished_run_is_refused(tmp_path):
    folder = tmp_path / "empty"
    write_json(folder / "sweep.json", {"run_ids": ["a"]})
    with pytest.raises(InputError) as error:
        load_report_data(folder)
    assert (error.value.file, error.value.message) == (
        str(folder), "a sweep folder with no finished run yet")
    write_json(folder / "sweep.json", {})
    with pytest.raises(InputError, match="no finished run yet"):
        load_report_data(folder)


def test_a_damaged_table_falls_back_to_the_run_folders(tmp_path):
    folder = killed_sweep(tmp_path)
    (folder / "sweep.parquet").write_bytes(b"PAR1 truncated")
    assert load_report_data(folder).table["run_id"].tolist() == ["a", "b", "c", "d", "f"]


def test_a_run_folder_is_one_row(tmp_path):
    """A run folder: its summary's scalars as one ok row named after the folder, capacity
    per replica, its config.yaml as the config text."""
    run = tmp_path / "my-run"
    write_json(run / "summary.json", {"cache_capacity_tokens": 9000, "replicas": 3,
                                      "series": [1], "cache_policy": "lru"})
    (run / "config.yaml").write_text("cache: {}\n")
    report = load_report_data(run)
    assert report.kind == "run" and report.title == "prefixsim run: my-run"
    assert report.table.to_dict("records") == [{
        "run_id": "my-run", "status": "ok", "cache_capacity_tokens": 3000.0, "replicas": 3,
        "cache_policy": "lru"}]
    assert report.run_dirs == {"my-run": run} and report.swept == []
    assert report.config_text == "cache: {}\n"


def test_what_is_not_a_results_folder(tmp_path):
    with pytest.raises(InputError) as error:
        load_report_data(tmp_path / "absent")
    assert (error.value.file, error.value.message) == (
        str(tmp_path / "absent"), "no such folder (expected a run or sweep results folder)")
    with pytest.raises(InputError) as error:
        load_report_data(tmp_path)
    assert (error.value.file, error.value.message) == (
        str(tmp_path), "not a results folder (no sweep.parquet or summary.json)")


def test_a_sweep_table_without_its_plan_or_run_ids(tmp_path):
    """sweep.parquet alone (sweep.json lost) is a sweep of the table's runs; a table with no
    run_id column names no run folders. The plan's meta is kept as read."""
    folder = tmp_path / "sweep"
    folder.mkdir()
    pd.DataFrame({"run_id": ["a"], "status": ["ok"], "x": [1]}).to_parquet(
        folder / "sweep.parquet")
    report = load_report_data(folder)
    assert (report.kind, report.meta, list(report.run_dirs)) == ("sweep", {}, ["a"])
    pd.DataFrame({"status": ["ok"]}).to_parquet(folder / "sweep.parquet")
    assert load_report_data(folder).run_dirs == {}
    write_json(folder / "sweep.json", {"run_ids": ["a"], "name": "n"})
    assert load_report_data(folder).meta == {"run_ids": ["a"], "name": "n"}


def test_a_sweep_table_of_values_written_with_units_reads_as_numbers(tmp_path):
    """A sweep folder whose table holds the swept values as written ('200k', '2M', '5m':
    how sweeps kept them before they kept the numbers): the report reads them as the
    numbers they stand for and draws every plot (it failed converting '200k' to a float)."""
    from prefixsim.report import build_report
    from prefixsim.sweep import ExecutorOptions, parse_spec, run_sweep

    out = tmp_path / "sweep"
    run_sweep(parse_spec({"base": {"trace": {"path": str(Path("traces/demo_chat.jsonl")
                                                         .resolve()), "max_requests": 60},
                                   "cache_only": True},
                          "grid": {"cache.capacity_tokens": ["2k", "20k"],
                                   "cache.ttl_s": ["30s", "5m"]}}), out,
              ExecutorOptions(n_jobs=1))
    table = pd.read_parquet(out / "sweep.parquet")
    assert sorted(table["cache_capacity_tokens"]) == [2000, 2000, 20000, 20000]
    older = table.assign(cache_capacity_tokens=table["cache_capacity_tokens"].map(
        {2000: "2k", 20000: "20k"}), cache_ttl_s=table["cache_ttl_s"].map(
        {30.0: "30s", 300.0: "5m"}))
    older.to_parquet(out / "sweep.parquet")
    data = load_report_data(out)
    assert sorted(data.table["cache_capacity_tokens"]) == [2000, 2000, 20000, 20000]
    assert sorted(data.table["cache_ttl_s"]) == [30.0, 30.0, 300.0, 300.0]
    report = build_report(data)
    assert "policy_zoo" in report.pngs and "hit_rate_vs_ttl" in report.pngs, report.skipped


def test_a_summary_holding_text_where_the_schema_has_a_number_is_damage(tmp_path):
    """A hand-edited `"cache_token_hit_rate": "abc"` crashed the report with a traceback
    (could not convert string to float): a run folder is refused naming its file and key; a
    sweep's run read from its folder is drawn as damaged, with why; a run's whole summary
    read for a plot is {} and the run counted damaged. Text keys (mode) and nulls pass."""
    run = tmp_path / "run"
    write_json(run / "summary.json", {"mode": "timed", "cache_token_hit_rate": "abc",
                                      "request_goodput": None})
    with pytest.raises(InputError) as caught:
        load_report_data(run)
    assert (caught.value.message, caught.value.file) == (
        "cache_token_hit_rate: expected a number, got 'abc'", str(run / "summary.json"))
    assert misread_number({"mode": "timed", "kept_up": True, "p99_ttft_ms": 1.5,
                           "stages": [], "unknown_key": "x", "trace_prefix_model": "y"}) is None
    assert misread_number({"replica2_completed": [3]}) == \
        "replica2_completed: expected a number, got [3]"
    folder = killed_sweep(tmp_path)
    write_json(folder / "runs" / "a" / "summary.json", {"cache_token_hit_rate": "abc"})
    table = load_report_data(folder).table
    assert table.iloc[0]["status"] == "damaged"
    assert table.iloc[0]["error"] == "summary.json: cache_token_hit_rate: expected a number, " \
        "got 'abc'"
    report = data(pd.DataFrame({"run_id": ["a"]}), run_dirs={"a": folder / "runs" / "a"})
    assert report.summary("a") == {} and report.damaged == {"a"}
