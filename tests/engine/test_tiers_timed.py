"""Host tier in the timed engine (docs/cache-semantics.md R15): an HBM miss found in host DRAM is a
host
hit, and its load time (bytes / link bandwidth) is added before the prefill chunk."""

from __future__ import annotations

import pytest

from prefixsim.cache import POLICIES, SegmentCache
from prefixsim.cache.tiers import TierSpec, TierStack
from prefixsim.config import load_config
from prefixsim.costmodel import PrefillChunk, StepBatch, StepRoofline
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.pipeline import simulate
from prefixsim.presets import get_gpu, get_model
from prefixsim.router import ROUTERS
from prefixsim.trace import Request

# each test runs on the package's cache and on the per-page reference (conftest: each_cache)
pytestmark = pytest.mark.usefixtures("each_cache")
Cache = SegmentCache


COST = StepRoofline(get_model("llama-3.1-8b"), get_gpu("h100-sxm"))
KV = 131_072  # bytes per token, llama-3.1-8b bf16
LINK = 50e9
P = 16


def prefill_s(n: int, c: int) -> float:
    return COST.step_time_s(StepBatch((PrefillChunk(n, c),)))


TRACE = [
    Request(0, 0.0, 32, 1, (1, 2), P),  # a1 a2
    Request(1, 10.0, 48, 1, (11, 12, 13), P),  # b1 b2 b3: evicts a2 (demoted)
    Request(2, 20.0, 48, 1, (1, 2, 3), P),  # a1 in HBM, a2 in host, 3 new
]


def run(with_host: bool):
    cache = Cache(64, POLICIES.build("lru"))
    tiers = [TierStack(cache, [TierSpec("host", 1000, LINK)])] if with_host else None
    return replay_timed(TRACE, Fleet([cache], COST, ContinuousBatching(8192, 256),
                        ROUTERS.build("round_robin"), tiers=tiers, kv_bytes_per_token=KV),
                        Sampling(check_invariants=True))


def test_host_hit_in_timed_mode_with_its_load_time():
    """HBM of 64 tokens. r1 needs 48 with 32 free: LRU evicts a2 (16 tokens) to host. r2:
    a1 hits in HBM (16), a2 in host (16): cached 32, of which host 16; TTFT = load of 16
    tokens (16 * 131,072 B / 50 GB/s = 41.9 us) + prefill(16 new after 32). Without the
    host tier: cached 16, TTFT = prefill(32 new after 16)."""
    plain = run(False).records[2]
    assert (plain.cached_tokens, plain.cached_tokens_host) == (16, 0)
    assert plain.ttft_ms == pytest.approx(prefill_s(32, 16) * 1e3, rel=1e-9)
    tiered = run(True).records[2]
    assert (tiered.cached_tokens, tiered.cached_tokens_host) == (32, 16)
    load = 16 * KV / LINK
    assert load == pytest.approx(41.943e-6, rel=1e-4)
    assert tiered.ttft_ms == pytest.approx((load + prefill_s(16, 32)) * 1e3, rel=1e-9)


def test_timed_summary_has_the_unbounded_bound():
    trace = [Request(i, float(i), 64, 2, (1, 2, 3, 100 + i), P) for i in range(6)]
    timed = simulate(load_config(overrides={"cache.capacity_tokens": 4096}), trace).summary
    only = simulate(load_config(overrides={"cache_only": True}), trace).summary
    assert timed["cache_unbounded_token_hit_rate"] == only["cache_token_hit_rate"]
    assert only["cache_token_hit_rate"] == pytest.approx(5 * 48 / (6 * 64))
