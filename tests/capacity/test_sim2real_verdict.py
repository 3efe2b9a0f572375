"""bench/sim2real.py judges its capacity probes and its "saturates in simulation only" flag
by the capacity verdict on one open-loop stage's rows; the summary it hands the verdict
must carry the run's kept-up keys, or no queue would ever be seen growing (every probe
passing up to 2^20 times the start rate)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd

_PATH = Path(__file__).resolve().parents[2] / "bench" / "sim2real.py"
_SPEC = importlib.util.spec_from_file_location("sim2real", _PATH)
sim2real = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("sim2real", sim2real)  # its dataclasses look their module up
_SPEC.loader.exec_module(sim2real)


def rows(ttft_ms):
    n = len(ttft_ms)
    arrivals = np.arange(n, dtype=float)
    return pd.DataFrame({"arrival_s": arrivals, "status": ["completed"] * n,
                         "ttft_ms": ttft_ms, "finish_s": arrivals + 1.0})


def test_a_stage_whose_queue_grows_is_not_kept_up():
    assert sim2real.kept_up(rows([10.0] * 8))
    assert sim2real.kept_up(rows([10, 10, 5, 5, 5, 5, 20, 20]))  # 2x: at the limit
    assert not sim2real.kept_up(rows([10, 10, 20, 40, 80, 90, 25, 35]))  # 3x
    failed = rows([10.0] * 50)
    failed.loc[:1, "status"] = "failed"
    assert not sim2real.kept_up(failed)  # 48 of 50 completed: under 98%
