"""The one prefix cache's calls (cache/protocol.py, `PrefixCache`): `SegmentCache` answers
them, and so does the per-page reference the differential tests compare it with, with the
same parameters in the same places and the same defaults (the engines call them by
position), so a test may hand either to an engine."""

from __future__ import annotations

import inspect

import pytest
from radix_reference import RadixCache

from prefixsim.cache import POLICIES, PrefixCache, SegmentCache, TTLRule

CALLS = [name for name, value in vars(PrefixCache).items()
         if inspect.isfunction(value) and not name.startswith("_")]


def test_the_protocol_names_the_step_calls():
    assert sorted(CALLS) == sorted([
        "available_tokens", "check_invariants", "evict", "expire", "insert", "lock", "match",
        "next_expiry_s", "pages", "relock", "release", "reserve", "touch", "unlock"])


@pytest.mark.parametrize("mode", ["radix", "block"])
@pytest.mark.parametrize("cache_class", [SegmentCache, RadixCache],
                         ids=["segments", "reference"])
def test_both_caches_are_prefix_caches(cache_class, mode):
    cache = cache_class(8, POLICIES.build("lru"), TTLRule(5), mode=mode)
    assert isinstance(cache, PrefixCache)


def test_a_cache_without_a_step_is_not_one():
    class NoExpiry:
        capacity_tokens = resident_tokens = locked_tokens = reserved_tokens = 0
        counters = on_demote = free_tokens = evictable_tokens = None

    for name in CALLS:
        if name != "expire":
            setattr(NoExpiry, name, lambda self, *args: None)
    assert not isinstance(NoExpiry(), PrefixCache)
    NoExpiry.expire = lambda self, now: 0
    assert isinstance(NoExpiry(), PrefixCache)


def _shape(function) -> list[tuple]:
    """A signature's parameters as the caller meets them by position: kind and default."""
    return [(p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("cache_class", [SegmentCache, RadixCache],
                         ids=["segments", "reference"])
def test_each_call_takes_the_protocols_parameters(cache_class, name):
    assert _shape(getattr(cache_class, name)) == _shape(getattr(PrefixCache, name))
