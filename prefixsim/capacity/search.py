"""Finding where a monotone pass/fail question flips: bracketing by doubling, then bisection.

The question is asked of a knob value (`probe(values) -> passes`, several values at once so
that a round's probes may run in parallel). Passing is assumed monotone in the knob: either
the low values pass (an offered rate: `passes_below`) or the high ones do (replicas). The
search keeps the best passing value (`good`) and the nearest failing one beyond it (`bad`):

1. bracketing: probe `start`; while nothing passed, step away from it towards the passing
   side, `width` doublings (or halvings) per round; once something passed but nothing
   failed, step the other way, until both sides are known or the knob's limit is reached;
2. bisection: probe `width` evenly spaced values strictly between `good` and `bad` per
   round until `|bad - good| <= tolerance * good` (relative) or, for a whole-number knob,
   until they are neighbours (exact).

Where the probes are not monotone, `good` is the best passing value nearer the passing side
than every failure. This module knows nothing about runs; capacity/driver.py asks it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

Probe = Callable[[Sequence[float]], Sequence[bool]]


@dataclass(frozen=True)
class SearchSpace:
    """The knob searched: where to start, which side passes, its limits and the precision."""

    start: float
    passes_below: bool  # True: low values pass (a rate); False: high values pass (replicas)
    lowest: float
    highest: float
    tolerance: float = 0.05  # relative width of the final bracket (a real-valued knob)
    integer: bool = False  # whole numbers; the final bracket is exact (neighbours)
    width: int = 1  # probes per round (run in parallel)


@dataclass
class SearchResult:
    """`good`: the best passing value (None: none passed within the limits); `bad`: the
    nearest failing value beyond it (None: none failed within the limits); every probe."""

    good: float | None
    bad: float | None
    probes: list[tuple[float, bool]] = field(default_factory=list)


def find_threshold(probe: Probe, space: SearchSpace) -> SearchResult:
    """Bracket then bisect the value where `probe` flips (module docstring)."""
    seen: dict[float, bool] = {}

    def ask(values: Sequence[float]) -> bool:
        fresh = [v for v in dict.fromkeys(_clamp(values, space)) if v not in seen]
        if not fresh:
            return False
        for value, passed in zip(fresh, probe(fresh), strict=True):
            seen[value] = bool(passed)
        return True

    ask([space.start])
    while True:  # bracketing
        good, bad = _bounds(seen, space)
        if good is not None and bad is not None:
            break
        if good is None:  # towards the passing side, from the value nearest it
            edge = min(seen) if space.passes_below else max(seen)
            factor = 0.5 if space.passes_below else 2.0
        else:  # towards the failing side, from the best pass
            edge, factor = good, (2.0 if space.passes_below else 0.5)
        if not ask([edge * factor ** k for k in range(1, space.width + 1)]):
            break  # the knob's limit is reached
    while good is not None and bad is not None and not _close(good, bad, space):
        if not ask(_between(good, bad, space)):
            break
        good, bad = _bounds(seen, space)
    return SearchResult(good=good, bad=bad, probes=list(seen.items()))


def _clamp(values: Sequence[float], space: SearchSpace) -> list[float]:
    out = []
    for value in values:
        value = min(max(value, space.lowest), space.highest)
        out.append(float(round(value)) if space.integer else value)
    return out


def _bounds(seen: dict[float, bool], space: SearchSpace) -> tuple[float | None, float | None]:
    """(good, bad) with the knob oriented so that passing values are the low ones."""
    sign = 1.0 if space.passes_below else -1.0
    failing = [sign * v for v, passed in seen.items() if not passed]
    bad = min(failing) if failing else None
    passing = [sign * v for v, passed in seen.items() if passed and (bad is None or sign * v < bad)]
    good = max(passing) if passing else None
    return (None if good is None else sign * good), (None if bad is None else sign * bad)


def _close(good: float, bad: float, space: SearchSpace) -> bool:
    if space.integer:
        return abs(bad - good) <= 1
    return abs(bad - good) <= space.tolerance * abs(good)


def _between(good: float, bad: float, space: SearchSpace) -> list[float]:
    low, high = sorted((good, bad))
    if space.integer:
        inside = range(int(low) + 1, int(high))
        if len(inside) <= space.width:
            return [float(v) for v in inside]
    step = (high - low) / (space.width + 1)
    values = [low + step * k for k in range(1, space.width + 1)]
    if space.integer:
        values = [float(min(max(round(v), low + 1), high - 1)) for v in values]
    return values
