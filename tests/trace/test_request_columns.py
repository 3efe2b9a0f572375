"""`RequestColumns` (trace/columns.py) against the list of records it stands for: every way
of reading it (index, negative index, slice, iteration over several id blocks, take,
renumbering) gives the same requests, sessions and namespaces included; the builder, the
conversion and the concatenation by hand."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.trace import columns as columns_module
from prefixsim.trace.columns import ColumnsBuilder, as_columns, concat_columns
from prefixsim.trace.record import Request


def records(count: int, sessions: bool = True, namespaces: bool = True) -> list[Request]:
    return [Request(request_id=10 + i, arrival_s=i * 0.5, input_tokens=16 * (i % 3) + 1,
                    output_tokens=i, page_ids=tuple(range(100 * i, 100 * i + i % 3 + 1)),
                    page_size_tokens=16,
                    session_id=f"s{i}" if sessions and i % 2 else None,
                    namespace=f"n{i % 2}" if namespaces and i % 3 else None)
            for i in range(count)]


@pytest.fixture(autouse=True)
def small_id_blocks(monkeypatch):
    monkeypatch.setattr(columns_module, "ID_BLOCK", 3)  # iteration crosses id blocks


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 12), st.booleans(), st.booleans())
def test_every_read_gives_the_records(count, sessions, namespaces):
    expected = records(count, sessions, namespaces)
    got = as_columns(expected)
    assert list(got) == expected
    assert [got[i] for i in range(count)] == expected
    assert [got[i - count] for i in range(count)] == expected
    assert list(got[1:count - 1]) == expected[1:count - 1]
    assert list(got[::-2]) == expected[::-2]
    order = np.arange(count)[::-1]
    assert list(got.take(order)) == [expected[i] for i in order]
    shifted = got.renumbered(-1.0)
    assert list(shifted) == [replace(r, request_id=i, arrival_s=r.arrival_s - 1.0)
                             for i, r in enumerate(expected)]
    assert got.num_pages == sum(len(r.page_ids) for r in expected)


def test_an_index_past_either_end_is_refused():
    got = as_columns(records(3))
    for index in (3, -4):
        with pytest.raises(IndexError, match="^request index out of range$"):
            got[index]


def test_the_builder_keeps_a_column_only_when_some_row_has_it():
    builder = ColumnsBuilder()
    assert len(builder.build()) == 0 and builder.build().num_pages == 0
    builder.append(0.0, 5, 1, (7,), 16, session="a")
    builder.append(1.0, 5, 1, (8,), 16, session="b")
    built = builder.build()
    assert built.sessions.to_pylist() == ["a", "b"] and built.namespaces is None
    assert built.request_ids.tolist() == [0, 1] and len(builder) == 2
    only_namespaces = ColumnsBuilder()
    only_namespaces.append(0.0, 5, 1, (7,), 16, namespace="x")
    assert only_namespaces.build().namespaces.to_pylist() == ["x"]
    assert only_namespaces.build().sessions is None


def test_concatenation_joins_text_columns_with_nulls_where_a_part_has_none():
    first = as_columns(records(2, sessions=False, namespaces=False))
    second = as_columns(records(4, sessions=True, namespaces=True)[2:])
    joined = concat_columns([first, second])
    assert joined.request_ids.tolist() == [0, 1, 2, 3]
    assert joined.sessions.to_pylist() == [None, None, None, "s3"]
    assert joined.namespaces.to_pylist() == [None, None, "n0", None]
    assert joined.page_start.tolist() == [0, 1, 3, 6, 7]
    plain = concat_columns([first, first])
    assert plain.sessions is None and plain.namespaces is None
    alone = concat_columns([second])  # one part: renumbered from 0
    assert alone.request_ids.tolist() == [0, 1]
