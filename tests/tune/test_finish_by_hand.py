"""The end of a tune by hand (prefixsim/tune/heldout.py `finish`): a study of two trials
whose runs are on disk, finished with a stand-in executor that runs here. tune.json's every
key, the held-out re-run and the base on each part, the retained share recomputed from the
run folders' own summaries, best.yaml, a lost worker's run, a finish midway and a study
with nothing feasible."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from cli_helpers import DEMO
from fakes import LosingExecutor

from prefixsim.sweep import run_point
from prefixsim.sweep.store import read_run, run_dir, write_run
from prefixsim.tune import PartOptions, parse_tune_spec, parts_for
from prefixsim.tune.heldout import WHOLE_TRACE, finish, trial_point

optuna = pytest.importorskip("optuna")

HIT = "cache_token_hit_rate"
SPEC = {"name": "t",
        "base": {"trace": {"path": str(DEMO)}, "cache_only": True,
                 "cache": {"capacity_tokens": 20_000}, "engine": {"sample_interval_s": None}},
        "space": {"cache.policy": ["lru", "lfu"]},
        "objectives": {HIT: "maximize"},
        "constraints": ["cache_peak_tokens <= 1e9"], "trials": 2,
        "sampler": {"name": "random", "seed": 0}}
PARAMS = [{"cache.policy": "lru"}, {"cache.policy": "lfu"}]


class Here:
    """Runs every item here, in order, as the local executor's single worker does."""

    def map_unordered(self, fn, items):
        for index, item in enumerate(items):
            yield index, fn(item)


def summary(out, run_id):
    found = read_run(run_dir(out, run_id))
    return None if found is None else found.summary


def tuned(tmp_path, options=WHOLE_TRACE, constraint="cache_peak_tokens <= 1e9"):
    """A spec, its parts, and a study whose two trials ran on the tuned part (folders
    written as the driver writes them), told their hit rates and violations."""
    spec = parse_tune_spec({**SPEC, "constraints": [constraint]})
    parts = parts_for(spec, options)
    out = tmp_path / "out"
    study = optuna.create_study(direction="maximize")
    distribution = optuna.distributions.CategoricalDistribution(["lru", "lfu"])
    for number, params in enumerate(PARAMS):
        point = trial_point(spec, parts.train, params, number)
        write_run(out, run_point(point, keep_requests=False))
        found = summary(out, point.run_id)
        violation = found["cache_peak_tokens"] - float(constraint.split()[-1])
        study.add_trial(optuna.trial.create_trial(
            params=params, distributions={"cache.policy": distribution}, values=[found[HIT]],
            user_attrs={"run_id": point.run_id}, constraints={constraint: violation}))
    return spec, parts, out, study


def test_finish_on_a_split_by_hand(tmp_path):
    spec, parts, out, study = tuned(tmp_path, PartOptions(split="time:0.5"))
    lru, lfu = (summary(out, f"trial-000{n}")[HIT] for n in (0, 1))
    # LFU beats LRU on the demo's first half at 20k tokens (0.642 against 0.588)
    assert lfu > lru
    best = 1
    result = finish(study, spec, parts, out, Here(), keep_requests=False)
    test = summary(out, f"trial-000{best}-test")
    base_train, base_test = summary(out, "base-train"), summary(out, "base-test")
    windows = [yaml.safe_load(read_run(run_dir(out, r)).config_text)["trace"]["time_window"]
               for r in ("base-train", "base-test", f"trial-000{best}-test")]
    assert windows == [[0.0, 0.5], [0.5, 1.0], [0.5, 1.0]]
    gain = (lru if best == 0 else lfu) - base_train[HIT]
    assert gain > 0  # the base is LRU (the default policy): a gain to keep
    retained = (test[HIT] - base_test[HIT]) / gain
    assert result == {
        "kind": "tune", "name": "t",
        "objectives": [{"key": HIT, "direction": "maximize"}],
        "constraints": ["cache_peak_tokens <= 1e9"],
        "sampler": {"name": "random", "seed": 0},
        "split": "time:0.5", "tuned_on": "train",
        "trials": {"total": 2, "complete": 2},
        "best": [{"trial": best, "run_id": f"trial-000{best}", "params": PARAMS[best],
                  "train": {HIT: lru if best == 0 else lfu},
                  "test_run_id": f"trial-000{best}-test", "test": {HIT: test[HIT]},
                  "test_feasible": True, "retained": {HIT: retained}}],
        "base": {"train": {HIT: base_train[HIT]}, "test": {HIT: base_test[HIT]}},
        "base_feasible": {"train": True, "test": True},
        "finished": True,
    }
    assert json.loads((out / "tune.json").read_text()) == result
    # best.yaml: the best trial's own config.yaml under a header naming it and its figure
    text = (out / "best.yaml").read_text()
    header = (f"# best trial {best} of the tune 't' (on the train part): "
              f"{HIT}={result['best'][0]['train'][HIT]:.6g}\n"
              "# prefixsim run --config best.yaml repeats it\n")
    assert text == header + (run_dir(out, f"trial-000{best}") / "config.yaml").read_text()
    assert yaml.safe_load(text)["cache"]["policy"] == PARAMS[best]["cache.policy"]
    # the tables: each run with its part
    runs = ["trial-0000", "trial-0001", "trial-0001-test", "base-train", "base-test"]
    assert json.loads((out / "sweep.json").read_text())["run_ids"] == runs
    table = pd.read_parquet(out / "sweep.parquet")
    assert list(table.columns[:3]) == ["run_id", "trial", "part"]
    assert table["run_id"].tolist() == runs
    assert str(table["trial"].dtype) == "Int64"
    assert table["trial"].tolist()[:3] == [0, 1, 1] and table["trial"][3:].isna().all()
    assert table["part"].tolist() == ["train", "train", "test", "train", "test"]


def test_finish_on_the_whole_trace_runs_the_base_once(tmp_path):
    spec, parts, out, study = tuned(tmp_path)
    result = finish(study, spec, parts, out, Here(), keep_requests=False)
    assert (result["split"], result["tuned_on"]) == (None, "all")
    assert set(result["base"]) == {"all"} and result["base_feasible"] == {"all": True}
    assert result["base"]["all"] == {HIT: summary(out, "base")[HIT]}
    entry = result["best"][0]
    assert set(entry) == {"trial", "run_id", "params", "all"}  # no held-out keys
    assert not run_dir(out, f"{entry['run_id']}-test").exists()


def test_a_lost_worker_leaves_a_failed_run_named_so(tmp_path):
    spec, parts, out, study = tuned(tmp_path, PartOptions(split="time:0.5"))
    losing = LosingExecutor()
    losing.lost_index = 0  # base-train's worker dies
    result = finish(study, spec, parts, out, losing, keep_requests=False)
    meta = read_run(run_dir(out, "base-train")).meta
    assert (meta["status"], meta["error"]) == ("failed", "worker lost: ConnectionError")
    assert result["base"]["train"] is None and result["base_feasible"]["train"] is None
    assert result["best"][0]["retained"] == {}  # no base on the train part: nothing to say


def test_midway_nothing_runs_and_tune_json_says_unfinished(tmp_path):
    spec, parts, out, study = tuned(tmp_path, PartOptions(split="time:0.5"))
    (out / "best.yaml").write_text("# an earlier best\n")
    result = finish(study, spec, parts, out, None, keep_requests=False)
    assert result["finished"] is False
    assert not run_dir(out, "base-train").exists()
    assert result["base"] == {"train": None, "test": None}
    assert result["best"][0]["test"] is None and result["best"][0]["test_feasible"] is None
    assert (out / "best.yaml").read_text() == "# an earlier best\n"  # left as it was


def test_with_nothing_feasible_there_is_no_best(tmp_path):
    spec, parts, out, study = tuned(tmp_path, constraint="cache_peak_tokens <= 10")
    (out / "best.yaml").write_text("# an earlier best\n")
    result = finish(study, spec, parts, out, Here(), keep_requests=False)
    assert result["best"] == [] and result["base_feasible"] == {"all": False}
    assert not (out / "best.yaml").exists()


@pytest.mark.parametrize("keep", [False, True])
def test_the_re_runs_keep_requests_as_asked(tmp_path, keep):
    spec, parts, out, study = tuned(tmp_path, PartOptions(split="time:0.5"))
    finish(study, spec, parts, out, Here(), keep_requests=keep)
    for run_id in ("base-train", "base-test", "trial-0001-test"):
        assert (run_dir(out, run_id) / "requests.parquet").exists() is keep


def test_a_lost_re_run_keeps_its_parameters(tmp_path):
    spec, parts, out, study = tuned(tmp_path, PartOptions(split="time:0.5"))
    losing = LosingExecutor()
    losing.lost_index = 2  # after base-train and base-test: the best's held-out re-run
    result = finish(study, spec, parts, out, losing, keep_requests=False)
    meta = read_run(run_dir(out, "trial-0001-test")).meta
    assert (meta["status"], meta["params"]) == ("failed", {"cache.policy": "lfu"})
    assert result["best"][0]["test"] is None and result["best"][0]["test_feasible"] is None


def test_best_yaml_is_rebuilt_when_the_trials_folder_lost_its_config(tmp_path):
    spec, parts, out, study = tuned(tmp_path)
    (run_dir(out, "trial-0001") / "config.yaml").unlink()
    finish(study, spec, parts, out, Here(), keep_requests=False)
    config = yaml.safe_load((out / "best.yaml").read_text())
    assert config["cache"]["policy"] == "lfu" and config["cache"]["capacity_tokens"] == 20_000
    assert config["trace"]["path"] == str(DEMO)


def test_best_yaml_names_every_objective(tmp_path):
    spec, parts, out, study = tuned(tmp_path)
    two = parse_tune_spec({**SPEC, "objectives": {HIT: "maximize",
                                                  "cache_peak_tokens": "minimize"}})
    both = optuna.create_study(directions=["maximize", "minimize"])
    distribution = optuna.distributions.CategoricalDistribution(["lru", "lfu"])
    for number, params in enumerate(PARAMS):
        found = summary(out, f"trial-000{number}")
        both.add_trial(optuna.trial.create_trial(
            params=params, distributions={"cache.policy": distribution},
            values=[found[HIT], found["cache_peak_tokens"]],
            user_attrs={"run_id": f"trial-000{number}"}, constraints={"c": -1.0}))
    result = finish(both, two, parts, out, Here(), keep_requests=False)
    first = result["best"][0]
    shown = (f"{HIT}={first['all'][HIT]:.6g}, "
             f"cache_peak_tokens={first['all']['cache_peak_tokens']:.6g}")
    assert (out / "best.yaml").read_text().splitlines()[0] == (
        f"# best trial {first['trial']} of the tune 't' (on the all part): {shown}")


def test_no_best_and_no_earlier_best_yaml_is_no_error(tmp_path):
    spec, parts, out, study = tuned(tmp_path, constraint="cache_peak_tokens <= 10")
    result = finish(study, spec, parts, out, Here(), keep_requests=False)
    assert result["best"] == [] and not (out / "best.yaml").exists()


def test_a_study_with_no_trials_finishes_with_the_base_alone(tmp_path):
    spec = parse_tune_spec(SPEC)
    parts = parts_for(spec, WHOLE_TRACE)
    study = optuna.create_study(direction="maximize")
    result = finish(study, spec, parts, tmp_path / "out", Here(), keep_requests=False)
    assert result["trials"] == {"total": 0} and result["best"] == []
    assert result["base"]["all"] == {HIT: summary(tmp_path / "out", "base")[HIT]}
