"""`capacity.png`: latency against load for every probe of a capacity search.

Four panels: TTFT and TPOT (p50 and p99, ms, and each SLO's own statistic) against the
offered rate and against the achieved rate (requests/s; a replicas search plots against the
replicas instead of the offered rate, which it does not change). The answer's probe (the
knee) is marked with a vertical line, each SLO on a plotted latency with a horizontal one;
probes that failed are hollow. The drawing is the report's (report/plots_load.py), so
`prefixsim report` on the capacity folder shows the same figure. Returns PNG bytes; writing
is the CLI's.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from prefixsim.report.figures import plain_text, png_bytes
from prefixsim.report.plots_load import capacity_figure


def capacity_png(probes: pd.DataFrame, answer: dict[str, Any]) -> bytes:
    """The figure described in the module docstring, as PNG bytes."""
    with plain_text():
        return png_bytes(capacity_figure(probes, answer))
