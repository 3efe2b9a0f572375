"""SeenPages (analysis/seen_pages.py) against an unbounded cache replayed request by
request: same hit tokens for every request, whatever the chunking."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from radix_reference import RadixCache

from prefixsim.analysis.seen_pages import SeenPages
from prefixsim.cache import POLICIES
from prefixsim.engine import replay_cache_only
from prefixsim.trace import Request


def chained_trace(seed, n):
    """Requests over a few shared chains (prefixes of them), some fresh pages, page sizes
    4 or 16, partial last pages, an occasional empty prompt."""
    rng = np.random.default_rng(seed)
    chains = [tuple(range(k * 1000, k * 1000 + int(rng.integers(1, 8)))) for k in range(5)]
    out, fresh = [], 10**6
    for i in range(n):
        size = int(rng.choice([4, 16]))
        base = chains[int(rng.integers(0, len(chains)))]
        ids = base[:int(rng.integers(0, len(base) + 1))] + tuple(
            range(fresh, fresh + int(rng.integers(0, 3))))
        fresh += 10
        tokens = 0 if not ids else size * (len(ids) - 1) + int(rng.integers(1, size + 1))
        out.append(Request(i, float(i), max(tokens, 1) if ids else 1, 1, ids, size))
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 100_000), st.integers(1, 80), st.integers(1, 30))
def test_seen_pages_equal_an_unbounded_replay(seed, n, chunk):
    requests = chained_trace(seed, n)
    expected = [r.cached_tokens for r in
                replay_cache_only(requests, RadixCache(None, POLICIES.build("lru"))).records]
    seen = SeenPages()
    got = []
    for start in range(0, n, chunk):
        got += seen.hit_tokens(requests[start:start + chunk]).tolist()
    assert got == expected
    assert len(seen) == len({p for r in requests for p in r.page_ids})


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 100_000), st.integers(1, 80), st.integers(1, 30),
       st.sampled_from([1 << 27, 1500, 0]))
def test_table_sorted_and_columns_agree(seed, n, chunk, table_ids):
    """The direct table, the sorted array and a switch from one to the other midway (the
    table's range cut to `table_ids`), fed Requests or columns: the same hits."""
    from prefixsim.analysis import seen_pages
    from prefixsim.analysis.seen_pages import unbounded_hit_tokens_columns
    from prefixsim.trace.columns import as_columns
    requests = chained_trace(seed, n)
    expected = [r.cached_tokens for r in
                replay_cache_only(requests, RadixCache(None, POLICIES.build("lru"))).records]
    original = seen_pages.TABLE_IDS
    seen_pages.TABLE_IDS = table_ids
    try:
        seen = SeenPages()
        got = []
        for start in range(0, n, chunk):
            got += seen.hit_tokens(requests[start:start + chunk]).tolist()
        columns = unbounded_hit_tokens_columns(as_columns(requests), chunk)
    finally:
        seen_pages.TABLE_IDS = original
    assert got == expected
    assert columns == (sum(expected), sum(r.input_tokens for r in requests))
