"""Page-size conversion and the distinct-token tally (trace/pages.py) at their edges: each
refusal word for word, what coarsening keeps, and a negative id fed to the chunk tally's
direct table (which it must leave for its sorted mode: a negative index would wrap)."""

from __future__ import annotations

from fakes import refusal

from prefixsim.trace.columns import as_columns
from prefixsim.trace.pages import (
    DistinctTokens,
    check_page_size,
    coarsen,
    convert_pages,
    distinct_prefix_tokens,
)
from prefixsim.trace.record import Request


def test_page_size_refusals_word_for_word():
    assert refusal(check_page_size, 16, 0) == "--page-size: must be >= 1, got 0"
    assert refusal(check_page_size, 16, 8) == (
        "--page-size: cannot convert 16-token pages to finer 8-token pages: the ids do not say "
        "where inside a page two prompts diverge (only coarser sizes that are multiples of 16 "
        "are exact)")
    assert refusal(check_page_size, 16, 40) == (
        "--page-size: 40 is not a multiple of the trace's 16-token pages, so its pages would not "
        "be runs of whole pages")
    assert (check_page_size(16, 16), check_page_size(16, 64)) == (1, 4)


def test_coarsening_keeps_what_a_request_is():
    # five 16-token pages in 32-token pages: pages 2 and 4 name the first two (each the
    # last fine page of its run), page 5 the partial third
    request = Request(3, 1.5, 70, 2, (1, 2, 3, 4, 5), 16, "s", "tenant")
    assert coarsen(request, 32) == Request(3, 1.5, 70, 2, (2, 4, 5), 32, "s", "tenant")
    assert coarsen(request, 16) is request
    assert list(convert_pages([request], None)) == [request]
    assert list(convert_pages([request], 80)) == [Request(3, 1.5, 70, 2, (5,), 80, "s",
                                                          "tenant")]


def test_a_negative_id_leaves_the_direct_table():
    # pages 3 and 4 are full (16 tokens each); -1 holds 10 tokens: 42 in all. Fed to the
    # table, -1 would index its last slot (page 4) and count nothing
    first = [Request(0, 0.0, 32, 1, (3, 4), 16)]
    second = [Request(1, 1.0, 10, 1, (-1,), 16)]
    tally = DistinctTokens()
    tally.add(as_columns(first))
    tally.add(as_columns(second))
    assert tally.total == distinct_prefix_tokens(first + second) == 42
