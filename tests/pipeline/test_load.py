"""Open-loop loads (pipeline/load.py, metrics/stages.py; docs/load.md), by known answers.

Worked by hand:
- constant, rate r: request i arrives at i / r (r = 4: 0, 0.25, 0.5, ...).
- trace, rate_scale 2: every arrival halves (0, 0.3, 0.6 -> 0, 0.15, 0.3).
- poisson, rate r: the gaps are exponential of mean 1 / r, so over n = 10,000 gaps their
  mean is 1 / r within 3 sigma = 3 / (r sqrt(n)) (r = 5: 0.2 +- 0.006); one seed gives one
  sequence, another seed another.
- two constant stages, 2 req/s for 3 s then 1 req/s for 2 s, over 20 requests a second
  apart in the trace: stage 0 offers 0, 0.5, ..., 2.5 (6 requests, 3.0 is its end), stage 1
  starts at 3 s and offers 3, 4 (2 requests; 5 is the end of the last stage), the other 12
  are not offered: 8 rows, stage column [0]*6 + [1]*2, per-stage counts 6 and 2.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from prefixsim.config import build_config, load_config
from prefixsim.metrics.schema import schema_key
from prefixsim.pipeline import FrameRows, simulate
from prefixsim.pipeline.inputs import resolve_trace_defaults
from prefixsim.pipeline.load import ArrivalClock, RetimedStream, retime_requests
from prefixsim.trace import Request
from prefixsim.trace.columns import as_columns
from prefixsim.trace.generate import generate, load_preset
from prefixsim.trace.stream import open_stream
from prefixsim.trace.write import mooncake_lines

TWO_STAGES = {"type": "constant", "stages": [{"rate": 2.0, "duration_s": 3.0},
                                            {"rate": 1.0, "duration_s": 2.0}]}


def _trace(count: int = 20, gap_s: float = 1.0) -> list[Request]:
    return [Request(i, i * gap_s, 1024, 8, (i % 3 * 10 + 1, i % 3 * 10 + 2), 512)
            for i in range(count)]


def _load(**keys):
    return build_config({"load": keys}).load


def test_constant_rate_gives_i_over_r():
    retimed = retime_requests(_trace(10, 0.3), _load(type="constant", rate=4.0))
    assert [r.arrival_s for r in retimed] == [i / 4.0 for i in range(10)]
    assert [r.input_tokens for r in retimed] == [1024] * 10  # only the times change


def test_rate_scale_two_halves_every_arrival():
    trace = _trace(10, 0.3)
    retimed = retime_requests(trace, _load(rate_scale=2.0))
    assert [r.arrival_s for r in retimed] == [r.arrival_s / 2.0 for r in trace]
    assert retimed[3].arrival_s == pytest.approx(0.45)


def test_poisson_mean_gap_within_three_sigma_and_seeded():
    rate, count = 5.0, 10_001
    times = ArrivalClock(_load(type="poisson", rate=rate, seed=7)).times(np.zeros(count))
    gaps = np.diff(times)
    assert times[0] == 0.0
    assert abs(gaps.mean() - 1 / rate) < 3 / (rate * np.sqrt(len(gaps)))
    again = ArrivalClock(_load(type="poisson", rate=rate, seed=7)).times(np.zeros(count))
    other = ArrivalClock(_load(type="poisson", rate=rate, seed=8)).times(np.zeros(count))
    assert np.array_equal(times, again) and not np.array_equal(times, other)


def test_times_do_not_depend_on_the_chunks():
    for keys in ({"type": "poisson", "rate": 3.0, "seed": 1},
                 {"type": "poisson", "stages": [{"rate": 3.0, "duration_s": 2.0},
                                                {"rate": 9.0, "duration_s": 1.0}]},
                 TWO_STAGES):
        whole = ArrivalClock(_load(**keys)).times(np.zeros(40))
        clock = ArrivalClock(_load(**keys))
        parts = [clock.times(np.zeros(n)) for n in (1, 5, 3, 17, 14)]
        assert np.array_equal(np.concatenate(parts), whole)


@pytest.mark.parametrize("cache_only", [True, False])
def test_two_constant_stages_by_hand(cache_only):
    config = build_config({"cache_only": cache_only, "load": TWO_STAGES})
    sink = FrameRows()
    result = simulate(config, _trace(), sink=sink)
    rows = sink.frame()
    assert rows["arrival_s"].tolist() == pytest.approx([0, 0.5, 1, 1.5, 2, 2.5, 3, 4])
    assert rows["stage"].tolist() == [0] * 6 + [1] * 2
    assert result.requests["stage"].tolist() == [0] * 6 + [1] * 2
    stages = result.summary["stages"]
    assert [s["stage"] for s in stages] == [0, 1]
    assert [s["num_requests"] for s in stages] == [6, 2]
    assert [s["completed"] for s in stages] == [6, 2]
    assert [s["rate"] for s in stages] == [2.0, 1.0]
    assert [s["start_s"] for s in stages] == [0.0, 3.0]
    assert [s["total_input_tokens"] for s in stages] == [6 * 1024, 2 * 1024]
    assert result.summary["num_requests"] == 8
    json.dumps(result.summary, allow_nan=True)  # summary.json can hold it
    if not cache_only:  # every stage served well within its span: offered rate
        assert [s["request_throughput"] for s in stages] == pytest.approx([2.0, 1.0])
        assert not any(key.endswith("_itl_ms") for key in stages[0])
    assert all(schema_key(key) is not None for key in result.summary)


def test_no_load_keeps_the_columns_and_times():
    trace = _trace(10, 0.3)
    result = simulate(build_config({"cache_only": True}), trace)
    assert "stage" not in result.requests.columns and "stages" not in result.summary
    assert result.requests["arrival_s"].tolist() == [r.arrival_s for r in trace]


def test_columns_and_records_are_retimed_alike():
    trace = _trace(30, 0.7)
    load = _load(**TWO_STAGES)
    records = retime_requests(trace, load)
    columns = retime_requests(as_columns(trace), load)
    assert [r.arrival_s for r in records] == columns.arrival_s.tolist()
    assert [dataclasses.astuple(r) for r in records] == [dataclasses.astuple(r)
                                                         for r in columns]


@pytest.mark.parametrize("cache_only", [True, False])
def test_streamed_road_matches_the_whole_road(tmp_path, cache_only):
    requests = generate(load_preset("chat"), 400, seed=2)
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(mooncake_lines(requests)))
    load = {"type": "poisson", "stages": [{"rate": 20.0, "duration_s": 5.0},
                                          {"rate": 40.0, "duration_s": 4.0}], "seed": 4}
    config = resolve_trace_defaults(load_config(None, {
        "trace.path": str(path), "cache_only": cache_only, "load": load}))
    streamed_rows, whole_rows = FrameRows(), FrameRows()
    streamed = simulate(config, sink=streamed_rows, stream=True)
    whole = simulate(config, sink=whole_rows)
    assert streamed.streamed and not whole.streamed
    pd.testing.assert_frame_equal(streamed_rows.frame(), whole_rows.frame())
    assert 0 < len(whole_rows.frame()) < 400
    for a, b in zip(streamed.summary["stages"], whole.summary["stages"], strict=True):
        assert a.keys() == b.keys()
        assert all(a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]) for k in a)


def test_retimed_stream_answers_like_its_chunks(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(mooncake_lines(generate(load_preset("chat"), 200, seed=1))))
    inner = open_stream(path, "mooncake", 512, None)
    for load in (_load(rate_scale=3.0), _load(type="constant", rate=50.0)):
        stream = RetimedStream(inner, load)
        last = [float(chunk.arrival_s[-1]) for chunk in stream][-1]
        assert stream.last_arrival_s(inner.first_arrival_s()) == last
