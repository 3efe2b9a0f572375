"""A tune's tables by hand (prefixsim/tune/store.py): trials.parquet's rows from the trials
Optuna keeps (states, feasibility, violations, parameters, timing), mixed columns as text,
the best trial(s) of one and of several objectives, the Pareto table, best.yaml's header and
tune.json read back."""

from __future__ import annotations

import datetime
import json
from types import SimpleNamespace

import pandas as pd
import pytest
from cli_helpers import DEMO

from prefixsim.tune import parse_tune_spec
from prefixsim.tune.spec import Objective
from prefixsim.tune.store import (
    _dominates,
    _text_where_mixed,
    best_trials,
    read_tune_meta,
    trials_frame,
    write_best,
    write_summary,
    write_tables,
)

SPEC = parse_tune_spec({
    "name": "t", "base": {"trace": {"path": str(DEMO)}, "cache_only": True},
    "space": {"cache.policy": ["lru", "s3fifo"], "cache.ttl_s": {"float": [1, 600]}},
    "objectives": {"cache_token_hit_rate": "maximize"},
    "constraints": ["cache_peak_tokens <= 9216", "cache_evictions <= 10"], "trials": 2})
PEAK, EVICTIONS = (c.text for c in SPEC.constraints)
MAX = Objective("hit", "maximize")
MIN = Objective("cost", "minimize")


def trial(number, state="COMPLETE", values=(0.5,), constraints=None, params=None,
          attrs=None, seconds=None):
    """The part of an Optuna FrozenTrial that trials_frame reads."""
    return SimpleNamespace(
        number=number, state=SimpleNamespace(name=state),
        values=None if values is None else list(values),
        constraints={PEAK: 0.0, EVICTIONS: -1.0} if constraints is None else constraints,
        params=params or {}, user_attrs=attrs or {},
        duration=None if seconds is None else datetime.timedelta(seconds=seconds))


# ---------------------------------------------------------------------------- trials
def test_a_trials_row_by_hand():
    frame = trials_frame([trial(3, values=(0.75,), constraints={PEAK: 12.0},
                                params={"cache.policy": "lru", "cache.ttl_s": 30.0},
                                attrs={"run_id": "trial-0003", "worker": "host:7"},
                                seconds=2.5)], SPEC)
    assert frame.to_dict("records") == [{
        "trial": 3, "state": "complete", "feasible": False, "cache_token_hit_rate": 0.75,
        "violation_0": 12.0, "violation_1": None, "cache_policy": "lru", "cache_ttl_s": 30.0,
        "run_id": "trial-0003", "duplicate_of": None, "worker": "host:7", "error": None,
        "duration_s": 2.5}]


def test_a_repeated_and_a_failed_trial_say_so():
    rows = trials_frame([trial(4, attrs={"duplicate_of": 2, "run_id": "trial-0002"}),
                         trial(5, state="FAIL", values=None, attrs={"error": "it broke"})], SPEC)
    assert rows["duplicate_of"][0] == 2 and pd.isna(rows["duplicate_of"][1])
    assert pd.isna(rows["error"][0]) and rows["error"][1] == "it broke"


@pytest.mark.parametrize("state, shown, feasible", [
    ("COMPLETE", "complete", True), ("PRUNED", "pruned", True), ("FAIL", "failed", None),
    ("RUNNING", "running", None), ("WAITING", "waiting", None), ("NEW", "new", None),
])
def test_states_and_whether_a_trial_is_feasible(state, shown, feasible):
    row = trials_frame([trial(0, state=state, values=None)], SPEC).iloc[0]
    assert row["state"] == shown
    assert row["feasible"] is feasible or row["feasible"] == feasible
    assert row["cache_token_hit_rate"] is None and row["duration_s"] is None


def test_feasible_needs_every_violation_at_most_zero():
    rows = trials_frame([trial(0, constraints={PEAK: 0.0, EVICTIONS: 0.0}),
                         trial(1, constraints={PEAK: 0.0, EVICTIONS: 1e-9}),
                         trial(2, constraints={})], SPEC)
    assert rows["feasible"].tolist() == [True, False, True]


def test_rows_in_trial_number_order():
    assert trials_frame([trial(2), trial(0), trial(1)], SPEC)["trial"].tolist() == [0, 1, 2]


def test_a_column_of_mixed_kinds_is_text():
    frame = pd.DataFrame({"n": [1, 2.5, None], "mixed": [1, "a", None],
                          "flag": [True, 1, float("nan")], "same": ["a", "b", None]})
    shown = _text_where_mixed(frame)
    assert shown["n"].tolist()[:2] == [1, 2.5]  # int and float: numbers
    assert shown["mixed"].tolist()[:2] == ["1", "a"] and pd.isna(shown["mixed"][2])
    assert shown["flag"].tolist()[:2] == ["True", "1"]  # a bool among numbers: text
    assert pd.isna(shown["flag"][2])  # a missing value stays missing, not the text "nan"
    assert shown["same"].tolist()[:2] == ["a", "b"] and pd.isna(shown["same"][2])
    held = _text_where_mixed(pd.DataFrame({"ints": pd.Series([1, None], dtype=object),
                                           "both": pd.Series([1, 2.5], dtype=object)}))
    assert held["ints"].tolist() == [1, None]  # a missing value is not a kind of its own
    assert held["both"].tolist() == [1, 2.5]  # ints and floats together stay numbers


# ------------------------------------------------------------------------------ best
def frame(rows):
    return pd.DataFrame([{"trial": n, "state": s, "feasible": f, "hit": h, "cost": c,
                          "duplicate_of": d} for n, s, f, h, c, d in rows])


def test_the_best_of_one_objective_lowest_number_on_a_tie():
    rows = frame([(0, "complete", True, 0.5, 1.0, None), (1, "complete", True, 0.7, 1.0, None),
                  (2, "complete", True, 0.7, 1.0, None), (3, "complete", False, 0.9, 1.0, None),
                  (4, "failed", None, 0.95, 1.0, None), (5, "complete", True, 0.99, 1.0, 2)])
    assert best_trials(rows, [MAX]) == [1]  # 3 infeasible, 4 failed, 5 a repeat of 2
    assert best_trials(rows, [Objective("hit", "minimize")]) == [0]
    assert best_trials(rows.drop(columns="duplicate_of"), [MAX]) == [5]
    assert best_trials(rows[rows["trial"] >= 3], [MAX]) == []  # nothing feasible and complete
    assert best_trials(pd.DataFrame(), [MAX]) == []


def test_the_pareto_front_of_two_objectives_by_the_first():
    """Hit up, cost down: 0 (0.5, 1) and 1 (0.7, 2) and 3 (0.9, 5) trade off; 2 (0.6, 3) is
    beaten by 1; 4 equals 1 (neither dominates the other: both on the front)."""
    rows = frame([(0, "complete", True, 0.5, 1.0, None), (1, "complete", True, 0.7, 2.0, None),
                  (2, "complete", True, 0.6, 3.0, None), (3, "complete", True, 0.9, 5.0, None),
                  (4, "complete", True, 0.7, 2.0, None)])
    assert best_trials(rows, [MAX, MIN]) == [3, 1, 4, 0]  # hit high to low, then number
    assert best_trials(rows, [MIN, MAX]) == [0, 1, 4, 3]  # cost low to high


def test_the_front_is_ordered_by_the_first_objective_then_the_trial():
    """Three trade-offs: by the first objective, whichever direction; equal trials (4 and 1,
    listed in that order) by their numbers."""
    rows = frame([(0, "complete", True, 0.5, 3.0, None), (1, "complete", True, 0.7, 2.0, None),
                  (2, "complete", True, 0.9, 1.0, None)])
    up = Objective("cost", "maximize")
    assert best_trials(rows, [MAX, up]) == [2, 1, 0]
    assert best_trials(rows, [Objective("hit", "minimize"), MIN]) == [0, 1, 2]
    ties = frame([(4, "complete", True, 0.7, 2.0, None), (1, "complete", True, 0.7, 2.0, None)])
    assert best_trials(ties, [MAX, MIN]) == [1, 4]


def test_domination_by_hand():
    assert _dominates([0.7, 2.0], [0.6, 3.0], [MAX, MIN])
    assert _dominates([0.7, 3.0], [0.6, 3.0], [MAX, MIN])  # better in one, equal in the other
    assert not _dominates([0.7, 2.0], [0.7, 2.0], [MAX, MIN])  # equal: no
    assert not _dominates([0.9, 5.0], [0.5, 1.0], [MAX, MIN])  # a trade-off: no
    assert not _dominates([0.5, 1.0], [0.9, 5.0], [MAX, MIN])


# ----------------------------------------------------------------------------- files
def test_a_pareto_table_only_for_several_objectives(tmp_path):
    rows = trials_frame([trial(0, values=(0.5,)), trial(1, values=(0.7,))], SPEC)
    write_tables(tmp_path, rows, SPEC, [], {})
    assert not (tmp_path / "pareto.parquet").exists()
    assert pd.read_parquet(tmp_path / "trials.parquet")["trial"].tolist() == [0, 1]
    meta = {"kind": "tune", "name": "t", "swept_keys": ["cache.policy", "cache.ttl_s"],
            "swept_columns": ["cache_policy", "cache_ttl_s"], "run_ids": []}
    assert (tmp_path / "sweep.json").read_text() == json.dumps(meta, indent=2) + "\n"
    two = parse_tune_spec({**json.loads(json.dumps({"base": SPEC.base})), "name": "t",
                           "space": {"cache.ttl_s": {"float": [1, 600]}},
                           "objectives": {"cache_token_hit_rate": "maximize",
                                          "cache_peak_tokens": "minimize"}})
    rows = trials_frame([trial(0, values=(0.5, 10.0)), trial(1, values=(0.7, 20.0)),
                         trial(2, values=(0.4, 30.0))], two)
    write_tables(tmp_path, rows, two, [], {})
    front = pd.read_parquet(tmp_path / "pareto.parquet")
    assert front["trial"].tolist() == [1, 0]  # 2 is dominated by 0


def test_best_yaml_has_its_header_as_comments_and_tune_json_reads_back(tmp_path):
    write_best(tmp_path, "cache:\n  policy: lru\n", "best trial 3\nprefixsim run --config")
    assert (tmp_path / "best.yaml").read_text() == (
        "# best trial 3\n# prefixsim run --config\ncache:\n  policy: lru\n")
    assert read_tune_meta(tmp_path) is None  # no tune.json yet
    write_summary(tmp_path, {"kind": "tune", "when": datetime.date(2026, 12, 7)})
    assert (tmp_path / "tune.json").read_text() == (
        '{\n  "kind": "tune",\n  "when": "2026-12-07"\n}\n')
    assert read_tune_meta(tmp_path) == {"kind": "tune", "when": "2026-12-07"}
    (tmp_path / "tune.json").write_text("{not json")
    assert read_tune_meta(tmp_path) is None
