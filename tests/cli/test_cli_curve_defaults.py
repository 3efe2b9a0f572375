"""`prefixsim curve` without --capacities: 20 capacities log-spaced from 0.01% of the
trace's distinct prefix tokens (at least a page) to all of them, where the curve reaches
the unbounded hit rate; the command says which it chose."""

from __future__ import annotations

import json

import pytest
from cli_helpers import DEMO, invoke

from prefixsim.cli.curve import default_capacities
from prefixsim.trace import load_trace
from prefixsim.trace.pages import distinct_prefix_tokens


def test_default_capacities_by_hand():
    caps = default_capacities(1_000_000, 16)
    assert len(caps) == 20 and caps[0] == 100 and caps[-1] == 1_000_000
    assert caps[1] == round(100 * 10 ** (4 / 19))  # four decades in 19 steps
    assert default_capacities(100_000, 512)[0] == 512  # at least a page
    assert default_capacities(300, 512) == [300]  # less than a page: the footprint alone
    assert default_capacities(0, 16) == [0]


def test_curve_without_capacities_ends_at_the_unbounded_rate():
    requests = load_trace(DEMO)
    footprint = distinct_prefix_tokens(requests)
    result = invoke("curve", "--trace", DEMO, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    caps = [p["capacity_tokens"] for p in report["points"]]
    assert caps == default_capacities(footprint, requests[0].page_size_tokens)
    assert caps[-1] == footprint
    assert report["points"][-1]["token_hit_rate"] == pytest.approx(
        report["unbounded_token_hit_rate"], abs=1e-12)
    assert (f"capacities: {len(caps)} log-spaced from {caps[0]:,} to {footprint:,} tokens "
            f"(the trace's {footprint:,} distinct prefix tokens") in result.stderr
