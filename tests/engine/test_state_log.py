"""`StateLog` (engine/state_log.py) against a plain list of rows: every value back in its
column and dtype, whatever the packing cadence and however often the columns are read."""

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.engine import state_log
from prefixsim.engine.state_log import STATE_COLUMNS, StateLog

SMALL = st.integers(0, 2**31 - 1)
ROW = st.tuples(st.floats(0, 1e9, allow_nan=False), st.integers(0, 64), st.integers(0, 9),
                st.integers(0, 9), st.integers(0, 9), SMALL, SMALL, st.integers(0, 2**52),
                st.integers(0, 2**52), st.integers(0, 2**52), SMALL)


def replica_at(row):
    now, index, running, waiting, loading, resident, reserved, query, hit, evicted, pre = row
    cache = SimpleNamespace(resident_tokens=resident, reserved_tokens=reserved,
                            counters=SimpleNamespace(evicted_pages=evicted))
    return SimpleNamespace(env=SimpleNamespace(now=now), index=index, running=[0] * running,
                           waiting=[0] * waiting, loading=[0] * loading, cache=cache,
                           query_tokens=query, hit_tokens=hit, num_preemptions=pre)


def expected_row(row):
    now, index, running, waiting, loading, *rest = row
    return (now, index, running, waiting + loading, *rest)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(ROW, st.booleans()), max_size=40), st.sampled_from([1, 2, 3, 7]))
def test_columns_equal_the_rows(rows, chunk_rows):
    original = state_log.CHUNK_ROWS
    state_log.CHUNK_ROWS = chunk_rows
    try:
        log, reference, snapshots = StateLog(), [], []
        for row, read in rows:
            log.record(replica_at(row))
            reference.append(expected_row(row))
            assert len(log) == len(reference)
            if read:
                snapshots.append((len(reference), log.columns()))
    finally:
        state_log.CHUNK_ROWS = original
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
    log.record(replica_at(row))
    assert len(log._flat) == len(STATE_COLUMNS) and log._size == 0
    log.record(replica_at(row))
    assert len(log._flat) == 0 and log._size == 2
    log.record(replica_at(row))
    assert len(log) == 3 and log._size == 2
    assert StateLog().columns()["time_s"].shape == (0,)
