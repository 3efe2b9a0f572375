"""distinct_prefix_tokens on RequestColumns (numpy) against the same function on a list of
Requests (the dict-and-set reference): the same figure for any requests."""

from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.trace.columns import as_columns
from prefixsim.trace.pages import DistinctTokens, distinct_prefix_tokens
from prefixsim.trace.record import Request

ids = st.one_of(st.integers(0, 40), st.integers(-5, 2**40))


@st.composite
def requests(draw):
    out = []
    for i in range(draw(st.integers(0, 25))):
        size = draw(st.sampled_from([16, 64]))
        pages = tuple(draw(st.lists(ids, max_size=6)))
        tokens = max(1, size * max(len(pages) - 1, 0) + draw(st.integers(1, size)))
        out.append(Request(i, float(i), tokens, 1, pages, size))
    return out


@given(requests())
def test_columns_count_like_the_reference(reqs):
    assert distinct_prefix_tokens(as_columns(reqs)) == distinct_prefix_tokens(reqs)


def test_known_answer():
    """Pages 1, 2 are full (16 tokens) somewhere; 3 is only ever last, with 10, 5 and 4
    tokens (the most counts); 2 is last once (5 tokens) but full elsewhere: 16 + 16 + 10."""
    reqs = [Request(0, 0.0, 26, 1, (1, 3), 16), Request(1, 1.0, 21, 1, (1, 2), 16),
            Request(2, 2.0, 37, 1, (1, 2, 3), 16), Request(3, 3.0, 20, 1, (1, 3), 16)]
    assert distinct_prefix_tokens(reqs) == 16 + 16 + 10
    assert distinct_prefix_tokens(as_columns(reqs)) == distinct_prefix_tokens(reqs)


@st.composite
def one_size_requests(draw):
    """Requests with one page size (what a stream takes), and where to cut them."""
    size = draw(st.sampled_from([16, 64]))
    out = []
    for i in range(draw(st.integers(0, 25))):
        pages = tuple(draw(st.lists(ids, max_size=6)))
        tokens = max(1, size * max(len(pages) - 1, 0) + draw(st.integers(1, size)))
        out.append(Request(i, float(i), tokens, 1, pages, size))
    cuts = sorted(draw(st.lists(st.integers(0, len(out)), max_size=4)))
    return out, cuts


@settings(deadline=None)
@given(one_size_requests())
def test_chunk_by_chunk_counts_like_the_reference(case):
    """DistinctTokens fed in chunks (table mode, and the sorted mode that large or negative
    ids switch to mid-stream) gives distinct_prefix_tokens of the whole trace."""
    reqs, cuts = case
    tally = DistinctTokens()
    for first, last in zip([0, *cuts], [*cuts, len(reqs)], strict=True):
        tally.add(as_columns(reqs[first:last]))
    assert tally.total == distinct_prefix_tokens(reqs)
