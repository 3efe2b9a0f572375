"""The tune search space by hand (prefixsim/tune/space.py): every refusal of a knob word for
word with its field, units in bounds and steps, a range's grid at its edges, what a trial is
asked for, conditional knobs (`when:`), the probe points and the grid's combinations."""

from __future__ import annotations

import pytest

from prefixsim.errors import InputError
from prefixsim.tune.space import (
    CATEGORICAL,
    FLOAT,
    INT,
    Knob,
    grid_points,
    needs_step,
    parse_knob,
    probe_points,
    suggest,
)


def error(message: str, field: str) -> InputError:
    return InputError(message, field=field)


def knob(key: str, spec, earlier=()) -> Knob:
    return parse_knob(key, spec, list(earlier), error)


def refused(key: str, spec, earlier=()) -> tuple[str | None, str]:
    with pytest.raises(InputError) as info:
        knob(key, spec, earlier)
    return info.value.field, info.value.message


class Trial:
    """Records what each knob asks for and answers with a known value."""

    def __init__(self, answers: dict[str, object] | None = None) -> None:
        self.asked: list[tuple] = []
        self.answers = answers or {}

    def suggest_categorical(self, name, choices):
        self.asked.append(("categorical", name, choices))
        return self.answers.get(name, choices[-1])

    def suggest_int(self, name, low, high, *, step=1, log=False):
        self.asked.append(("int", name, low, high, step, log))
        return self.answers.get(name, high)

    def suggest_float(self, name, low, high, *, step=None, log=False):
        self.asked.append(("float", name, low, high, step, log))
        return self.answers.get(name, low)


POLICY = Knob("cache.policy", CATEGORICAL, choices=("lru", "s3fifo"))


# ------------------------------------------------------------------------ parsing a knob
def test_a_list_is_a_categorical_knob():
    assert knob("cache.policy", ["lru", "s3fifo"]) == POLICY
    assert knob("cache.policy", {"choices": ["lru", "s3fifo"]}) == POLICY
    assert knob("x.flag", [None, True, 2, 2.5, "a"]).choices == (None, True, 2, 2.5, "a")


def test_ranges_take_units_log_and_step():
    assert knob("cache.capacity_tokens", {"int": ["2k", "30k"]}) == Knob(
        "cache.capacity_tokens", INT, low=2000, high=30000)
    assert knob("cache.ttl_s", {"float": ["30s", "5m"], "log": True}) == Knob(
        "cache.ttl_s", FLOAT, low=30.0, high=300.0, log=True)
    assert knob("cache.capacity_tokens", {"int": [1000, 9000], "step": "4k"}).step == 4000
    assert knob("cache.ttl_s", {"float": [1, 2], "step": 0.5}).step == 0.5
    assert knob("cache.ttl_s", {"float": [1, 1]}) == Knob("cache.ttl_s", FLOAT, low=1, high=1)
    assert knob("x.count", {"int": [3, 5]}) == Knob("x.count", INT, low=3, high=5)  # no unit
    assert knob("count", {"int": [3, 5]}) == Knob("count", INT, low=3, high=5)  # no section
    assert knob("cache.ttl_s", {"float": [0.5, 2], "log": True}).low == 0.5  # 0 < low < 1
    # a bound in words where the key names no unit stays as written, and is refused
    assert refused("x.count", {"int": ["2k", 5]}) == (
        "space.x.count", "expected int: [low, high] with integers")


@pytest.mark.parametrize("key, spec, message", [
    ("cache.policy", ["lru", "lru"], "a choice is listed twice"),
    ("cache.policy", [], "empty range: expected a non-empty list of values"),
    ("cache.policy", {"choices": "lru"}, "empty range: expected a non-empty list of values"),
    ("cache.policy", [["lru"]], "choices must be numbers, names, true/false or null"),
    ("cache.policy", {"choices": ["lru"], "log": True}, "log: is for int: and float: ranges"),
    ("cache.policy", {"choices": ["lru"], "step": 1}, "step: is for int: and float: ranges"),
    ("cache.ttl_s", 5, "expected a list of values or a mapping with int:, float: or "
                       "choices:"),
    ("cache.ttl_s", {"float": [1, 2], "lg": True},
     "unknown option 'lg' (valid: choices, int, float, log, step, when)"),
    ("cache.ttl_s", {"float": [1, 2], "int": [1, 2]},
     "expected exactly one of choices:, int: or float:"),
    ("cache.ttl_s", {"log": True}, "expected exactly one of choices:, int: or float:"),
    ("cache.ttl_s", {"float": [1]}, "expected float: [low, high] with numbers"),
    ("cache.ttl_s", {"float": [1, 2, 3]}, "expected float: [low, high] with numbers"),
    ("cache.ttl_s", {"float": 1}, "expected float: [low, high] with numbers"),
    ("cache.ttl_s", {"float": [1, True]}, "expected float: [low, high] with numbers"),
    ("cache.capacity_tokens", {"int": [1, 2.5]}, "expected int: [low, high] with integers"),
    ("cache.ttl_s", {"float": [60, 10]}, "empty range: low 60 > high 10"),
    ("cache.ttl_s", {"float": [1, 2], "log": "yes"}, "log: expected true or false, got 'yes'"),
    ("cache.ttl_s", {"float": [1, 2], "step": 0}, "step: expected a positive number"),
    ("cache.ttl_s", {"float": [1, 2], "step": -1}, "step: expected a positive number"),
    ("cache.ttl_s", {"float": [1, 2], "step": "x"}, "step: expected a positive number"),
    ("cache.capacity_tokens", {"int": [1, 9], "step": 1.5},
     "step: expected a positive integer"),
    ("cache.ttl_s", {"float": [1, 2], "step": 1, "log": True},
     "log: and step: exclude each other"),
    ("cache.ttl_s", {"float": [0, 10], "log": True}, "log: needs low > 0, got 0"),
    ("cache.ttl_s", {"float": [-1, 10], "log": True}, "log: needs low > 0, got -1"),
])
def test_a_bad_knob_is_refused_word_for_word(key, spec, message):
    assert refused(key, spec) == (f"space.{key}", message)


def test_a_knob_listed_twice_is_refused():
    assert refused("cache.policy", ["lru"], [POLICY]) == ("space.cache.policy", "listed twice")


# ----------------------------------------------------------------------------- when:
def test_when_names_an_earlier_categorical_knob_and_its_values():
    ttl = knob("cache.ttl_s", {"float": [1, 2], "when": {"cache.policy": "lru"}}, [POLICY])
    assert ttl.when == {"cache.policy": ("lru",)}
    both = knob("cache.ttl_s", {"float": [1, 2], "when": {"cache.policy": ["lru", "s3fifo"]}},
                [POLICY])
    assert both.when == {"cache.policy": ("lru", "s3fifo")}
    ranged = Knob("x.n", INT, low=1, high=2)
    for when, message in [
        ({}, "when: expected a mapping of an earlier knob to its value(s)"),
        ("cache.policy", "when: expected a mapping of an earlier knob to its value(s)"),
        ({"cache.other": "lru"}, "when: cache.other is not a categorical knob listed before "
                                 "cache.ttl_s"),
        ({"x.n": 1}, "when: x.n is not a categorical knob listed before cache.ttl_s"),
        ({"cache.policy": "fifo"}, "when: cache.policy never takes 'fifo' (its choices: "
                                   "['lru', 's3fifo'])"),
        ({"cache.policy": ["lru", "fifo"]}, "when: cache.policy never takes 'fifo' (its "
                                            "choices: ['lru', 's3fifo'])"),
    ]:
        assert refused("cache.ttl_s", {"float": [1, 2], "when": when}, [POLICY, ranged]) == (
            "space.cache.ttl_s", message)


def test_active_needs_every_condition():
    ttl = Knob("cache.ttl_s", FLOAT, low=1, high=2,
               when={"cache.policy": ("lru",), "x.mode": ("a", "b")})
    assert ttl.active({"cache.policy": "lru", "x.mode": "b"})
    assert not ttl.active({"cache.policy": "lru"})  # a parent not sampled
    assert not ttl.active({"cache.policy": "s3fifo", "x.mode": "a"})
    assert Knob("x", FLOAT).active({})  # no condition


# ------------------------------------------------------------------------- sampling
def test_each_kind_asks_the_trial_as_optuna_is_asked():
    trial = Trial()
    knobs = [POLICY, Knob("cache.capacity_tokens", INT, low=1000, high=9000, step=4000),
             Knob("x.count", INT, low=2, high=64, log=True),
             Knob("cache.ttl_s", FLOAT, low=30.0, high=300.0, log=True),
             Knob("x.share", FLOAT, low=0.1, high=0.5, step=0.1)]
    assert suggest(trial, knobs) == {"cache.policy": "s3fifo", "cache.capacity_tokens": 9000,
                                     "x.count": 64, "cache.ttl_s": 30.0, "x.share": 0.1}
    assert trial.asked == [
        ("categorical", "cache.policy", ["lru", "s3fifo"]),
        ("int", "cache.capacity_tokens", 1000, 9000, 4000, False),
        ("int", "x.count", 2, 64, 1, True),
        ("float", "cache.ttl_s", 30.0, 300.0, None, True),
        ("float", "x.share", 0.1, 0.5, 0.1, False),
    ]
    assert all(type(a) is int for a in trial.asked[1][2:5])  # Optuna wants ints for int:


def test_a_conditional_knob_is_asked_only_under_its_value():
    ttl = Knob("cache.ttl_s", FLOAT, low=1.0, high=2.0, when={"cache.policy": ("lru",)})
    trial = Trial({"cache.policy": "s3fifo"})
    assert suggest(trial, [POLICY, ttl]) == {"cache.policy": "s3fifo"}
    assert len(trial.asked) == 1
    trial = Trial({"cache.policy": "lru"})
    assert suggest(trial, [POLICY, ttl]) == {"cache.policy": "lru", "cache.ttl_s": 1.0}


# ------------------------------------------------------------------------------ grids
@pytest.mark.parametrize("made, values", [
    (Knob("k", INT, low=1000, high=9000, step=4000), [1000, 5000, 9000]),
    (Knob("k", INT, low=1000, high=8999, step=4000), [1000, 5000]),  # high not on the grid
    (Knob("k", INT, low=3, high=5), [3, 4, 5]),  # no step: 1
    (Knob("k", INT, low=3, high=3), [3]),
    (Knob("k", INT, low=2.0, high=4.0), [2, 3, 4]),  # an int range's grid is of ints
    (Knob("k", FLOAT, low=0.1, high=0.5, step=0.1), [0.1, 0.2, 0.3, 0.4, 0.5]),  # 0.5 kept
    (Knob("k", FLOAT, low=0.0, high=0.3, step=0.1), [0.0, 0.1, 0.2, 0.3]),  # rounded
    (POLICY, ["lru", "s3fifo"]),
])
def test_a_knobs_grid_by_hand(made, values):
    grid = made.grid()
    assert grid == values
    assert all(type(v) is type(w) for v, w in zip(grid, values, strict=True))


def test_the_grid_combines_knobs_the_last_fastest_conditional_only_where_active():
    ttl = Knob("cache.ttl_s", FLOAT, low=10.0, high=20.0, step=10.0,
               when={"cache.policy": ("lru",)})
    assert grid_points([POLICY, ttl]) == [
        {"cache.policy": "lru", "cache.ttl_s": 10.0},
        {"cache.policy": "lru", "cache.ttl_s": 20.0},
        {"cache.policy": "s3fifo"},
    ]
    size = Knob("n", INT, low=1, high=2)
    assert grid_points([size, POLICY]) == [
        {"n": 1, "cache.policy": "lru"}, {"n": 1, "cache.policy": "s3fifo"},
        {"n": 2, "cache.policy": "lru"}, {"n": 2, "cache.policy": "s3fifo"}]
    assert grid_points([]) == [{}]


def test_what_a_grid_cannot_enumerate():
    knobs = [POLICY, Knob("a", INT, low=1, high=4), Knob("b", INT, low=1, high=4, log=True),
             Knob("c", FLOAT, low=1, high=4), Knob("d", FLOAT, low=1, high=4, step=1.0),
             Knob("e", FLOAT, low=1, high=4, log=True)]
    assert needs_step(knobs) == ["b", "c", "e"]


# ------------------------------------------------------------------------ probe points
def test_probe_points_set_the_parents_to_their_first_allowed_value():
    mode = Knob("x.mode", CATEGORICAL, choices=("a", "b", "c"),
                when={"cache.policy": ("s3fifo",)})
    share = Knob("x.share", FLOAT, low=0.1, high=0.5, when={"x.mode": ("c", "b")})
    knobs = [POLICY, mode, share]
    assert list(probe_points(share, knobs)) == [
        {"x.mode": "c", "cache.policy": "s3fifo", "x.share": 0.1},
        {"x.mode": "c", "cache.policy": "s3fifo", "x.share": 0.5}]
    assert list(probe_points(POLICY, knobs)) == [{"cache.policy": "lru"},
                                                 {"cache.policy": "s3fifo"}]
    count = Knob("x.count", INT, low=2.0, high=2.0)  # one value: probed once, as an int
    points = list(probe_points(count, [count]))
    assert points == [{"x.count": 2}] and type(points[0]["x.count"]) is int
