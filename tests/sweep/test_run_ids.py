"""Run ids are stable across checkouts (docs/architecture.md: sweep): the bundled demo
sweeps' ids are pinned as an earlier release derived them, so a config key added since
(sweep/spec.py LATER_KEYS) must leave them as they were while at its default, and an old
sweep folder resumes (its finished runs are found by id)."""

from __future__ import annotations

from pathlib import Path

import pytest

from prefixsim.sweep import expand, load_spec
from prefixsim.sweep.spec import make_point

SWEEPS = Path(__file__).resolve().parents[2] / "traces" / "sweeps"
PINNED = {
    "demo": [
        "lru-5000-ffb16846", "lru-10000-edb5cf55", "lru-20000-65890e67",
        "lru-40000-f69ede0e", "lru-80000-71fe700c", "s3fifo-5000-af1344cb",
        "s3fifo-10000-2438fd73", "s3fifo-20000-46952147", "s3fifo-40000-be36216b",
        "s3fifo-80000-3b538cc7", "none-none-7429ce14", "none-10-239960da",
        "none-30-5c9ab19c", "none-120-5772de21",
    ],
    "timed_demo": [
        "round-robin-10000-4d0271d4", "round-robin-40000-10cdc578",
        "round-robin-160000-ea12507f", "prefix-aware-10000-319573e4",
        "prefix-aware-40000-8037f78b", "prefix-aware-160000-e8600684",
    ],
    "cluster_demo": [
        "4-76c6f4a0", "4-capacity-tokens-None-ded02933", "2-2-08b3d0c1",
        "2-2-capacity-tokens-None-464b9049", "1-1-10af0fc1",
        "1-1-capacity-tokens-None-e6fad662",
    ],
}


@pytest.mark.parametrize("name", PINNED)
def test_the_demo_sweeps_keep_their_run_ids(name):
    assert [p.run_id for p in expand(load_spec(SWEEPS / f"{name}.yaml"))] == PINNED[name]


def test_a_later_key_changes_the_id_only_when_set():
    plain = make_point({"cache_only": True}, {"cache.capacity_tokens": 5000})
    assert plain.run_id == "5000-0ac1cdf1"  # as derived before `load` and `model.config_path`
    loaded = make_point({"cache_only": True, "load": {"rate_scale": 2.0}},
                        {"cache.capacity_tokens": 5000})
    assert loaded.run_id.startswith("5000-") and loaded.run_id != plain.run_id
