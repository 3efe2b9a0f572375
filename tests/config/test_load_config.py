"""The `load:` section (config/load.py; docs/load.md): defaults, the keys each type reads,
and bad input refused in one line naming the dotted key (docs/input-rules.md I1, I8),
from the config and from `prefixsim run` (exit 2, nothing written)."""

from __future__ import annotations

import pytest

from prefixsim.config import build_config
from prefixsim.errors import InputError
from tests.cli_helpers import DEMO, invoke, one_line_error


def test_default_is_the_trace_unscaled():
    load = build_config({}).load
    assert (load.type, load.rate_scale, load.rate, load.users, load.think_time_s, load.seed,
            load.stages) == ("trace", 1.0, None, None, None, 0, None)
    assert not load.closed_loop


@pytest.mark.parametrize("keys", [
    {"type": "poisson", "rate": 2.5, "seed": 3},
    {"type": "constant", "stages": [{"rate": 1, "duration_s": 5}]},
    {"type": "concurrency", "users": 4, "think_time_s": 0.5},
    {"type": "sessions"},
    {"type": "sessions", "users": 2, "stages": None},
    {"type": "concurrency", "stages": [{"users": 2, "duration_s": 5},
                                       {"users": 8, "duration_s": 5}]},
    {"rate_scale": 0.5},
])
def test_good_loads(keys):
    assert build_config({"load": keys}).load.type == keys.get("type", "trace")


@pytest.mark.parametrize(("keys", "field", "text"), [
    ({"type": "concurrency", "users": 0}, "load.users", "must be >= 1, got 0"),
    ({"type": "concurrency", "users": 2, "think_time_s": -1}, "load.think_time_s",
     "must be >= 0, got -1"),
    ({"type": "poisson", "rate": -2}, "load.rate", "must be > 0, got -2"),
    ({"type": "poisson", "rate": 0}, "load.rate", "must be > 0, got 0"),
    ({"rate_scale": 0}, "load.rate_scale", "must be > 0, got 0"),
    ({"type": "poisson"}, "load.rate", "needs load.rate"),
    ({"type": "concurrency"}, "load.users", "needs load.users"),
    ({"rate": 3}, "load.rate", "not trace"),
    ({"type": "poisson", "rate": 1, "users": 3}, "load.users", "not poisson"),
    ({"think_time_s": 1}, "load.think_time_s", "not trace"),
    ({"type": "constant", "rate": 1, "rate_scale": 2}, "load.rate_scale", "only the trace"),
    ({"stages": [{"rate": 1, "duration_s": 1}]}, "load.stages", "trace's own times"),
    ({"type": "constant", "stages": [{"users": 1, "duration_s": 1}]}, "load.stages",
     "stage 0"),
    ({"type": "constant", "stages": [{"rate": 1, "users": 1, "duration_s": 1}]},
     "load.stages.0", "either rate or users"),
    ({"type": "constant", "stages": [{"rate": 1, "duration_s": 0}]},
     "load.stages.0.duration_s", "must be > 0, got 0"),
    ({"type": "constant", "stages": []}, "load.stages", "at least one"),
    ({"type": "poisson", "rate": "3"}, "load.rate", "expected a number"),
    ({"type": "uniform"}, "load.type", "poisson"),
    ({"type": "poisson", "rate": 1, "burst": 2}, "load.burst", "unknown key"),
])
def test_bad_loads_name_the_key(keys, field, text):
    with pytest.raises(InputError) as caught:
        build_config({"load": keys})
    assert caught.value.field == field and text in caught.value.message
    assert "\n" not in str(caught.value)


def test_a_rate_for_the_trace_load_points_to_its_scale():
    """`--rate 5` on the trace's own arrivals (what a newcomer tries to replay it faster)
    names the rate multiplier; a user count on it does not."""
    with pytest.raises(InputError) as caught:
        build_config({"load": {"rate": 5.0}})
    assert str(caught.value) == ("load.rate: read only by poisson and constant loads, not "
                                 "trace; a trace's own arrivals go faster with "
                                 "load.rate_scale (--rate-scale 2)")
    with pytest.raises(InputError) as caught:
        build_config({"load": {"users": 5}})
    assert str(caught.value).endswith("not trace")


def test_closed_loops_need_a_timed_run():
    for kind in ("concurrency", "sessions"):
        with pytest.raises(InputError) as caught:
            build_config({"cache_only": True, "load": {"type": kind, "users": 2}})
        assert caught.value.field == "load.type" and "timed run" in caught.value.message


@pytest.mark.parametrize(("flags", "text"), [
    (["--load", "concurrency", "--users", "0"], "load.users"),
    (["--load", "poisson", "--rate", "1", "--load-seed", "-1"], "load.seed"),
    (["--load", "poisson"], "load.rate"),
    (["--load", "poisson", "--rate", "-1"], "load.rate"),
    (["--load", "concurrency", "--users", "2", "--think-time", "-1"], "load.think_time_s"),
    (["--load", "concurrency", "--users", "2", "--cache-only"], "load.type"),
    (["--rate-scale", "2", "--load", "constant", "--rate", "1"], "load.rate_scale"),
])
def test_cli_refuses_in_one_line_and_writes_nothing(tmp_path, flags, text):
    out = tmp_path / "run"
    one_line_error(invoke("run", "--trace", DEMO, *flags, "-o", out), text)
    assert not out.exists()


def test_cli_flags_reach_the_section(tmp_path):
    out = tmp_path / "run"
    result = invoke("run", "--trace", DEMO, "--cache-only", "--max-requests", "20",
                    "--load", "poisson", "--rate", "4", "--load-seed", "9", "-o", out,
                    "--quiet")
    assert result.exit_code == 0, result.output
    written = (out / "config.yaml").read_text()
    assert "type: poisson" in written and "rate: 4.0" in written and "seed: 9" in written
