"""Reading measured tables (costmodel/tables.py): known answers worked by hand, and the
vectorised reads against the scalar ones."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.costmodel.tables import RowGrid, Table1D


def test_table_known_answers():
    """Points (2, 4 s), (4, 6 s), (10, 18 s). Between: x = 3 -> 5; x = 7 -> 6 + 12 * 3/6 = 12.
    Below 2: 4 (clamped), or with extend_low the first segment's line, 4 + (1 - 2) * 1 = 3
    at x = 1 and 0 (not -2) at x = -4. Beyond 10: the slope from the largest point at or
    below 10 / 2 = 5, i.e. from (4, 6): (18 - 6) / 6 = 2 per unit, so x = 12 -> 22."""
    table = Table1D([4, 2, 10], [6, 4, 18])
    assert table.time_s(3) == pytest.approx(5)
    assert table.time_s(7) == pytest.approx(12)
    assert table.time_s(1) == 4
    assert table.time_s(12) == pytest.approx(22)
    low = Table1D([4, 2, 10], [6, 4, 18], extend_low=True)
    assert low.time_s(1) == pytest.approx(3)
    assert low.time_s(-4) == 0.0
    assert Table1D([1], [5.0]).time_s(100) == 5.0  # one point: flat
    assert Table1D([1, 2], [1, 3], tail_slope=10).time_s(3) == pytest.approx(13)


def test_row_grid_known_answers():
    """Rows 2: (0, 1), (10, 11); 4: (0, 3), (10, 23). Key 3, column 5: row 2 reads 6, row 4
    reads 13, halfway: 9.5. Key 1 reads row 2 (6); key 5 reads row 4 (13)."""
    grid = RowGrid({2: Table1D([0, 10], [1, 11]), 4: Table1D([0, 10], [3, 23])})
    assert grid.time_s(3, 5) == pytest.approx(9.5)
    assert grid.time_s(1, 5) == pytest.approx(6)
    assert grid.time_s(5, 5) == pytest.approx(13)
    assert grid.max_key == 4


points = st.dictionaries(st.integers(0, 5000), st.floats(1e-7, 1.0), min_size=1, max_size=10)


@settings(max_examples=60, deadline=None)
@given(points, st.lists(st.floats(-100, 20000), min_size=1, max_size=20), st.booleans())
def test_vectorised_reads_equal_scalar_reads(table_points, xs, low):
    table = Table1D(list(table_points), list(table_points.values()), extend_low=low)
    vector = table.times_s_at(np.array(xs))
    assert vector == pytest.approx([table.time_s(x) for x in xs], rel=1e-12, abs=1e-15)
    grid = RowGrid({1: table, 7: Table1D([0, 100], [1e-6, 2e-6])})
    for key in (0, 1, 3.5, 7, 9):
        assert grid.times_s_at(key, np.array(xs)) == pytest.approx(
            [grid.time_s(key, x) for x in xs], rel=1e-12, abs=1e-15)


@settings(max_examples=60, deadline=None)
@given(points)
def test_tables_pass_through_their_points_and_never_go_negative(table_points):
    table = Table1D(list(table_points), list(table_points.values()), extend_low=True)
    for x, t in table_points.items():
        assert table.time_s(x) == pytest.approx(t)
    assert table.time_s(-1e6) >= 0.0
