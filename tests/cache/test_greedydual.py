"""The GreedyDual policies' keys worked by hand on pages built directly
(prefixsim/cache/aging.py, gdsf.py, workload_aware.py): the inflation clock, a key asked for
a page the hooks never saw, GDSF's cost proxy and its memo, and the workload-aware reuse
probability per (category, position bucket). Victim orders on whole caches are in
tests/cache/test_policies.py."""

from __future__ import annotations

import pytest

from prefixsim.cache.gdsf import ATTENTION_EQUAL_TOKENS, GDSF, proxy_cost_per_token
from prefixsim.cache.lfu import LFU
from prefixsim.cache.page import Page
from prefixsim.cache.workload_aware import NUM_BUCKETS, WorkloadAware, position_bucket


def page(page_id: int, parent: Page | None = None, hits: int = 0) -> Page:
    made = Page(page_id, parent, 4, 0.0, 0)
    made.num_hits = hits
    return made


# ----------------------------------------------------------------------- aging.py
def test_a_key_asked_before_any_hook_is_the_clock_plus_the_value_and_is_kept():
    """LFU, clock 5 (raised by evicting a page of key 5): a page never inserted through the
    hooks, hit twice, gets 5 + 3 = 8; the key stays 8 after its hits change (it is frozen
    until the next hook)."""
    lfu = LFU()
    gone = page(9, hits=4)
    lfu.on_insert(gone)
    lfu.on_evict(gone)
    assert lfu.clock == 5.0
    unseen = page(1, hits=2)
    assert lfu.key(unseen) == 8.0
    unseen.num_hits = 7
    assert lfu.key(unseen) == 8.0


def test_leaving_drops_the_key_and_an_unknown_page_leaves_quietly():
    """After an expiry or an eviction the page's next key is recomputed from the clock
    then; a page the policy never saw may leave (its state is already gone)."""
    lfu = LFU()
    first = page(1)
    lfu.on_insert(first)  # key 1
    lfu.on_evict(page(2, hits=5))  # never keyed: the clock stays 0
    assert lfu.clock == 0.0
    raiser = page(3, hits=2)
    lfu.on_insert(raiser)
    lfu.on_evict(raiser)  # clock 3
    lfu.on_expire(first)
    assert lfu.key(first) == 4.0  # 3 + 1, not the old 1
    lfu.on_expire(page(4))
    assert lfu.clock == 3.0


# ------------------------------------------------------------------------ gdsf.py
def test_the_proxy_cost_is_one_at_the_head_and_two_at_the_attention_equal_length():
    assert proxy_cost_per_token(0) == 1.0
    assert proxy_cost_per_token(ATTENTION_EQUAL_TOKENS) == 2.0


def test_gdsf_prices_each_position_once():
    """Two pages at depth 1 under 4-token parents sit at position 4: the cost function is
    asked once for it; (hits + 1) x cost each."""
    asked: list[float] = []

    def cost(position: float) -> float:
        asked.append(position)
        return 0.5

    gdsf = GDSF(cost)
    root = page(1)
    assert gdsf.value(page(2, root)) == 0.5
    assert gdsf.value(page(3, root, hits=3)) == 2.0
    assert asked == [4]


# -------------------------------------------------------------- workload_aware.py
@pytest.mark.parametrize("depth, bucket", [(0, 0), (1, 1), (2, 2), (3, 2), (4, 3), (7, 3),
                                           (8, 4), (15, 4), (16, 5), (64, 5), (10**6, 5)])
def test_position_buckets_are_log2_and_capped(depth, bucket):
    assert position_bucket(depth) == bucket and bucket < NUM_BUCKETS


def test_reuse_probability_per_category_and_bucket():
    """Roots 1 and 3 (categories 1 and 3, bucket 0); pages 2 and 5 below page 1 (category
    1, bucket 1). (reused + 1) / (inserted + 2): every root 1/3 and the depth-1 pages 1/4
    before any hit (a key keeps the value of its insert). Page 1's first hit makes its
    class 2/3; page 5's first hit makes page 2's class 2/4, page 2's own first hit 3/4, and
    its second hit changes nothing."""
    policy = WorkloadAware()
    one, three = page(1), page(3)
    two, five = page(2, one), page(5, one)
    for made in (one, two, three, five):
        policy.on_insert(made)
    probabilities = [policy.reuse_probability(p) for p in (one, two, three, five)]
    assert probabilities == [1 / 3, 1 / 4, 1 / 3, 1 / 4]
    assert policy.key(two) == 1 / 3  # frozen when inserted, before page 5 (clock 0)
    one.num_hits = 1
    policy.on_access(one)
    assert policy.reuse_probability(one) == 2 / 3 and policy.reuse_probability(three) == 1 / 3
    five.num_hits = 1
    policy.on_access(five)
    assert policy.reuse_probability(two) == 2 / 4
    two.num_hits = 1
    policy.on_access(two)
    assert policy.reuse_probability(two) == 3 / 4
    two.num_hits = 2
    policy.on_access(two)
    assert policy.reuse_probability(two) == 3 / 4


def test_a_page_below_a_parent_the_policy_never_saw_starts_its_own_category():
    policy = WorkloadAware()
    orphan = page(8, page(7))
    policy.on_insert(orphan)
    sibling = page(9, page(7))
    policy.on_insert(sibling)
    assert policy.reuse_probability(orphan) == 1 / 3  # class (8, 1) alone, not (7, 1)


def test_an_evicted_page_is_forgotten_and_an_unknown_one_leaves_quietly():
    policy = WorkloadAware()
    root = page(1)
    policy.on_insert(root)
    policy.on_evict(root)
    policy.on_evict(page(2))
    assert policy._category == {} and policy._priority == {}
