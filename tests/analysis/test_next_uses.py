"""NextUses (analysis/next_uses.py) against a dict walked backwards over the same trace,
fed in chunks and walked in blocks of a few uses, and a known answer worked by hand."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefixsim.analysis import next_uses
from prefixsim.analysis.next_uses import NextUses
from prefixsim.trace.columns import as_columns
from prefixsim.trace.record import Request
from prefixsim.trace.stream import NotStreamable


def reference(pages: list[tuple[int, ...]]) -> list[list[int]]:
    """For each request, for each of its pages, the next request naming that page id."""
    following: dict[int, int] = {}
    out: list[list[int]] = [[] for _ in pages]
    for position in range(len(pages) - 1, -1, -1):
        out[position] = [following.get(page_id, -1) for page_id in pages[position]]
        for page_id in pages[position]:
            following[page_id] = position
    return out


def columns(pages: list[tuple[int, ...]], chunk: int):
    reqs = [Request(i, float(i), 16 * max(len(p), 1), 1, p, 16) for i, p in enumerate(pages)]
    return [as_columns(reqs[start:start + chunk]) for start in range(0, len(reqs), chunk)]


def read_all(uses: NextUses) -> list[list[int]]:
    values, offsets = uses.chunk(0, len(uses))
    return [values[offsets[i]:offsets[i + 1]].tolist() for i in range(len(uses))]


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pages=st.lists(st.lists(st.integers(0, 30), max_size=6, unique=True).map(tuple),
                      max_size=40),
       chunk=st.integers(1, 9), block=st.sampled_from([1, 3, 7, 1 << 22]))
def test_same_as_a_backward_dict(tmp_path_factory, monkeypatch, pages, chunk, block):
    monkeypatch.setattr(next_uses, "BLOCK_USES", block)
    folder = tmp_path_factory.mktemp("uses")
    uses = NextUses.build(columns(pages, chunk), folder)
    assert len(uses) == len(pages)
    assert read_all(uses) == reference(pages)
    assert [p.name for p in folder.iterdir()] == ["next-uses.bin"]  # the id file is gone


def test_known_answer_and_chunks(tmp_path):
    """Requests 0: pages 1, 2; 1: page 1; 2: pages 1, 3; 3: page 2. Page 1 is next named
    by 1, then 2, then never; page 2 by 3; page 3 never."""
    uses = NextUses.build(columns([(1, 2), (1,), (1, 3), (2,)], 2), tmp_path)
    assert read_all(uses) == [[1, 3], [2], [-1, -1], [-1]]
    values, offsets = uses.chunk(2, 2)
    assert values.tolist() == [-1, -1, -1] and offsets == [0, 2, 3]


@pytest.mark.parametrize("page_id", [-1, 1 << 28])
def test_ids_outside_the_table_do_not_stream(tmp_path, page_id):
    with pytest.raises(NotStreamable):
        NextUses.build(columns([(1,), (page_id,)], 1), tmp_path)
