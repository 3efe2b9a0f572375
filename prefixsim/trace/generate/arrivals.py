"""Session start times of a generated workload: Poisson, gamma (bursty) or diurnal."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from prefixsim.trace.generate.preset import Arrival


def session_starts(arrival: Arrival, sessions_per_s: float,
                   rng: np.random.Generator) -> Iterator[float]:
    """An endless, increasing sequence of session start times (s), the first at >= 0."""
    now = 0.0
    if arrival.process == "poisson":
        while True:
            now += rng.exponential(1.0 / sessions_per_s)
            yield now
    elif arrival.process == "gamma":
        shape = 1.0 / arrival.cv**2
        scale = 1.0 / (sessions_per_s * shape)
        while True:
            now += rng.gamma(shape, scale)
            yield now
    else:  # diurnal: thinning of a Poisson process at the peak rate
        peak = sessions_per_s * (1.0 + arrival.amplitude)
        while True:
            now += rng.exponential(1.0 / peak)
            rate = sessions_per_s * (
                1.0 + arrival.amplitude * math.sin(2 * math.pi * now / arrival.period_s))
            if rng.random() * peak <= rate:
                yield now
