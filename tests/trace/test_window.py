"""trace.time_window: a share of the trace's time span, shifted and renumbered."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import prefixsim
from prefixsim.config import load_config
from prefixsim.errors import InputError
from prefixsim.trace import Request
from prefixsim.trace.window import time_window

DEMO = str(Path(__file__).resolve().parents[2] / "traces" / "demo_chat.jsonl")


def requests_at(*arrivals: float) -> list[Request]:
    return [Request(request_id=i, arrival_s=t, input_tokens=4, output_tokens=1,
                    page_ids=(i,), page_size_tokens=4) for i, t in enumerate(arrivals)]


def test_known_windows():
    """Arrivals 10, 20, 30, 50, 110: t0 = 10, span = 100.
    [0, 0.2) -> [10, 30): the first two, times unchanged.
    [0.2, 1] -> [30, 110] shifted back by 20: 30 -> 10, 50 -> 30, 110 -> 90; ids 0, 1, 2.
    [0.1, 0.3) -> [20, 40): 20 and 30, shifted by 10 -> 10, 20."""
    trace = requests_at(10, 20, 30, 50, 110)
    assert [r.arrival_s for r in time_window(trace, 0, 0.2)] == [10, 20]
    late = time_window(trace, 0.2, 1)
    assert [(r.request_id, r.arrival_s, r.page_ids) for r in late] == [
        (0, 10, (2,)), (1, 30, (3,)), (2, 90, (4,))]
    assert [r.arrival_s for r in time_window(trace, 0.1, 0.3)] == [10, 20]
    assert time_window([], 0, 0.5) == []
    with pytest.raises(ValueError):
        time_window(trace, 0.5, 0.5)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1e4, allow_nan=False), min_size=1, max_size=40),
       st.floats(0.01, 0.99))
def test_a_split_gives_every_request_to_one_part(arrivals, fraction):
    """[0, f) and [f, 1] partition the trace; the first part is the trace's own prefix."""
    trace = requests_at(*sorted(arrivals))
    train, test = time_window(trace, 0, fraction), time_window(trace, fraction, 1)
    assert len(train) + len(test) == len(trace)
    assert [r.arrival_s for r in train] == [r.arrival_s for r in trace[:len(train)]]
    assert [r.page_ids for r in train + test] == [r.page_ids for r in trace]
    assert [r.request_id for r in test] == list(range(len(test)))


def test_a_windowed_run_equals_a_run_of_the_filtered_requests():
    """The config option gives the same summary as replaying the window's requests by hand,
    and the summary names the window."""
    windowed = prefixsim.run(trace={"path": DEMO, "time_window": [0.5, 1]}, cache_only=True,
                             cache={"capacity_tokens": 20000})
    by_hand = time_window(prefixsim.load_trace(DEMO), 0.5, 1)
    direct = prefixsim.run(trace={"path": DEMO}, cache_only=True, requests=by_hand,
                           cache={"capacity_tokens": 20000})
    assert windowed.summary["num_requests"] == len(by_hand) < 264
    assert windowed.summary["cache_hit_tokens"] == direct.summary["cache_hit_tokens"]
    assert windowed.summary["trace_time_window"] == "0.5-1"


@pytest.mark.parametrize("window", [[0.6, 0.2], [0, 1.5], [-0.1, 0.5], [0.5, 0.5]])
def test_bad_windows_name_the_key(window):
    with pytest.raises(InputError) as error:
        load_config(overrides={"trace.path": DEMO, "trace.time_window": window})
    assert error.value.field == "trace.time_window"


def test_an_empty_window_is_an_input_error():
    with pytest.raises(InputError, match="no requests") as error:
        prefixsim.run(trace={"path": DEMO, "time_window": [0.99999, 0.999999]},
                      cache_only=True)
    assert error.value.field == "trace.time_window"


@pytest.mark.parametrize(("start", "end"), [(0.5, 1.5), (-0.1, 0.5), (0.5, 0.5), (0.6, 0.4)])
def test_a_window_outside_the_span_is_refused(start, end):
    with pytest.raises(ValueError) as error:
        time_window(requests_at(0, 1, 2), start, end)
    assert str(error.value) == f"expected 0 <= start < end <= 1, got [{start}, {end}]"
