"""The sweep driver's checks and bookkeeping on small traces, in this process: the plan a
folder holds, the traces checked before any run, what a call reports, lost workers and the
table's refresh (prefixsim/sweep/runner.py)."""

import json

import pandas as pd
import pytest
from fakes import LosingExecutor

from prefixsim.errors import InputError
from prefixsim.sweep import EXECUTORS, ExecutorOptions, parse_spec, run_sweep, runner
from prefixsim.sweep.runner import check_same_plan, check_traces
from prefixsim.sweep.spec import expand

IN_PROCESS = ExecutorOptions(executor="losing")


@pytest.fixture(autouse=True)
def in_process(monkeypatch):
    """Every run in this process, none lost (LosingExecutor with no item to lose)."""
    monkeypatch.setattr(LosingExecutor, "lost_index", -1)
    monkeypatch.setattr(LosingExecutor, "crash", False)
    monkeypatch.setitem(EXECUTORS._factories, "losing", LosingExecutor)


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "t.jsonl"
    rows = [{"timestamp": 1000 * i, "input_length": 2048, "output_length": 4,
             "hash_ids": [0, 100 + 3 * i, 101 + 3 * i, 102 + 3 * i], "session_id": f"s{i}"}
            for i in range(5)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def spec_of(trace, capacities=(1024, 2048), **extra):
    return parse_spec({"base": {"trace": {"path": str(trace)}, "cache_only": True},
                       "grid": {"cache.capacity_tokens": list(capacities)}, **extra})


def test_the_plan_a_folder_holds_is_compared_by_hash(tmp_path, trace):
    points = expand(spec_of(trace))
    ids = [p.run_id for p in points]
    check_same_plan(tmp_path, {}, points)                    # no run ids held: nothing to say
    check_same_plan(tmp_path, {"run_ids": "x"}, points)
    renamed = [f"older-name-{i.rsplit('-', 1)[1]}" for i in ids]
    check_same_plan(tmp_path, {"run_ids": renamed}, points)  # readable parts may differ
    with pytest.raises(InputError) as error:
        check_same_plan(tmp_path, {"run_ids": [ids[0], "other-12345678"]}, points)
    assert (error.value.message, error.value.file) == (
        "holds a sweep of another spec (1 of its 2 runs are not in this one); resume it with "
        "its own spec, or pass --force", str(tmp_path))
    with pytest.raises(InputError, match=r"\(0 of its 1 runs"):   # a run fewer is another plan
        check_same_plan(tmp_path, {"run_ids": ids[:1]}, points)


def test_traces_are_checked_once_each_before_any_run(tmp_path, trace, monkeypatch):
    missing = tmp_path / "a-missing.jsonl"
    spec = parse_spec({"base": {"cache_only": True},
                       "grid": {"trace.path": [str(trace), str(missing), str(tmp_path / "b")]}})
    with pytest.raises(InputError) as error:
        check_traces(expand(spec), "s.yaml")
    assert (error.value.message, error.value.file, error.value.field) == (
        f"trace {missing} does not exist (no run was started)", "s.yaml", "trace.path")
    checked = []
    monkeypatch.setattr(runner, "check_trace", lambda config, read: checked.append(read))
    check_traces(expand(spec_of(trace, capacities=(1024, 2048, 4096))), "s.yaml")
    assert checked == [True]  # three points, one trace section
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0}\n')
    monkeypatch.undo()
    with pytest.raises(InputError) as error:
        check_traces(expand(spec_of(bad)), "s.yaml")
    assert error.value.file == str(bad)  # the trace's own file and line, not the spec


def test_a_trace_error_without_a_file_names_the_spec(tmp_path, trace, monkeypatch):
    def refuse(config, read):
        raise InputError("no requests", field="trace.max_requests")

    monkeypatch.setattr(runner, "check_trace", refuse)
    with pytest.raises(InputError) as error:
        check_traces(expand(spec_of(trace)), "s.yaml")
    assert (error.value.message, error.value.file, error.value.field) == (
        "no requests", "s.yaml", "trace.max_requests")


def test_what_a_sweep_call_reports(tmp_path, trace):
    out = tmp_path / "out"
    started, seen = [], []
    result = run_sweep(spec_of(trace), out, IN_PROCESS, on_start=started.append,
                       on_outcome=lambda outcome: seen.append(outcome.run_id))
    ids = [p.run_id for p in result.points]
    assert started == [2] and seen == ids == result.executed
    assert (result.skipped, result.failed, result.foreign) == ([], {}, [])
    assert result.table_path == out / "sweep.parquet"
    assert list(pd.read_parquet(result.table_path)["run_id"]) == ids
    with pytest.raises(InputError) as error:
        run_sweep(spec_of(trace), out, IN_PROCESS)
    assert error.value.message.startswith("already holds a sweep; pass --resume")
    (out / "runs" / "foreign-run-abcdef12").mkdir()
    again = run_sweep(spec_of(trace), out, IN_PROCESS, resume=True, on_start=started.append)
    assert started == [2, 0] and again.executed == [] and again.skipped == ids
    assert again.foreign == ["foreign-run-abcdef12"]
    with pytest.raises(InputError, match="another spec"):
        run_sweep(spec_of(trace, capacities=(1024, 8192)), out, IN_PROCESS, resume=True)
    forced = run_sweep(spec_of(trace, capacities=(1024, 8192)), out, IN_PROCESS, resume=True,
                       force=True)
    assert forced.skipped == ids[:1] and len(forced.executed) == 1


def test_a_lost_worker_and_a_broken_pool_are_failed_runs(tmp_path, trace, monkeypatch):
    monkeypatch.setattr(LosingExecutor, "lost_index", 0)
    result = run_sweep(spec_of(trace, capacities=(1024, 2048, 4096)), tmp_path / "a", IN_PROCESS)
    lost = result.points[0].run_id
    assert result.failed == {lost: "worker lost: ConnectionError: worker died"}
    assert result.executed[0] == lost and len(result.executed) == 3
    monkeypatch.setattr(LosingExecutor, "lost_index", 1)
    monkeypatch.setattr(LosingExecutor, "crash", True)
    result = run_sweep(spec_of(trace, capacities=(1024, 2048, 4096)), tmp_path / "b", IN_PROCESS)
    assert sorted(result.failed) == sorted(p.run_id for p in result.points[1:])
    assert set(result.failed.values()) == {"worker lost: RuntimeError: pool broke"}
    table = pd.read_parquet(tmp_path / "b" / "sweep.parquet")
    assert list(table["status"]) == ["ok", "failed", "failed"]


def test_the_table_is_rewritten_while_runs_finish(tmp_path, trace, monkeypatch):
    monkeypatch.setattr(runner, "TABLE_REFRESH_S", 0.0)
    rows = []
    out = tmp_path / "out"

    def after_each(outcome):
        rows.append(len(pd.read_parquet(out / "sweep.parquet"))
                    if (out / "sweep.parquet").exists() else 0)

    run_sweep(spec_of(trace, capacities=(1024, 2048, 4096)), out, IN_PROCESS,
              on_outcome=after_each)
    # the table lists the runs stored so far and is written after each outcome is told
    assert rows == [0, 1, 2]
    assert len(pd.read_parquet(out / "sweep.parquet")) == 3


def test_an_interrupt_still_writes_the_table(tmp_path, trace):
    out = tmp_path / "out"

    def stop(outcome):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec_of(trace), out, IN_PROCESS, on_outcome=stop)
    table = pd.read_parquet(out / "sweep.parquet")  # the finished run, stored
    assert list(table["status"]) == ["ok"]
