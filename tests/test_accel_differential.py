"""Compiled against pure, on random workloads (docs/architecture.md "Compiled hot modules").

Hypothesis draws a batch of small random workloads (sessions that share prefixes, bursts,
long outputs) with random configurations (timed with 1-3 replicas or 1P1D / 2P1D, each
router, small caches that evict and preempt, TTLs, LRU / FIFO / S3-FIFO, cache-only
replays), and one child process replays the whole batch on the sources (PREFIXSIM_PURE=1)
and another on the compiled hot modules: every request row and every summary figure but the
wall times must be equal. One child per path, not per example, because a child's start is
most of the cost; no shrinking (a failure names its workload index and first differing
column instead).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from prefixsim import accel

ROOT = Path(__file__).resolve().parents[1]

# Replays the workloads of a JSON file and pickles (rows, summary) per workload.
WORKER = """
import json, pickle, sys
from prefixsim import accel
accel.install_if_asked()
from prefixsim.config import load_config
from prefixsim.pipeline import simulate
from prefixsim.trace import Request
out = []
for work in json.load(open(sys.argv[1])):
    requests = [Request(*r) for r in work["requests"]]
    result = simulate(load_config(None, work["config"]), requests)
    out.append((result.requests, result.summary))
pickle.dump((accel.code_path(), out), open(sys.argv[2], "wb"))
"""

P = 16  # tokens per page


@st.composite
def workload(draw) -> dict:
    sessions = draw(st.integers(1, 4))
    roots = [[draw(st.integers(1, 3))] for _ in range(sessions)]  # shared first pages
    requests, next_page, now = [], 100, 0.0
    for i in range(draw(st.integers(2, 14))):
        now += draw(st.sampled_from([0.0, 0.01, 0.2, 1.0, 5.0]))
        session = draw(st.integers(0, sessions - 1))
        grow = draw(st.integers(1, 4))
        roots[session] = roots[session] + list(range(next_page, next_page + grow))
        next_page += grow
        pages = roots[session]
        tokens = P * (len(pages) - 1) + draw(st.integers(1, P))
        requests.append([i, now, tokens, draw(st.integers(1, 40)), pages, P, f"s{session}"])
    config: dict = {"trace.path": "differential", "model.name": "llama-3.1-8b",
                    "hardware.gpu": "h100-sxm", "engine.sample_interval_s": None,
                    "cache.policy": draw(st.sampled_from(["lru", "fifo", "s3fifo"]))}
    if draw(st.booleans()):
        config["cache.capacity_tokens"] = draw(st.integers(8, 40)) * P
    if draw(st.booleans()):
        config["cache.ttl_s"] = draw(st.sampled_from([0.5, 3.0]))
    mode = draw(st.sampled_from(["cache_only", "timed", "timed", "pd"]))
    if mode == "cache_only":
        config["cache_only"] = True
    else:
        config["scheduler.max_num_seqs"] = draw(st.sampled_from([2, 8, 64]))
        config["scheduler.max_batched_tokens"] = draw(st.sampled_from([64, 8192]))
        config["router.name"] = draw(st.sampled_from(
            ["round_robin", "least_loaded", "prefix_aware", "session_affinity"]))
        if mode == "pd":
            config["engine.prefill_replicas"] = draw(st.integers(1, 2))
            config["engine.decode_replicas"] = 1
        else:
            config["engine.replicas"] = draw(st.integers(1, 3))
    return {"requests": requests, "config": config}


def _replay(batch: Path, out: Path, env: dict[str, str]) -> tuple[dict, list]:
    subprocess.run([sys.executable, "-c", WORKER, str(batch), str(out)], env=env, check=True,
                   cwd=ROOT)
    with out.open("rb") as f:
        return pickle.load(f)


def _compiled_env() -> dict[str, str] | None:
    """The environment of a child importing every hot module compiled, or None (skip)."""
    if not all(accel.status().values()):
        return None
    env = {**os.environ, "PREFIXSIM_PURE": "0", accel.ASK: "1"}
    return env


@pytest.mark.heavy  # .ci/run's second step, where the install compiled the hot modules
@pytest.mark.skipif(_compiled_env() is None,
                    reason="no compiled copy of every hot module's current source (install "
                           "without a C compiler, or edited since: prefixsim accelerate)")
@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batch=st.lists(workload(), min_size=25, max_size=25))
def test_compiled_modules_replay_random_workloads_as_the_sources(batch, tmp_path):
    path = tmp_path / "batch.json"
    path.write_text(json.dumps(batch))
    pure_path, pure = _replay(path, tmp_path / "pure.pickle",
                              {**os.environ, "PREFIXSIM_PURE": "1"})
    fast_path, fast = _replay(path, tmp_path / "compiled.pickle", _compiled_env())
    assert pure_path["code_path"] == "pure" and fast_path["code_path"] == "compiled"
    for index, ((rows, summary), (fast_rows, fast_summary)) in enumerate(
            zip(pure, fast, strict=True)):
        where = f"workload {index}: {batch[index]['config']}"
        pd.testing.assert_frame_equal(fast_rows, rows, check_exact=True, obj=where)
        skip = {"code_path", "compiled_modules", "command"}
        skip |= {key for key in summary if "wall" in key}
        assert {k: v for k, v in fast_summary.items() if k not in skip} == \
            {k: v for k, v in summary.items() if k not in skip}, where
