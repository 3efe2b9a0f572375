"""Train/test splits: a TTL tuned to a burst that does not recur scores lower held out."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from prefixsim.cli import app
from prefixsim.errors import InputError
from prefixsim.sweep import ExecutorOptions
from prefixsim.tune import PartOptions, parse_tune_spec, parts_for, run_tune
from prefixsim.tune.heldout import _retained

PAGE = 512  # Mooncake's tokens per hash id
BUDGET = 9216  # peak resident tokens allowed: 3 sessions of 6 pages


def session(start_s: float, gap_s: float, first_id: int) -> list[dict]:
    """4 turns `gap_s` apart; turn k sends the session's first 3 + k pages."""
    return [{"timestamp": int((start_s + k * gap_s) * 1000), "input_length": PAGE * (3 + k),
             "output_length": 8, "hash_ids": list(range(first_id, first_id + 3 + k))}
            for k in range(4)]


def burst_then_slow(path: Path) -> Path:
    """40 sessions 20 s apart whose turns come 4 s apart (0..792 s), then 40 sessions from
    1200 s whose turns come 120 s apart (to 2340 s). Split at half the span (1170 s): the
    first part is the burst alone. There a TTL >= 4 s hits 2/3 of the tokens (turns 2-4
    reuse 3, 4, 5 of their 4, 5, 6 pages: 12/18) and a TTL up to ~45 s keeps at most 3
    sessions (9216 tokens) resident; on the second part any TTL under 120 s hits nothing."""
    rows = [r for i in range(40) for r in session(20 * i, 4, 1000 * i)]
    rows += [r for i in range(40) for r in session(1200 + 20 * i, 120, 100000 + 1000 * i)]
    rows.sort(key=lambda r: r["timestamp"])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def spec_for(trace: Path, trials: int = 12) -> dict:
    return {"name": "burst",
            "base": {"trace": {"path": str(trace)}, "cache_only": True,
                     "engine": {"sample_interval_s": None}},
            "space": {"cache.ttl_s": {"float": [1, 600], "log": True}},
            "objectives": {"cache_token_hit_rate": "maximize"},
            "constraints": [f"cache_peak_tokens <= {BUDGET}"],
            "trials": trials, "sampler": {"name": "tpe", "seed": 0}}


def test_a_ttl_tuned_to_a_burst_scores_lower_on_the_held_out_part(tmp_path):
    """Tuned on the first half, the best TTL is feasible there with hit rate 2/3; re-run on
    the second half it hits nothing. tune.json files each figure under its part, and each
    run's summary names the window it replayed."""
    trace = burst_then_slow(tmp_path / "burst.jsonl")
    out = tmp_path / "t"
    result = run_tune(parse_tune_spec(spec_for(trace)), out, held_out=PartOptions(split="time:0.5"),
                      workers=ExecutorOptions(n_jobs=1), keep_requests=False)
    (best,) = result.summary["best"]
    train = best["train"]["cache_token_hit_rate"]
    test = best["test"]["cache_token_hit_rate"]
    assert train == pytest.approx(12 / 18) and test == 0.0 < train
    assert 4 <= best["params"]["cache.ttl_s"] < 120
    assert result.summary["split"] == "time:0.5" and result.summary["tuned_on"] == "train"
    # the base (no TTL) keeps every page: 2/3 on both parts, but breaks the budget
    assert result.summary["base"]["train"]["cache_token_hit_rate"] == pytest.approx(12 / 18)
    assert result.summary["base_feasible"] == {"train": False, "test": False}
    assert best["retained"]["cache_token_hit_rate"] is None  # no train gain over the base
    runs = pd.read_parquet(out / "sweep.parquet").set_index("run_id")
    test_id = best["test_run_id"]
    assert runs.loc[test_id, "part"] == "test"
    assert runs.loc[test_id, "trace_time_window"] == "0.5-1"
    assert runs.loc[best["run_id"], "trace_time_window"] == "0-0.5"
    assert runs.loc["base-train", "part"] == "train" and runs.loc["base-test", "part"] == "test"
    best_yaml = yaml.safe_load((out / "best.yaml").read_text())
    assert best_yaml["trace"]["time_window"] == [0.0, 0.5]


def test_train_and_test_traces(tmp_path):
    """--train A --test B: trials run on A, the best again on B; the CLI prints both parts
    side by side."""
    trace = burst_then_slow(tmp_path / "burst.jsonl")
    lines = trace.read_text().splitlines()
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("\n".join(lines[:160]) + "\n")
    second.write_text("\n".join(lines[160:]) + "\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(spec_for(trace, trials=6)))
    out = tmp_path / "ab"
    result = CliRunner().invoke(app, ["tune", str(spec), "-o", str(out), "--train", str(first),
                                      "--test", str(second), "-j", "1"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "tune.json").read_text())
    (best,) = summary["best"]
    assert best["train"]["cache_token_hit_rate"] > best["test"]["cache_token_hit_rate"]
    assert re.search(r"cache_token_hit_rate +train ", result.output)
    assert re.search(r"cache_token_hit_rate +test ", result.output)
    config = yaml.safe_load((out / "runs" / best["test_run_id"] / "config.yaml").read_text())
    assert config["trace"]["path"] == str(second)


@pytest.mark.parametrize("args, message", [
    ({"split": "time:0.5", "train": "a"}, "not both"),
    ({"split": "time:0"}, "0 < F < 1"),
    ({"split": "rows:0.5"}, "expected time:F"),
    ({"train": __file__}, "--train needs --test"),
])
def test_bad_splits(args, message, tmp_path):
    spec = parse_tune_spec(spec_for(burst_then_slow(tmp_path / "b.jsonl")))
    with pytest.raises(InputError, match=message):
        parts_for(spec, PartOptions(**args))


def test_retained_share_known_answers(tmp_path):
    """Maximise hit rate: base 0.4 -> best 0.6 on train (+0.2), 0.3 -> 0.35 on test (+0.05):
    25% kept. Minimise cost: 10 -> 8 on train (-2), 9 -> 8.5 on test (-0.5): also 25%. A best
    that does not beat the base on train has nothing to keep (None)."""
    spec = parse_tune_spec({**spec_for(burst_then_slow(tmp_path / "b.jsonl")), "objectives": {
        "cache_token_hit_rate": "maximize", "cost_total_usd": "minimize"}})
    base = {"train": {"cache_token_hit_rate": 0.4, "cost_total_usd": 10.0},
            "test": {"cache_token_hit_rate": 0.3, "cost_total_usd": 9.0}}
    kept = _retained(spec, {"cache_token_hit_rate": 0.6, "cost_total_usd": 8.0},
                     {"cache_token_hit_rate": 0.35, "cost_total_usd": 8.5}, base)
    assert kept == pytest.approx({"cache_token_hit_rate": 0.25, "cost_total_usd": 0.25})
    worse = _retained(spec, {"cache_token_hit_rate": 0.3, "cost_total_usd": 11.0},
                      {"cache_token_hit_rate": 0.35, "cost_total_usd": 8.5}, base)
    assert worse == {"cache_token_hit_rate": None, "cost_total_usd": None}
