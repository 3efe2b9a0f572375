"""What a tune may try and how often: offline policies refused as candidates, a repeated
point told its earlier values instead of run again and listed once on the front, and the
TPE sampler measurably better than random search on a problem with a known optimum."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd
import pytest
import yaml
from cli_helpers import invoke, one_line_error

from prefixsim.tune import suggest
from prefixsim.tune.samplers import build_sampler, optuna_module
from prefixsim.tune.space import parse_knob

DEMO = str(Path(__file__).resolve().parents[2] / "traces" / "demo_chat.jsonl")
BASE = {"trace": {"path": DEMO}, "cache_only": True, "engine": {"sample_interval_s": None}}


@pytest.mark.parametrize("space, base, field", [
    ({"cache.policy": ["lru", "belady"]}, {}, "space.cache.policy"),
    ({"cache.capacity_tokens": [5000, 9000]}, {"cache": {"policy": "belady"}}, "base"),
])
def test_offline_policies_are_not_candidates(tmp_path, space, base, field):
    spec = tmp_path / "t.yaml"
    spec.write_text(yaml.safe_dump({"base": {**BASE, **base}, "space": space, "trials": 2,
                                    "objectives": {"cache_token_hit_rate": "max"}}))
    result = invoke("tune", spec, "-o", tmp_path / "out")
    one_line_error(result, field, "belady", "offline")
    assert not (tmp_path / "out").exists()


def test_a_repeated_point_runs_once_and_is_listed_once(tmp_path):
    """2 policies x 3 capacities = 6 points and 14 trials (NSGA-II, two objectives, two
    workers): by pigeonhole at least 8 trials repeat a point. Each point is simulated once
    (one run folder), a repeat carries its twin's values, and the front names each point
    once."""
    spec = tmp_path / "nsga2.yaml"
    spec.write_text(yaml.safe_dump({
        "base": BASE, "trials": 14,
        "space": {"cache.policy": ["lru", "s3fifo"],
                  "cache.capacity_tokens": {"int": [4000, 20000], "step": 8000}},
        "objectives": {"cache_token_hit_rate": "max", "cache_capacity_tokens": "min"},
        "sampler": {"name": "nsga2", "seed": 1, "population_size": 4}}))
    out = tmp_path / "mo"
    assert invoke("tune", spec, "-o", out, "-j", "2", "--quiet").exit_code == 0
    trials = pd.read_parquet(out / "trials.parquet")
    params = ["cache_policy", "cache_capacity_tokens"]
    assert len(trials) == 14 and (trials["state"] == "complete").all()
    ran = trials[trials["duplicate_of"].isna()]
    assert not ran.duplicated(params).any() and len(ran) <= 6
    folders = sorted(p.name for p in (out / "runs").iterdir() if p.name.startswith("trial-"))
    assert folders == [f"trial-{n:04d}" for n in sorted(ran["trial"])]
    by_number = trials.set_index("trial")
    for _, copy in trials[trials["duplicate_of"].notna()].iterrows():
        twin = by_number.loc[int(copy["duplicate_of"])]
        assert list(twin[params]) == list(copy[params])
        assert twin["cache_token_hit_rate"] == copy["cache_token_hit_rate"]
    front = pd.read_parquet(out / "pareto.parquet")
    best = json.loads((out / "tune.json").read_text())["best"]
    assert not front.duplicated(params).any() and len(front) == len(best) >= 2


def _best_regret(sampler: str, seed: int, trials: int = 60) -> float:
    """Best distance found to a known optimum (x, y, z) = (0.73, 0.21, 37) of a smooth
    bowl over two float knobs and an int knob, asked through the tune's own knobs."""
    def error(message: str, field: str) -> ValueError:
        return ValueError(message)

    knobs: list = []
    for key, spec in {"x": {"float": [0.0, 1.0]}, "y": {"float": [0.0, 1.0]},
                      "z": {"int": [0, 100]}}.items():
        knobs.append(parse_knob(key, spec, knobs, error))
    study = optuna_module().create_study(sampler=build_sampler(sampler, seed, {}),
                                         direction="minimize")
    for _ in range(trials):
        trial = study.ask()
        p = suggest(trial, knobs)
        study.tell(trial, (p["x"] - 0.73) ** 2 + (p["y"] - 0.21) ** 2
                   + ((p["z"] - 37) / 100) ** 2)
    return study.best_value


def test_tpe_beats_random_search_with_fixed_seeds():
    """Seeds 0-7, 60 trials each (TPE's first 10 are random): TPE's best regret is lower on
    at least 7 of 8 seeds and its mean under a quarter of random search's (measured: 0.0016
    against 0.0203). A sampler no better than random fails this."""
    tpe = [_best_regret("tpe", seed) for seed in range(8)]
    rand = [_best_regret("random", seed) for seed in range(8)]
    assert sum(t < r for t, r in zip(tpe, rand, strict=True)) >= 7, (tpe, rand)
    assert statistics.mean(tpe) < statistics.mean(rand) / 4, (tpe, rand)
