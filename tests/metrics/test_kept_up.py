"""The kept-up rule a timed run reports (metrics/kept_up.py; docs/load.md "kept up"): known
answers worked by hand, the summary keys of real runs that keep up, fall behind or reject
requests, the warnings `prefixsim run` prints, and the capacity search judging by the same
rule."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from prefixsim.capacity import verdict
from prefixsim.cli import app
from prefixsim.config import load_config
from prefixsim.metrics import kept_up
from prefixsim.metrics.kept_up import kept_up_keys, ttft_growth, with_stages
from prefixsim.pipeline import simulate

DEMO = "traces/demo_chat.jsonl"


def frame(ttft_ms, status=None, arrival_s=None, input_tokens=None) -> pd.DataFrame:
    n = len(ttft_ms)
    return pd.DataFrame({
        "arrival_s": np.arange(n, dtype=float) if arrival_s is None else arrival_s,
        "ttft_ms": np.asarray(ttft_ms, dtype=float),
        "status": ["completed"] * n if status is None else status,
        "input_tokens": [100] * n if input_tokens is None else input_tokens,
    })


def test_growth_known_answer_in_arrival_order():
    # 8 requests, quarters of 2: first (1 + 3) / 2 = 2, last (8 + 12) / 2 = 10 -> 5x; the
    # rows are given out of arrival order and the middle ones do not count
    rows = frame([12, 1, 50, 8, 3, 50, 50, 50], arrival_s=[7.0, 0.0, 2.0, 6.0, 1.0, 3.0,
                                                           4.0, 5.0])
    assert ttft_growth(rows) == pytest.approx(5.0)


def test_growth_edge_cases():
    assert ttft_growth(frame([5.0, 5.0, 5.0])) == 0.0  # no quarter
    assert ttft_growth(frame([math.nan, 1, 1, 1])) == 0.0  # nothing to compare against
    assert ttft_growth(frame([1, 1, 1, math.nan])) == math.inf  # the last never started
    assert ttft_growth(frame([0, 0, 1, 1, 1, 1, 5, 5])) == 0.0  # no first-quarter wait
    # rejected requests have no TTFT: the quarter's mean is over those that have one
    assert ttft_growth(frame([2, math.nan, 1, 1, 6, math.nan, 4, 4])) == pytest.approx(2.0)
    assert ttft_growth(pd.DataFrame({"arrival_s": [0.0]})) == 0.0


def test_steady_open_loop_keeps_up_without_a_warning():
    keys = kept_up_keys(frame([10, 12, 11, 30, 9, 14, 20, 19]), True, 1000)
    assert keys == {"ttft_growth": pytest.approx(19.5 / 11), "kept_up": True}
    at_the_limit = kept_up_keys(frame([10, 10, 5, 5, 5, 5, 20, 20]), True, 1000)
    assert at_the_limit == {"ttft_growth": 2.0, "kept_up": True}  # "at most twice"


def test_growing_queue_warns_with_its_figure():
    keys = kept_up_keys(frame([10, 10, 20, 40, 80, 90, 25, 35]), True, 1000)
    assert keys["kept_up"] is False and keys["ttft_growth"] == pytest.approx(3.0)
    assert "3.0x the first quarter's" in keys["kept_up_warning"]
    assert "prefixsim capacity --search replicas" in keys["kept_up_warning"]
    assert "rejected_warning" not in keys


def test_closed_loop_judges_completions_only():
    keys = kept_up_keys(frame([10, 10, 20, 40, 80, 90, 250, 350]), False, 1000)
    assert keys == {"kept_up": True}


@pytest.mark.parametrize(("rejected", "kept"), [(1, True), (2, True), (3, False)])
def test_rejections_warn_and_more_than_two_percent_fail(rejected, kept):
    status = ["rejected"] * rejected + ["completed"] * (100 - rejected)
    tokens = [5000 + i for i in range(rejected)] + [100] * (100 - rejected)
    ttft = [math.nan] * rejected + [10.0] * (100 - rejected)
    keys = kept_up_keys(frame(ttft, status=status, input_tokens=tokens), True, 4096)
    assert keys["kept_up"] is kept
    assert keys["rejected_warning"].startswith(f"{rejected} of 100 requests were rejected")
    assert "KV pool of 4,096 tokens" in keys["rejected_warning"]
    assert f"longest rejected prompt has {5000 + rejected - 1:,} tokens" in \
        keys["rejected_warning"]
    if not kept:
        assert "only 97.0% of the requests completed" in keys["kept_up_warning"]
        assert "larger KV pool" in keys["kept_up_warning"]
        assert "queue grew" not in keys["kept_up_warning"]


def test_the_smaller_limit_is_named_with_its_remedy():
    status = ["rejected"] * 5 + ["completed"] * 5
    rows = frame([math.nan] * 5 + [10.0] * 5, status=status,
                 input_tokens=[200_000] * 5 + [100] * 5)
    by_context = kept_up_keys(rows, True, 450_911, 131_072)
    assert "the model's context (max_model_len) of 131,072 tokens" in \
        by_context["rejected_warning"]
    assert "a model with a longer context" in by_context["kept_up_warning"]
    by_pool = kept_up_keys(rows, True, 100_000, 131_072)
    assert "a replica's KV pool of 100,000 tokens" in by_pool["rejected_warning"]
    assert "a larger KV pool" in by_pool["kept_up_warning"]
    assert "KV pool of 100,000" in kept_up_keys(rows, True, 100_000, None)["rejected_warning"]


def test_warnings_word_for_word():
    # both reasons at once, the remedy of each, joined as one warning (hand-written: a
    # user reads these lines, so the whole text is pinned)
    status = ["rejected"] * 3 + ["completed"] * 97
    ttft = [math.nan] * 3 + [10.0] * 25 + [20.0] * 47 + [40.0] * 25
    keys = kept_up_keys(frame(ttft, status=status,
                              input_tokens=[9000, 8000, 7000] + [100] * 97), True, 4096)
    assert keys["rejected_warning"] == (
        "3 of 100 requests were rejected: a prompt plus its output longer than a replica's "
        "KV pool of 4,096 tokens (the longest rejected prompt has 9,000 tokens); no latency "
        "figure counts them")
    assert keys["ttft_growth"] == pytest.approx(4.0)  # first quarter (10 x 22) / 22 = 10
    assert keys["kept_up_warning"] == (
        "the fleet did not keep up: only 97.0% of the requests completed (at least 98% keep "
        "up); a larger KV pool would serve them (a larger GPU, more GPUs per replica: --tp, "
        "or more --cache-tokens); and the queue grew: the last quarter's mean TTFT is 4.0x "
        "the first quarter's, so the latencies measure a backlog, not the server; more "
        "replicas, GPUs per replica (--tp) or a faster GPU would keep up (`prefixsim "
        "capacity --search replicas` finds the fewest replicas that do)")
    by_context = kept_up_keys(frame(ttft, status=status), False, None, 131_072)
    assert by_context["kept_up_warning"] == (
        "the fleet did not keep up: only 97.0% of the requests completed (at least 98% keep "
        "up); a model with a longer context would serve them (or --max-model-len, where the "
        "model supports more)")
    assert "longer than a replica's KV pool (the longest" in \
        kept_up_keys(frame(ttft, status=status), False, None, None)["rejected_warning"]


def test_limits_equal_name_the_pool_and_nothing_run_nothing_rejected():
    status = ["rejected"] + ["completed"] * 9
    rows = frame([math.nan] + [10.0] * 9, status=status)
    assert "a replica's KV pool of 4,096 tokens" in \
        kept_up_keys(rows, False, 4096, 4096)["rejected_warning"]
    assert "max_model_len) of 4,095" in kept_up_keys(rows, False, 4096, 4095)["rejected_warning"]
    assert kept_up_keys(frame([]), True, 4096) == {"ttft_growth": 0.0, "kept_up": True}
    assert kept_up_keys(frame([]), False, 4096) == {"kept_up": True}


def test_growth_below_a_millisecond_and_with_equal_arrivals():
    # TTFTs under a millisecond still compare (0.25 ms -> 1 ms: 4x)
    assert ttft_growth(frame([0.25] * 4 + [1.0] * 4 + [1.0] * 4 + [1.0] * 4)) == \
        pytest.approx(4.0)
    # requests arriving together keep their row order (a stable sort): 200 rows at t = 1
    # after 200 at t = 0, given interleaved; TTFT = row number, so the first quarter is the
    # first 100 rows at t = 0 (1, 3, .., 199: mean 100) and the last the last 100 at t = 1
    # (202, 204, .., 400: mean 301)
    rows = frame(list(range(1, 401)), arrival_s=[0.0, 1.0] * 200)
    assert ttft_growth(rows) == pytest.approx(301 / 100)


def test_stage_verdicts_join_a_run_warning_and_the_growth_limit_is_at_most_twice():
    # stage 0's growth is at the limit (not over it), so its verdict is read from its
    # completions (a unit check of the wording: the stages' own rule set kept_up)
    stages = [{"stage": 0, "rate": 2.0, "kept_up": False, "ttft_growth": 2.0,
               "num_requests": 1, "completed": 1},
              {"stage": 1, "rate": 8.0, "kept_up": False, "ttft_growth": 2.5}]
    run = {"kept_up": False, "kept_up_warning": "the fleet did not keep up: X"}
    keys = with_stages(run, stages)
    assert keys["kept_up_warning"] == (
        "the fleet did not keep up: X; and the fleet fell behind in stages 0 (2 req/s: 0.0% "
        "of its requests rejected), 1 (8 req/s: the queue grew 2.5x), so those stages' "
        "latencies measure a backlog, not the server")
    assert run["kept_up_warning"] == "the fleet did not keep up: X"  # not changed in place
    one = with_stages({"kept_up": True}, [{"stage": 3, "rate": None, "kept_up": False,
                                           "num_requests": 1, "completed": None}])
    assert one["kept_up_warning"] == (
        "the fleet did not keep up: the fleet fell behind in stage 3 (100.0% of its requests "
        "rejected), so its latencies measure a backlog, not the server")


def test_capacity_search_judges_by_the_same_rule():
    assert (verdict.named_stages, verdict.stages_behind) == (kept_up.named_stages,
                                                            kept_up.stages_behind)
    assert (verdict.KEPT_UP_SHARE, verdict.GROWTH_LIMIT) == (0.98, 2.0)
    rows = frame([10, 10, 20, 40, 80, 90, 25, 35])
    summary = {"completed": 8, "num_requests": 8}
    judged = verdict.judge({**summary, **kept_up_keys(rows, True, None)}, rows, {})
    assert judged.reasons == ("queue grew: last quarter's mean TTFT 3.00 x the first's",)
    # a closed loop's run is judged by its completions: the same rows pass
    assert verdict.judge({**summary, **kept_up_keys(rows, False, None)}, rows, {}).passed
    stages = [{"stage": 0, "rate": 1.0, "kept_up": True, "ttft_growth": 0.7},
              {"stage": 1, "rate": 30.0, "kept_up": False, "ttft_growth": 2.04}]
    judged = verdict.judge({**summary, "kept_up": False, "stages": stages}, rows, {})
    assert judged.reasons == ("behind in stage 1 (30 req/s: the queue grew 2.0x)",)


@pytest.mark.parametrize("overrides", [
    {"engine.replicas": 2},
    {"load.type": "constant", "load.rate": 200.0},
    {"cache.capacity_tokens": 3000},
    {"load.type": "concurrency", "load.users": 64},
    # a ramp whose last stage falls behind (its growth 2.04x) while the run's rows, judged
    # whole, grow 1.96x: a probe passed by the whole-run figure that its run says failed
    {"load.type": "poisson", "engine.replicas": 2,
     "load.stages": [{"rate": 0.5, "duration_s": 30}, {"rate": 30, "duration_s": 30}]},
])
def test_a_probe_passes_exactly_when_its_run_kept_up(overrides):
    config = load_config(None, {"trace.path": DEMO, "engine.sample_interval_s": None,
                                **overrides})
    result = simulate(config)
    judged = verdict.judge(result.summary, result.requests, {})
    assert judged.passed is result.summary["kept_up"]
    if "load.stages" in overrides:
        assert result.summary["kept_up"] is False and ttft_growth(result.requests) < 2


def _run(**overrides) -> dict:
    config = load_config(None, {"trace.path": DEMO, "engine.sample_interval_s": None,
                                **overrides})
    return simulate(config).summary


def test_real_runs_keep_up_fall_behind_and_reject():
    light = _run(**{"engine.replicas": 2})
    assert light["kept_up"] is True and light["ttft_growth"] < 2
    assert "kept_up_warning" not in light and "rejected_warning" not in light
    flooded = _run(**{"load.type": "constant", "load.rate": 200.0})
    assert flooded["kept_up"] is False and flooded["ttft_growth"] > 2
    assert flooded["completed"] == flooded["num_requests"]  # served in the end, late
    small = _run(**{"cache.capacity_tokens": 3000})
    assert small["rejected"] > 0 and small["kept_up"] is False
    assert f"{small['rejected']} of 264 requests were rejected" in small["rejected_warning"]
    closed = _run(**{"load.type": "concurrency", "load.users": 64})
    assert closed["kept_up"] is True and "ttft_growth" not in closed


def test_run_prints_the_warnings_under_its_result_block(tmp_path):
    out = tmp_path / "flooded"
    result = CliRunner().invoke(app, ["run", "--trace", DEMO, "--load", "constant",
                                      "--rate", "200", "--cache-tokens", "3000",
                                      "-o", str(out)])
    assert result.exit_code == 0, result.output
    block, _, after = result.output.partition("=" * 60 + "\n")
    lines = after.splitlines()
    assert lines[0].startswith("warning: ") and "were rejected" in lines[0]
    assert lines[1].startswith("warning: the fleet did not keep up: only ")
    assert "queue grew" in lines[1]
    summary = json.loads((out / "summary.json").read_text())
    assert lines[1] == f"warning: {summary['kept_up_warning']}"


def test_a_stage_behind_for_its_rejections_says_so():
    stages = [{"stage": 0, "rate": 1.0, "kept_up": True, "ttft_growth": 1.0},
              {"stage": 1, "rate": 5.0, "kept_up": False, "ttft_growth": 1.5,
               "num_requests": 40, "completed": 38},
              {"stage": 2, "rate": None, "kept_up": False, "num_requests": 10,
               "completed": 5}]
    keys = with_stages({"kept_up": True}, stages)
    assert keys["kept_up_warning"] == (
        "the fleet did not keep up: the fleet fell behind in stages 1 (5 req/s: 5.0% of its "
        "requests rejected), 2 (50.0% of its requests rejected), so those stages' latencies "
        "measure a backlog, not the server")
    assert with_stages({"kept_up": True}, stages[:1]) == {"kept_up": True}


def test_sweep_names_the_runs_that_did_not_keep_up(tmp_path):
    spec = tmp_path / "spec.yaml"
    demo = Path(DEMO).resolve()  # a spec's paths are relative to its own folder
    spec.write_text(f"""name: kept
base: {{trace: {{path: {demo}}}, engine: {{sample_interval_s: null}}}}
runs:
  - {{engine.replicas: 2}}
  - {{load: {{type: constant, rate: 200.0}}}}
""")
    out = tmp_path / "sweep"
    result = CliRunner().invoke(app, ["sweep", str(spec), "-o", str(out)])
    assert result.exit_code == 0, result.output
    table = pd.read_parquet(out / "sweep.parquet")
    behind = table.loc[table["kept_up"].astype(object).eq(False), "run_id"].tolist()
    assert len(behind) == 1
    line = next(x for x in result.output.splitlines() if x.startswith("warning: "))
    assert line.startswith("warning: 1 timed run did not keep up with the load (kept_up ")
    assert line.endswith(f": {behind[0]}")


def test_a_staged_load_is_judged_stage_by_stage():
    """Poisson stages of 0.5 and 200 requests/s on one replica: the first keeps up, the
    flood does not; the run did not, and its warning names the stage and its rate."""
    summary = _run(**{"load.type": "poisson", "load.stages": [
        {"rate": 0.5, "duration_s": 200.0}, {"rate": 200.0, "duration_s": 0.5}]})
    calm, flood = summary["stages"]
    assert calm["kept_up"] is True and calm["ttft_growth"] <= 2
    assert flood["kept_up"] is False and flood["ttft_growth"] > 2
    assert summary["kept_up"] is False and "ttft_growth" not in summary
    assert (f"fell behind in stage 1 (200 req/s: the queue grew {flood['ttft_growth']:,.1f}x)"
            ", so its latencies measure a backlog") in summary["kept_up_warning"]
    steady = _run(**{"load.type": "poisson", "load.stages": [
        {"rate": 0.2, "duration_s": 200.0}, {"rate": 0.4, "duration_s": 200.0}]})
    assert steady["kept_up"] is True and "kept_up_warning" not in steady
    assert all(stage["kept_up"] for stage in steady["stages"])
