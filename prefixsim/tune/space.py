"""The search space: one knob per dotted config key, sampled through an Optuna trial.

A knob is categorical (a YAML list, or `{choices: [...]}`), an integer range
(`{int: [low, high]}`) or a float range (`{float: [low, high]}`); ranges take `log: true`
(sampled on a log scale, low > 0) or `step:` (a grid of low, low + step, ...); a range's
bounds and step take the unit the key names, as config values do (`{int: [2k, 30k]}` for
`cache.capacity_tokens`, `{float: [30s, 5m]}` for `cache.ttl_s`). `when:
{key: value or [values]}` makes a knob conditional: it is sampled only when the earlier
categorical knob `key` took one of those values (a policy's own parameters only under that
policy), otherwise the base's value stands. Knobs are sampled in spec order. This module
knows the trial only through the `suggest_*` methods Optuna's `Trial` has; it imports no
Optuna, runs nothing and writes nothing.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from prefixsim.config.units import quantity, unit_of
from prefixsim.errors import InputError

Scalar = None | bool | int | float | str
ErrorAt = Callable[[str, str], InputError]
KNOB_KEYS = ("choices", "int", "float", "log", "step", "when")
CATEGORICAL, INT, FLOAT = "categorical", "int", "float"


class Suggests(Protocol):
    """The part of `optuna.trial.Trial` a knob uses."""

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any: ...

    def suggest_int(self, name: str, low: int, high: int, *, step: int = 1,
                    log: bool = False) -> int: ...

    def suggest_float(self, name: str, low: float, high: float, *, step: float | None = None,
                      log: bool = False) -> float: ...


@dataclass(frozen=True)
class Knob:
    """One dotted config key to tune: its kind, its values, and when it is active."""

    key: str
    kind: str
    choices: tuple[Scalar, ...] = ()
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    step: float | None = None
    when: dict[str, tuple[Scalar, ...]] = field(default_factory=dict)

    def active(self, params: dict[str, Any]) -> bool:
        """Whether the knobs sampled so far (`params`) satisfy `when:`."""
        return all(key in params and params[key] in values for key, values in self.when.items())

    def suggest(self, trial: Suggests) -> Any:
        if self.kind == CATEGORICAL:
            return trial.suggest_categorical(self.key, list(self.choices))
        if self.kind == INT:
            return trial.suggest_int(self.key, int(self.low), int(self.high),
                                     step=int(self.step or 1), log=self.log)
        return trial.suggest_float(self.key, self.low, self.high, step=self.step, log=self.log)

    def grid(self) -> list[Scalar]:
        """The values a grid takes: the choices, or low, low + step, ... <= high."""
        if self.kind == CATEGORICAL:
            return list(self.choices)
        step = self.step or 1
        count = int(math.floor((self.high - self.low) / step + 1e-9)) + 1
        values = [self.low + i * step for i in range(count)]
        return [int(v) for v in values] if self.kind == INT else [round(v, 12) for v in values]


def suggest(trial: Suggests, knobs: Sequence[Knob]) -> dict[str, Any]:
    """Sample every active knob in spec order: the trial's dotted-key parameters."""
    params: dict[str, Any] = {}
    for knob in knobs:
        if knob.active(params):
            params[knob.key] = knob.suggest(trial)
    return params


def _number(value: Any, integer: bool) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) if integer else isinstance(value, int | float)


def _with_units(key: str, values: Any, integer: bool) -> Any:
    """A range's bounds or step given with the unit the key names (`2k`, `5m`: as a config
    value takes them, config/units.py) as numbers; anything else as written (checked
    next)."""
    unit = unit_of(key.rsplit(".", 1)[-1])
    if unit is None:
        return values

    def number(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return quantity(value, unit, integer=integer)
        except ValueError:
            return value

    return [number(v) for v in values] if isinstance(values, list) else number(values)


def _range(key: str, kind: str, spec: dict[str, Any], error: ErrorAt) -> Knob:
    integer = kind == INT
    bounds = _with_units(key, spec[kind], integer)
    if (not isinstance(bounds, list) or len(bounds) != 2
            or not all(_number(b, integer) for b in bounds)):
        raise error(f"expected {kind}: [low, high] with {'integers' if integer else 'numbers'}",
                    f"space.{key}")
    low, high = bounds
    if low > high:
        raise error(f"empty range: low {low} > high {high}", f"space.{key}")
    log = spec.get("log", False)
    step = _with_units(key, spec.get("step"), integer)
    if not isinstance(log, bool):
        raise error(f"log: expected true or false, got {log!r}", f"space.{key}")
    if step is not None and (not _number(step, integer) or step <= 0):
        raise error(f"step: expected a positive {'integer' if integer else 'number'}",
                    f"space.{key}")
    if log and step is not None:
        raise error("log: and step: exclude each other", f"space.{key}")
    if log and low <= 0:
        raise error(f"log: needs low > 0, got {low}", f"space.{key}")
    return Knob(key=key, kind=kind, low=low, high=high, log=log,
                step=None if step is None else step)


def _when(key: str, when: Any, earlier: Sequence[Knob], error: ErrorAt
          ) -> dict[str, tuple[Scalar, ...]]:
    if not isinstance(when, dict) or not when:
        raise error("when: expected a mapping of an earlier knob to its value(s)",
                    f"space.{key}")
    known = {k.key: k for k in earlier}
    conditions = {}
    for parent, values in when.items():
        knob = known.get(str(parent))
        if knob is None or knob.kind != CATEGORICAL:
            raise error(f"when: {parent} is not a categorical knob listed before {key}",
                        f"space.{key}")
        values = tuple(values) if isinstance(values, list) else (values,)
        missing = [v for v in values if v not in knob.choices]
        if missing:
            raise error(f"when: {parent} never takes {missing[0]!r} (its choices: "
                        f"{list(knob.choices)})", f"space.{key}")
        conditions[str(parent)] = values
    return conditions


def parse_knob(key: str, spec: Any, earlier: Sequence[Knob], error: ErrorAt) -> Knob:
    """A knob from its spec entry; `earlier` are the knobs listed before it."""
    if key in {k.key for k in earlier}:
        raise error("listed twice", f"space.{key}")
    if isinstance(spec, list):
        spec = {"choices": spec}
    if not isinstance(spec, dict):
        raise error("expected a list of values or a mapping with int:, float: or choices:",
                    f"space.{key}")
    for option in spec:
        if option not in KNOB_KEYS:
            raise error(f"unknown option {option!r} (valid: {', '.join(KNOB_KEYS)})",
                        f"space.{key}")
    kinds = [k for k in ("choices", INT, FLOAT) if k in spec]
    if len(kinds) != 1:
        raise error("expected exactly one of choices:, int: or float:", f"space.{key}")
    if kinds[0] == "choices":
        choices = spec["choices"]
        if not isinstance(choices, list) or not choices:
            raise error("empty range: expected a non-empty list of values", f"space.{key}")
        if not all(c is None or isinstance(c, bool | int | float | str) for c in choices):
            raise error("choices must be numbers, names, true/false or null", f"space.{key}")
        if len(set(map(repr, choices))) != len(choices):
            raise error("a choice is listed twice", f"space.{key}")
        extra = [o for o in ("log", "step") if o in spec]
        if extra:
            raise error(f"{extra[0]}: is for int: and float: ranges", f"space.{key}")
        knob = Knob(key=key, kind=CATEGORICAL, choices=tuple(choices))
    else:
        knob = _range(key, kinds[0], spec, error)
    if "when" in spec:
        knob = dataclasses.replace(knob, when=_when(key, spec["when"], earlier, error))
    return knob


def probe_points(knob: Knob, knobs: Sequence[Knob]) -> Iterator[dict[str, Any]]:
    """Points that check a knob: each choice (or both ends of the range), with the knobs its
    `when:` names (and theirs) set to their first allowed value."""
    by_key = {k.key: k for k in knobs}
    parents: dict[str, Any] = {}
    pending = dict(knob.when)
    while pending:
        parent, values = pending.popitem()
        parents.setdefault(parent, values[0])
        pending.update({k: v for k, v in by_key[parent].when.items() if k not in parents})
    values = knob.choices if knob.kind == CATEGORICAL else (knob.low, knob.high)
    for value in dict.fromkeys(values):
        yield {**parents, knob.key: int(value) if knob.kind == INT else value}


def grid_points(knobs: Sequence[Knob]) -> list[dict[str, Any]]:
    """Every combination of the knobs' grid values, conditional knobs only where active
    (so no two points are equal), in spec order (the last knob varies fastest)."""
    points: list[dict[str, Any]] = [{}]
    for knob in knobs:
        grown = []
        for params in points:
            if knob.active(params):
                grown.extend({**params, knob.key: v} for v in knob.grid())
            else:
                grown.append(params)
        points = grown
    return points


def needs_step(knobs: Sequence[Knob]) -> list[str]:
    """Knobs a grid cannot enumerate: float ranges without `step:`, log ranges."""
    return [k.key for k in knobs
            if k.kind != CATEGORICAL and (k.log or (k.kind == FLOAT and k.step is None))]

