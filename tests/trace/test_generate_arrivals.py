"""Session start times of a generated workload (trace/generate/arrivals.py): Poisson and
gamma starts are the cumulative sums of numpy's draws from the same seed (mean gap
1 / rate, the gamma's shape 1 / cv^2); diurnal starts follow the sinusoidal rate, checked by
how many fall in each half of the period."""

from __future__ import annotations

import math
from itertools import islice

import numpy as np
import pytest

from prefixsim.trace.generate.arrivals import session_starts
from prefixsim.trace.generate.preset import Arrival


def starts(arrival: Arrival, rate: float, n: int, seed: int = 9) -> np.ndarray:
    return np.array(list(islice(session_starts(arrival, rate, np.random.default_rng(seed)), n)))


def test_poisson_starts_are_exponential_gaps_from_zero():
    rng = np.random.default_rng(9)
    expected = np.cumsum([rng.exponential(1 / 4.0) for _ in range(50)])
    assert starts(Arrival(process="poisson"), 4.0, 50).tolist() == expected.tolist()


@pytest.mark.parametrize("cv", [0.5, 1.0, 3.0])
def test_gamma_starts_have_shape_one_over_cv_squared(cv):
    """Shape k = 1 / cv^2 and scale 1 / (rate k): mean gap 1 / rate, its cv `cv`."""
    rng = np.random.default_rng(9)
    k = 1 / cv**2
    expected = np.cumsum([rng.gamma(k, 1 / (2.0 * k)) for _ in range(50)])
    assert starts(Arrival(process="gamma", cv=cv), 2.0, 50).tolist() == \
        pytest.approx(expected.tolist(), rel=1e-12)
    gaps = np.diff(starts(Arrival(process="gamma", cv=cv), 2.0, 40_000), prepend=0.0)
    assert gaps.mean() == pytest.approx(0.5, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.08)


def test_diurnal_starts_follow_the_sine():
    """Rate 10 (1 + 0.5 sin(2 pi t / 100)): over 100 periods the mean rate is 10, the first
    half of each period runs at 10 (1 + 1 / pi) = 13.18 and the second at 6.82."""
    arrival = Arrival(process="diurnal", amplitude=0.5, period_s=100.0)
    times = starts(arrival, 10.0, 150_000)
    times = times[times < 10_000.0]
    assert len(times) / 10_000.0 == pytest.approx(10.0, rel=0.02)
    first_half = np.count_nonzero((times % 100.0) < 50.0) / 5_000.0
    second_half = np.count_nonzero((times % 100.0) >= 50.0) / 5_000.0
    assert first_half == pytest.approx(10 * (1 + 1 / math.pi), rel=0.03)
    assert second_half == pytest.approx(10 * (1 - 1 / math.pi), rel=0.03)
    assert np.all(np.diff(times) > 0) and times[0] > 0


def test_a_flat_diurnal_is_poisson():
    """amplitude 0: every candidate is kept, so the starts are the Poisson process's."""
    flat = starts(Arrival(process="diurnal", amplitude=0.0), 3.0, 200)
    rng = np.random.default_rng(9)
    expected = []
    now = 0.0
    while len(expected) < 200:
        now += rng.exponential(1 / 3.0)
        rng.random()  # the thinning draw, always accepted
        expected.append(now)
    assert flat.tolist() == expected
