"""The chunked chain check (trace/chains.py) against the exact per-line one (fields.py's
ChainCheck): the same verdict for any prompts cut into any chunks, with ids that keep it in
its direct table, that send it to its sorted arrays (ids of 2^28 and up, or negative), or
that switch it mid-stream; `requests_chained` over blocks of Requests and of columns alike;
and the verdicts worked by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.errors import InputError
from prefixsim.trace import chains
from prefixsim.trace.chains import NO_PARENT, TABLE_IDS, ChunkChains, requests_chained
from prefixsim.trace.columns import as_columns
from prefixsim.trace.fields import ChainCheck
from prefixsim.trace.record import Request

MAPS = {  # how a drawn id 0..9 is written: table ids, sorted-mode ids, a mix of both
    "small": lambda i: i,
    "huge": lambda i: TABLE_IDS + (i << 40),
    "negative": lambda i: -1 - i,
    "mixed": lambda i: i if i % 2 else TABLE_IDS + i,
}


@st.composite
def prompts(draw):
    """Prompts that are mostly prefixes of three chains of distinct ids (so many traces
    are chained), some drawn freely (so many are not), in chunks."""
    alphabet = list(range(10))
    bases = [draw(st.permutations(alphabet))[:draw(st.integers(1, 6))] for _ in range(3)]
    out = []
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.booleans()):
            base = draw(st.sampled_from(bases))
            out.append(list(base[:draw(st.integers(0, len(base)))]))
        else:
            out.append(draw(st.lists(st.sampled_from(alphabet), max_size=4)))
    cuts = sorted(draw(st.lists(st.integers(0, len(out)), max_size=4)))
    return out, cuts


def exact(prompts_: list[list[int]]) -> bool:
    check = ChainCheck()
    try:
        for prompt in prompts_:
            check.check(prompt, {})
    except InputError:
        return False
    return True


def chunk_arrays(prompts_: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ids = np.array([i for p in prompts_ for i in p], dtype=np.int64)
    lengths = np.array([len(p) for p in prompts_], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[lengths > 0] \
        if len(lengths) else np.zeros(0, dtype=np.int64)
    return ids, starts.astype(np.int64)


@pytest.mark.parametrize("mode", MAPS)
@settings(max_examples=300, deadline=None)
@given(case=prompts())
def test_chunks_give_the_exact_verdict(mode, case):
    drawn, cuts = case
    written = [[MAPS[mode](i) for i in p] for p in drawn]
    check = ChunkChains()
    verdict = True
    for first, last in zip([0, *cuts], [*cuts, len(written)], strict=True):
        verdict = check.check(*chunk_arrays(written[first:last]))
    assert verdict == check.ok == exact(written)
    requests = [Request(n, float(n), max(1, 4 * len(p)), 1, tuple(p), 4)
                for n, p in enumerate(written)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chains, "CHECK_BLOCK", 3)  # several blocks, each checked on the last
        assert requests_chained(requests) == exact(written)
        assert requests_chained(as_columns(requests)) == exact(written)


def test_verdicts_by_hand():
    check = ChunkChains()
    big = TABLE_IDS  # the sorted arrays from the first chunk
    assert check.check(np.array([big, big + 1, big, big + 2]), np.array([0, 2]))  # 1 then 2
    assert check.table is None
    assert check.check(np.array([big, big + 1]), np.array([0]))  # seen: same parent
    assert check.check(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    assert not check.check(np.array([big + 1]), np.array([0]))  # a second page first
    assert not check.check(np.array([big]), np.array([0]))  # once False, False
    marker = ChunkChains()
    assert not marker.check(np.array([NO_PARENT, 5]), np.array([0])) and not marker.ok
    switched = ChunkChains()
    assert switched.check(np.array([3, 4]), np.array([0])) and switched.table is not None
    assert not switched.check(np.array([-7, 4]), np.array([0]))  # 4 followed 3 in the table
    assert switched.table is None


def test_the_async_check_gives_the_same_verdicts():
    check = ChunkChains()
    check.check_async(np.array([1, 2]), np.array([0]))
    check.check_async(np.array([1, 2, 3]), np.array([0]))
    assert check.wait()
    check.check_async(np.array([2]), np.array([0]))  # 2 followed 1
    assert not check.wait() and not check.wait()


def test_ids_that_are_not_int64_are_not_chained():
    assert requests_chained([Request(0, 0.0, 4, 1, (1 << 64,), 4)]) is False
    assert requests_chained([]) is True


def test_what_the_table_knew_survives_the_switch_to_sorted_arrays():
    # 4 follows 3 and 3 starts a prompt, learnt in the table; a negative id moves the check
    # to its sorted arrays, which must keep both parents (3: none, 4: 3)
    check = ChunkChains()
    assert check.check(np.array([3, 4]), np.array([0]))
    assert check.check(np.array([-7]), np.array([0])) and check.table is None
    assert check.check(np.array([3, 4, -9]), np.array([0]))
    assert not ChunkChains().check(np.array([3, 4, -1, 4]), np.array([0, 2]))
    check_first = ChunkChains()
    assert check_first.check(np.array([3, 4]), np.array([0]))
    assert check_first.check(np.array([-7]), np.array([0]))
    assert not check_first.check(np.array([4]), np.array([0]))  # 4 never starts a prompt
