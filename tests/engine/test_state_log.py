"""`StateLog` (engine/state_log.py) against a plain list of rows: every value back in its
column and dtype, whatever the packing cadence and however often the columns are read."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.engine import state_log
from prefixsim.engine.state_log import STATE_COLUMNS, StateLog

SMALL = st.integers(0, 2**31 - 1)
ROW = st.tuples(st.floats(0, 1e9, allow_nan=False), st.integers(0, 64), st.integers(0, 9),
                st.integers(0, 9), st.integers(0, 9), SMALL, SMALL, st.integers(0, 2**52),
                st.integers(0, 2**52), st.integers(0, 2**52), SMALL)


def expected_row(row):
    now, index, running, waiting, loading, *rest = row
    return (now, index, running, waiting + loading, *rest)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(ROW, st.booleans()), max_size=40),
       st.sampled_from([1, 2, 3, 7, 1 << 16]), st.sampled_from([1, 2, 64]))
def test_columns_equal_the_rows(rows, chunk_rows, first_rows):
    """Whatever the chunk and the pending buffer's first room (it doubles as rows come)."""
    original = state_log.CHUNK_ROWS, state_log.FIRST_ROWS
    state_log.CHUNK_ROWS, state_log.FIRST_ROWS = chunk_rows, first_rows
    try:
        log, reference, snapshots = StateLog(), [], []
        for row, read in rows:
            log.record(expected_row(row))
            reference.append(expected_row(row))
            assert len(log) == len(reference)
            if read:
                snapshots.append((len(reference), log.columns()))
    finally:
        state_log.CHUNK_ROWS, state_log.FIRST_ROWS = original
    columns = log.columns()
    assert list(columns) == list(STATE_COLUMNS)
    for name, column in columns.items():
        wide = name in ("query_tokens", "hit_tokens", "evictions")
        assert column.dtype == (np.float64 if name == "time_s"
                                else np.int64 if wide else np.int32)
    for size, snapshot in [*snapshots, (len(reference), columns)]:  # earlier reads unchanged
        got = list(zip(*(snapshot[name].tolist() for name in STATE_COLUMNS), strict=True))
        assert got == reference[:size]


def test_packs_every_chunk(monkeypatch):
    """With 2 rows a chunk, the third row is still pending after the first two are packed."""
    monkeypatch.setattr(state_log, "CHUNK_ROWS", 2)
    log = StateLog()
    row = (1.5, 0, 1, 2, 0, 10, 0, 5, 4, 1, 0)
    log.record(expected_row(row))
    assert log._rows == 1 and log._size == 0
    log.record(expected_row(row))
    assert log._rows == 0 and log._size == 2
    log.record(expected_row(row))
    assert len(log) == 3 and log._size == 2
    assert StateLog().columns()["time_s"].shape == (0,)


def test_a_grid_keeps_the_rows_a_sample_reads():
    """Grid 1 s. Replica 0 at t = 0, 0.2, 0.5, 1.0, 1.5, 2.7; replica 1 at t = 0, 0.9, 2.1.
    Replica 0's row at 0.2 is replaced at 0.5 (no point in [0.2, 0.5)); the one at 0.5 is
    kept (1.0 counts: within rounding of the next row's time); 1.0 and 1.5 each precede a
    point. Replica 1's row at 0.9 stays: 1.0 and 2.0 lie in [0.9, 2.1)."""
    log = StateLog(grid_s=1.0)
    base = (0, 1, 0, 0, 10, 0, 5, 4, 1, 0)
    for t, replica in [(0.0, 0), (0.0, 1), (0.2, 0), (0.5, 0), (0.9, 1), (1.0, 0),
                       (1.5, 0), (2.1, 1), (2.7, 0)]:
        log.record(expected_row((t, replica, *base[1:])))
    columns = log.columns()
    kept = {r: columns["time_s"][columns["replica"] == r].tolist() for r in (0, 1)}
    assert kept == {0: [0.0, 0.5, 1.0, 1.5, 2.7], 1: [0.0, 0.9, 2.1]}


GRID_ROW = st.tuples(st.integers(0, 30), st.integers(0, 3), st.integers(0, 9),
                     st.integers(0, 9), st.integers(0, 99))


@settings(max_examples=150, deadline=None)
@given(st.lists(GRID_ROW, max_size=60), st.sampled_from([1.0, 0.3, 0.25, 2.5]),
       st.sampled_from([1, 2, 3, 64]))
def test_a_grid_log_samples_as_the_whole_log(rows, grid_s, chunk_rows):
    """Random rows of 4 replicas at non-decreasing times (steps of 0.1 s: on and off the
    grid points): the samples on the grid and on 2x and 3x coarser grids, as
    metrics/timeseries.py takes them, are the same from a log made with the grid as from
    one that keeps every row; whatever the packing cadence."""
    from prefixsim.metrics.timeseries import sample_states

    original = state_log.CHUNK_ROWS
    state_log.CHUNK_ROWS = chunk_rows
    try:
        whole, gridded = StateLog(), StateLog(grid_s=grid_s)
        now = 0.0
        for replica in range(4):  # every replica has a row at t = 0, as the engine writes
            for log in (whole, gridded):
                log.record(expected_row((0.0, replica, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        for step, replica, running, waiting, tokens in rows:
            now = round(now + step / 10, 10)
            row = (now, replica, running, waiting, 0, tokens, 0, tokens, tokens // 2, step, 0)
            for log in (whole, gridded):
                log.record(expected_row(row))
    finally:
        state_log.CHUNK_ROWS = original
    assert len(gridded) <= len(whole)
    for factor in (1, 2, 3):
        frames = [sample_states(log.columns(), [100] * 4, factor * grid_s, now + 1.0)
                  for log in (whole, gridded)]
        assert frames[0].equals(frames[1])


def test_rows_packed_are_not_replaced(monkeypatch):
    """Chunks of 3 rows, grid 1 s: replicas 0-2 at t=0 (packed); 0 at 0.2, 1 at 0.3, 0 at
    0.4 (replaces 0.2), 2 at 0.5 (packed: 0@0.4, 1@0.3, 2@0.5); then 1 at 0.6 and 0 at 0.7
    start new rows: a packed row is never replaced, nor a row in its place."""
    monkeypatch.setattr(state_log, "CHUNK_ROWS", 3)
    log = StateLog(grid_s=1.0)
    for t, replica, running in [(0.0, 0, 0), (0.0, 1, 0), (0.0, 2, 0), (0.2, 0, 1),
                                (0.3, 1, 2), (0.4, 0, 3), (0.5, 2, 4), (0.6, 1, 5),
                                (0.7, 0, 6)]:
        log.record(expected_row((t, replica, running, 0, 0, 0, 0, 0, 0, 0, 0)))
    columns = log.columns()
    rows = list(zip(columns["time_s"].tolist(), columns["replica"].tolist(),
                    columns["running"].tolist(), strict=True))
    assert rows == [(0.0, 0, 0), (0.0, 1, 0), (0.0, 2, 0), (0.4, 0, 3), (0.3, 1, 2),
                    (0.5, 2, 4), (0.6, 1, 5), (0.7, 0, 6)]
