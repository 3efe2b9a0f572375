"""The prefix-aware router's stale view (`prefix_tokens_in` over a snapshot) caps the cached
prefix exactly as its live view (`Replica.cached_prefix_tokens`) and admission do: whole pages
ending by token L - 1 (docs/cache-semantics.md R3), not the cache-only L - 1 cap."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prefixsim.cache import POLICIES, SegmentCache
from prefixsim.engine.cache_only import hit_tokens
from prefixsim.engine.replica import Replica
from prefixsim.router.protocol import prefix_tokens_in
from prefixsim.trace import Request

# each test runs on the package's cache and on the per-page reference (conftest: each_cache)
pytestmark = pytest.mark.usefixtures("each_cache")
Cache = SegmentCache



def live_view(cached: Request, request: Request) -> int:
    cache = Cache(10_000, POLICIES.build("lru"))
    cache.insert(None, cached.page_ids, cached.page_tokens(), 0.0, 0)
    replica = Replica.__new__(Replica)
    replica.cache = cache
    return replica.cached_prefix_tokens(request, 1.0)


def test_stale_view_of_seven_full_pages_is_page_aligned():
    """L=112, P=16, 7 pages cached: admission would hit 6 pages = 96 tokens; the unaligned
    cap said 111."""
    ids = (1, 2, 3, 4, 5, 6, 7)
    request = Request(1, 5.0, 112, 1, ids, 16)
    assert prefix_tokens_in(request, set(ids)) == 96
    assert live_view(Request(0, 0.0, 112, 1, ids, 16), request) == 96


@given(size=st.integers(1, 8), cached_len=st.integers(1, 60), length=st.integers(1, 60),
       shared=st.integers(0, 10))
def test_stale_and_live_views_agree(size, cached_len, length, shared):
    """Differential: a snapshot taken now gives what the live view gives, for any prompt."""
    def ids(tokens, salt):
        n = -(-tokens // size)
        return tuple(i if i < shared else salt * 1000 + i for i in range(n))

    cached = Request(0, 0.0, cached_len, 1, ids(cached_len, 1), size)
    request = Request(1, 1.0, length, 1, ids(length, 2), size)
    stale = prefix_tokens_in(request, set(cached.page_ids))
    assert stale == live_view(cached, request)
    assert stale <= length - 1 and stale % size == 0


def test_cache_only_cap_stays_unaligned():
    """Part A keeps its own cap: 7 of 7 pages of a 112-token prompt hit 111 tokens."""
    request = Request(1, 5.0, 112, 1, (1, 2, 3, 4, 5, 6, 7), 16)
    assert hit_tokens(request, 7) == 111
    assert hit_tokens(request, 6) == 96
    assert hit_tokens(Request(2, 0.0, 20, 1, (1, 2), 16), 2) == 19
