"""Tunes that survive a killed worker and share a study between workers and processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import optuna
import pandas as pd
import yaml
from click.testing import CliRunner

from prefixsim.cli import app
from prefixsim.sweep import ExecutorOptions
from prefixsim.sweep.store import read_run_meta
from prefixsim.tune import parse_tune_spec, run_tune

DEMO = str(Path(__file__).resolve().parents[2] / "traces" / "demo_chat.jsonl")
SPEC = {"name": "w", "base": {"trace": {"path": DEMO}, "cache_only": True,
                              "engine": {"sample_interval_s": None}},
        "space": {"cache.policy": ["lru", "s3fifo", "lfu"],
                  "cache.capacity_tokens": {"int": [2000, 40000], "log": True}},
        "objectives": {"cache_token_hit_rate": "maximize"}, "trials": 8}

# Runs `prefixsim tune` in a child that SIGKILLs itself when trial 3's run folder is
# complete but before the study is told: the most a kill can lose.
KILLER = """
import os, signal, sys
import prefixsim.tune.driver as driver
finish = driver._finish_trial
def killed(study, spec, trial, *rest):
    if trial.number == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return finish(study, spec, trial, *rest)
driver._finish_trial = killed
from prefixsim.cli import main
sys.argv = ["prefixsim", "tune", *sys.argv[1:]]
main()
"""


def study_trials(out: Path, name: str = "w") -> list:
    storage = f"sqlite:///{out / 'study.db'}"
    return optuna.load_study(study_name=name, storage=storage).get_trials()


def test_resume_after_sigkill_loses_no_finished_trial(tmp_path):
    """Killed after trial 3's folder was written: trials 0-2 are complete, 3 is still
    running. --resume completes 3 from its folder (same value), keeps 0-2 as they were, and
    runs on to 8 trials numbered 0..7, none failed."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    out = tmp_path / "out"
    child = subprocess.run([sys.executable, "-c", KILLER, str(spec), "-o", str(out), "-j", "1",
                            "--quiet", "--no-requests"], capture_output=True, text=True,
                           timeout=300)
    assert child.returncode == -9, child.stderr
    before = {t.number: t for t in study_trials(out)}
    assert [before[n].state.name for n in range(4)] == ["COMPLETE"] * 3 + ["RUNNING"]
    assert read_run_meta(out / "runs" / "trial-0003")["status"] == "ok"
    resumed = CliRunner().invoke(app, ["tune", str(spec), "-o", str(out), "-j", "1",
                                       "--resume", "--no-requests", "--quiet"])
    assert resumed.exit_code == 0, resumed.output
    after = {t.number: t for t in study_trials(out)}
    assert sorted(after) == list(range(8))
    assert all(t.state.name == "COMPLETE" for t in after.values())
    assert all(after[n].values == before[n].values for n in range(3))
    frame = pd.read_parquet(out / "sweep.parquet").set_index("run_id")
    assert after[3].values[0] == frame.loc["trial-0003", "cache_token_hit_rate"]


def test_local_workers_share_one_study_without_duplicate_numbers(tmp_path):
    """-j 2: trials run two at a time in worker processes; 10 trials numbered 0..9, each
    with its own run folder."""
    result = run_tune(parse_tune_spec({**SPEC, "trials": 10}), tmp_path / "j2",
                      workers=ExecutorOptions(n_jobs=2), keep_requests=False)
    trials = pd.read_parquet(tmp_path / "j2" / "trials.parquet")
    assert trials["trial"].tolist() == list(range(10)) and result.ran == 10
    assert set(trials["state"]) == {"complete"}
    assert all((tmp_path / "j2" / "runs" / r).is_dir() for r in trials["run_id"])


def test_two_processes_on_one_folder_share_the_study(tmp_path):
    """A tune of 1 trial, then two `--resume` processes on the same folder at once, asking
    for 12 in all: trial numbers are unique and consecutive, every complete trial has its
    run folder, and the study stops at 12 (at most one more from a race at the end)."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    out = tmp_path / "shared"
    run_tune(parse_tune_spec(SPEC), out, workers=ExecutorOptions(n_jobs=1), keep_requests=False,
             trials=1)
    command = [sys.executable, "-m", "prefixsim", "tune", str(spec), "-o", str(out), "-j", "1",
               "--resume", "--trials", "12", "--quiet", "--no-requests"]
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True) for _ in range(2)]
    for child in children:
        _, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
    trials = study_trials(out)
    numbers = sorted(t.number for t in trials)
    assert numbers == list(range(len(numbers))) and 12 <= len(numbers) <= 13
    assert all(t.state.name == "COMPLETE" for t in trials)
    ran = [t for t in trials if "duplicate_of" not in t.user_attrs]  # a repeat is not run
    assert all((out / "runs" / t.user_attrs["run_id"]).is_dir() for t in ran)


def test_a_journal_storage_holds_the_study_outside_the_folder(tmp_path):
    """--storage journal:PATH: the study is in the journal file (no DIR/study.db), and a
    second folder joining it continues the numbering."""
    journal = tmp_path / "study.log"
    spec = parse_tune_spec({**SPEC, "trials": 3})
    run_tune(spec, tmp_path / "a", workers=ExecutorOptions(n_jobs=1),
             storage_url=f"journal:{journal}", keep_requests=False)
    run_tune(spec, tmp_path / "b", workers=ExecutorOptions(n_jobs=1),
             storage_url=f"journal:{journal}", keep_requests=False, trials=5)
    assert journal.is_file() and not (tmp_path / "a" / "study.db").exists()
    second = pd.read_parquet(tmp_path / "b" / "trials.parquet")
    assert second["trial"].tolist() == list(range(5))
    ran = second[(second["trial"] >= 3) & second["duplicate_of"].isna()]  # repeats: not run
    assert sorted(p.name for p in (tmp_path / "b" / "runs").iterdir() if "trial" in p.name) \
        == [f"trial-{n:04d}" for n in ran["trial"]]
