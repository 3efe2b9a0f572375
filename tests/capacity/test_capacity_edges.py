"""Known answers for the parts of `prefixsim capacity` that decide without a run: the
question's checks, the knob, the probe verdict's figures and boundaries, the answer and its
rows, the search's probe sequence, and probes whose worker was lost (capacity/*.py).
Each answer is worked by hand in its comment; the end-to-end runs are in
test_capacity_cli.py."""

import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml
from fakes import LosingExecutor

from prefixsim.capacity import SearchSpace, find_threshold
from prefixsim.capacity.driver import (
    CapacityQuestion,
    _answer,
    _plain,
    _row,
    _unservable,
    _unservable_note,
    check_question,
    run_capacity,
)
from prefixsim.capacity.knob import MAX_REPLICAS, RATE_RANGE, knob_for
from prefixsim.capacity.search import SearchResult
from prefixsim.capacity.verdict import SLO_KEYS, Verdict, judge, parse_slos
from prefixsim.config import load_config
from prefixsim.errors import InputError
from prefixsim.sweep import OK, RunOutcome
from prefixsim.sweep.executors import EXECUTORS, ExecutorOptions
from prefixsim.sweep.spec import make_point
from prefixsim.sweep.worker import FAILED

DEMO = "traces/demo_chat.jsonl"


def config(**overrides):
    return load_config(None, {"trace.path": DEMO, **overrides})


def refused(call, field: str, message: str) -> None:
    """`call` raises an InputError naming `field` whose message is `message`, or starts
    with it when `message` ends in "..."."""
    with pytest.raises(InputError) as caught:
        call()
    assert caught.value.field == field
    if message.endswith("..."):
        assert caught.value.message.startswith(message[:-3])
    else:
        assert caught.value.message == message


# ------------------------------------------------------------------------- the question
@pytest.mark.parametrize("tolerance", [0.0, 1.0, -0.1])
def test_tolerance_must_lie_strictly_between_0_and_1(tolerance):
    question = CapacityQuestion(config(), "rate", tolerance=tolerance)
    refused(lambda: check_question(question), "--tolerance",
            "expected a relative tolerance between 0 and 1")


def test_tolerances_and_shares_just_inside_are_taken():
    assert check_question(CapacityQuestion(config(), "rate", tolerance=0.999)).key == \
        "load.rate_scale"
    with_slo = config(**{"engine.goodput_ttft_ms": 500.0})
    assert check_question(CapacityQuestion(with_slo, "rate", goodput_share=1.0))
    assert check_question(CapacityQuestion(with_slo, "rate", goodput_share=1e-9))


@pytest.mark.parametrize("share", [0.0, 1.0001, -0.5])
def test_goodput_share_must_be_in_0_1(share):
    question = CapacityQuestion(config(**{"engine.goodput_ttft_ms": 500.0}), "rate",
                                goodput_share=share)
    refused(lambda: check_question(question), "--goodput-share", "expected a share in (0, 1]")


@pytest.mark.parametrize(("slos", "ok"), [({}, False), ({"engine.goodput_ttft_ms": 500.0}, True),
                                          ({"engine.goodput_tpot_ms": 50.0}, True)])
def test_goodput_share_needs_one_of_the_goodput_slos(slos, ok):
    question = CapacityQuestion(config(**slos), "rate", goodput_share=0.9)
    if ok:
        assert check_question(question).search == "rate"
    else:
        refused(lambda: check_question(question), "--goodput-share",
                "needs the goodput SLOs: --goodput ttft:MS and/or tpot:MS")


# ------------------------------------------------------------------------- the knob
def test_each_knob_and_its_values():
    replicas = knob_for(config(), "replicas")
    assert (replicas.search, replicas.key, replicas.start, replicas.label) == \
        ("replicas", "engine.replicas", 1.0, "replicas")
    assert replicas.to_config(3.0) == 3 and type(replicas.to_config(3.0)) is int
    assert replicas.params(5.0) == {"engine.replicas": 5}
    assert replicas.space(0.05, 3) == SearchSpace(start=1.0, passes_below=False, lowest=1,
                                                  highest=MAX_REPLICAS, integer=True, width=3)
    poisson = knob_for(config(**{"load.type": "poisson", "load.rate": 3.5}), "rate")
    assert (poisson.search, poisson.key, poisson.start, poisson.label) == \
        ("rate", "load.rate", 3.5, "load.rate (requests/s)")
    assert poisson.to_config(1 / 3) == 0.333333  # six significant digits
    assert poisson.space(0.02, 2) == SearchSpace(
        start=3.5, passes_below=True, lowest=3.5 / RATE_RANGE, highest=3.5 * RATE_RANGE,
        tolerance=0.02, integer=False, width=2)
    trace = knob_for(config(**{"load.rate_scale": 2.0}), "rate")
    assert (trace.key, trace.start) == ("load.rate_scale", 1.0)
    assert trace.to_config(1.5) == 3.0  # the multiplier times the config's own scale
    assert trace.label == "rate multiplier of the trace (x the config's rate)"


def test_knobs_that_cannot_be_turned_name_the_flag():
    refused(lambda: knob_for(config(**{"cache_only": True}), "rate"), "--search",
            "a capacity search needs a timed run (not cache_only)")
    split = config(**{"engine.prefill_replicas": 1, "engine.decode_replicas": 1})
    refused(lambda: knob_for(split, "replicas"), "--search",
            "--search replicas turns engine.replicas; this config splits prefill_replicas "
            "and decode_replicas")
    refused(lambda: knob_for(config(), "gpus"), "--search",
            "unknown search 'gpus' (valid: rate, replicas)")
    staged = config(**{"load.type": "poisson",
                       "load.stages": [{"rate": 1, "duration_s": 5}]})
    refused(lambda: knob_for(staged, "rate"), "--search",
            "--search rate turns a trace, poisson or constant load's rate, not a staged "
            "poisson load")
    refused(lambda: knob_for(config(**{"load.type": "concurrency", "load.users": 4}), "rate"),
            "--search", "--search rate turns a trace, poisson or constant load's rate, not a "
            "concurrency load")


def test_a_closed_loop_search_needs_an_slo_or_a_goodput_share():
    closed = config(**{"load.type": "sessions", "load.users": 4})
    refused(lambda: check_question(CapacityQuestion(closed, "replicas")), "--slo",
            "a sessions load is a closed loop: its users wait for their answers, so no queue "
            "builds and every probe keeps up; give the latency it must hold (--slo, e.g. "
            "p99_ttft_ms:2000, or --goodput-share)")
    assert check_question(CapacityQuestion(closed, "replicas", slos={"p99_ttft_ms": 1.0}))
    with_goodput = config(**{"load.type": "sessions", "load.users": 4,
                             "engine.goodput_ttft_ms": 100.0})
    assert check_question(CapacityQuestion(with_goodput, "replicas", goodput_share=0.5))


# ------------------------------------------------------------------------- the verdict
def rows(arrivals):
    return pd.DataFrame({"arrival_s": arrivals, "ttft_ms": [10.0] * len(arrivals)})


def test_verdict_rates_and_figures_worked_by_hand():
    # 4 timed arrivals over 0..8 s (the NaN one does not count): offered (4 - 1) / 8 =
    # 0.375 req/s; achieved is the summary's
    summary = {"completed": 5, "num_requests": 5, "request_throughput": 0.4,
               "p99_ttft_ms": 200, "mean_tpot_ms": 30.5}
    verdict = judge(summary, rows([0.0, 2.0, 8.0, 4.0, np.nan]),
                    {"p99_ttft_ms": 200, "mean_tpot_ms": 30.0, "p90_itl_ms": 10})
    assert verdict.offered_rate == pytest.approx(3 / 8)
    assert verdict.achieved_rate == 0.4
    assert verdict.figures == {"p99_ttft_ms": 200, "mean_tpot_ms": 30.5, "p90_itl_ms": None}
    # a figure equal to its limit holds it; a missing one fails
    assert verdict.reasons == ("mean_tpot_ms 30.5 > 30", "p90_itl_ms missing > 10")
    assert not verdict.passed
    assert math.isnan(judge({}, rows([1.0]), {}).offered_rate)  # one arrival: no span
    assert math.isnan(judge({}, rows([2.0, 2.0]), {}).offered_rate)  # no span
    assert math.isnan(judge({}, pd.DataFrame({"x": [1]}), {}).offered_rate)
    assert judge({}, rows([0.0, 1.0]), {}).achieved_rate == 0.0


def test_verdict_edges_of_missing_and_odd_figures():
    assert judge({}, rows([2.0, 6.0]), {}).offered_rate == pytest.approx(1 / 4)
    assert judge({"num_requests": 1}, rows([0.0, 1.0]), {}).reasons == \
        ("0 of 1 requests completed (< 0.98)",)
    assert judge({"completed": 0}, rows([0.0, 1.0]), {}).passed  # nothing offered
    text = judge({"p99_ttft_ms": "fast"}, rows([0.0, 1.0]), {"p99_ttft_ms": 5.0})
    assert text.figures == {"p99_ttft_ms": None}
    assert text.reasons == ("p99_ttft_ms missing > 5",)


def test_verdict_of_a_staged_run_names_the_stages_behind():
    summary = {"completed": 10, "num_requests": 10, "stages": [
        {"stage": 0, "rate": 1.0, "kept_up": True, "ttft_growth": 1.0},
        {"stage": 1, "rate": 4.0, "kept_up": False, "ttft_growth": 3.25},
        {"stage": 2, "rate": None, "kept_up": None},
        {"stage": 3, "rate": 9.0, "kept_up": False, "ttft_growth": 1.0, "num_requests": 8,
         "completed": 6}]}
    assert judge(summary, rows([0.0, 1.0]), {}).reasons == (
        "behind in stages 1 (4 req/s: the queue grew 3.2x), 3 (9 req/s: 25.0% of its "
        "requests rejected)",)
    one = {**summary, "stages": summary["stages"][:2]}
    assert judge(one, rows([0.0, 1.0]), {}).reasons == (
        "behind in stage 1 (4 req/s: the queue grew 3.2x)",)
    assert judge({**summary, "stages": summary["stages"][:1]}, rows([0.0, 1.0]), {}).passed


@pytest.mark.parametrize(("completed", "passed"), [(98, True), (97, False)])
def test_verdict_completions_boundary(completed, passed):
    verdict = judge({"completed": completed, "num_requests": 100}, rows([0.0, 1.0]), {})
    assert verdict.passed is passed
    if not passed:
        assert verdict.reasons == ("97 of 100 requests completed (< 0.98)",)


@pytest.mark.parametrize(("growth", "passed"), [(2.0, True), (2.01, False), (None, True)])
def test_verdict_growth_boundary(growth, passed):
    summary = {"completed": 4, "num_requests": 4, "ttft_growth": growth}
    verdict = judge(summary, rows([0.0, 1.0]), {})
    assert verdict.passed is passed
    if not passed:
        assert verdict.reasons == ("queue grew: last quarter's mean TTFT 2.01 x the first's",)


def test_goodput_share_worked_by_hand():
    # 1.5 req/s within the SLOs over 40 s = 60 of 80 offered: 0.75
    summary = {"completed": 80, "num_requests": 80, "request_goodput": 1.5, "duration": 40.0}
    held = judge(summary, rows([0.0, 1.0]), {}, goodput_share=0.75)
    assert held.passed and held.figures == {"goodput_share": 0.75}
    missed = judge(summary, rows([0.0, 1.0]), {}, goodput_share=0.76)
    assert missed.reasons == ("goodput share 0.750 < 0.76",)
    for absent in ("request_goodput", "duration"):
        partial = {k: v for k, v in summary.items() if k != absent}
        assert judge(partial, rows([0.0, 1.0]), {}, goodput_share=0.1).figures == \
            {"goodput_share": 0.0}
    assert judge({**summary, "num_requests": 0, "completed": 0}, rows([0.0, 1.0]), {},
                 goodput_share=0.1).figures == {"goodput_share": 0.0}


def test_slo_parsing_splits_and_refuses():
    assert parse_slos(["p99_ttft_ms:2000,mean_tpot_ms:50", " p90_e2el_ms:0.5 "]) == \
        {"p99_ttft_ms": 2000.0, "mean_tpot_ms": 50.0, "p90_e2el_ms": 0.5}
    refused(lambda: parse_slos(["p99_ttft_ms:1:2"]), "--slo",
            "expected KEY:LIMIT with a positive number of ms, got 'p99_ttft_ms:1:2'")
    refused(lambda: parse_slos(["p99_ttft_ms"], flag="--x"), "--x",
            "expected KEY:LIMIT with a positive number of ms, got 'p99_ttft_ms'")
    for bad in ("p99_ttft_ms:0", "p99_ttft_ms:inf", "p99_ttft_ms:-3", "p99_ttft_ms:x"):
        refused(lambda bad=bad: parse_slos([bad]), "--slo",
                f"expected KEY:LIMIT with a positive number of ms, got {bad!r}")
    refused(lambda: parse_slos(["load:5"]), "--slo",
            f"'load' is not a latency of a timed summary (valid: {', '.join(SLO_KEYS)})")
    for bad, meant in (("ttft_p99", "p99_ttft_ms"), ("P99-TTFT", "p99_ttft_ms"),
                       ("e2el_mean_s", "mean_e2el_ms"), ("p99_tpot", "p99_tpot_ms"),
                       ("p99_ttf_ms", "p99_ttft_ms"), ("median_e2e_ms", "median_e2el_ms"),
                       ("p50_p99_ttft", "p99_ttft_ms")):
        refused(lambda bad=bad: parse_slos([f"{bad}:5"]), "--slo",
                f"{bad!r} is not a latency of a timed summary (did you mean {meant!r}? "
                f"valid: {', '.join(SLO_KEYS)})")
    assert SLO_KEYS[:3] == ("mean_ttft_ms", "median_ttft_ms", "p50_ttft_ms")


# ------------------------------------------------------------------------- the answer
def outcome(status=OK, **summary):
    return RunOutcome(run_id="r", params={}, status=status, summary=summary)


def test_a_probe_is_unservable_beyond_two_percent_rejected():
    assert not _unservable(outcome(num_requests=100, rejected=2))
    assert _unservable(outcome(num_requests=100, rejected=3))
    assert _unservable(outcome(num_requests=1, rejected=1))
    assert not _unservable(outcome(num_requests=1, rejected=0))
    assert not _unservable(outcome(num_requests=0, rejected=0))
    assert not _unservable(outcome(status=FAILED, num_requests=100, rejected=50))
    knob = knob_for(config(), "replicas")
    note = _unservable_note({"rejected": 1234, "num_requests": 5000, "max_model_len": 4096,
                             "kv_pool_tokens_per_replica": 100_000}, knob)
    assert note == ("stopped: 1,234 of 5,000 requests are longer than the model's context "
                    "(max_model_len) of 4,096 tokens at any engine.replicas, more than 2% of "
                    "them, so no probe can pass; a model with a longer context would serve "
                    "them (or --max-model-len, where the model supports more)")


def test_rows_of_a_judged_and_of_a_failed_probe():
    knob = knob_for(config(**{"load.type": "poisson", "load.rate": 2.0}), "rate")
    point = make_point({"trace": {"path": DEMO}, "load": {"type": "poisson", "rate": 2.0}},
                       {"load.rate": 0.5})
    judged = Verdict(offered_rate=0.49, achieved_rate=0.45, figures={"p99_ttft_ms": 120.0},
                     reasons=("a", "b"))
    row = _row(3, 2, knob, 0.4999999, point, judged)
    assert row == {"probe": 3, "round": 2, "knob": "load.rate", "value": 0.4999999,
                   "config_value": 0.5, "run_id": point.run_id, "offered_rate": 0.49,
                   "achieved_rate": 0.45, "passed": False, "reasons": "a; b",
                   "p99_ttft_ms": 120.0}
    failed = _row(0, 1, knob, 1.0, point, None)
    assert failed["passed"] is False and failed["reasons"] == "the run failed"
    assert _row(0, 1, knob, 1.0, point, None, "a.jsonl:4: x")["reasons"] == \
        "the run failed: a.jsonl:4: x"
    assert math.isnan(failed["offered_rate"]) and math.isnan(failed["achieved_rate"])


def test_the_answer_worked_by_hand():
    table = pd.DataFrame({"value": [1.0, 2.0, 4.0, 3.0], "round": [1, 2, 2, 3],
                          "config_value": [1, 2, 4, 3], "run_id": ["a", "b", "c", "d"],
                          "offered_rate": [5.0, 5.0, 5.0, np.float64(5.5)],
                          "achieved_rate": [4.0, 4.5, 4.9, float("nan")],
                          "reasons": ["slow", "slow", "", ""]})
    question = CapacityQuestion(config(), "replicas", slos={"p99_ttft_ms": 500.0})
    knob = knob_for(config(), "replicas")
    answer = _answer(question, knob, SearchResult(good=3.0, bad=2.0), table)
    assert answer == {
        "search": "replicas", "knob": "engine.replicas", "knob_meaning": "replicas",
        "answer": 3, "answer_config_value": 3, "answer_run_id": "d", "offered_rate": 5.5,
        "achieved_rate": None, "first_failing": 2, "first_failing_reasons": "slow",
        "slos": {"p99_ttft_ms": 500.0}, "goodput_share": None, "tolerance": "exact",
        "probes": 4, "rounds": 3}
    assert type(answer["answer"]) is int and type(answer["offered_rate"]) is float
    none = _answer(question, knob, SearchResult(good=None, bad=1.0), table)
    assert (none["answer"], none["answer_run_id"], none["first_failing"]) == (None, None, 1)
    assert none["note"] == "no probe passed within the knob's range"
    empty = _answer(question, knob, SearchResult(good=None, bad=None), table.iloc[:0])
    assert (empty["probes"], empty["rounds"]) == (0, 0)
    rate_question = CapacityQuestion(config(), "rate", tolerance=0.1)
    rate = _answer(rate_question, knob_for(config(), "rate"),
                   SearchResult(good=2.0, bad=None), table)
    assert (rate["answer"], rate["tolerance"], rate["first_failing"]) == (2.0, 0.1, None)
    fractional = _answer(rate_question, knob_for(config(), "rate"),
                         SearchResult(good=2.5, bad=3.5), table.assign(value=[1.0, 2.5, 3.5, 4]))
    assert (fractional["answer"], fractional["first_failing"]) == (2.5, 3.5)
    assert type(answer["first_failing"]) is int
    assert rate["note"] == "no probe failed within the knob's range (the answer is its limit)"
    plain = [_plain(v) for v in (np.int64(3), np.float32(0.5), float("inf"), "x", np.nan)]
    assert plain == [3, 0.5, None, "x", None]
    assert [type(v) for v in plain[:2]] == [int, float]


# ------------------------------------------------------------------------- the search
def test_rate_search_probe_sequence_worked_by_hand():
    # start 1 passes; doubling to 2, 4 pass and 8 fails; bisection of (4, 8): 6 fails, 5
    # passes, 5.5 fails, 5.25 fails: |5.25 - 5| = 0.25 <= 0.05 x 5, done
    space = SearchSpace(start=1.0, passes_below=True, lowest=1e-3, highest=1e3,
                        tolerance=0.05, width=1)
    result = find_threshold(lambda values: [v <= 5.2 for v in values], space)
    assert [v for v, _ in result.probes] == [1.0, 2.0, 4.0, 8.0, 6.0, 5.0, 5.5, 5.25]
    assert (result.good, result.bad) == (5.0, 5.25)
    # nothing passes at the start: halving from it towards the passing side
    low = find_threshold(lambda values: [v <= 0.3 for v in values], space)
    assert [v for v, _ in low.probes][:3] == [1.0, 0.5, 0.25]
    assert (low.good, low.bad) == (0.296875, 0.3046875)  # 0.0078 <= 0.05 x 0.297


def test_replicas_search_probe_sequence_worked_by_hand():
    # two at a time: 1 fails; 2 and 4 fail; 8 and 16 pass; between 4 and 8 (5, 6, 7: more
    # than two) at thirds of the gap: 5.33 -> 5 and 6.67 -> 7, both pass: 5 next to 4
    space = SearchSpace(start=1, passes_below=False, lowest=1, highest=4096, integer=True,
                        width=2)
    asked = []

    def probe(values):
        asked.append(list(values))
        return [v >= 5 for v in values]

    result = find_threshold(probe, space)
    assert asked == [[1.0], [2.0, 4.0], [8.0, 16.0], [5.0, 7.0]]
    assert (result.good, result.bad) == (5.0, 4.0)
    # the gap holds exactly `width` whole numbers: each is asked, once
    asked.clear()
    find_threshold(lambda values: asked.append(list(values)) or [v >= 3 for v in values],
                   space)
    assert asked == [[1.0], [2.0, 4.0]] + [[3.0]]
    # one replica passes: nothing below it to ask (1 is the lowest), so one probe in all
    asked.clear()
    every = find_threshold(lambda values: asked.append(list(values)) or [True] * len(values),
                           space)
    assert asked == [[1.0]] and (every.good, every.bad) == (1.0, None)
    # at the top of the range replicas stop at the limit (4096 fails: no answer)
    never = find_threshold(lambda values: [False] * len(values), space)
    assert (never.good, never.bad) == (None, 4096.0)


# ------------------------------------------------------------------------- lost workers
def test_probes_whose_worker_was_lost_fail_and_are_stored(tmp_path, monkeypatch):
    monkeypatch.setattr(LosingExecutor, "lost_index", 0)  # every round's only probe
    monkeypatch.setitem(EXECUTORS._factories, "losing", LosingExecutor)
    seen = []
    out = tmp_path / "cap"
    out.mkdir()
    question = CapacityQuestion(config(**{"trace.max_requests": 20}), "replicas",
                                slos={"p99_ttft_ms": 1000.0})
    answer = run_capacity(question, out, ExecutorOptions(executor="losing", n_jobs=1),
                          on_probe=seen.append, command="prefixsim capacity ...")
    assert answer.summary["answer"] is None and answer.summary["first_failing"] == 4096
    # 1, 2, 4, ..., 4096: 13 probes, one per round, each failed without a run
    assert [row["value"] for row in seen] == [2.0 ** k for k in range(13)]
    assert [row["round"] for row in seen] == list(range(1, 14))
    assert [row["probe"] for row in seen] == list(range(13))
    assert {row["reasons"] for row in seen} == {"the run failed: worker lost: worker died"}
    table = pd.read_parquet(out / "capacity.parquet")
    assert table["passed"].tolist() == [False] * 13
    stored = json.loads((out / "capacity.json").read_text())
    assert stored["first_failing_reasons"] == "the run failed: worker lost: worker died"
    assert stored["note"] == "no probe passed within the knob's range"
    assert (out / "capacity.json").read_text().startswith('{\n  "search": "replicas",\n')
    spec = (out / "spec.yaml").read_text()
    assert spec.startswith("name: capacity-replicas\nbase:\n")
    parsed = yaml.safe_load(spec)
    assert parsed["grid"] == {}
    assert parsed["runs"] == [{"engine.replicas": 2 ** k} for k in range(13)]
    assert parsed["base"]["trace"]["max_requests"] == 20
    sweep = json.loads((out / "sweep.json").read_text())
    assert (sweep["name"], sweep["command"]) == ("capacity-replicas", "prefixsim capacity ...")
    first = json.loads((out / "runs" / seen[0]["run_id"] / "run.json").read_text())
    assert (first["status"], first["error"], first["params"]) == \
        ("failed", "worker lost: worker died", {"engine.replicas": 1})
    sweep_rows = pd.read_parquet(out / "sweep.parquet")
    assert sweep_rows["status"].tolist() == ["failed"] * 13
    assert set(sweep_rows["error"]) == {"worker lost: worker died"}
    assert sweep_rows["engine_replicas"].tolist() == [2 ** k for k in range(13)]
