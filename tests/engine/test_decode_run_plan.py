"""`plan_decode_run` (engine/decode_run.py): (steps, covered) worked by hand for each branch,
on a fake cache whose free, evictable and freed-by-eviction tokens are set directly."""

import pytest

from prefixsim.engine.decode_run import plan_decode_run


class Cache:
    """Free and evictable tokens as given; `evict(n)` frees `frees` tokens (whole pages)."""

    def __init__(self, free: int, evictable: int = 0, frees: int = 0, ttl=None) -> None:
        self.free_tokens = free
        self.evictable_tokens = evictable
        self.frees = frees
        self.ttl = ttl
        self.evicted: list[int] = []

    def evict(self, num_tokens: int) -> None:
        self.evicted.append(num_tokens)
        self.free_tokens += self.frees
        self.evictable_tokens -= self.frees


def plan(cache, num_seqs=4, remaining=10, waiting=False, defers=False, max_run_steps=None,
         gap_pending=False):
    return plan_decode_run(cache, num_seqs, remaining, waiting, defers, max_run_steps,
                           gap_pending)


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({}, (5, 5)),  # 20 free tokens, 4 a step: 5 steps, all covered
    ({"remaining": 3}, (3, 3)),  # the completion comes first
    ({"defers": True}, (7, 5)),  # (20 free + 10 evictable) // 4 = 7 steps, later ones evict
    ({"defers": True, "remaining": 6}, (6, 5)),  # capped by the completion
    ({"defers": True, "remaining": 5}, (5, 5)),  # all covered: nothing to defer
    ({"waiting": True}, (5, 5)),  # a waiting request, no eviction, no TTL: the free memory
    ({"max_run_steps": 2}, (2, 2)),
    ({"max_run_steps": 9}, (5, 5)),  # a cap above the plan changes nothing
    ({"defers": True, "max_run_steps": 6}, (6, 5)),
    ({"gap_pending": True}, (1, 1)),
    ({"defers": True, "gap_pending": True}, (1, 1)),
])
def test_no_eviction_by_hand(kwargs, expected):
    cache = Cache(free=20, evictable=10)
    assert plan(cache, **kwargs) == expected
    assert cache.evicted == []


def test_waiting_with_a_ttl_steps_one_by_one():
    assert plan(Cache(free=20, ttl=object()), waiting=True) == (1, 1)


def test_exactly_enough_free_for_one_step_evicts_nothing():
    cache = Cache(free=4, evictable=40, frees=16)
    assert plan(cache) == (1, 1)
    assert cache.evicted == []


def test_first_step_evicts_then_covers_what_it_freed():
    """3 free, 4 needed: evict(4) frees a 16-token page, 19 free: 4 steps covered. With a
    request waiting, a run that evicted stops after one step."""
    cache = Cache(free=3, evictable=40, frees=16)
    assert plan(cache) == (4, 4)
    assert cache.evicted == [4]
    cache = Cache(free=3, evictable=40, frees=16)
    assert plan(cache, waiting=True) == (1, 1)
    cache = Cache(free=3, evictable=40, frees=16)
    assert plan(cache, defers=True) == ((19 + 24) // 4, 4)


def test_nothing_evictable_still_covers_one_step():
    cache = Cache(free=2)
    assert plan(cache) == (1, 1)
    assert cache.evicted == [4]
