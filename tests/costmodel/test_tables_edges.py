"""Reading measured tables at their edges (costmodel/tables.py, docs/cost-models.md "Reading
the tables"), known answers worked by hand, written to kill the mutants bench/mutation.sh
left alive there: unpaired points and empty tables refused with their message, a
two-point table extended low, a one-point table computing no 0/0, and row grids of one and
of three rows read below, between and beyond their keys."""

import warnings

import pytest

from prefixsim.costmodel.tables import RowGrid, Table1D


def test_unpaired_points_and_empty_tables_are_refused():
    with pytest.raises(ValueError, match="shorter|longer"):
        Table1D([1, 2, 3], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"^a table needs at least one point$"):
        Table1D([], [])
    with pytest.raises(ValueError, match=r"^a grid needs at least one row$"):
        RowGrid({})


def test_two_points_extend_low_along_their_line():
    """(2, 4), (4, 6): slope 1 a unit, so x = 1 reads 3 and x = 0 reads 2 (not 4)."""
    table = Table1D([2, 4], [4, 6], extend_low=True)
    assert table.time_s(1) == pytest.approx(3)
    assert list(table.times_s_at([0.0, 1.0])) == pytest.approx([2, 3])


def test_one_point_is_flat_without_dividing_zero_by_zero():
    """One point, or a last point at x = 0 (half of it is itself): no tail slope, and no
    RuntimeWarning from 0 / 0 on the way."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Table1D([5], [2.0]).tail_slope == 0.0
        assert Table1D([-4, 0], [1.0, 3.0]).tail_slope == 0.0


ROW = {1: Table1D([0, 10], [1, 11]), 3: Table1D([0, 10], [3, 13]),
       5: Table1D([0, 10], [7, 27])}


def test_one_row_grid_reads_its_row_for_every_key():
    grid = RowGrid({4: ROW[1]})
    for key in (1, 4, 9):
        assert grid.time_s(key, 5) == 6
        assert list(grid.times_s_at(key, [5.0])) == [6]


def test_three_row_grid_below_between_and_beyond():
    """Rows 1, 3, 5 read at column 5: 6, 8, 17. Key 0 -> 6; key 2 -> 7; key 3 -> 8;
    key 4 -> (8 + 17) / 2 = 12.5; key 9 -> 17 (the last row, not the second)."""
    grid = RowGrid(ROW)
    expected = {0: 6, 2: 7, 3: 8, 4: 12.5, 5: 17, 9: 17}
    for key, time in expected.items():
        assert grid.time_s(key, 5) == pytest.approx(time)
        assert list(grid.times_s_at(key, [5.0])) == pytest.approx([time])
