"""Tunes end to end on the demo trace (cache-only, seeded): the known optimum, determinism,
outputs that repeat and report, several objectives, the grid sampler."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

import prefixsim
from prefixsim.cli import app
from prefixsim.sweep import ExecutorOptions, parse_spec, run_sweep
from prefixsim.tune import grid_points, parse_tune_spec, run_tune

DEMO = str(Path(__file__).resolve().parents[2] / "traces" / "demo_chat.jsonl")
BASE = {"trace": {"path": DEMO}, "cache_only": True, "engine": {"sample_interval_s": None}}
POLICIES = ["lru", "lfu", "s3fifo", "gdsf"]
CAPACITIES = list(range(2000, 40001, 2000))
TTLS = [None, 20, 40, 60, 90, 120]
BUDGET = 24000


def tune(tmp_path, name="t", **spec):
    data = {"base": BASE, "objectives": {"cache_token_hit_rate": "maximize"}, **spec}
    out = tmp_path / name
    return run_tune(parse_tune_spec(data), out, workers=ExecutorOptions(n_jobs=1),
                    keep_requests=False), out


@pytest.mark.slow  # a 288-run sweep and 57 trials (~85 s): .ci/run's second step
def test_a_constrained_tune_finds_the_known_optimum_in_a_fifth_of_the_grid(tmp_path):
    """Maximise the hit rate under a capacity budget (capacity <= 24,000 tokens) over
    policy x capacity x TTL. The grid is 4 x 20 x 6 = 480 points, 4 x 12 x 6 = 288 within the
    budget; their exhaustive sweep gives the optimum. A tune (TPE, seed 0) given 288 // 5 = 57
    trials (infeasible ones, pruned without a run, counted too) finds a trial within 1% and
    never runs an infeasible one. This checks the tune loop, not the sampler: random search
    passes it too (test_candidates.py tells TPE from random search)."""
    feasible = [{"cache.policy": p, "cache.capacity_tokens": c, "cache.ttl_s": t}
                for p in POLICIES for c in CAPACITIES if c <= BUDGET for t in TTLS]
    assert len(feasible) == 288
    sweep = run_sweep(parse_spec({"base": BASE, "runs": feasible}), tmp_path / "grid",
                      ExecutorOptions(n_jobs=1), keep_requests=False)
    assert not sweep.failed
    table = pd.read_parquet(sweep.table_path)
    optimum = table["cache_token_hit_rate"].max()
    space = {"cache.policy": POLICIES,
             "cache.capacity_tokens": {"int": [2000, 40000], "step": 2000},
             "cache.ttl_s": TTLS}
    result, out = tune(tmp_path, space=space, trials=len(feasible) // 5,
                       constraints=[f"cache.capacity_tokens <= {BUDGET}"],
                       sampler={"name": "tpe", "seed": 0})
    trials = pd.read_parquet(out / "trials.parquet")
    assert len(trials) == 57
    found = result.summary["best"][0]["all"]["cache_token_hit_rate"]
    assert found >= 0.99 * optimum, (found, optimum)
    best = trials[trials["trial"] == result.summary["best"][0]["trial"]].iloc[0]
    assert best["cache_capacity_tokens"] <= BUDGET
    assert (trials["state"] == "pruned").sum() > 0  # some were infeasible and never ran
    assert trials.loc[trials["state"] == "pruned", "cache_capacity_tokens"].min() > BUDGET


def test_same_spec_and_seed_give_the_same_trials(tmp_path):
    """Two tunes of one spec (TPE, seed 3) into two folders: equal parameters and values."""
    space = {"cache.policy": ["lru", "s3fifo"],
             "cache.capacity_tokens": {"int": [2000, 30000], "log": True},
             "cache.ttl_s": {"float": [5, 300], "log": True}}
    columns = ["trial", "state", "cache_policy", "cache_capacity_tokens", "cache_ttl_s",
               "cache_token_hit_rate"]
    frames = []
    for name in ("a", "b"):
        _, out = tune(tmp_path, name, space=space, trials=14, sampler={"seed": 3})
        frames.append(pd.read_parquet(out / "trials.parquet")[columns])
    pd.testing.assert_frame_equal(*frames)
    assert frames[0]["cache_policy"].nunique() == 2


def test_outputs_repeat_the_best_and_report(tmp_path):
    """best.yaml repeats the best trial's figure with `prefixsim run --config`; the tune
    folder has the sweep layout, so `prefixsim report` draws it with the tune plots."""
    space = {"cache.policy": ["lru", "lfu"],
             "cache.capacity_tokens": {"int": [4000, 30000], "step": 2000}}
    result, out = tune(tmp_path, space=space, trials=8, sampler="random")
    best = result.summary["best"][0]
    rerun = prefixsim.run(str(out / "best.yaml"))
    assert rerun.summary["cache_token_hit_rate"] == best["all"]["cache_token_hit_rate"]
    header = (out / "best.yaml").read_text().splitlines()[0]
    assert header.startswith(f"# best trial {best['trial']} ")
    table = pd.read_parquet(out / "sweep.parquet")
    assert {f"trial-{best['trial']:04d}", "base"} <= set(table["run_id"])
    assert set(table["part"]) == {"all"}
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["kind"] == "tune" and meta["swept_columns"] == ["cache_policy",
                                                               "cache_capacity_tokens"]
    report = CliRunner().invoke(app, ["report", str(out)])
    assert report.exit_code == 0, report.output
    for plot in ("optimisation_history", "parameter_importances", "objective_vs_parameters"):
        assert (out / "plots" / f"{plot}.png").is_file(), report.output
    assert "skipped pareto_front: needs two or more objectives" in report.output
    assert "<title>prefixsim tune:" in (out / "report.html").read_text()
    assert "missing" not in report.output  # the trials not drawn are not missing


def test_several_objectives_give_a_pareto_front(tmp_path):
    """Maximise the hit rate, minimise the capacity (NSGA-II): every front member is
    feasible and complete, none is dominated by another trial, and the front is ordered by
    the first objective."""
    space = {"cache.policy": ["lru", "s3fifo"],
             "cache.capacity_tokens": {"int": [2000, 40000], "step": 2000}}
    data = {"base": BASE, "space": space, "trials": 16,
            "objectives": {"cache_token_hit_rate": "maximize",
                           "cache_capacity_tokens": "minimize"},
            "sampler": {"name": "nsga2", "seed": 1, "population_size": 8}}
    out = tmp_path / "mo"
    result = run_tune(parse_tune_spec(data), out, workers=ExecutorOptions(n_jobs=1),
                      keep_requests=False)
    front = pd.read_parquet(out / "pareto.parquet")
    trials = pd.read_parquet(out / "trials.parquet")
    done = trials[trials["state"] == "complete"]
    assert len(front) == len(result.summary["best"]) >= 2
    for _, member in front.iterrows():
        assert not any(r["cache_token_hit_rate"] >= member["cache_token_hit_rate"]
                       and r["cache_capacity_tokens"] <= member["cache_capacity_tokens"]
                       and (r["cache_token_hit_rate"], r["cache_capacity_tokens"])
                       != (member["cache_token_hit_rate"], member["cache_capacity_tokens"])
                       for _, r in done.iterrows())
    assert front["cache_token_hit_rate"].is_monotonic_decreasing
    report = CliRunner().invoke(app, ["report", str(out), "--quiet"])
    assert report.exit_code == 0 and (out / "plots" / "pareto_front.png").is_file()


def test_the_grid_sampler_runs_every_point_once(tmp_path):
    """policy [lru, s3fifo] x capacity {5000, 15000} x small_fraction (s3fifo only, 0.1 or
    0.3) = 2 + 4 = 6 points; asking for 10 trials runs exactly those 6."""
    space = {"cache.policy": ["lru", "s3fifo"],
             "cache.capacity_tokens": {"int": [5000, 15000], "step": 10000},
             "cache.policy_params.small_fraction": {"float": [0.1, 0.3], "step": 0.2,
                                                    "when": {"cache.policy": "s3fifo"}}}
    spec = parse_tune_spec({"base": BASE, "space": space, "trials": 10, "sampler": "grid",
                            "objectives": {"cache_token_hit_rate": "max"}})
    assert len(grid_points(spec.knobs)) == 6
    run_tune(spec, tmp_path / "g", workers=ExecutorOptions(n_jobs=1), keep_requests=False)
    trials = pd.read_parquet(tmp_path / "g" / "trials.parquet")
    assert len(trials) == 6 and set(trials["state"]) == {"complete"}
    seen = {(r.cache_policy, r.cache_capacity_tokens,
             None if pd.isna(r.cache_policy_params_small_fraction)
             else round(float(r.cache_policy_params_small_fraction), 6))
            for r in trials.itertuples()}
    assert seen == {("lru", 5000, None), ("lru", 15000, None), ("s3fifo", 5000, 0.1),
                    ("s3fifo", 5000, 0.3), ("s3fifo", 15000, 0.1), ("s3fifo", 15000, 0.3)}


def test_the_bundled_demo_spec_is_valid_and_resumes_to_more_trials(tmp_path):
    """traces/tune/demo.yaml loads; 4 trials, then --resume --trials 6 adds two (numbers
    0..5, none repeated), and a plain second start refuses the folder."""
    spec = Path(__file__).resolve().parents[2] / "traces" / "tune" / "demo.yaml"
    out = tmp_path / "demo"
    runner = CliRunner()
    first = runner.invoke(app, ["tune", str(spec), "-o", str(out), "--trials", "4", "-j", "1",
                                "--quiet", "--no-requests"])
    assert first.exit_code in (0, 1), first.output
    again = runner.invoke(app, ["tune", str(spec), "-o", str(out), "--trials", "6"])
    assert again.exit_code == 2 and "pass --resume" in again.stderr
    more = runner.invoke(app, ["tune", str(spec), "-o", str(out), "--trials", "6", "-j", "1",
                               "--resume", "--no-requests"])
    assert more.exit_code in (0, 1), more.output
    trials = pd.read_parquet(out / "trials.parquet")
    assert trials["trial"].tolist() == list(range(6))
    assert yaml.safe_load((out / "spec.yaml").read_text())["name"] == "demo"


def test_resuming_with_another_split_is_refused(tmp_path):
    """The study remembers its split: resuming it with another one is an input error."""
    _, out = tune(tmp_path, space={"cache.policy": ["lru", "s3fifo"]}, trials=2)
    spec = tmp_path / "spec.yaml"
    spec.write_text((out / "spec.yaml").read_text())
    result = CliRunner().invoke(app, ["tune", str(spec), "-o", str(out), "--resume",
                                      "--split", "time:0.5"])
    assert result.exit_code == 2 and "was started with" in result.stderr
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text((out / "spec.yaml").read_text().replace("name: tune", "name: other"))
    other = CliRunner().invoke(app, ["tune", str(renamed), "-o", str(out), "--resume"])
    assert other.exit_code == 2 and "holds the tune 'tune'" in other.stderr
