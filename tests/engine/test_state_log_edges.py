"""Edges of engine/state_log.py worked by hand: when rows are packed at the default chunk
size, and how the column arrays grow (by doubling, only when the rows do not fit)."""

import numpy as np
import pytest

from prefixsim.engine import state_log
from prefixsim.engine.state_log import CHUNK_ROWS, STATE_COLUMNS, StateLog
from tests.engine.test_state_log import expected_row

ROW = (2.5, 1, 3, 4, 1, 96, 32, 7, 5, 2, 1)


def test_default_chunk_packs_at_its_size():
    """2**16 rows stay pending until the last of them, which packs them all."""
    assert CHUNK_ROWS == 1 << 16
    log, row = StateLog(), expected_row(ROW)
    for _ in range(CHUNK_ROWS - 1):
        log.record(row)
    assert log._size == 0 and len(log) == CHUNK_ROWS - 1
    log.record(row)
    assert log._size == CHUNK_ROWS and log._rows == 0 and len(log) == CHUNK_ROWS
    log.record(row)
    assert log._size == CHUNK_ROWS and len(log) == CHUNK_ROWS + 1
    columns = log.columns()
    assert columns["waiting"].tolist() == [5] * (CHUNK_ROWS + 1)
    assert columns["time_s"][-1] == 2.5 and columns["evictions"][0] == 2


def test_columns_grow_by_doubling(monkeypatch):
    """Chunks of 2 rows: capacities 2, 4, 8, 8 (8 rows fit exactly), 16; a read packs the
    11th row into the room left. With chunks of 4, a first read of 3 pending rows makes
    the capacity 3 (twice 0 is too small)."""
    monkeypatch.setattr(state_log, "CHUNK_ROWS", 2)
    log, capacities = StateLog(), []
    for i in range(10):
        log.record(expected_row((float(i), *ROW[1:])))
        if i % 2:
            capacities.append([len(column) for column in log._columns])
    assert capacities == [[size] * len(STATE_COLUMNS) for size in (2, 4, 8, 8, 16)]
    log.record(expected_row(ROW))
    assert len(log.columns()["time_s"]) == 11 and len(log._columns[0]) == 16
    assert log.columns()["time_s"].tolist() == [*map(float, range(10)), 2.5]
    monkeypatch.setattr(state_log, "CHUNK_ROWS", 4)
    big = StateLog()
    for _ in range(3):
        big.record(expected_row(ROW))
    assert [len(column) for column in big._columns] == [0] * len(STATE_COLUMNS)
    assert big.columns()["replica"].tolist() == [1, 1, 1]
    assert [len(column) for column in big._columns] == [3] * len(STATE_COLUMNS)
    assert [column.dtype for column in big._columns] == [
        np.float64, np.int32, np.int32, np.int32, np.int32, np.int32, np.int64, np.int64,
        np.int64, np.int32]


def test_a_row_of_another_width_is_refused():
    """A row is the ten values of STATE_COLUMNS; nine or eleven raise, recording nothing."""
    log = StateLog()
    row = expected_row(ROW)
    for wrong in (row[:-1], (*row, 0)):
        with pytest.raises(ValueError, match="a state row has 10 values, got"):
            log.record(wrong)
    assert len(log) == 0


def test_pending_rows_outgrow_their_first_room(monkeypatch):
    """Room for 1 row first: 5 rows grow it to 2, 4 and 8, each row kept; on a 1 s grid
    replica 0's rows at 0.1 and 0.2 s replace each other in the room they share."""
    monkeypatch.setattr(state_log, "FIRST_ROWS", 1)
    log = StateLog()
    for i in range(5):
        log.record(expected_row((float(i), *ROW[1:])))
        assert len(log._flat) == len(STATE_COLUMNS) * (1 << (i.bit_length()))
    assert log.columns()["time_s"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    grid = StateLog(1.0)
    for t, replica in [(0.1, 0), (0.2, 0), (0.3, 1), (1.5, 0)]:
        grid.record(expected_row((t, replica, *ROW[2:])))
    columns = grid.columns()
    assert columns["time_s"].tolist() == [0.2, 0.3, 1.5]
    assert columns["replica"].tolist() == [0, 1, 0]
