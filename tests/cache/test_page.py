"""A page as built (prefixsim/cache/page.py, docs/cache-semantics.md R1, R16): the fields a
new page starts with when only its identity, size and time are given."""

from __future__ import annotations

from prefixsim.cache.page import INFINITY, Page


def test_a_new_page_starts_unhit_at_priority_0_created_and_used_now():
    root = Page(1, None, 4, 2.5, 7)
    child = Page(2, root, 3, 3.0, 8)
    assert (root.created_s, root.last_access_s, root.recency) == (2.5, 2.5, 7)
    assert (child.priority, child.num_hits, child.deadline_s) == (0, 0, INFINITY)
    assert (child.depth, child.num_tokens, child.resident) == (1, 3, True)
    assert child.path() == [root, child] and root.is_leaf
