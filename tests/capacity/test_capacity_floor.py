"""A search whose failing SLO figures stop moving with the knob ends there
(capacity/driver.py `floor_note`; docs/load.md, capacity): by hand over judged probes, and
end to end on the demo trace, where a p99 TTFT no replica count reaches used to double the
replicas to 4,096."""

import json

import pytest
from cli_helpers import DEMO, invoke

from prefixsim.capacity.driver import FLAT_TOLERANCE, floor_note
from prefixsim.capacity.knob import knob_for
from prefixsim.capacity.verdict import Verdict
from prefixsim.config import load_config

SLOS = {"p99_ttft_ms": 2000.0}


def knob(search):
    return knob_for(load_config(None, {"trace.path": DEMO}), search)


def failed(ttft=7459.0, *extra, **figures):
    """A probe that failed its p99 TTFT SLO (and the extra reasons given)."""
    return Verdict(offered_rate=3.0, achieved_rate=2.9,
                   figures={"p99_ttft_ms": ttft, **figures},
                   reasons=(f"p99_ttft_ms {ttft} > 2,000", *extra))


def test_three_flat_probes_nearest_the_passing_side_stop_a_replicas_search():
    # 1 and 2 replicas fell behind; 4 is slower; 8, 16 and 32 all 7,459 ms: flat over 4x
    judged = {1.0: failed(90_000.0, "queue grew"), 2.0: failed(20_000.0, "queue grew"),
              4.0: failed(9191.0), 8.0: failed(7459.0), 16.0: failed(7459.0),
              32.0: failed(7459.0)}
    value, note = floor_note(judged, knob("replicas"), SLOS)
    assert value == 32.0  # the probe nearest the passing side (the most replicas)
    assert note == ("stopped: p99_ttft_ms stays 7,459 ms (SLO 2,000) at engine.replicas 8 "
                    "to 32; adding replicas no longer lowers it (what the requests take with "
                    "no queue to wait in, with the trace's own bursts and routing), so no "
                    "probe can pass; a looser SLO, a faster GPU, more tensor parallelism or "
                    "a smaller model would")


def test_a_rate_search_looks_at_its_lowest_rates():
    judged = {1.0: failed(30_000.0, "queue grew"), 0.5: failed(20_592.0),
              0.25: failed(20_588.0), 0.125: failed(20_585.0)}
    value, note = floor_note(judged, knob("rate"), SLOS)
    assert value == 0.125
    assert "at load.rate_scale 0.5 to 0.125; lowering the rate no longer lowers it" in note
    assert note.startswith("stopped: p99_ttft_ms stays 20,585 ms (SLO 2,000)")


@pytest.mark.parametrize("judged", [
    {},  # nothing probed
    {8.0: failed(), 16.0: failed()},  # two probes only
    {16.0: failed(), 24.0: failed(), 32.0: failed()},  # spanning 2x, not 4x
    {8.0: failed(), 16.0: failed(), 32.0: failed(), 64.0: failed(1.0)},  # 64 passed...
    {8.0: failed(), 16.0: failed(), 32.0: failed(), 1.0: None},  # a probe's run failed
    {8.0: failed(), 16.0: failed(7459.0, "queue grew"), 32.0: failed()},  # one fell behind too
    {8.0: failed(7459.0 * (1 + 2 * FLAT_TOLERANCE)), 16.0: failed(), 32.0: failed()},
])
def test_no_floor_unless_every_condition_holds(judged):
    if 64.0 in judged:  # a passing probe: no reasons
        judged[64.0] = Verdict(3.0, 3.0, {"p99_ttft_ms": 1000.0}, ())
    assert floor_note(judged, knob("replicas"), SLOS) is None


def test_figures_within_the_tolerance_are_flat():
    judged = {8.0: failed(7459.0 * (1 + FLAT_TOLERANCE / 2)), 16.0: failed(), 32.0: failed()}
    assert floor_note(judged, knob("replicas"), SLOS) is not None


def test_every_failing_slo_must_be_flat_and_the_same_ones_fail():
    slos = {"p99_ttft_ms": 2000.0, "mean_tpot_ms": 20.0}

    def both(tpot):
        return Verdict(3.0, 2.9, {"p99_ttft_ms": 7459.0, "mean_tpot_ms": tpot},
                       ("p99_ttft_ms 7,459 > 2,000", f"mean_tpot_ms {tpot} > 20"))

    flat = {8.0: both(25.0), 16.0: both(25.0), 32.0: both(25.0)}
    value, note = floor_note(flat, knob("replicas"), slos)
    assert "mean_tpot_ms stays 25 ms (SLO 20); p99_ttft_ms stays 7,459 ms" in note
    falling = {8.0: both(30.0), 16.0: both(27.0), 32.0: both(25.0)}
    assert floor_note(falling, knob("replicas"), slos) is None
    mixed = {8.0: both(25.0), 16.0: failed(mean_tpot_ms=15.0), 32.0: both(25.0)}
    assert floor_note(mixed, knob("replicas"), slos) is None


def test_an_unreachable_slo_ends_a_replicas_search_early(tmp_path):
    """1 ms of p99 TTFT is under any prefill: the search stops after three flat probes
    instead of doubling to 4,096 replicas (13 probes)."""
    out = tmp_path / "cap"
    result = invoke("capacity", "--search", "replicas", "--trace", DEMO, "--max-requests",
                    60, "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "-j", 1,
                    "--slo", "p99_ttft_ms:1", "-o", out)
    assert result.exit_code == 1, result.output  # no answer
    answer = json.loads((out / "capacity.json").read_text())
    assert answer["answer"] is None and answer["probes"] == 3  # 1, 2 and 4 replicas
    assert answer["first_failing"] == 4  # the probe nearest the passing side
    assert answer["note"].startswith("stopped: p99_ttft_ms stays ")
    assert "adding replicas no longer lowers it" in answer["note"]
    assert f"note: {answer['note']}" in result.output


def test_the_note_quotes_the_figure_and_slo_to_their_digits():
    """The figure to 4 significant digits (157.63 ms -> 157.6), the SLO to 6 (1,234.5678 ->
    1,234.57), from the probe nearest the passing side."""
    slos = {"p99_ttft_ms": 1234.5678}
    judged = {v: Verdict(3.0, 2.9, {"p99_ttft_ms": 1500.25},
                         ("p99_ttft_ms 1,500 > 1,234.57",)) for v in (1.0, 2.0, 4.0)}
    _, note = floor_note(judged, knob("replicas"), slos)
    assert note.startswith("stopped: p99_ttft_ms stays 1,500 ms (SLO 1,234.57) at "
                           "engine.replicas 1 to 4;")
    small = {v: Verdict(3.0, 2.9, {"p99_ttft_ms": 157.63}, ("p99_ttft_ms 157.6 > 1",))
             for v in (1.0, 2.0, 4.0)}
    assert "p99_ttft_ms stays 157.6 ms (SLO 1)" in floor_note(small, knob("replicas"),
                                                              {"p99_ttft_ms": 1.0})[1]


def test_a_missing_figure_or_one_at_its_limit_is_not_a_failing_figure():
    missing = {v: Verdict(3.0, 2.9, {"p99_ttft_ms": None}, ("p99_ttft_ms missing > 2,000",))
               for v in (8.0, 16.0, 32.0)}
    assert floor_note(missing, knob("replicas"), SLOS) is None  # no figure: no floor
    slos = {"p99_ttft_ms": 2000.0, "p99_tpot_ms": 20.0}
    at_limit = {v: Verdict(3.0, 2.9, {"p99_ttft_ms": 7459.0, "p99_tpot_ms": 20.0},
                           ("p99_ttft_ms 7,459 > 2,000",)) for v in (8.0, 16.0, 32.0)}
    _, note = floor_note(at_limit, knob("replicas"), slos)  # TPOT at its limit holds
    assert "p99_tpot_ms" not in note
