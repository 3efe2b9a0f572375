"""How CacheRules picks a request's class (prefixsim/cache/classes.py, docs/cache-semantics.md
R12, R16), rule by rule and at each boundary, against `unit_hash` as the reference for the
seeded share; and which cache class `replay_cache` builds (prefixsim/cache/factory.py).
Simulated runs with classes are in tests/cache/test_ttl_classes.py."""

from __future__ import annotations

import pytest

from prefixsim.cache import POLICIES, CacheMode, SegmentCache, UnsupportedPolicy
from prefixsim.cache.classes import DEFAULT_RULE, CacheRules, RequestClass, RequestRule, unit_hash
from prefixsim.cache.factory import replay_cache
from prefixsim.trace import Request


def request(i: int = 0, tokens: int = 16, session: str | None = None) -> Request:
    return Request(i, 0.0, tokens, 1, (1,), 16, session)


def test_without_classes_or_minimum_every_request_gets_the_default_rule():
    """The default minimum is 0 tokens: even an empty prompt is cacheable."""
    rules = CacheRules()
    assert rules.for_request(request(tokens=0)) == DEFAULT_RULE


def test_a_class_whose_regex_does_not_match_passes_to_the_next():
    rules = CacheRules([RequestClass("vip", 60.0, 2, session_regex="^vip"),
                        RequestClass("rest", 7.0, 1)])
    assert rules.for_request(request(session="vip-1")) == RequestRule(True, 60.0, 2, "vip")
    assert rules.for_request(request(session="user-1")) == RequestRule(True, 7.0, 1, "rest")
    assert rules.for_request(request()).class_name == "rest"  # no session id: no regex match


def test_min_input_tokens_is_inclusive():
    rules = CacheRules([RequestClass("big", 60.0, min_input_tokens=100)])
    assert rules.for_request(request(tokens=100)).class_name == "big"
    assert rules.for_request(request(tokens=99)).class_name == "default"


def test_the_minimum_cacheable_prompt_is_inclusive():
    rules = CacheRules(min_cacheable_tokens=100)
    assert rules.for_request(request(tokens=100)).cacheable
    assert not rules.for_request(request(tokens=99)).cacheable


@pytest.mark.parametrize("seed", [None, 0, 5])
def test_the_share_picks_exactly_the_ids_hashing_below_it(seed):
    """A session is in the class iff unit_hash(session, seed) < share (the default seed is
    0); a request without a session hashes "request:<id>". A miss passes to the next
    class."""
    rules = CacheRules([RequestClass("half", 7.0, share=0.5), RequestClass("rest", 1.0)],
                       **({} if seed is None else {"seed": seed}))
    seed = seed or 0
    for i in range(60):
        session = f"s{i}"
        expected = "half" if unit_hash(session, seed) < 0.5 else "rest"
        assert rules.for_request(request(i, session=session)).class_name == expected
        expected = "half" if unit_hash(f"request:{i}", seed) < 0.5 else "rest"
        assert rules.for_request(request(i)).class_name == expected


def test_a_share_equal_to_the_hash_excludes_it():
    """The share is the half-open [0, share): an id hashing exactly to it is out."""
    share = unit_hash("s1", 0)
    rules = CacheRules([RequestClass("in", 7.0, share=share)])
    assert rules.for_request(request(session="s1")).class_name == "default"
    assert CacheRules([RequestClass("in", 7.0, share=share * 1.0000001)]).for_request(
        request(session="s1")).class_name == "in"


def test_unit_hash_known_answer():
    """blake2b-64 of "seed:key", read big-endian, over 2**64."""
    import hashlib

    digest = hashlib.blake2b(b"3:k", digest_size=8).digest()
    assert unit_hash("k", 3) == int.from_bytes(digest, "big") / 2**64
    assert unit_hash("k", 3) != int.from_bytes(digest, "little") / 2**64


@pytest.mark.parametrize("name", POLICIES.names())
def test_every_registered_policy_runs_on_the_segment_cache_in_every_mode(name):
    """One cache for every replay (docs/architecture.md "One prefix cache"): each registered
    policy, radix and block mode, timed (keys by access, paths not whole) or cache-only."""
    for mode in ("radix", "block"):
        for by_access in (False, True):
            for whole_paths in (False, True):
                cache = replay_cache(8, POLICIES.build(name), mode=mode, by_access=by_access,
                                     whole_paths=whole_paths)
                assert type(cache) is SegmentCache and cache.mode is CacheMode(mode)


def test_replay_cache_keeps_the_mode_it_is_given():
    """Block mode, whether the mode comes as the enum or its name."""
    for mode in (CacheMode.BLOCK, "block"):
        cache = replay_cache(8, POLICIES.build("lru"), mode=mode)
        assert type(cache) is SegmentCache and cache.mode is CacheMode.BLOCK and cache.block


def test_a_policy_that_declares_no_segment_form_is_refused_by_name():
    """A policy whose per-page hooks alone say how its pages go: refused, with the flags it
    could declare, before any cache is made. In radix mode a new key that declares nothing;
    in block mode a subclass that changes LRU's key (its own class declares no block form;
    radix mode takes LRU's `node_uniform`, which a subclass inherits)."""
    from prefixsim.cache.lru import LRU
    from prefixsim.cache.policy import Policy

    class ByPageId(Policy):
        name = "by-page-id"

        def key(self, page):
            return page.page_id

    class MostRecentFirst(LRU):
        name = "most-recent-first"

        def key(self, page):
            return -page.recency

    for policy, mode in ((ByPageId(), "radix"), (ByPageId(), "block"),
                         (MostRecentFirst(), "block")):
        with pytest.raises(UnsupportedPolicy, match=f"'{policy.name}' cannot run in {mode} "
                           "mode: its class declares none of node_uniform"):
            replay_cache(8, policy, mode=mode)


def test_parents_outlasting_children_serves_block_mode_only_on_whole_paths():
    """A policy whose own class declares only `parents_outlast_children` (and node-uniform
    keys): block mode takes the leaves radix mode takes only where every request touches
    its whole path (a cache-only replay); a timed replica's block mode refuses it."""
    from prefixsim.cache.lru import LRU

    class LeavesFirst(LRU):
        name = "leaves-first"
        parents_outlast_children = True

        def key(self, page):
            return page.recency

    cache = replay_cache(8, LeavesFirst(), mode="block", whole_paths=True)
    assert type(cache) is SegmentCache and cache.mode is CacheMode.BLOCK
    assert not cache.block  # no unlocked segment but a leaf is a victim
    with pytest.raises(UnsupportedPolicy, match="'leaves-first' cannot run in block mode"):
        replay_cache(8, LeavesFirst(), mode="block", whole_paths=False)
