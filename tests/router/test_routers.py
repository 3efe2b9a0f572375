"""Router contracts: every registered router returns a valid replica; each one's rule."""

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.router import ROUTERS
from prefixsim.router.protocol import prefix_tokens_in
from prefixsim.trace import Request

P = 16


@dataclass
class FakeReplica:
    """A ReplicaView with a fixed load and a set of cached page ids."""

    index: int
    outstanding_tokens: int = 0
    pages: set = field(default_factory=set)

    def cached_page_ids(self):
        return self.pages

    def cached_prefix_tokens(self, request, now):
        return prefix_tokens_in(request, self.pages)


def req(rid, ids, tokens=None, session=None):
    return Request(rid, 0.0, tokens or len(ids) * P, 10, tuple(ids), P, session)


@pytest.mark.parametrize("name", ROUTERS.names())
@pytest.mark.parametrize("num", [1, 3, 8])
def test_every_router_returns_a_valid_index(name, num):
    router = ROUTERS.build(name)
    replicas = [FakeReplica(i, outstanding_tokens=(7 * i) % 5, pages={1, 2} if i == 1 else set())
                for i in range(num)]
    for rid in range(20):
        chosen = router.route(req(rid, [1, 2, 3], session=f"s{rid % 3}"), replicas, float(rid))
        assert 0 <= chosen < num


def test_round_robin_cycles():
    router = ROUTERS.build("round_robin")
    replicas = [FakeReplica(i) for i in range(3)]
    assert [router.route(req(i, [i]), replicas, 0.0) for i in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_least_loaded_picks_fewest_outstanding_tokens_ties_lowest_index():
    router = ROUTERS.build("least_loaded")
    replicas = [FakeReplica(0, 50), FakeReplica(1, 10), FakeReplica(2, 10)]
    assert router.route(req(0, [1]), replicas, 0.0) == 1


def test_session_affinity_is_sticky():
    router = ROUTERS.build("session_affinity")
    replicas = [FakeReplica(0, 0), FakeReplica(1, 5)]
    assert router.route(req(0, [1], session="a"), replicas, 0.0) == 0
    replicas[0].outstanding_tokens = 100  # now replica 0 is busier: "a" stays, "b" goes to 1
    assert router.route(req(1, [1], session="a"), replicas, 0.0) == 0
    assert router.route(req(2, [1], session="b"), replicas, 0.0) == 1
    assert router.route(req(3, [1], session=None), replicas, 0.0) == 1


def test_prefix_aware_trades_cached_prefix_against_load():
    """Replica 1 caches 3 pages (48 tokens) of a 64-token prompt: it wins while its extra load
    is below 48 tokens (load_weight 1), and loses beyond."""
    router = ROUTERS.build("prefix_aware")
    r = req(0, [1, 2, 3, 4])
    replicas = [FakeReplica(0, 0), FakeReplica(1, 47, {1, 2, 3})]
    assert router.route(r, replicas, 0.0) == 1
    replicas[1].outstanding_tokens = 49
    assert router.route(r, replicas, 0.0) == 0
    heavy = ROUTERS.build("prefix_aware", load_weight=0.0)  # cache only
    replicas[1].outstanding_tokens = 10**9
    assert heavy.route(r, replicas, 0.0) == 1


def test_prefix_aware_hit_is_capped_at_l_minus_1():
    r = req(0, [1, 2], tokens=20)  # pages of 16 + 4 tokens
    assert prefix_tokens_in(r, {1, 2}) == 16  # page 2 ends at token 20 > L - 1 (R3)
    assert prefix_tokens_in(r, {1}) == 16
    assert prefix_tokens_in(r, {2}) == 0  # not a prefix


def test_prefix_aware_staleness_uses_a_snapshot():
    """With staleness 10 s the router keeps the caches it saw at t=0 until t=10."""
    router = ROUTERS.build("prefix_aware", staleness_s=10.0)
    replicas = [FakeReplica(0, 0), FakeReplica(1, 5)]
    r = req(0, [1, 2, 3, 4])
    assert router.route(r, replicas, 0.0) == 0  # nothing cached: lower load
    replicas[1].pages = {1, 2, 3, 4}
    assert router.route(r, replicas, 9.9) == 0  # stale view: still nothing cached
    assert router.route(r, replicas, 10.0) == 1  # refreshed
    live = ROUTERS.build("prefix_aware")
    assert live.route(r, replicas, 0.0) == 1


def test_bad_parameters_fail():
    with pytest.raises(ValueError):
        ROUTERS.build("prefix_aware", load_weight=-1)
    with pytest.raises(ValueError, match="valid"):
        ROUTERS.build("random")


class FixedIndex:
    """A PrefixIndex stand-in: the same cached tokens per replica for every prompt."""

    def __init__(self, found):
        self.found = found

    def prefix_tokens(self, request, now):
        return dict(self.found)

    def prefix_token_list(self, request, now, count):
        return [float(self.found.get(i, 0)) for i in range(count)]


def best_by_reading_every_replica(found, loads, weight):
    """The rule, replica by replica: the highest found - weight x load, ties to the lower
    load, then the lower index."""
    key = [(found.get(i, 0) - weight * load, -load, -i) for i, load in enumerate(loads)]
    return max(range(len(loads)), key=key.__getitem__)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=12),
       st.dictionaries(st.integers(0, 11), st.integers(0, 8), max_size=6),
       st.sampled_from([0.0, 0.5, 1.0, 3.0]))
def test_prefix_aware_through_an_index_follows_the_rule_ties_included(loads, found, weight):
    """Routing through the index (which names only the replicas holding the prompt's
    first page) picks what the rule picks replica by replica, ties included: small loads
    and small cached counts tie often."""
    router = ROUTERS.build("prefix_aware", load_weight=weight)
    router._index = FixedIndex(found)
    replicas = [FakeReplica(i, outstanding_tokens=load) for i, load in enumerate(loads)]
    inside = {i: tokens for i, tokens in found.items() if i < len(loads)}
    assert router.route(req(0, [1, 2]), replicas, 0.0) == best_by_reading_every_replica(
        inside, loads, weight)
