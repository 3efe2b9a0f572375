"""The report on loads (docs/load.md): latency against load per stage of a staged run, per
probe of a capacity folder, and the header's line saying how the requests were offered.
Folders are written by hand so that every drawn point is a known answer."""

import json

import matplotlib.pyplot as plt
import pandas as pd
import pytest
import yaml
from matplotlib.text import Text

from prefixsim.capacity.plot import capacity_png
from prefixsim.report import PlotSkipped, build_report, load_report_data
from prefixsim.report.answers import answers
from prefixsim.report.figures import finish_figure, plain_text
from prefixsim.report.header import header_sections, load_text
from prefixsim.report.plots_load import capacity_figure, latency_vs_load

STAGED = {"type": "poisson", "stages": [{"rate": r, "users": None, "duration_s": 20.0}
                                        for r in (2.0, 8.0, 30.0)]}


def _stage(index, rate=None, users=None, requests=40, throughput=1.0, ttft=50.0):
    return {"stage": index, "rate": rate, "users": users, "duration_s": 20.0,
            "num_requests": requests, "request_throughput": throughput,
            "p50_ttft_ms": ttft, "p99_ttft_ms": 3 * ttft, "p50_tpot_ms": 8.0,
            "p99_tpot_ms": 12.0}


def _run(folder, stages=None, load=None, mode="timed"):
    folder.mkdir(parents=True)
    summary = {"mode": mode, "num_requests": 120, "p99_ttft_ms": 100.0}
    if stages is not None:
        summary["stages"] = stages
    (folder / "summary.json").write_text(json.dumps(summary))
    config = {"trace": {"path": "demo_chat.jsonl"}} | ({"load": load} if load else {})
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return folder


def _staged_stages():
    return [_stage(i, rate=r, throughput=t, ttft=f)
            for i, (r, t, f) in enumerate([(2.0, 1.8, 40.0), (8.0, 7.5, 60.0), (30.0, 9.0, 900.0)])]


def _sweep(root, runs, swept=(), capacity=None):
    """A sweep folder of `runs` ({run_id: (stages, load, extra columns)})."""
    rows = []
    for run_id, (stages, load, extra) in runs.items():
        _run(root / "runs" / run_id, stages, load)
        rows.append({"run_id": run_id, "status": "ok", **extra})
    pd.DataFrame(rows).to_parquet(root / "sweep.parquet")
    (root / "sweep.json").write_text(json.dumps({"name": "loads", "swept_columns": list(swept),
                                                 "run_ids": list(runs)}))
    if capacity is not None:
        capacity[0].to_parquet(root / "capacity.parquet")
        (root / "capacity.json").write_text(json.dumps(capacity[1]))
    return root


def check_drawn_text(fig):
    """Every text drawn lies inside the figure, none is math text, every axis has a unit
    (the figure finished as the report saves it: log axes labelled in plain numbers)."""
    finish_figure(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    hidden = {id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
              for tick in axis.get_major_ticks() + axis.get_minor_ticks()
              if not _inside(tick.get_loc(), axis.get_view_interval())
              for label in (tick.label1, tick.label2)}  # ticks beyond the limits: not drawn
    texts = [t for t in fig.findobj(Text)
             if t.get_visible() and t.get_text() and id(t) not in hidden]
    assert texts
    for text in texts:
        assert "$" not in text.get_text() and "\\mathdefault" not in text.get_text(), text
        extent = text.get_window_extent(renderer)
        assert box.x0 - 1 <= extent.x0 and extent.x1 <= box.x1 + 1, text.get_text()
        assert box.y0 - 1 <= extent.y0 and extent.y1 <= box.y1 + 1, text.get_text()
    for ax in fig.axes:
        assert ax.get_xlabel().endswith(")") and "(" in ax.get_xlabel()
        assert ax.get_ylabel().endswith("(ms)")
    assert any(ax.get_legend() is not None for ax in fig.axes)  # several runs: one legend


def _inside(value, interval):
    low, high = sorted(interval)
    return low - 1e-9 * abs(high - low) <= value <= high + 1e-9 * abs(high - low)


def _draw(data):
    with plain_text():
        fig = latency_vs_load(data)
        check_drawn_text(fig)
    return fig


def _points(ax, label):
    """(x, y) of the filled points of `label` (the scatter's gid, "TTFT p99"; the legend
    names the statistic once, with a line and marker of its own)."""
    for collection in ax.collections:
        if collection.get_gid() == label:
            return [tuple(p) for p in collection.get_offsets().tolist()]
    raise AssertionError(f"no points labelled {label}")


def test_a_staged_run_draws_each_stage_against_offered_and_achieved_rate(tmp_path):
    """Offered = each stage's rate (2, 8, 30 req/s); achieved = its request_throughput."""
    data = load_report_data(_run(tmp_path / "run", _staged_stages(), STAGED))
    fig = _draw(data)
    ttft_offered, ttft_achieved, tpot_offered, _ = fig.axes
    assert _points(ttft_offered, "TTFT p99") == [(2.0, 120.0), (8.0, 180.0), (30.0, 2700.0)]
    assert _points(ttft_achieved, "TTFT p50") == [(1.8, 40.0), (7.5, 60.0), (9.0, 900.0)]
    assert _points(tpot_offered, "TPOT p50") == [(2.0, 8.0), (8.0, 8.0), (30.0, 8.0)]
    assert ttft_offered.get_xlabel() == "offered rate (requests/s)"
    assert fig.prefixsim_runs == ["run"]


def test_a_stage_that_did_not_keep_up_is_drawn_hollow(tmp_path):
    """The 30 req/s stage fell behind (`kept_up` false): its points are hollow, the others
    filled, and the title says what hollow means."""
    stages = _staged_stages()
    stages[2]["kept_up"] = False
    stages[0]["kept_up"] = stages[1]["kept_up"] = True
    fig = _draw(load_report_data(_run(tmp_path / "run", stages, STAGED)))
    ttft_offered = fig.axes[0]
    assert _points(ttft_offered, "TTFT p99") == [(2.0, 120.0), (8.0, 180.0)]  # filled
    hollow = [c for c in ttft_offered.collections if (c.get_gid() or "").endswith(" failed")]
    assert sorted(tuple(p) for c in hollow for p in c.get_offsets().tolist()) == [
        (30.0, 900.0), (30.0, 2700.0)]  # p50 and p99 TTFT of the stage that fell behind
    assert all((c.get_facecolor().size == 0 or c.get_facecolor()[:, 3].max() == 0)
               for c in hollow)
    assert "hollow: the fleet did not keep up" in fig._suptitle.get_text()


def test_a_closed_loop_stage_offers_its_requests_over_its_duration(tmp_path):
    """Users stages have no rate: 40 requests in 20 s offer 2 req/s, 100 in 20 s 5 req/s."""
    stages = [_stage(0, users=2, requests=40), _stage(1, users=8, requests=100)]
    load = {"type": "concurrency", "stages": [{"users": 2, "duration_s": 20.0},
                                              {"users": 8, "duration_s": 20.0}]}
    data = load_report_data(_run(tmp_path / "run", stages, load))
    assert [x for x, _ in _points(_draw(data).axes[0], "TTFT p50")] == [2.0, 5.0]
    loads = dict(header_sections(data)[0][1])["load"]
    assert loads == "concurrency, 2-8 users, 2 stages"


def test_staged_runs_of_a_sweep_are_one_colour_each_named_in_a_legend(tmp_path):
    runs = {f"r{n}": (_staged_stages(), STAGED, {"cache_policy": p})
            for n, p in enumerate(["lru", "s3fifo", "fifo"])}
    data = load_report_data(_sweep(tmp_path / "sweep", runs, swept=["cache_policy"]))
    fig = _draw(data)
    # one legend, right of the top right panel (the four panels' four copies squeezed them)
    assert [ax.get_legend() is not None for ax in fig.axes] == [False, True, False, False]
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert labels == ["policy=lru", "policy=s3fifo", "policy=fifo", "p50", "p99"]
    assert fig.prefixsim_runs == ["r0", "r1", "r2"]


def test_a_capacity_folder_draws_its_probes_slos_and_answer(tmp_path):
    probes = pd.DataFrame({
        "probe": [0, 1, 2], "value": [1.0, 2.0, 4.0], "config_value": [1.0, 2.0, 4.0],
        "offered_rate": [1.0, 2.0, 4.0], "achieved_rate": [0.9, 1.8, 2.5],
        "passed": [True, True, False], "run_id": ["p0", "p1", "p2"],
        "p50_ttft_ms": [40.0, 50.0, 400.0], "p99_ttft_ms": [90.0, 150.0, 900.0],
        "p50_tpot_ms": [8.0, 9.0, 15.0], "p99_tpot_ms": [9.0, 10.0, 20.0]})
    answer = {"search": "rate", "answer_run_id": "p1", "slos": {"p99_ttft_ms": 200.0}}
    runs = {r: (None, {"type": "trace", "rate_scale": s}, {})
            for r, s in zip(probes["run_id"], probes["value"], strict=True)}
    data = load_report_data(_sweep(tmp_path / "cap", runs, ["load_rate_scale"],
                                   (probes, answer)))
    fig = _draw(data)
    ttft = fig.axes[0]
    assert _points(ttft, "TTFT p99") == [(1.0, 90.0), (2.0, 150.0)]  # the failed one hollow
    slo = [line for line in ttft.get_lines() if line.get_label().startswith("SLO")]
    assert slo and slo[0].get_ydata()[0] == 200.0
    knee = [line for line in ttft.get_lines() if line.get_label() == "answer (knee): 2"]
    assert knee[0].get_xdata()[0] == 2.0
    assert not any(line.get_label().startswith("SLO") for line in fig.axes[2].get_lines())
    assert fig.prefixsim_runs is None
    assert dict(header_sections(data)[0][1])["load"] == \
        "trace (recorded times, rate scaled by 1-4)"
    assert capacity_png(probes, answer).startswith(b"\x89PNG")


def test_the_statistic_an_slo_judges_is_drawn_beside_p50_and_p99(tmp_path):
    """A probe judged on its p90 TTFT shows that p90: drawn p50 and p99 alone, passing probes
    sat above the p90 SLO line and read as failures."""
    probes = pd.DataFrame({
        "probe": [0, 1], "value": [1.0, 2.0], "config_value": [1.0, 2.0],
        "offered_rate": [1.0, 2.0], "achieved_rate": [1.0, 1.5], "passed": [True, False],
        "run_id": ["p0", "p1"], "p50_ttft_ms": [40.0, 400.0], "p90_ttft_ms": [150.0, 800.0],
        "p99_ttft_ms": [300.0, 900.0], "p50_tpot_ms": [8.0, 15.0], "p99_tpot_ms": [9.0, 20.0]})
    answer = {"search": "rate", "answer_run_id": "p0", "slos": {"p90_ttft_ms": 200.0}}
    runs = {r: (None, {"type": "trace", "rate_scale": s}, {})
            for r, s in zip(probes["run_id"], probes["value"], strict=True)}
    fig = _draw(load_report_data(_sweep(tmp_path / "cap", runs, ["load_rate_scale"],
                                        (probes, answer))))
    ttft, tpot = fig.axes[0], fig.axes[2]
    assert _points(ttft, "TTFT p90") == [(1.0, 150.0)]
    labels = [t.get_text() for t in ttft.get_legend().get_texts()]
    assert labels[:3] == ["TTFT p50", "TTFT p90", "TTFT p99"]
    with pytest.raises(AssertionError, match="no points"):
        _points(tpot, "TPOT p90")  # no SLO on TPOT's p90, and no column either
    colours = {line.get_label(): line.get_color() for ax in (ttft, tpot)
               for line in ax.get_lines() if line.get_label().endswith("p99")}
    assert colours["TTFT p99"] == colours["TPOT p99"]  # one colour per statistic


def test_a_search_with_no_passing_probe_says_so_in_its_title():
    """Every probe failed (no rate sustained): the figure said only 'hollow: failed
    probes'; its title now says no probe passed and there is no answer."""
    probes = pd.DataFrame({
        "probe": [0, 1], "value": [1.0, 0.5], "config_value": [1.0, 0.5],
        "offered_rate": [1.0, 0.5], "achieved_rate": [0.5, 0.4], "passed": [False, False],
        "run_id": ["p0", "p1"], "p50_ttft_ms": [400.0, 300.0], "p99_ttft_ms": [900.0, 800.0],
        "p50_tpot_ms": [15.0, 14.0], "p99_tpot_ms": [20.0, 19.0]})
    fig = capacity_figure(probes, {"search": "rate", "answer_run_id": None,
                                   "slos": {"p99_ttft_ms": 200.0}})
    assert fig._suptitle.get_text() == \
        "Capacity search: rate (hollow: failed probes; none passed: no answer)"
    passing = capacity_figure(probes.assign(passed=[True, False]),
                              {"search": "rate", "answer_run_id": "p0"})
    assert passing._suptitle.get_text() == "Capacity search: rate (hollow: failed probes)"
    plt.close("all")


def test_the_report_page_names_the_load_and_draws_the_figure(tmp_path):
    built = build_report(load_report_data(_run(tmp_path / "run", _staged_stages(), STAGED)))
    assert "latency_vs_load" in built.pngs
    assert "<dt>load</dt><dd>poisson 2-30 req/s, 3 stages</dd>" in built.html


@pytest.mark.parametrize(("stages", "mode", "reason"), [
    (None, "timed", "no run has load stages"),
    ([{"stage": 0, "rate": 2.0, "duration_s": 20.0, "num_requests": 5}], "cache_only",
     "no latencies"),
])
def test_runs_without_stages_or_latencies_skip_it_with_the_reason(tmp_path, stages, mode,
                                                                   reason):
    data = load_report_data(_run(tmp_path / "run", stages, None, mode))
    with pytest.raises(PlotSkipped, match=reason):
        latency_vs_load(data)
    plt.close("all")


@pytest.mark.parametrize(("load", "text"), [
    (None, "trace (recorded times)"),
    ({"type": "trace", "rate_scale": 1.0}, "trace (recorded times)"),
    ({"type": "trace", "rate_scale": 2.5}, "trace (recorded times, rate scaled by 2.5)"),
    ({"type": "poisson", "rate": 4.0}, "poisson 4 req/s"),
    (STAGED, "poisson 2-30 req/s, 3 stages"),
    ({"type": "constant", "rate": 0.5}, "constant 0.5 req/s"),
    ({"type": "concurrency", "users": 8}, "concurrency, 8 users"),
    ({"type": "concurrency", "users": 8, "think_time_s": 2.0}, "concurrency, 8 users, think 2 s"),
    ({"type": "sessions", "users": None}, "sessions, all sessions"),
])
def test_the_header_says_how_requests_were_offered(load, text):
    assert load_text(load) == text


def test_a_search_that_never_passed_is_readable(tmp_path):
    """The Mooncake replicas search that found no count (every probe failed): p99 TTFT from
    1.9M ms at 1 replica to 7,459 ms, its SLO of 2,000 ms. The TTFT axes go logarithmic
    (linear, the SLO lay on the zero line under a `1e6` offset), TPOT too (8-331 ms), the
    replicas in base 2 at
    the counts probed, and the legend names both statistics although no point is filled
    (it named none: the TPOT panels had an empty legend)."""
    replicas = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    p99 = [1_943_532.0, 490_344.0, 9191.0, 7843.0, 7459.0, 7459.0, 7459.0]
    probes = pd.DataFrame({
        "probe": range(7), "value": replicas, "config_value": [int(r) for r in replicas],
        "offered_rate": [3.04] * 7, "achieved_rate": [1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 3.0],
        "passed": [False] * 7, "run_id": [f"p{i}" for i in range(7)],
        "p50_ttft_ms": [v / 2 for v in p99], "p99_ttft_ms": p99,
        "p50_tpot_ms": [80.0, 80.0, 22.0, 10.0, 8.0, 8.0, 8.0],
        "p99_tpot_ms": [320.0, 330.0, 331.0, 122.0, 22.0, 22.0, 22.0]})
    answer = {"search": "replicas", "answer": None, "answer_run_id": None,
              "slos": {"p99_ttft_ms": 2000.0}, "note": "stopped: p99_ttft_ms stays 7,459 ms"}
    runs = {r: (None, {"type": "trace"}, {}) for r in probes["run_id"]}
    data = load_report_data(_sweep(tmp_path / "cap", runs, ["engine_replicas"],
                                   (probes, answer)))
    fig = _draw(data)
    ttft_replicas, ttft_achieved, tpot_replicas, tpot_achieved = fig.axes
    assert (ttft_replicas.get_yscale(), ttft_achieved.get_yscale()) == ("log", "log")
    # TPOT 8-331 ms spans 41x (over 10x): logarithmic too; within 10x it stays linear
    assert (tpot_replicas.get_yscale(), tpot_achieved.get_yscale()) == ("log", "log")
    assert ttft_replicas.get_xscale() == "log" and ttft_achieved.get_xscale() == "linear"
    assert [t.get_text() for t in ttft_replicas.get_xticklabels()] == \
        ["1", "2", "4", "8", "16", "32", "64"]
    for ax in fig.axes:
        assert ax.yaxis.get_offset_text().get_text() == ""  # no 1e6 over the axis
        assert ax.xaxis.get_offset_text().get_text() == ""
    legend = [t.get_text() for t in tpot_replicas.get_legend().get_texts()]
    assert legend == ["TPOT p50", "TPOT p99"]
    assert [t.get_text() for t in ttft_replicas.get_legend().get_texts()] == \
        ["TTFT p50", "TTFT p99", "SLO p99_ttft_ms = 2,000 ms"]
    assert _points(ttft_replicas, "TTFT p99 failed") == list(zip(replicas, p99, strict=True))
    plt.close(fig)
    first = answers(data)[0]  # the search's own answer heads the box
    assert (first.question, first.parts) == ("Capacity: fewest replicas",
                                             ("none: p99_ttft_ms stays 7,459 ms",))


@pytest.mark.parametrize("replicas, ticks", [
    ([1], ["1"]),  # one probe: was ticked 0.945-1.05 (too few whole numbers in view)
    ([1, 2, 4], ["1", "2", "4"]),  # linear (a span under 8): at the counts probed
    ([3, 6], ["3", "6"]),
])
def test_a_replicas_axis_is_ticked_at_the_counts_probed(replicas, ticks):
    n = len(replicas)
    probes = pd.DataFrame({
        "probe": range(n), "value": [float(r) for r in replicas], "config_value": replicas,
        "offered_rate": [18.5] * n, "achieved_rate": [8.0 + r for r in replicas],
        "passed": [True] * n, "run_id": [f"p{i}" for i in range(n)],
        "p50_ttft_ms": [60.0] * n, "p99_ttft_ms": [120.0] * n,
        "p50_tpot_ms": [7.5] * n, "p99_tpot_ms": [8.5] * n})
    fig = capacity_figure(probes, {"search": "replicas", "answer_run_id": "p0",
                                   "slos": {"p99_ttft_ms": 2000.0}})
    fig.canvas.draw()
    for ax in fig.axes[::2]:  # the replicas panels
        assert ax.get_xscale() == "linear"
        assert [t.get_text() for t in ax.get_xticklabels()] == ticks
    plt.close(fig)
