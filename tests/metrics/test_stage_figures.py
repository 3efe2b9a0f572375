"""A staged run's per-stage figures worked by hand (metrics/stages.py): which stage each
request falls in, the span its serving figures are over, its goodput under both SLOs, and
its kept-up verdict, judged by its queue only when the stage offers a rate."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from prefixsim.config import load_config
from prefixsim.metrics.facts import TIMED
from prefixsim.metrics.stages import stage_index, stage_starts, stage_summaries, with_stage_column
from prefixsim.pipeline import simulate

DEMO = "traces/demo_chat.jsonl"
NAN = float("nan")


@pytest.fixture(scope="module")
def template():
    """Eight real request rows (every column a summary reads), to be given figures by hand."""
    config = load_config(None, {"trace.path": DEMO, "trace.max_requests": 8,
                                "engine.sample_interval_s": None})
    return simulate(config).requests


def facts(template, load: dict, **engine):
    config = load_config(None, {"trace.path": DEMO, **{f"load.{k}": v for k, v in
                                                       load.items()},
                                **{f"engine.{k}": v for k, v in engine.items()}})
    rows = template.copy()
    # stage 0 is [0, 10) s and gets nothing; stage 1, [10, 15), six; stage 2, [15, 20), two
    rows["arrival_s"] = [10.0, 11.0, 12.0, 13.0, 14.0, 14.5, 16.0, 17.0]
    rows["status"] = ["completed"] * 5 + ["rejected"] + ["completed"] * 2
    rows["ttft_ms"] = [10.0, 10.0, 20.0, 40.0, 90.0, NAN, 30.0, 30.0]
    rows["tpot_ms"] = [5.0, 5.0, 5.0, 500.0, 5.0, NAN, 5.0, 5.0]
    # the request of 11 s finishes last in stage 1: at 11 + 7 = 18 s
    rows["e2el_ms"] = [1000.0, 7000.0, 1000.0, 1000.0, 1000.0, NAN, 500.0, 500.0]
    return SimpleNamespace(config=config, requests=rows, mode=TIMED,
                           pool_tokens_per_replica=100_000, max_model_len=None)


RATE_STAGES = {"type": "poisson", "stages": [{"rate": 1.0, "duration_s": 10.0},
                                             {"rate": 2.0, "duration_s": 5.0},
                                             {"rate": 3.0, "duration_s": 5.0}]}
USER_STAGES = {"type": "concurrency", "stages": [{"users": 1, "duration_s": 10.0},
                                                 {"users": 4, "duration_s": 5.0},
                                                 {"users": 2, "duration_s": 5.0}]}


def test_stage_bounds_and_index():
    assert stage_starts([10.0, 5.0, 5.0]) == [0.0, 10.0, 15.0, 20.0]
    stages = load_config(None, {"trace.path": DEMO, "load.type": "poisson",
                                "load.stages": RATE_STAGES["stages"]}).load.stages
    # a stage owns [start, next start); past the last one, its index + 1
    assert stage_index(np.array([0, 9.999, 10, 14.99, 15, 20, 25]), stages).tolist() == \
        [0, 0, 1, 1, 2, 3, 3]
    column = with_stage_column(pd.DataFrame({"arrival_s": [3, 12]}), stages)["stage"]
    assert column.tolist() == [0, 1] and column.dtype == np.int64


def test_rate_stages_worked_by_hand(template):
    summaries = stage_summaries(facts(template, RATE_STAGES, goodput_ttft_ms=50.0,
                                      goodput_tpot_ms=100.0))
    empty, one, two = summaries
    assert (empty["stage"], empty["rate"], empty["users"], empty["start_s"],
            empty["duration_s"], empty["num_requests"]) == (0, 1.0, None, 0.0, 10.0, 0)
    assert (one["start_s"], one["duration_s"], one["num_requests"]) == (10.0, 5.0, 6)
    # stage 1: 5 completed; its last finishes at 18 s, 8 s after the stage began, so its
    # figures are over 8 s (longer than its 5 s): 5 / 8 = 0.625 requests/s
    assert one["duration"] == 8.0 and one["request_throughput"] == pytest.approx(0.625)
    # within TTFT <= 50 and TPOT <= 100 ms: 10, 10, 20 (40 has a TPOT of 500; 90 is late)
    assert one["request_goodput"] == pytest.approx(3 / 8)
    assert one["rejected"] == 1 and "mean_itl_ms" not in one
    # its queue: a quarter of 6 is 1 row, and the last is the rejected one, which never got
    # a first token: infinite growth (and 5 of 6 completed)
    assert (one["kept_up"], one["ttft_growth"]) == (False, float("inf"))
    # stage 2: two requests, both done by 17.5 s, within its 5 s: 2 / 5
    assert two["duration"] == 5.0 and two["request_throughput"] == pytest.approx(0.4)
    assert (two["kept_up"], two["ttft_growth"]) == (True, 0.0)  # a quarter of 2 is none


def test_user_stages_are_judged_by_their_completions_only(template):
    summaries = stage_summaries(facts(template, USER_STAGES))
    one = summaries[1]
    assert (one["rate"], one["users"]) == (None, 4)
    assert one["request_goodput"] is None  # no goodput SLOs
    # the same rows as the rate stage: 5 of 6 completed fails it, but no growth is judged
    assert one["kept_up"] is False and "ttft_growth" not in one
    rows = facts(template, USER_STAGES)
    rows.requests.loc[5, ["status", "ttft_ms", "e2el_ms"]] = ["completed", 900.0, 1000.0]
    grown = stage_summaries(rows)[1]  # TTFT 10 -> 900 ms: a closed loop keeps up
    assert grown["kept_up"] is True and "ttft_growth" not in grown
    rate_rows = facts(template, RATE_STAGES)
    rate_rows.requests.loc[5, ["status", "ttft_ms", "e2el_ms"]] = ["completed", 900.0, 1000.0]
    assert stage_summaries(rate_rows)[1]["ttft_growth"] == pytest.approx(90.0)
