"""No finished work lost, nothing written where it should not be (docs/input-rules.md
I9-I17, each section headed by its rule). Output locations are checked before any work,
default folders are never reused, a sweep folder is locked, report reads what a killed
sweep left and nothing outside its folder, names from files are safe for paths and
terminals."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import stat
from pathlib import Path

import pandas as pd
import pytest
from cli_helpers import DEMO, invoke, one_line_error

import prefixsim.sweep.runner
from prefixsim.cli.app import one_line, safe_name
from prefixsim.cli.files import write_bytes
from prefixsim.errors import InputError
from prefixsim.sweep import ExecutorOptions, parse_spec, run_sweep
from prefixsim.sweep.store import lock_sweep_folder

BROKEN = '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1]}\n'


def spec_file(folder: Path, name: str = "s", grid: str = "cache.capacity_tokens: [5000, 20000]",
              trace: Path = DEMO) -> Path:
    path = folder / "spec.yaml"
    path.write_text(f"name: {json.dumps(name)}\nbase: {{trace: {{path: {json.dumps(str(trace))}}}, "
                    f"cache_only: true}}\ngrid: {{{grid}}}\n")
    return path


# -------------------------------------------- docs/input-rules.md I9
def test_an_unwritable_output_fails_before_any_work(tmp_path):
    """-o under a file (a place no folder can be made) is refused at once: before the trace is
    read (the broken trace's own error would otherwise come first), one line, exit 2; the
    same for sweep, curve, trace generate/convert."""
    (tmp_path / "file").write_text("")
    broken = tmp_path / "broken.jsonl"
    broken.write_text(BROKEN)
    blocked = tmp_path / "file" / "out"
    one_line_error(invoke("run", "--trace", broken, "--cache-only", "-o", blocked),
                   "cannot write here", "is not a folder")
    one_line_error(invoke("sweep", spec_file(tmp_path, trace=DEMO), "-o", blocked), "file")
    one_line_error(invoke("curve", "--trace", broken, "--capacities", "1000", "-o",
                          blocked / "c.csv"), "cannot write here")
    one_line_error(invoke("trace", "generate", "--preset", "chat", "--requests", "5", "-o",
                          blocked / "t.jsonl"), "cannot write here")
    one_line_error(invoke("trace", "convert", broken, blocked / "t.jsonl"), "cannot write here")
    clash = invoke("run", "--trace", broken, "--cache-only", "-o", tmp_path / "file")
    assert clash.exit_code == 2 and "is a file" in clash.stderr  # click's own usage error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.jsonl", "file", "spec.yaml"]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_place_no_staging_can_be_made_names_the_output(tmp_path):
    """/proc passes the checks as root (a folder, writable), then refuses the staging file or
    folder: that failure named the staging name (`/proc/.x.7pm0uv87`) and exited 1."""
    for args in (["run", "--trace", DEMO, "--cache-only", "--quiet", "-o", "/proc/prefixsim-x"],
                 ["trace", "generate", "--preset", "chat", "--requests", "5", "-o",
                  "/proc/prefixsim-y.jsonl"]):
        line = one_line_error(invoke(*args), f"{args[-1]}: ")
        assert "/proc/." not in line


def test_a_folder_where_the_report_goes_is_refused_before_drawing(tmp_path):
    """DIR/report.html a folder: refused naming it (not its staging name, exit 1), before
    any plot is written."""
    out = tmp_path / "run"
    assert invoke("run", "--trace", DEMO, "--cache-only", "--quiet", "-o", out).exit_code == 0
    (out / "report.html").mkdir()
    one_line_error(invoke("report", out), f"{out / 'report.html'}: is a folder")
    assert not (out / "plots").exists()


def test_a_file_written_onto_a_folder_names_the_file(tmp_path):
    """write_file's rename onto a folder (one made after the checks) names the file."""
    (tmp_path / "taken").mkdir()
    with pytest.raises(InputError, match="is a folder") as caught:
        write_bytes(tmp_path / "taken", b"x")
    assert caught.value.file == str(tmp_path / "taken")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]  # no staging file left


def test_an_unwritable_folder_is_refused(tmp_path, monkeypatch):
    """Without write permission (os.access says no; root would pass any mode bits)."""
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    one_line_error(invoke("run", "--trace", DEMO, "--cache-only", "-o", tmp_path / "o"),
                   "no write permission")


# ------------------------------------------- docs/input-rules.md I10
def test_runs_started_in_the_same_second_never_share_a_folder(tmp_path,
                                                                         monkeypatch):
    """Three runs without -o whose default name is the same (the clock frozen at one
    second): three folders, NAME, NAME-2, NAME-3, each with its own results."""
    monkeypatch.chdir(tmp_path)
    run_output = importlib.import_module("prefixsim.cli.run_output")  # names the folder

    class Frozen:
        @staticmethod
        def now():
            from datetime import datetime
            return datetime(2025, 1, 2, 3, 4, 5)

    monkeypatch.setattr(run_output, "datetime", Frozen)
    for ttl in (10, 20, 30):
        assert invoke("run", "--trace", DEMO, "--cache-only", "--ttl", ttl,
                      "--quiet").exit_code == 0
    folders = sorted(p.name for p in (tmp_path / "results").iterdir())
    base = "20250102-030405-demo_chat-lru-cache-only"
    assert folders == [base, f"{base}-2", f"{base}-3"]
    ttls = [json.loads((tmp_path / "results" / f / "summary.json").read_text())["cache_ttl_s"]
            for f in folders]
    assert ttls == [10, 20, 30]


# ------------------------------------------- docs/input-rules.md I13
def test_a_second_sweep_into_a_locked_folder_is_refused(tmp_path):
    spec = parse_spec({"base": {"trace": {"path": str(DEMO)}, "cache_only": True},
                       "grid": {"cache.capacity_tokens": [5000]}})
    out = tmp_path / "sweep"
    with lock_sweep_folder(out):
        with pytest.raises(InputError, match=rf"another sweep \(pid {os.getpid()}\)"):
            run_sweep(spec, out, ExecutorOptions(n_jobs=1), resume=True)
    assert not (out / "runs").exists()
    again = run_sweep(spec, out, ExecutorOptions(n_jobs=1), resume=True)
    assert again.executed  # the lock is gone after


# ------------------------------------------- docs/input-rules.md I14
def test_force_without_resume_is_refused(tmp_path):
    """--force only qualifies --resume (its help says so); alone it was accepted and did
    nothing."""
    spec = spec_file(tmp_path)
    one_line_error(invoke("sweep", spec, "-o", tmp_path / "s", "--force"), "--force",
                   "--resume")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]


def test_report_reads_a_sweep_killed_before_its_first_table(tmp_path, monkeypatch):
    """A sweep whose sweep.parquet was never written (killed before the first refresh):
    report reads its finished run folders (3 runs, one failed)."""
    # a broken trace stops a sweep before any run (check_traces); skipping that read stands
    # for a trace that breaks only as its run reads it, to test a failed run among others
    monkeypatch.setattr(prefixsim.sweep.runner, "check_trace", lambda config, read: None)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(BROKEN)
    out = tmp_path / "sweep"
    spec = parse_spec({"base": {"trace": {"path": str(DEMO)}, "cache_only": True},
                       "grid": {"trace.path": [str(DEMO), str(broken)],
                                "cache.capacity_tokens": [5000, 20000]}})
    run_sweep(spec, out, ExecutorOptions(n_jobs=1))
    (out / "sweep.parquet").unlink()
    result = invoke("report", out)
    assert result.exit_code == 0, result.output
    html = (out / "report.html").read_text()
    assert "Failed runs" in html and (out / "plots" / "policy_zoo.png").is_file()
    from prefixsim.report import load_report_data
    table = load_report_data(out).table
    assert sorted(table["status"]) == ["failed", "failed", "ok", "ok"]
    assert sorted(table[table["status"] == "ok"]["cache_capacity_tokens"]) == [5000, 20000]


# --------------------------------------- docs/input-rules.md I2, I14
def test_a_missing_trace_stops_a_sweep_before_any_run(tmp_path):
    """No run folder, no sweep folder, one line even with --quiet."""
    spec = spec_file(tmp_path, trace=tmp_path / "gone.jsonl")
    result = invoke("sweep", spec, "-o", tmp_path / "out", "--quiet")
    one_line_error(result, "gone.jsonl", "does not exist", "trace.path")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", ["bad line", "no base", "bad trace.path in the grid"])
def test_a_trace_every_run_would_fail_on_stops_a_sweep_before_any_run(tmp_path, case):
    """Checked as a capacity search checks its trace: a malformed line (each run failed on
    it, exit 1, the sweep folder left), no trace at all, or one of the traces a grid
    sweeps: one line, exit 2, nothing written."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text(DEMO.read_text().splitlines()[0] + "\n" + BROKEN.replace("600", '"x"'))
    spec = tmp_path / "spec.yaml"
    spec.write_text({
        "bad line": "name: n\nbase: {trace: {path: bad.jsonl}, cache_only: true}\n"
                    "grid: {cache.capacity_tokens: [5000, 10000]}\n",
        "no base": "name: n\ngrid: {cache.capacity_tokens: [5000, 10000]}\n",
        "bad trace.path in the grid": f"name: n\nbase: {{cache_only: true}}\n"
                                      f"grid: {{trace.path: [{DEMO}, bad.jsonl]}}\n"}[case])
    expected = ["trace.path", "no trace given"] if case == "no base" else \
        [f"{bad}:2: input_length"]
    one_line_error(invoke("sweep", spec, "-o", tmp_path / "s", "-j", "1"), *expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "spec.yaml"]


def test_failed_runs_are_printed_even_with_quiet(tmp_path, monkeypatch):
    # a broken trace stops a sweep before any run (check_traces); skipping that read stands
    # for a trace that breaks only as its run reads it, to test a failed run among others
    monkeypatch.setattr(prefixsim.sweep.runner, "check_trace", lambda config, read: None)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(BROKEN)
    spec = spec_file(tmp_path, grid=f"trace.path: [{json.dumps(str(DEMO))}, "
                                    f"{json.dumps(str(broken))}]")
    result = invoke("sweep", spec, "-o", tmp_path / "out", "--quiet", "-j", "1")
    assert result.exit_code == 1
    assert result.stdout == "" and result.stderr.count("failed ") == 1
    assert "hash_ids" in result.stderr


# ------------------------------------------- docs/input-rules.md I17
def test_progress_lines_when_stderr_is_not_a_terminal(tmp_path, monkeypatch):
    """With output to a log (CliRunner's stderr is no terminal) a plain progress line comes
    every LINE_EVERY_S seconds (0 here: at every update) and one when done."""
    import prefixsim.cli.progress as progress

    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)
    result = invoke("run", "--trace", DEMO, "--cache-only", "-o", tmp_path / "o")
    assert result.exit_code == 0
    assert "prefixsim: replay: " in result.stderr and "/264 req" in result.stderr
    assert "done" in result.stderr
    result = invoke("trace", "generate", "--preset", "chat", "--requests", "300", "-o",
                    tmp_path / "g.jsonl")
    assert result.exit_code == 0 and "prefixsim: generate: " in result.stderr
    result = invoke("curve", "--trace", DEMO, "--capacities", "1000,5000", "--replay")
    assert result.exit_code == 0 and "prefixsim: curve: " in result.stderr
    quiet = invoke("run", "--trace", DEMO, "--cache-only", "-o", tmp_path / "q", "--quiet")
    assert quiet.stderr == ""


# ------------------------------------------- docs/input-rules.md I15
def test_a_spec_name_cannot_leave_results(tmp_path, monkeypatch):
    """name "x/../../../victim": the default folder is results/sweep-x-victim, inside
    results/; nothing is written anywhere else."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "specs").mkdir()
    spec = spec_file(tmp_path / "specs", name="x/../../../victim")
    result = invoke("sweep", spec, "--quiet", "-j", "1")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["sweep-x-victim"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results", "specs"]
    assert safe_name("../..") == "sweep" and safe_name("a b/c") == "a-b-c"


# ------------------------------------------- docs/input-rules.md I15
def _sweep(tmp_path: Path) -> Path:
    out = tmp_path / "sweep"
    spec = parse_spec({"base": {"trace": {"path": str(DEMO)}, "cache_only": True},
                       "grid": {"cache.capacity_tokens": [5000, 20000]}})
    run_sweep(spec, out, ExecutorOptions(n_jobs=1))
    return out


def test_report_refuses_a_symlinked_plots_folder(tmp_path):
    out = _sweep(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "plots").symlink_to(elsewhere)
    one_line_error(invoke("report", out), "plots", "symlink")
    assert list(elsewhere.iterdir()) == []


def test_report_refuses_run_ids_that_leave_the_folder(tmp_path):
    out = _sweep(tmp_path)
    table = pd.read_parquet(out / "sweep.parquet")
    table.loc[0, "run_id"] = "../../etc"
    table.to_parquet(out / "sweep.parquet", index=False)
    one_line_error(invoke("report", out), "run_id", "not a run id")


def test_resume_refuses_a_symlinked_runs_folder(tmp_path):
    out = _sweep(tmp_path)
    target = tmp_path / "target"
    shutil.move(out / "runs", target)
    (target / ".tmp-keep").write_text("not ours")
    (out / "runs").symlink_to(target)
    spec = parse_spec({"base": {"trace": {"path": str(DEMO)}, "cache_only": True},
                       "grid": {"cache.capacity_tokens": [5000, 20000]}})
    with pytest.raises(InputError, match="symlink"):
        run_sweep(spec, out, ExecutorOptions(n_jobs=1), resume=True)
    assert (target / ".tmp-keep").exists()


# ------------------------------------------- docs/input-rules.md I12
def test_the_sweep_store_follows_the_umask(tmp_path):
    """Under umask 007 results are group-writable and not world-readable (0o660/0o770)."""
    import prefixsim.sweep.store as store

    old = os.umask(0o007)
    try:
        importlib.reload(store)
        assert (store.FILE_MODE, store.DIR_MODE) == (0o660, 0o770)
        store.write_text_atomic(tmp_path / "x.txt", "x")
        assert stat.S_IMODE((tmp_path / "x.txt").stat().st_mode) == 0o660
    finally:
        os.umask(old)
        importlib.reload(store)


# ------------------------------------------- docs/input-rules.md I15
def test_a_dollar_in_a_swept_string_does_not_break_the_report(tmp_path):
    r"""A trace named `$\foo{$.jsonl` is a swept value, so it reaches a legend; matplotlib
    would parse it as mathtext and fail. Text is drawn as given."""
    odd = tmp_path / "$\\foo{$.jsonl"
    shutil.copy(DEMO, odd)
    out = tmp_path / "sweep"
    spec = parse_spec({"base": {"trace": {"path": str(DEMO)}, "cache_only": True},
                       "grid": {"trace.path": [str(DEMO), str(odd)],
                                "cache.capacity_tokens": [5000, 20000]}})
    run_sweep(spec, out, ExecutorOptions(n_jobs=1))
    result = invoke("report", out)
    assert result.exit_code == 0, result.output
    assert (out / "plots" / "policy_zoo.png").is_file()


def test_terminal_escapes_from_files_are_shown_escaped():
    """An OSC sequence (retitle the terminal) and a newline in a name become visible escapes
    on one line."""
    shown = one_line("spec \x1b]0;owned\x07 name\nsecond")
    assert "\x1b" not in shown and "\x07" not in shown and "\n" not in shown
    assert shown == "spec \\x1b]0;owned\\x07 name second"


# ------------------------------------------- docs/input-rules.md I11
def test_a_folder_another_writer_makes_meanwhile_is_written_into(tmp_path, monkeypatch):
    """Two processes writing the same results folder (two tune workers' `base` run): the
    one that finds it made between its check and its rename moves its files in instead of
    failing with "Directory not empty"; each file is whole, the owned stale one is gone."""
    from prefixsim.cli.files import write_folder

    out = tmp_path / "runs" / "base"
    rename = os.rename

    def racing_rename(source, target):  # the other writer wins the race just before
        if Path(target) == out and not out.exists():
            out.mkdir()
            (out / "summary.json").write_text('{"theirs": 1}')
            (out / "requests.parquet").write_text("theirs")
        return rename(source, target)

    monkeypatch.setattr(os, "rename", racing_rename)
    fill = lambda staging: (staging / "summary.json").write_text('{"mine": 1}')  # noqa: E731
    assert write_folder(out, fill, frozenset({"summary.json", "requests.parquet"})) == out
    assert json.loads((out / "summary.json").read_text()) == {"mine": 1}
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]
    assert [p.name for p in out.parent.iterdir()] == ["base"]  # no staging left


def test_a_run_and_a_sweep_never_share_a_results_folder(tmp_path):
    """`run -o SWEEPDIR` left a summary.json beside sweep.parquet (exit 0), and `sweep -o
    RUNDIR` a sweep beside a run's results; `report` then read one of the two. Each is
    refused in one line naming the folder, exit 2, nothing written into it."""
    sweep_dir, run_dir = tmp_path / "sweep", tmp_path / "run"
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"base: {{trace: {{path: {DEMO}, max_requests: 20}}, cache_only: true}}\n"
                    "grid: {cache.capacity_tokens: [5000, 10000]}\n")
    assert invoke("sweep", spec, "-o", sweep_dir, "--quiet").exit_code == 0
    assert invoke("run", DEMO, "--cache-only", "--max-requests", 20, "-o", run_dir,
                  "--quiet").exit_code == 0
    before = sorted(p.name for p in sweep_dir.iterdir())
    result = invoke("run", DEMO, "--cache-only", "--max-requests", 20, "-o", sweep_dir)
    one_line_error(result, f"{sweep_dir}: holds a sweep (sweep.json); a run's results "
                           "would mix with it: choose another -o folder")
    assert sorted(p.name for p in sweep_dir.iterdir()) == before
    held = sorted(p.name for p in run_dir.iterdir())
    result = invoke("sweep", spec, "-o", run_dir)
    one_line_error(result, f"{run_dir}: holds a run's results (summary.json); a sweep's "
                           "would mix with them: choose another -o folder")
    assert sorted(p.name for p in run_dir.iterdir()) == held


@pytest.mark.parametrize(("flags", "named"), [
    (("--router", "round_robin"), "--router"), (("--replicas", 4), "--replicas"),
    (("--max-num-seqs", 8), "--max-num-seqs"),
])
def test_a_timed_only_flag_on_a_cache_only_run_is_refused(tmp_path, flags, named):
    """`run --cache-only --router round_robin` exited 0 and recorded a router nothing read
    (I8); a config file's timed keys stay accepted (a sweep's base serves both modes) and
    --check-invariants checks the cache in both."""
    out = tmp_path / "out"
    result = invoke("run", DEMO, "--cache-only", *flags, "-o", out)
    one_line_error(result, f"{named}: only timed runs read it, and this run is cache-only")
    assert not out.exists()
    config = tmp_path / "c.yaml"
    config.write_text("cache_only: true\nengine: {replicas: 4}\nrouter: {name: round_robin}\n")
    assert invoke("run", DEMO, "--config", config, "--max-requests", 10, "--check-invariants",
                  "-o", out, "--quiet").exit_code == 0
