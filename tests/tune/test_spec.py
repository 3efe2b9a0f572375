"""Tune specs: knobs, conditions, grids, constraints, and bad specs as one-line errors that
write nothing (through `prefixsim tune`, exit code 2)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from prefixsim.cli import app
from prefixsim.errors import InputError
from prefixsim.tune import grid_points, parse_tune_spec, suggest
from prefixsim.tune.constraints import parse_constraint

DEMO = str(Path(__file__).resolve().parents[2] / "traces" / "demo_chat.jsonl")
BASE = {"trace": {"path": DEMO}, "cache_only": True}
SPACE = {"cache.policy": ["lru", "s3fifo"],
         "cache.capacity_tokens": {"int": [1000, 9000], "step": 4000},
         "cache.policy_params.small_fraction": {"float": [0.1, 0.3], "step": 0.1,
                                                "when": {"cache.policy": "s3fifo"}}}


def spec_of(**changes):
    data = {"base": BASE, "space": SPACE, "objectives": {"cache_token_hit_rate": "max"},
            "trials": 4, **changes}
    return parse_tune_spec(data)


def test_a_spec_parses_into_knobs_objectives_and_a_seeded_sampler():
    spec = spec_of(sampler="random")
    assert [k.key for k in spec.knobs] == list(SPACE)
    assert spec.knobs[1].kind == "int" and (spec.knobs[1].low, spec.knobs[1].high) == (1000, 9000)
    assert spec.knobs[2].when == {"cache.policy": ("s3fifo",)}
    assert [(o.key, o.direction) for o in spec.objectives] == [("cache_token_hit_rate",
                                                                 "maximize")]
    assert (spec.sampler.name, spec.sampler.seed) == ("random", 0)


def test_a_ranges_bounds_and_step_take_the_keys_unit():
    """As config values do: `{int: [1k, 9k], step: 4k}` for a token count, `{float:
    [30s, 5m]}` for a TTL (it was refused as 'expected int: [low, high] with integers');
    a unit a key does not name, or text that is no quantity, is still refused."""
    spec = spec_of(space={"cache.capacity_tokens": {"int": ["1k", "9k"], "step": "4k"},
                          "cache.ttl_s": {"float": ["30s", "5m"], "log": True}})
    tokens, ttl = spec.knobs
    assert (tokens.low, tokens.high, tokens.step) == (1000, 9000, 4000)
    assert (ttl.low, ttl.high, ttl.log) == (30.0, 300.0, True)
    assert [p["cache.capacity_tokens"] for p in grid_points(spec_of(
        space={"cache.capacity_tokens": {"int": ["1k", "9k"], "step": "4k"}}).knobs)] == \
        [1000, 5000, 9000]
    for bad in ({"cache.capacity_tokens": {"int": ["1.0005k", "9k"]}},  # not a whole number
                {"cache.capacity_tokens": {"int": ["1 lot", "9k"]}},
                {"engine.replicas": {"int": ["1k", "2k"]}}):  # replicas name no unit
        with pytest.raises(InputError, match="expected int: \\[low, high\\] with integers"):
            spec_of(space=bad)


def test_the_grid_expands_conditional_knobs_only_where_active():
    """lru x 3 capacities (no small_fraction) + s3fifo x 3 capacities x 3 fractions = 12,
    all distinct."""
    points = grid_points(spec_of().knobs)
    assert len(points) == 3 + 9
    assert len({tuple(sorted(p.items())) for p in points}) == 12
    assert {"cache.policy": "lru", "cache.capacity_tokens": 5000} in points
    assert {"cache.policy": "s3fifo", "cache.capacity_tokens": 9000,
            "cache.policy_params.small_fraction": 0.3} in points
    assert all(("cache.policy_params.small_fraction" in p) == (p["cache.policy"] == "s3fifo")
               for p in points)


class Scripted:
    """A stand-in trial that answers each suggest_* with a scripted value."""

    def __init__(self, answers):
        self.answers, self.asked = answers, []

    def suggest_categorical(self, name, choices):
        self.asked.append(name)
        return self.answers[name]

    suggest_int = suggest_float = lambda self, name, low, high, step=None, log=False: (
        self.asked.append(name) or self.answers[name])


def test_a_conditional_knob_is_asked_only_under_its_condition():
    knobs = spec_of().knobs
    lru = Scripted({"cache.policy": "lru", "cache.capacity_tokens": 5000})
    assert suggest(lru, knobs) == {"cache.policy": "lru", "cache.capacity_tokens": 5000}
    assert lru.asked == ["cache.policy", "cache.capacity_tokens"]
    s3 = Scripted({"cache.policy": "s3fifo", "cache.capacity_tokens": 1000,
                   "cache.policy_params.small_fraction": 0.2})
    assert suggest(s3, knobs)["cache.policy_params.small_fraction"] == 0.2


def test_constraints_known_answers():
    """capacity 30000 + host 20000 = 50000 against <= 40000: violation +10000; against
    >= 60000: +10000; a summary key reads the summary; a null value is infinitely off."""
    def error(message, field):
        return InputError(message, field=field)

    budget = parse_constraint("cache.capacity_tokens + cache.host_capacity_tokens <= 40000",
                              "c", error)
    floor = parse_constraint("cache.capacity_tokens+cache.host_capacity_tokens >= 6e4", "c",
                             error)
    config = {"cache": {"capacity_tokens": 30000, "host_capacity_tokens": 20000}}
    assert budget.before_run and budget.violation(config, None) == 10000
    assert floor.violation(config, None) == 10000
    latency = parse_constraint("p99_ttft_ms <= 2000", "c", error)
    assert not latency.before_run
    assert latency.violation(config, {"p99_ttft_ms": 1500.0}) == -500
    assert latency.violation(config, {}) == float("inf")
    assert budget.violation({"cache": {"capacity_tokens": None}}, None) == float("inf")


BAD_SPECS = {
    "unknown top-level key": ({"trails": 3}, "trails", "unknown key"),
    "unknown knob option": ({"space": {"cache.ttl_s": {"float": [1, 2], "lg": True}}},
                            "space.cache.ttl_s", "unknown option 'lg'"),
    "unknown config key": ({"space": {"cache.polcy": ["lru"]}}, "space.cache.polcy",
                           "unknown key"),
    "empty range": ({"space": {"cache.ttl_s": {"float": [60, 10]}}}, "space.cache.ttl_s",
                    "empty range"),
    "empty choices": ({"space": {"cache.policy": []}}, "space.cache.policy", "empty range"),
    "bad choice": ({"space": {"cache.policy": ["lru", "lur"]}}, "space.cache.policy",
                   "unknown eviction policy 'lur'"),
    "log of zero": ({"space": {"cache.ttl_s": {"float": [0, 10], "log": True}}},
                    "space.cache.ttl_s", "needs low > 0"),
    "param without its policy": (
        {"space": {"cache.policy_params.small_fraction": {"float": [0.1, 0.2]}}},
        "space.cache.policy_params.small_fraction", "lru has no parameter"),
    "condition on a later knob": (
        {"space": {"cache.ttl_s": {"float": [1, 2], "when": {"cache.policy": "lru"}},
                   "cache.policy": ["lru"]}}, "space.cache.ttl_s", "not a categorical knob"),
    "unknown objective": ({"objectives": {"cache_hitrate": "max"}}, "objectives.cache_hitrate",
                          "unknown objective"),
    "bad direction": ({"objectives": {"cache_token_hit_rate": "up"}},
                      "objectives.cache_token_hit_rate", "maximize or minimize"),
    "unknown sampler": ({"sampler": "bayes"}, "sampler", "unknown sampler 'bayes'"),
    "cmaes with two objectives": (
        {"sampler": "cmaes", "objectives": {"cache_token_hit_rate": "max",
                                            "cache_evictions": "min"}}, "sampler",
        "one objective"),
    "malformed constraint": ({"constraints": ["cache.capacity_tokens < 5"]}, "constraints.0",
                             "expected 'KEY"),
    "unknown constraint key": ({"constraints": ["cache.capacity_tokns <= 5"]}, "constraints.0",
                               "not a config key"),
    "zero trials": ({"trials": 0}, "trials", "integer >= 1"),
}


@pytest.mark.parametrize("name", BAD_SPECS)
def test_a_bad_spec_is_one_line_exit_2_and_nothing_written(name, tmp_path, monkeypatch):
    changes, field, message = BAD_SPECS[name]
    data = {"base": BASE, "space": {"cache.policy": ["lru", "s3fifo"]},
            "objectives": {"cache_token_hit_rate": "maximize"}, "trials": 3, **changes}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["tune", "spec.yaml", "-o", "out"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert lines[0].startswith("prefixsim: error: spec.yaml:")  # file and line
    assert f" {field}: " in lines[0] and message in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]


def test_a_missing_trace_or_bad_split_writes_nothing(tmp_path, monkeypatch):
    path = tmp_path / "spec.yaml"
    data = {"base": {"trace": {"path": "missing.jsonl"}, "cache_only": True},
            "space": {"cache.policy": ["lru"]}, "objectives": {"cache_token_hit_rate": "max"}}
    path.write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    missing = CliRunner().invoke(app, ["tune", "spec.yaml", "-o", "out"])
    assert missing.exit_code == 2 and "missing.jsonl: trace.path: no such file" in missing.stderr
    data["base"]["trace"]["path"] = DEMO
    path.write_text(yaml.safe_dump(data))
    for split in ("time:1.5", "size:0.5"):
        bad = CliRunner().invoke(app, ["tune", "spec.yaml", "-o", "out", "--split", split])
        assert bad.exit_code == 2 and "--split" in bad.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]


@pytest.mark.parametrize("storage", ["foo://bar", "sqlite:////nonexistent/dir/x.db",
                                     "journal:/nonexistent/dir/journal.log"])
def test_a_bad_storage_is_refused_before_the_folder_is_made(storage, tmp_path, monkeypatch):
    """A --storage that cannot be opened left out/ holding spec.yaml and sweep.json (and a
    journal in a missing folder was an OSError, exit 1)."""
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"base": BASE, "space": {"cache.policy": ["lru"]},
                                    "objectives": {"cache_token_hit_rate": "max"}}))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["tune", "spec.yaml", "-o", "out", "--storage", storage])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("prefixsim: error: --storage: "), lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]


@pytest.mark.parametrize("held_out", ["empty", "bad line"])
def test_a_held_out_trace_that_does_not_read_is_refused_before_any_trial(held_out, tmp_path,
                                                                         monkeypatch):
    """--test with an empty file or a malformed line: the trials ran, the held-out re-run
    failed, and the tune exited 0 with `"test": null`; now one line, exit 2, nothing
    written (the trace checked as a capacity search checks its own)."""
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"base": BASE, "space": {"cache.policy": ["lru"]},
                                    "objectives": {"cache_token_hit_rate": "max"},
                                    "trials": 2}))
    test = tmp_path / "test.jsonl"
    first = Path(DEMO).read_text().splitlines()[0]
    test.write_text("" if held_out == "empty" else
                    first + "\n" + first.replace('"input_length": ', '"input_length": "x", '
                                                  '"was": ') + "\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["tune", "spec.yaml", "-o", "out", "--train", DEMO,
                                      "--test", "test.jsonl", "-j", "1"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("prefixsim: error: "), lines
    assert str(test) + (": cannot detect" if held_out == "empty" else ":2: input_length") \
        in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml", "test.jsonl"]


def test_without_optuna_a_tune_says_how_to_install_it(tmp_path, monkeypatch):
    """Optuna is an optional extra: with it missing, `prefixsim tune` is one line naming the
    extra, exit 2, nothing written (and the rest of the CLI still loads)."""
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"base": BASE, "space": {"cache.policy": ["lru"]},
                                    "objectives": {"cache_token_hit_rate": "max"}}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "optuna", None)
    result = CliRunner().invoke(app, ["tune", "spec.yaml", "-o", "out"])
    assert result.exit_code == 2
    assert "pip install 'prefixsim[tune]'" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]
    assert CliRunner().invoke(app, ["--help"]).exit_code == 0


def test_an_objective_the_runs_lack_stops_the_tune(tmp_path, monkeypatch):
    """p99_ttft_ms is a summary key, but a cache-only run has none: the first trial stops
    the tune with one line naming the objective, exit 2 (the trial is recorded failed)."""
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"base": BASE, "space": {"cache.policy": ["lru"]},
                                    "objectives": {"p99_ttft_ms": "minimize"}, "trials": 5}))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["tune", "spec.yaml", "-o", "out", "-j", "1"])
    assert result.exit_code == 2
    assert "objectives: objective p99_ttft_ms is None" in result.stderr
    assert "cache-only run has no latencies" in result.stderr
