"""bench/kv_cache_tester.py's cache per server (its docstring): the "gds_dram" server gets a
host tier holding the run's largest working set, which the periods' "fits" counts; the
"dram_only" server, whose tier size is unknown, gets none. With the data in ../shared
(skipped where absent), one gds_dram run replays with the tier and its periods beyond HBM
stay within the target."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

import pandas as pd
import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "kv_cache_tester.py"
_SPEC = importlib.util.spec_from_file_location("kv_cache_tester", _PATH)
kvt = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("kv_cache_tester", kvt)  # its dataclasses look their module up
_SPEC.loader.exec_module(kvt)


def _run(name: str, working_sets: list[int]) -> kvt.WorkingSetRun:
    periods = pd.DataFrame({"working_set_size": working_sets})
    return kvt.WorkingSetRun(name, 64_000, 10.0, pd.DataFrame(), periods)


def test_gds_dram_gets_a_tier_of_its_largest_working_set():
    run = _run("gds_dram_tp4_8126_10s", [640_000, 5_060_000, 3_000_000])
    assert kvt.host_tier_tokens(run) == 5_060_000
    assert kvt.cache_tokens(run, "h100-sxm") == kvt.pool_tokens("h100-sxm") + 5_060_000
    assert kvt._config("h100-sxm", [{"users": 1, "duration_s": 1.0}],
                       kvt.host_tier_tokens(run)).cache.host_capacity_tokens == 5_060_000


def test_dram_only_gets_hbm_alone():
    run = _run("dram_only_tp4_8125", [640_000, 5_060_000])
    assert kvt.host_tier_tokens(run) is None
    assert kvt.cache_tokens(run, "h200") == kvt.pool_tokens("h200")
    assert kvt._config("h200", [{"users": 1, "duration_s": 1.0}]).cache.host_capacity_tokens \
        is None


@pytest.mark.slow
@pytest.mark.skipif(not kvt.DEFAULT_DIR.is_dir(), reason=f"no data at {kvt.DEFAULT_DIR}")
def test_a_gds_dram_run_beyond_hbm_reads_its_tier():
    """gds_dram_tp4_8126_2s on an H100: the periods whose working set exceeds HBM are within
    30% of the measured mean TTFT (median), as those that fit HBM are."""
    run = kvt.load_runs(kvt.DEFAULT_DIR, ["gds_dram_tp4_8126_2s"])[0]
    simulated = kvt.simulated_periods(run, "h100-sxm", seed=0)
    pool = kvt.pool_tokens("h100-sxm")
    beyond = [abs(sim / row.avg_ttft - 1) for row, sim in zip(run.periods.itertuples(),
                                                              simulated, strict=True)
              if row.working_set_size > pool]
    assert beyond and statistics.median(beyond) <= kvt.TARGET
