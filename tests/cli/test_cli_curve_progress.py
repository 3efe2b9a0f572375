"""`prefixsim curve` reports progress per policy and within each policy's replays
(cli/progress.py lines, every update here), and its count ends at the work it announced."""

from __future__ import annotations

import re

import pytest
from cli_helpers import DEMO, invoke

import prefixsim.cli.progress as progress
from prefixsim.analysis.policy_curves import curve_work, policy_curves
from prefixsim.trace import load_trace


def test_curve_lines_name_each_policy_and_reach_the_total(monkeypatch):
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)
    result = invoke("curve", "--trace", DEMO, "--policy", "lru,s3fifo",
                    "--capacities", "1000,5000,20000")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("prefixsim: curve")]
    # 264 requests: one stack pass for lru, three replays for s3fifo, the unbounded pass
    assert any("policy lru" in line for line in lines)
    assert sum("policy s3fifo" in line for line in lines) >= 3  # one line or more per replay
    counts = [int(m.group(1).replace(",", "")) for line in lines
              if (m := re.search(r": ([\d,]+)/1,320 req", line))]
    assert counts == sorted(counts) and counts[-1] == 5 * 264


@pytest.mark.parametrize("policies, force", [(["lru"], False), (["lru", "gdsf"], True)])
def test_progress_adds_up_to_curve_work(policies, force):
    """Every request of every pass is told once: the sum equals curve_work."""
    requests = load_trace(DEMO)
    told: dict[str, int] = {}

    def tell(policy: str, done: int) -> None:
        told[policy] = told.get(policy, 0) + done

    policy_curves(requests, [1000, 8000], policies, force_replay=force, on_progress=tell)
    assert list(told) == policies
    assert sum(told.values()) == curve_work(requests, [1000, 8000], policies,
                                            force_replay=force)


def test_inspect_reports_its_replays(monkeypatch):
    """`trace inspect` reads the trace (its bar) and then replays it five times (unbounded,
    then four TTLs): a line per replay, the last at 5/5."""
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)
    result = invoke("trace", "inspect", DEMO)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines()
             if line.startswith("prefixsim: inspect demo_chat.jsonl")]
    counts = [int(m.group(1)) for line in lines if (m := re.search(r": (\d)/5 replays", line))]
    assert counts == [1, 2, 3, 4, 5, 5]  # one a replay, and the closing line
    assert lines[-1].endswith(", done")
