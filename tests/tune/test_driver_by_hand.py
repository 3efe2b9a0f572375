"""The tune driver's steps by hand (prefixsim/tune/driver.py), on in-memory Optuna studies:
the folder checks word for word, the grid (its refusal, seeded order, what is enqueued), a
trial asked for (invalid, infeasible before the run, a repeat of a finished point), a
repeat told its twin's end, a run's end told, the best so far, and a stale trial recovered
from its run folder."""

from __future__ import annotations

import json

import pytest
import yaml
from cli_helpers import DEMO

from prefixsim.errors import InputError
from prefixsim.sweep import RunOutcome, run_point
from prefixsim.sweep.store import write_run
from prefixsim.tune import parse_tune_spec, parts_for
from prefixsim.tune.driver import (
    TrialReport,
    TuneResult,
    _ask,
    _check_folder,
    _enqueue_grid,
    _finish_trial,
    _grid,
    _recover,
    _tell_copy,
    best_so_far,
)
from prefixsim.tune.heldout import WHOLE_TRACE, trial_point
from prefixsim.tune.space import grid_points
from prefixsim.tune.study import tell

optuna = pytest.importorskip("optuna")

HIT = "cache_token_hit_rate"
BASE = {"trace": {"path": str(DEMO)}, "cache_only": True,
        "cache": {"capacity_tokens": 20_000}, "engine": {"sample_interval_s": None}}


def spec(space=None, objectives=None, constraints=(), sampler=None):
    return parse_tune_spec({"name": "t", "base": BASE,
                            "space": space or {"cache.policy": ["lru", "lfu"]},
                            "objectives": objectives or {HIT: "maximize"},
                            "constraints": list(constraints),
                            **({"sampler": sampler} if sampler else {})})


def study_of(tuned, fixed=None):
    """An in-memory study; `fixed` params make every ask suggest them."""
    sampler = optuna.samplers.RandomSampler(seed=0)
    study = optuna.create_study(sampler=sampler,
                                directions=[o.direction for o in tuned.objectives])
    if fixed is not None:
        study.enqueue_trial(fixed)
    return study


def reports():
    seen: list[TrialReport] = []
    return seen, seen.append


# --------------------------------------------------------------------------- folders
def test_the_folder_checks_word_for_word(tmp_path):
    tuned = spec()
    fresh = tmp_path / "fresh"
    _check_folder(fresh, tuned, resume=False, storage_url=None)  # nothing there: fine
    assert refused(_check_folder, fresh, tuned, True, None) == (
        str(fresh), "holds no tune to resume")
    _check_folder(fresh, tuned, resume=True, storage_url="sqlite:///x.db")  # a shared study
    held = tmp_path / "held"
    held.mkdir()
    (held / "study.db").write_text("")
    assert refused(_check_folder, held, tuned, False, None) == (
        str(held), "already holds a tune or sweep; pass --resume to continue it or choose "
        "another -o folder")
    _check_folder(held, tuned, resume=True, storage_url=None)
    (held / "sweep.json").write_text(json.dumps({"kind": "tune", "name": "other"}))
    assert refused(_check_folder, held, tuned, True, None) == (
        str(held), "holds the tune 'other', not the tune 't' (the spec's name:)")
    (held / "sweep.json").write_text(json.dumps({"name": "t"}))
    assert refused(_check_folder, held, tuned, True, None) == (
        str(held), "holds the sweep 't', not the tune 't' (the spec's name:)")
    (held / "sweep.json").write_text(json.dumps({"kind": "tune", "name": "t"}))
    _check_folder(held, tuned, resume=True, storage_url=None)


def refused(call, *args):
    with pytest.raises(InputError) as info:
        call(*args)
    return info.value.file or info.value.field, info.value.message


# ------------------------------------------------------------------------------- grid
def test_the_grid_in_a_seeded_order_and_its_refusal():
    space = {"cache.policy": ["lru", "lfu", "fifo"],
             "cache.capacity_tokens": {"int": [10_000, 20_000], "step": 10_000}}
    tuned = spec(space=space, sampler={"name": "grid", "seed": 3})
    points = _grid(tuned)
    assert sorted(map(str, points)) == sorted(map(str, grid_points(tuned.knobs)))
    assert points == _grid(tuned) and len(points) == 6
    other = spec(space=space, sampler={"name": "grid", "seed": 4})
    assert _grid(other) != points  # another seed, another order
    stepless = spec(space={"cache.policy": ["lru"], "cache.ttl_s": {"float": [1, 10]}},
                    sampler="grid")
    assert refused(_grid, stepless) == (
        "space.cache.ttl_s", "the grid sampler needs choices or an int/float range with "
        "step: (no log:) for every knob; cache.ttl_s has neither")


def test_the_grid_enqueues_what_the_study_has_not_seen_up_to_the_budget():
    tuned = spec()
    study = study_of(tuned)
    grid = [{"cache.policy": "lru"}, {"cache.policy": "lfu"}, {"cache.policy": "fifo"}]
    _enqueue_grid(study, grid, budget=2)
    waiting = [t.system_attrs["fixed_params"] for t in study.trials]
    assert waiting == grid[:2]
    _enqueue_grid(study, grid, budget=3)  # the two already waiting are not enqueued again
    assert [t.system_attrs["fixed_params"] for t in study.trials] == grid
    _enqueue_grid(study, grid, budget=5)  # nothing left unseen
    assert len(study.trials) == 3
    later = study_of(tuned)
    _enqueue_grid(later, grid, budget=1)
    _enqueue_grid(later, grid, budget=2)  # room for one more beside the one seen
    assert [t.system_attrs["fixed_params"] for t in later.trials] == grid[:2]


# -------------------------------------------------------------------------------- ask
def test_an_asked_trial_gets_its_point_and_worker():
    tuned = spec()
    parts = parts_for(tuned, WHOLE_TRACE)
    study = study_of(tuned, {"cache.policy": "lfu"})
    result = TuneResult(out_dir=None)
    trial, point = _ask(study, tuned, parts, "host:1", result, None)
    assert trial.params == {"cache.policy": "lfu"} and point.run_id == "trial-0000"
    assert point.config.cache.policy == "lfu"
    frozen = study.trials[0]
    assert frozen.user_attrs == {"worker": "host:1", "run_id": "trial-0000"}
    assert frozen.state.name == "RUNNING"


def test_a_point_the_config_refuses_fails_before_running():
    """Each knob alone is valid (the spec checks that); a host tier and a shared pool
    together are not."""
    tuned = spec(space={"cache.host_capacity_tokens": [None, 1000],
                        "cache.pool.capacity_tokens": [None, 1000]})
    parts = parts_for(tuned, WHOLE_TRACE)
    study = study_of(tuned, {"cache.host_capacity_tokens": 1000,
                             "cache.pool.capacity_tokens": 1000})
    result, (seen, told) = TuneResult(out_dir=None), reports()
    assert _ask(study, tuned, parts, "host:1", result, told) is None
    frozen = study.trials[0]
    assert frozen.state.name == "FAIL" and "run_id" not in frozen.user_attrs
    assert "a shared pool and per-replica host/disk tiers together" in \
        frozen.user_attrs["error"]
    assert result.failed == {0: frozen.user_attrs["error"]}
    assert [(r.number, r.state) for r in seen] == [(0, "failed")]


def test_a_point_infeasible_by_its_config_is_pruned_unrun():
    tuned = spec(space={"cache.capacity_tokens": [10_000, 30_000]},
                 constraints=["cache.capacity_tokens <= 20000"])
    parts = parts_for(tuned, WHOLE_TRACE)
    study = study_of(tuned, {"cache.capacity_tokens": 30_000})
    result, (seen, told) = TuneResult(out_dir=None), reports()
    assert _ask(study, tuned, parts, "host:1", result, told) is None
    frozen = study.trials[0]
    assert frozen.state.name == "PRUNED"
    assert frozen.constraints == {"cache.capacity_tokens <= 20000": 10_000}
    assert frozen.user_attrs["error"] == (
        "infeasible before the run: cache.capacity_tokens <= 20000")
    assert [(r.number, r.state, r.error) for r in seen] == [(0, "pruned", None)]
    assert result.failed == {}


@pytest.mark.parametrize("ttl, pruned", [(10.0, False), (10.5, True)])
def test_a_constraint_breaks_when_its_violation_is_above_zero(ttl, pruned):
    """`cache.ttl_s <= 10`: 10 is within (violation 0), 10.5 is not (0.5); the error names
    the constraint broken, not one met at its bound."""
    tuned = spec(space={"cache.ttl_s": [10.0, 10.5]},
                 constraints=["cache.ttl_s <= 10.5", "cache.ttl_s <= 10"])
    parts = parts_for(tuned, WHOLE_TRACE)
    study = study_of(tuned, {"cache.ttl_s": ttl})
    asked = _ask(study, tuned, parts, "host:1", TuneResult(out_dir=None), None)
    frozen = study.trials[0]
    assert (asked is None) is pruned
    if pruned:
        assert frozen.user_attrs["error"] == "infeasible before the run: cache.ttl_s <= 10"
        assert frozen.constraints == {"cache.ttl_s <= 10.5": 0.0, "cache.ttl_s <= 10": 0.5}


def test_only_a_finished_trial_of_the_same_point_is_a_twin():
    """A complete trial of another point and a failed one of this point: neither is a twin,
    so the trial runs."""
    tuned = spec()
    parts = parts_for(tuned, WHOLE_TRACE)
    study = study_of(tuned)
    dist = {"cache.policy": optuna.distributions.CategoricalDistribution(["lru", "lfu"])}
    study.add_trial(optuna.trial.create_trial(params={"cache.policy": "lru"},
                                              distributions=dist, values=[0.5]))
    study.add_trial(optuna.trial.create_trial(params={"cache.policy": "lfu"},
                                              distributions=dist,
                                              state=optuna.trial.TrialState.FAIL))
    study.enqueue_trial({"cache.policy": "lfu"})
    asked = _ask(study, tuned, parts, "host:1", TuneResult(out_dir=None), None)
    assert asked is not None and asked[1].run_id == "trial-0002"
    assert "duplicate_of" not in study.trials[2].user_attrs


def test_a_repeat_of_a_finished_point_is_told_its_twins_end(tmp_path):
    tuned = spec()
    parts = parts_for(tuned, WHOLE_TRACE)
    study = study_of(tuned, {"cache.policy": "lfu"})
    first, _ = _ask(study, tuned, parts, "host:1", TuneResult(out_dir=None), None)
    tell(study, first, [0.6], {"c": -1.0})
    study.enqueue_trial({"cache.policy": "lfu"})
    result, (seen, told) = TuneResult(out_dir=None), reports()
    assert _ask(study, tuned, parts, "host:1", result, told) is None
    again = study.trials[1]
    assert again.state.name == "COMPLETE" and again.values == [0.6]
    assert again.constraints == {"c": -1.0}
    assert again.user_attrs["duplicate_of"] == 0 and "run_id" not in again.user_attrs
    assert [(r.number, r.state, r.values, r.best) for r in seen] == [
        (1, "complete", [0.6], [0.6])]


def test_a_repeat_of_a_failed_point_fails_too():
    tuned = spec()
    study = study_of(tuned)
    twin = study.ask({"cache.policy": optuna.distributions.CategoricalDistribution(
        ["lru", "lfu"])})
    study.tell(twin, state=optuna.trial.TrialState.FAIL)
    copy = study.ask()
    result, (seen, told) = TuneResult(out_dir=None), reports()
    _tell_copy(study, tuned, copy, study.trials[0], result, told)
    frozen = study.trials[1]
    error = "the point of trial 0, which did not complete"
    assert frozen.state.name == "FAIL" and frozen.user_attrs == {
        "duplicate_of": 0, "error": error}
    assert result.failed == {1: error}
    assert [(r.number, r.state, r.values, r.error) for r in seen] == [
        (1, "failed", None, error)]


# ---------------------------------------------------------------------- a run's end
def test_a_runs_end_is_told_with_its_values_and_violations(tmp_path):
    tuned = spec(constraints=["cache_peak_tokens <= 1000", "cache.capacity_tokens <= 30000"])
    parts = parts_for(tuned, WHOLE_TRACE)
    study = study_of(tuned, {"cache.policy": "lfu"})
    trial, point = _ask(study, tuned, parts, "host:1", TuneResult(out_dir=None), None)
    outcome = run_point(point, keep_requests=False)
    result, (seen, told) = TuneResult(out_dir=None), reports()
    _finish_trial(study, tuned, trial, point, outcome, result, told)
    frozen = study.trials[0]
    assert result.ran == 1 and frozen.values == [outcome.summary[HIT]]
    assert frozen.constraints == {
        "cache_peak_tokens <= 1000": outcome.summary["cache_peak_tokens"] - 1000,
        "cache.capacity_tokens <= 30000": 20_000 - 30_000}  # read from the point's config
    # infeasible (its peak is over 1,000 tokens): no best so far
    assert seen == [TrialReport(0, "complete", [outcome.summary[HIT]], None, None)]


def test_a_failed_run_and_a_missing_objective(tmp_path):
    tuned = spec()
    parts = parts_for(tuned, WHOLE_TRACE)
    study = study_of(tuned, {"cache.policy": "lfu"})
    trial, point = _ask(study, tuned, parts, "host:1", TuneResult(out_dir=None), None)
    broken = RunOutcome(run_id=point.run_id, params=point.params, status="failed",
                        error="it broke")
    result, (seen, told) = TuneResult(out_dir=None), reports()
    _finish_trial(study, tuned, trial, point, broken, result, told)
    assert study.trials[0].state.name == "FAIL" and result.failed == {0: "it broke"}
    assert study.trials[0].user_attrs["error"] == "it broke"
    assert result.ran == 1 and (seen[0].state, seen[0].error) == ("failed", "it broke")
    study.enqueue_trial({"cache.policy": "lru"})
    second, other = _ask(study, tuned, parts, "host:1", TuneResult(out_dir=None), None)
    _finish_trial(study, tuned, second, other, broken, result, None)
    assert result.ran == 2  # every run's end counts
    latency = spec(objectives={"p99_ttft_ms": "minimize"})
    study = study_of(latency, {"cache.policy": "lfu"})
    trial, point = _ask(study, latency, parts, "host:1", TuneResult(out_dir=None), None)
    with pytest.raises(InputError) as info:
        _finish_trial(study, latency, trial, point, run_point(point, keep_requests=False),
                      TuneResult(out_dir=None), None)
    assert info.value.field == "objectives"
    assert info.value.message.startswith("objective p99_ttft_ms is None in this run's summary")
    assert study.trials[0].state.name == "FAIL"
    assert study.trials[0].user_attrs["error"] == info.value.message


# ------------------------------------------------------------------------ best so far
def test_the_best_so_far_counts_feasible_complete_trials_of_one_objective():
    tuned = spec()
    study = study_of(tuned)
    assert best_so_far(study, tuned) is None
    dist = {"cache.policy": optuna.distributions.CategoricalDistribution(["lru", "lfu"])}
    for value, violation in ((0.5, 0.0), (0.9, 1.0), (0.7, -2.0)):
        study.add_trial(optuna.trial.create_trial(
            params={"cache.policy": "lru"}, distributions=dist, values=[value],
            constraints={"c": violation}))
    assert best_so_far(study, tuned) == [0.7]  # 0.9 breaks its constraint
    lower = spec(objectives={HIT: "minimize"})
    assert best_so_far(study, lower) == [0.5]
    two = spec(objectives={HIT: "maximize", "cache_peak_tokens": "minimize"})
    assert best_so_far(study, two) is None


# ---------------------------------------------------------------------------- recover
def test_a_stale_trial_is_recovered_from_a_complete_run_folder(tmp_path):
    tuned = spec(constraints=["cache_peak_tokens <= 1000", "cache.capacity_tokens <= 1"])
    parts = parts_for(tuned, WHOLE_TRACE)
    point = trial_point(tuned, parts.train, {"cache.policy": "lfu"}, 4)
    outcome = run_point(point, keep_requests=False)
    write_run(tmp_path, outcome)

    def frozen(**attrs):
        return optuna.trial.create_trial(state=optuna.trial.TrialState.RUNNING,
                                         user_attrs=attrs)

    values, violations = _recover(tmp_path, tuned, parts, frozen(run_id=point.run_id))
    assert values == [outcome.summary[HIT]]
    assert violations == {"cache_peak_tokens <= 1000": outcome.summary["cache_peak_tokens"]
                          - 1000, "cache.capacity_tokens <= 1": 20_000 - 1}
    assert _recover(tmp_path, tuned, parts, frozen()) is None  # it never got a run id
    assert _recover(tmp_path, tuned, parts, frozen(run_id="trial-0009")) is None  # no folder
    latency = spec(objectives={"p99_ttft_ms": "minimize"})  # the summary lacks it
    assert _recover(tmp_path, latency, parts, frozen(run_id=point.run_id)) is None
    folder = tmp_path / "runs" / point.run_id
    (folder / "config.yaml").unlink()
    assert _recover(tmp_path, tuned, parts, frozen(run_id=point.run_id)) is None
    (folder / "config.yaml").write_text(yaml.safe_dump({}))
    (folder / "summary.json").unlink()
    assert _recover(tmp_path, tuned, parts, frozen(run_id=point.run_id)) is None
