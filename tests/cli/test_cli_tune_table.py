"""`prefixsim tune`'s closing table: columns apart and numbers formatted whatever their
size (cli/tune.py)."""

from __future__ import annotations

import re
from pathlib import Path

from prefixsim.cli.tune import _figure, _print_summary


def test_figures_known_answers():
    assert [_figure(v) for v in (None, 0.78871, 154.34, 154.0, 1_000_000.005, 5_597_061)] == \
        ["-", "0.7887", "154.3", "154", "1,000,000", "5,597,061"]
    assert [_figure(v, "+") for v in (0.0876, -4_597_061.0, 4_597_061.0)] == \
        ["+0.0876", "-4,597,061", "+4,597,061"]


def test_large_figures_stay_in_their_columns(capsys):
    summary = {
        "name": "t", "trials": {"total": 3, "complete": 3}, "split": True,
        "objectives": [{"key": "cache_capacity_tokens"}, {"key": "cache_token_hit_rate"}],
        "base": {"train": {"cache_capacity_tokens": 1_000_000.005,
                           "cache_token_hit_rate": 0.5},
                 "test": {"cache_capacity_tokens": 1_000_000, "cache_token_hit_rate": 0.4}},
        "base_feasible": {"train": True, "test": True},
        "best": [{"trial": 2, "params": {"cache.capacity_tokens": 5_597_061},
                  "train": {"cache_capacity_tokens": 5_597_061, "cache_token_hit_rate": 0.8},
                  "test": {"cache_capacity_tokens": 5_597_061, "cache_token_hit_rate": 0.7},
                  "retained": {"cache_token_hit_rate": 1.0}}],
    }
    _print_summary(summary, Path("out"))
    lines = capsys.readouterr().out.splitlines()
    table = [line for line in lines if line.startswith("  cache_")]
    assert len(table) == 4
    for line in table:  # five cells, each apart from the next by two spaces or more
        assert len(re.split(r"\s{2,}", line.strip())) == 5, line
    assert re.search(r"train  1,000,000  5,597,061 +\+4,597,061$", table[0]), table[0]
    assert re.search(r"train +0\.5000 +0\.8000 +\+0\.3000$", table[2]), table[2]
    header = next(line for line in lines if "objective" in line)
    assert header.index("best - base") + len("best - base") == len(table[0])  # aligned
