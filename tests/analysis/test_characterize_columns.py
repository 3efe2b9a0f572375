"""`characterize` and `popularity` of a trace kept by column (analysis/characterize.py,
report/trace_plots.py) against the same requests one by one: every figure equal, the TTL
hit rates included (the columns replay chunk-wise through the compressed cache)."""

from pathlib import Path

import numpy as np
import pytest

from prefixsim.analysis.characterize import characterize
from prefixsim.report.trace_plots import popularity, top_share
from prefixsim.trace import read_trace
from prefixsim.trace.columns import RequestColumns

ROOT = Path(__file__).resolve().parents[2]
MOONCAKE = ROOT.parent / "shared" / "traces" / "mooncake" / "conversation_trace.jsonl"


TRACES = [pytest.param(ROOT / "traces" / "demo_chat.jsonl", id="demo_chat"),
          pytest.param(MOONCAKE, id="mooncake", marks=pytest.mark.skipif(
              not MOONCAKE.exists(), reason=f"{MOONCAKE} absent (real data lives in ../shared)"))]


@pytest.mark.parametrize("path", TRACES)
def test_columns_give_the_figures_of_the_requests(path):
    columns = read_trace(path).requests
    assert isinstance(columns, RequestColumns)
    one_by_one = list(columns)
    assert characterize(columns) == characterize(one_by_one)
    reuses = popularity(columns)
    np.testing.assert_array_equal(reuses, popularity(one_by_one))
    assert top_share(reuses) == top_share(popularity(one_by_one))


def test_a_slice_and_sessions_by_hand():
    """Three requests, the last two of one session, pages (1, 2), (1, 2, 3), (4,): 6 pages,
    4 distinct, 1 session; reuses 1 and 2 used twice: [1, 1, 0, 0]. The slice from the
    second request starts its page ids past the first's."""
    import pyarrow as pa

    columns = RequestColumns(
        np.array([0, 1, 2]), np.array([0.0, 1.0, 4.0]), np.array([32, 48, 16]),
        np.array([5, 5, 5]), np.array([16, 16, 16]), np.array([0, 2, 5, 6]),
        np.array([1, 2, 1, 2, 3, 4]), pa.array([None, "s", "s"]))
    figures = characterize(columns)
    assert (figures["pages"], figures["distinct_pages"], figures["sessions"]) == (6, 4, 1)
    assert figures == characterize(list(columns))
    # token counts' least and most are whole numbers (printed min=16, not min=16.0000)
    assert figures["input_tokens"]["min"] == 16 and type(figures["input_tokens"]["min"]) is int
    assert figures["input_tokens"]["max"] == 48 and type(figures["input_tokens"]["max"]) is int
    assert type(figures["output_tokens"]["max"]) is int
    assert figures["input_tokens"]["mean"] == 32.0
    assert popularity(columns).tolist() == [1, 1, 0, 0]
    tail = columns[1:]
    assert characterize(tail) == characterize(list(tail))
    assert characterize(tail)["pages"] == 4
