"""Belady's keys worked by hand (prefixsim/cache/belady.py): next uses found in the flat
arrays (ids absent from the trace, negative ids, an empty trace, the default time scale),
the error before `prepare`, and StreamedBelady's keys from the next uses it is given.
Belady against every online policy is in tests/cache/test_policies.py."""

from __future__ import annotations

import pytest

from prefixsim.cache.belady import Belady, StreamedBelady
from prefixsim.cache.page import INFINITY, Page
from prefixsim.trace import Request


def at(page_id: int, last_access_s: float = 0.0, recency: int = 0,
       parent: Page | None = None) -> Page:
    return Page(page_id, parent, 4, last_access_s, recency)


def prepared(*requests: tuple[float, tuple[int, ...]]) -> Belady:
    belady = Belady()
    belady.prepare([Request(i, t, 4 * len(ids), 1, ids, 4) for i, (t, ids) in
                    enumerate(requests)])
    return belady


def test_a_key_before_prepare_says_the_policy_is_offline():
    with pytest.raises(RuntimeError, match=r"^belady is offline: call prepare\(requests\) "
                                           r"before the replay$"):
        Belady().key(at(1))


def test_the_default_time_scale_is_one():
    """Page 7 named at t=1 (position 0) and t=2 (position 1); last accessed at t=1 after
    position 0: its next use is position 1, key -1."""
    belady = prepared((1.0, (7,)), (2.0, (7,)))
    assert belady.key(at(7, 1.0, 0)) == -1


def test_ids_the_trace_never_names_are_never_used_again():
    """The trace names ids 5 and 9 (and 5 again): 7 lies between them, 3 before, 11 after;
    none has a next use, key -inf."""
    belady = prepared((0.0, (5, 9)), (1.0, (5,)))
    for page_id in (3, 7, 11):
        assert belady.key(at(page_id)) == -INFINITY
    assert belady.key(at(5)) == -1 and belady.key(at(9)) == -INFINITY


def test_negative_ids_are_found():
    """Trace ids are any 64-bit integers: -5 used at positions 0 and 2."""
    belady = prepared((0.0, (-5,)), (1.0, (4,)), (2.0, (-5, 4)))
    assert belady.key(at(-5)) == -2 and belady.key(at(4)) == -1


def test_an_id_a_request_names_twice_is_next_used_by_a_later_request():
    """Ids not chained: request 0 names 1, 2, 1, 1. Each use of 1 there is next used by
    request 3 (key -3), not by the same request's later pages (key -0, which once made the
    compressed cache's belady keep the wrong page); 2 next at request 1; 9 at 2 then never.
    The keys of each request's pages agree with the key a page last touched there gets."""
    belady = prepared((0.0, (1, 2, 1, 1)), (1.0, (2,)), (2.0, (9, 9)), (3.0, (1,)))
    assert belady.request_keys(0) == [-3, -1, -3, -3]
    assert belady.request_keys(1) == [-INFINITY]
    assert belady.request_keys(2) == [-INFINITY, -INFINITY]
    assert belady.request_keys(3) == [-INFINITY]
    assert belady.key(at(1, 0.0, 0)) == -3 and belady.key(at(2, 0.0, 0)) == -1
    assert belady.key(at(9, 2.0, 2)) == -INFINITY


def test_an_empty_trace_has_no_uses():
    for belady in (prepared(), prepared((0.0, ()))):
        assert belady.key(at(0)) == -INFINITY and belady.key(at(1)) == -INFINITY


def streamed_page(policy: StreamedBelady, page_id: int, parent: Page | None = None) -> Page:
    made = at(page_id, parent=parent)
    policy.on_insert(made)
    return made


def test_streamed_keys_are_the_next_uses_it_was_given():
    """Request with next uses [5, 0, -1]: the first page is next used at 5 (key -5), the
    second at position 0 (key -0), the third never (key -inf). A hit on the first page with
    next uses [8] re-keys it -8; evicted, its next use is forgotten."""
    policy = StreamedBelady()
    assert policy.prepare([Request(0, 0.0, 4, 1, (1,), 4)]) is None
    policy.begin([5, 0, -1])
    first = streamed_page(policy, 1)
    second = streamed_page(policy, 2, first)
    third = streamed_page(policy, 3, second)
    assert [policy.key(p) for p in (first, second, third)] == [-5, 0, -INFINITY]
    policy.begin([8])
    policy.on_access(first)
    assert policy.key(first) == -8
    policy.on_evict(first)
    with pytest.raises(KeyError, match="^1$"):
        policy.key(first)
    policy.on_evict(at(42))  # a page it never keyed leaves quietly
    assert policy.key(second) == 0
