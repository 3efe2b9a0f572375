"""TTLRule's own checks (docs/cache-semantics.md R12): a negative or NaN ttl is refused with
a message naming the value; zero and infinity are valid; only the sliding mode refreshes."""

import math

import pytest

from prefixsim.cache.ttl import TTLMode, TTLRule


@pytest.mark.parametrize("ttl_s, shown", [(-1.0, "-1.0"), (-1e-9, "-1e-09"), (math.nan, "nan")])
def test_a_negative_or_nan_ttl_is_refused_naming_it(ttl_s, shown):
    with pytest.raises(ValueError, match=f"^ttl_s must be >= 0, got {shown}$"):
        TTLRule(ttl_s)


def test_zero_and_infinity_are_valid_and_only_sliding_refreshes():
    assert TTLRule(0.0).refreshes_on_access
    assert not TTLRule(math.inf, TTLMode.FIXED).refreshes_on_access
    assert TTLRule(5.0).mode is TTLMode.SLIDING
