"""The timed run's unbounded bound reads TTLs on the engine's clock (arrival x time_scale),
as the run itself does."""

from __future__ import annotations

from prefixsim.config import load_config
from prefixsim.pipeline import simulate
from prefixsim.trace import Request


def _two_visits() -> list[Request]:
    """Two 64-token prompts over the same 4 pages of 16 tokens, 10 s apart."""
    return [Request(0, 0.0, 64, 1, (1, 2, 3, 4), 16), Request(1, 10.0, 64, 1, (1, 2, 3, 4), 16)]


def _bound(time_scale: float) -> float:
    config = load_config(None, {"cache.ttl_s": 15.0, "engine.time_scale": time_scale,
                                "trace.path": "unused.jsonl"})
    return simulate(config, _two_visits()).summary["cache_unbounded_token_hit_rate"]


def test_the_bound_sees_the_scaled_gap():
    """Unscaled, the second visit comes 10 s after the first, within the 15 s TTL: it hits
    63 of 64 tokens (the cache-only cap L - 1), 63 / 128 of all prompt tokens. At time scale
    2 the gap is 20 s on the engine's clock: the pages expired, the bound is 0."""
    assert _bound(1.0) == 63 / 128
    assert _bound(2.0) == 0.0
