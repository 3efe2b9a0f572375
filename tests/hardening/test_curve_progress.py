"""Progress within each policy's replays (docs/input-rules.md I17): `curve --policy s3fifo`
on a long trace was silent for minutes, one tick per policy. Every policy's replay now tells
of every 2,000 requests as it goes; the trace here is written by the test, 6,000 requests.
"""

import json
import re
from pathlib import Path

import pytest
from cli_helpers import invoke

import prefixsim.cli.progress as progress
from prefixsim.analysis.policy_curves import policy_curves
from prefixsim.cache import POLICIES
from prefixsim.trace import load_trace

REQUESTS = 6000


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("curve") / "long.jsonl"
    with path.open("w") as stream:
        for i in range(REQUESTS):
            pages = [i % 30, 1000 + i % 900, 10_000 + i]  # chained: 30 divides 900
            stream.write(json.dumps({"timestamp": i * 10, "input_length": 3 * 512,
                                     "output_length": 4, "hash_ids": pages,
                                     "session_id": f"s{i % 30}"}) + "\n")
    return path


@pytest.mark.parametrize("policy", POLICIES.names())
def test_every_policy_replay_tells_of_progress_as_it_goes(long_trace, policy):
    """One capacity, one replay: three calls of 2,000 requests each, not one at the end."""
    told: list[tuple[str, int]] = []
    policy_curves(load_trace(long_trace), [4096], [policy], force_replay=True,
                  on_progress=lambda name, n: told.append((name, n)))
    assert [(name, n) for name, n in told if n] == [(policy, 2000)] * 3


def test_curve_s3fifo_prints_lines_during_its_replay(long_trace, monkeypatch):
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)
    result = invoke("curve", "--trace", long_trace, "--policy", "s3fifo",
                    "--capacities", "4096")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines()
             if line.startswith("prefixsim: curve") and "policy s3fifo" in line]
    counts = [int(m.group(1).replace(",", "")) for line in lines
              if (m := re.search(r": ([\d,]+)/12,000 req", line))]
    # the s3fifo replay (6,000) then the unbounded pass (6,000): lines within the replay
    assert sorted({c for c in counts if c <= REQUESTS}) == [2000, 4000, 6000]
