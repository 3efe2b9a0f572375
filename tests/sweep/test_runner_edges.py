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


def test_errors_name_the_spec_and_the_folder(tmp_path, trace):
    bad = parse_spec({"base": {"trace": {"path": str(trace)}, "cache_only": True},
                      "grid": {"cache.policy": ["nope"]}})
    with pytest.raises(InputError) as error:
        run_sweep(bad, tmp_path / "out", IN_PROCESS, source="s.yaml")
    assert (error.value.file, error.value.field) == ("s.yaml", "cache.policy")
    missing = parse_spec({"base": {"trace": {"path": str(tmp_path / "none.jsonl")},
                                   "cache_only": True}, "grid": {"cache.ttl_s": [1]}})
    with pytest.raises(InputError) as error:  # local workers: checked before any run
        run_sweep(missing, tmp_path / "out", IN_PROCESS, source="s.yaml")
    assert error.value.file == "s.yaml" and "no run was started" in error.value.message
    assert not (tmp_path / "out").exists()
    out = tmp_path / "done"
    run_sweep(spec_of(trace), out, IN_PROCESS)
    with pytest.raises(InputError) as error:
        run_sweep(spec_of(trace), out, IN_PROCESS)
    assert (error.value.message, error.value.file) == (
        "already holds a sweep; pass --resume to finish it or choose another -o folder",
        str(out))
    with pytest.raises(InputError) as error:
        run_sweep(spec_of(trace, capacities=(1024, 8192)), out, IN_PROCESS, resume=True)
    assert error.value.file == str(out)


def test_a_run_id_without_a_dash_is_its_own_hash(tmp_path, trace):
    with pytest.raises(InputError, match="another spec"):
        check_same_plan(tmp_path, {"run_ids": ["nodash"]}, expand(spec_of(trace)))


def test_a_second_trace_after_a_repeated_one_is_checked(tmp_path, trace):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0}\n')
    spec = parse_spec({"base": {"cache_only": True},
                       "grid": {"trace.path": [str(trace), str(bad)],
                                "cache.capacity_tokens": [1024, 2048]}})
    with pytest.raises(InputError) as error:
        check_traces(expand(spec), "s.yaml")
    assert error.value.file == str(bad)


def test_the_sweep_json_records_the_name_and_command(tmp_path, trace):
    out = tmp_path / "out"
    run_sweep(spec_of(trace, name="my-sweep"), out, IN_PROCESS, command="prefixsim sweep x")
    meta = json.loads((out / "sweep.json").read_text())
    assert (meta["name"], meta["command"]) == ("my-sweep", "prefixsim sweep x")


def test_requests_are_kept_unless_asked_not_to(tmp_path, trace):
    kept = run_sweep(spec_of(trace), tmp_path / "a", IN_PROCESS)
    assert all((tmp_path / "a" / "runs" / i / "requests.parquet").exists()
               for i in kept.executed)
    dropped = run_sweep(spec_of(trace), tmp_path / "b", IN_PROCESS, keep_requests=False)
    assert not any((tmp_path / "b" / "runs" / i / "requests.parquet").exists()
                   for i in dropped.executed)


def test_runs_left_in_a_folder_without_a_sweep_are_not_resumed(tmp_path, trace):
    import shutil

    first = run_sweep(spec_of(trace), tmp_path / "a", IN_PROCESS)
    shutil.copytree(tmp_path / "a" / "runs", tmp_path / "b" / "runs")
    (tmp_path / "b" / "runs" / "other-abcdef12").mkdir()
    again = run_sweep(spec_of(trace), tmp_path / "b", IN_PROCESS)
    assert again.executed == first.executed and again.skipped == [] and again.foreign == []


def test_the_table_waits_its_refresh_interval(tmp_path, trace, monkeypatch):
    rows = []
    out = tmp_path / "out"
    run_sweep(spec_of(trace, capacities=(1024, 2048, 4096)), out, IN_PROCESS,
              on_outcome=lambda outcome: rows.append((out / "sweep.parquet").exists()))
    assert rows == [False, False, False]  # within 30 s: only the final table
    monkeypatch.setattr(runner, "TABLE_REFRESH_S", 0.0)
    monkeypatch.setattr(runner.time, "monotonic", lambda: 5.0)  # no time passes
    rows.clear()
    run_sweep(spec_of(trace, capacities=(1024, 2048, 4096)), tmp_path / "b", IN_PROCESS,
              on_outcome=lambda outcome: rows.append((tmp_path / "b" / "sweep.parquet")
                                                     .exists()))
    assert rows == [False, True, True]  # an interval of 0 s is reached at once


def test_runs_a_broken_pool_lost_are_told_and_stored_whole(tmp_path, trace, monkeypatch):
    from prefixsim.config import config_to_yaml

    monkeypatch.setattr(LosingExecutor, "lost_index", 1)
    monkeypatch.setattr(LosingExecutor, "crash", True)
    seen = []
    result = run_sweep(spec_of(trace, capacities=(1024, 2048, 4096)), tmp_path / "a",
                       IN_PROCESS, on_outcome=lambda outcome: seen.append(outcome.run_id))
    assert seen == [p.run_id for p in result.points]
    lost = result.points[2]
    folder = tmp_path / "a" / "runs" / lost.run_id
    assert json.loads((folder / "run.json").read_text())["params"] == \
        {"cache.capacity_tokens": 4096}
    assert (folder / "config.yaml").read_text() == config_to_yaml(lost.config)


def test_a_failed_outcome_without_words_is_failed(tmp_path):
    from prefixsim.sweep.runner import SweepResult, _store
    from prefixsim.sweep.worker import FAILED, RunOutcome

    result = SweepResult(points=[])
    _store(tmp_path, RunOutcome(run_id="x-12345678", params={}, status=FAILED), result, None)
    assert result.failed == {"x-12345678": "failed"} and result.executed == ["x-12345678"]
