"""Train/test parts of a tune by hand (prefixsim/tune/heldout.py): every refusal of
`--split`, `--train` and `--test` word for word with its field, the parts' windows, traces
and labels, the traces checked before anything runs, what the best keeps on the held-out
part, and whether a run meets the constraints."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_helpers import DEMO
from fakes import refusal

from prefixsim.errors import InputError
from prefixsim.sweep.spec import make_point
from prefixsim.tune import PartOptions, parse_tune_spec, parts_for
from prefixsim.tune.heldout import (
    WHOLE_TRACE,
    _base_points,
    _feasible,
    _retained,
    check_traces,
    trial_point,
)

SPEC = {"name": "t", "base": {"trace": {"path": str(DEMO)}, "cache_only": True},
        "space": {"cache.ttl_s": {"float": [1, 600], "log": True}},
        "objectives": {"cache_token_hit_rate": "maximize", "cost_total_usd": "minimize"},
        "constraints": ["cache_peak_tokens <= 9216"], "trials": 2}


def spec(**base):
    return parse_tune_spec({**SPEC, "base": {**SPEC["base"], **base}})


def split(options: PartOptions, of=None) -> InputError:
    with pytest.raises(InputError) as info:
        parts_for(of or spec(), options)
    return info.value


# ------------------------------------------------------------------------------ --split
@pytest.mark.parametrize("value", ["time:0", "time:1", "time:-0.5", "time:1.5", "time:x",
                                   "time:", "time", "rows:0.5", "Time:0.5", ""])
def test_a_bad_split_is_refused_word_for_word(value):
    error = split(PartOptions(split=value))
    assert (error.field, error.message) == (
        "--split", f"expected time:F with 0 < F < 1, got {value!r}")


@pytest.mark.parametrize("fraction", [0.5, 0.001, 0.999])
def test_a_split_parts_the_span_at_its_fraction(fraction):
    parts = parts_for(spec(), PartOptions(split=f"time:{fraction}"))
    assert parts.label == f"time:{fraction}" and parts.tuned_on == "train"
    assert parts.train.base["trace"]["time_window"] == [0.0, fraction]
    assert parts.test.base["trace"]["time_window"] == [fraction, 1.0]
    assert parts.train.base["trace"]["path"] == str(DEMO)  # the rest of the base kept
    assert "time_window" not in spec().base["trace"]  # the spec itself untouched


def test_a_split_and_traces_exclude_each_other_and_a_window_in_the_base():
    for options in (PartOptions(split="time:0.5", train="a"),
                    PartOptions(split="time:0.5", test="b")):
        error = split(options)
        assert (error.field, error.message) == (
            "--split", "give --split or --train/--test, not both")
    error = split(PartOptions(split="time:0.5"),
                  spec(trace={"path": str(DEMO), "time_window": [0, 0.5]}))
    assert (error.field, error.message) == (
        "--split", "the base sets trace.time_window; --split sets it per part")


# ---------------------------------------------------------------------- --train / --test
def test_no_option_tunes_on_the_whole_trace():
    tuned = spec()
    parts = parts_for(tuned, WHOLE_TRACE)
    assert (parts.label, parts.train, parts.test, parts.tuned_on) == (None, tuned, None, "all")


def test_train_and_test_traces_by_their_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("a.jsonl").write_text("x")
    Path("b.jsonl").write_text("x")
    parts = parts_for(spec(), PartOptions(train="a.jsonl", test="b.jsonl"))
    assert parts.label == "traces:a.jsonl:b.jsonl" and parts.tuned_on == "train"
    assert parts.train.base["trace"]["path"] == os.path.abspath("a.jsonl")
    assert parts.test.base["trace"]["path"] == os.path.abspath("b.jsonl")
    alone = parts_for(spec(), PartOptions(test="b.jsonl"))  # tuned on the spec's own trace
    assert alone.label == "traces:(spec):b.jsonl"
    assert alone.train.base["trace"]["path"] == str(DEMO)
    assert alone.test.base["trace"]["path"] == os.path.abspath("b.jsonl")


def test_a_missing_part_trace_is_refused_with_its_option(tmp_path):
    there = tmp_path / "a.jsonl"
    there.write_text("x")
    gone = str(tmp_path / "gone.jsonl")
    for options, field, file in [(PartOptions(train=gone, test=str(there)), "--train", gone),
                                 (PartOptions(train=str(there), test=gone), "--test", gone),
                                 (PartOptions(test=str(tmp_path)), "--test", str(tmp_path))]:
        error = split(options)
        assert (error.field, error.file, error.message) == (field, file, "no such file")
    error = split(PartOptions(train=str(there)))
    assert (error.field, error.message) == ("--test", "--train needs --test (the held-out trace)")


# ------------------------------------------------------------------- traces read first
def test_every_parts_trace_is_checked_before_anything_runs(tmp_path):
    check_traces(parts_for(spec(), WHOLE_TRACE))  # the demo reads through
    gone = tmp_path / "gone.jsonl"
    assert refusal(check_traces, parts_for(spec(trace={"path": str(gone)}), WHOLE_TRACE)) == (
        f"{gone}: trace.path: no such file")
    assert refusal(check_traces, parts_for(spec(trace={}), WHOLE_TRACE)) == (
        "base.trace.path: no trace given")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0}\n')
    held = parts_for(spec(), PartOptions(test=str(bad)))  # the held-out part's too
    assert str(bad) in refusal(check_traces, held)


# --------------------------------------------------------------------------- retained
BASE = {"train": {"cache_token_hit_rate": 0.4, "cost_total_usd": 10.0},
        "test": {"cache_token_hit_rate": 0.3, "cost_total_usd": 9.0}}
TRAIN = {"cache_token_hit_rate": 0.6, "cost_total_usd": 8.0}
TEST = {"cache_token_hit_rate": 0.25, "cost_total_usd": 9.5}


def test_retained_by_hand():
    """Hit rate +0.2 on train, -0.05 on test: -25% kept (the gain turned into a loss); cost
    -2 on train, +0.5 on test: -25% as well."""
    assert _retained(spec(), TRAIN, TEST, BASE) == pytest.approx(
        {"cache_token_hit_rate": -0.25, "cost_total_usd": -0.25})
    same = {"cache_token_hit_rate": 0.4, "cost_total_usd": 10.0}  # no gain: nothing to keep
    assert _retained(spec(), same, TEST, BASE) == {"cache_token_hit_rate": None,
                                                   "cost_total_usd": None}


@pytest.mark.parametrize("train, test, base", [
    (None, TEST, BASE), (TRAIN, None, BASE), (TRAIN, TEST, {"test": BASE["test"]}),
    (TRAIN, TEST, {"train": BASE["train"]}), (TRAIN, TEST, {**BASE, "test": None}),
    (TRAIN, TEST, {**BASE, "train": None}),
])
def test_retained_needs_all_four_figures(train, test, base):
    assert _retained(spec(), train, test, base) == {}


# --------------------------------------------------------------------------- feasible
def test_a_run_is_feasible_when_every_constraint_holds():
    tuned = spec()
    point = make_point(tuned.base, {}, None, tuned.root)
    assert _feasible(tuned, point, {"cache_peak_tokens": 9216})  # at the bound
    assert not _feasible(tuned, point, {"cache_peak_tokens": 9217})
    none = parse_tune_spec({**SPEC, "constraints": []})
    assert _feasible(none, point, {})


def test_points_read_a_relative_trace_from_the_specs_folder(tmp_path, monkeypatch):
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "t.jsonl").write_bytes(DEMO.read_bytes())
    monkeypatch.chdir(tmp_path)  # not the spec's folder
    relative = parse_tune_spec({**SPEC, "base": {"trace": {"path": "t.jsonl"},
                                                 "cache_only": True}}, root=folder)
    parts = parts_for(relative, PartOptions(split="time:0.5"))
    point = trial_point(relative, parts.train, {"cache.policy": "lru"}, 3)
    assert point.run_id == "trial-0003" and point.config.trace.path == folder / "t.jsonl"
    assert trial_point(relative, parts.test, {}, 12, "-test").run_id == "trial-0012-test"
    bases = _base_points(parts)
    assert {p: (b.run_id, b.config.trace.path) for p, b in bases.items()} == {
        "train": ("base-train", folder / "t.jsonl"), "test": ("base-test", folder / "t.jsonl")}
    whole = _base_points(parts_for(relative, WHOLE_TRACE))
    assert {p: (b.run_id, b.config.trace.path) for p, b in whole.items()} == {
        "all": ("base", folder / "t.jsonl")}


def test_a_constraint_over_config_keys_judges_the_points_config():
    budget = parse_tune_spec({**SPEC, "constraints": ["cache.capacity_tokens <= 1000"]})
    small = make_point({**budget.base, "cache": {"capacity_tokens": 1000}}, {})
    large = make_point({**budget.base, "cache": {"capacity_tokens": 1001}}, {})
    assert _feasible(budget, small, {}) and not _feasible(budget, large, {})
