"""What the report's pictures show a reader, read from the rendered figures: every Text
artist of every standard plot of the bundled demo sweeps (cache-only, timed, cluster) is
drawn as the figure is saved and then checked: no raw math text (an unescaped `$`, or
matplotlib's `\\mathdefault`) and no text reaching outside its figure (a cut title, label
or tick). A swept string holding `$` is drawn as written."""

from __future__ import annotations

import re
from pathlib import Path
from unittest import mock

import matplotlib.pyplot as plt
import pandas as pd
import pytest
import yaml
from fakes import run_demo_sweep
from matplotlib.text import Text

from prefixsim.report import PLOTS, PlotSkipped, load_report_data
from prefixsim.report.figures import finish_figure, value_ticks
from prefixsim.report.plots import gib_axis
from prefixsim.report.plots_time import cache_tokens_over_time
from prefixsim.report.units import KVGeometry
from prefixsim.sweep import ExecutorOptions, load_spec, run_sweep

DEMOS = ("quickstart", "cluster_demo")  # quickstart: cache-only and timed runs
RAW_MATH = re.compile(r"(?<!\\)\$|\\mathdefault")
# 1.2e+02, 1e6: a `g` format's fallback or an axis's offset text, not for readers (a run
# id's hex digits, cc2fb4e3, are not a number)
EXPONENT = re.compile(r"(?<![\w.])\d+(?:\.\d+)?e[+-]?\d+(?![\w.])")
SLACK_PX = 1.0


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory):
    """The bundled demo sweeps, run once for the module, read as reports read them."""
    root = tmp_path_factory.mktemp("pictures")
    return {name: load_report_data(run_demo_sweep(name, root)) for name in DEMOS}


def drawn_texts(fig) -> list[tuple[str, object]]:
    """(text, window extent) of every non-empty Text artist drawn when `fig` is prepared
    and drawn as the report saves it (tick labels outside the view are not drawn)."""
    finish_figure(fig)
    drawn: list[Text] = []
    draw = Text.draw

    def recording_draw(self, renderer):
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)
        return draw(self, renderer)

    with mock.patch.object(Text, "draw", recording_draw):
        fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [(t.get_text(), t.get_window_extent(renderer)) for t in drawn]


def faults(fig) -> list[str]:
    """What a reader would see as wrong in `fig`: raw math text, text outside the figure."""
    box = fig.bbox
    wrong = []
    for text, extent in drawn_texts(fig):
        if RAW_MATH.search(text):
            wrong.append(f"raw math text {text!r}")
        if EXPONENT.search(text):
            wrong.append(f"a number in exponent notation {text!r}")
        if (extent.x0 < box.x0 - SLACK_PX or extent.y0 < box.y0 - SLACK_PX
                or extent.x1 > box.x1 + SLACK_PX or extent.y1 > box.y1 + SLACK_PX):
            wrong.append(f"outside the figure: {text!r} at x {extent.x0:.0f}-{extent.x1:.0f},"
                         f" y {extent.y0:.0f}-{extent.y1:.0f} of {box.width:.0f}x"
                         f"{box.height:.0f}")
    return wrong


def overlapping_ticks(fig) -> list[str]:
    """Neighbouring tick labels of one axis that run into each other (`100000200000`), of
    the ticks drawn (inside the view); `fig` finished and drawn first (drawn_texts)."""
    renderer = fig.canvas.get_renderer()
    wrong = []
    for ax in fig.axes:
        for axis, across in ((ax.xaxis, 0), (ax.yaxis, 1)):
            low, high = sorted(axis.get_view_interval())
            boxes = [(t.label1.get_window_extent(renderer), t.label1.get_text())
                     for t in axis.get_major_ticks()
                     if t.label1.get_visible() and t.label1.get_text().strip()
                     and low - 1e-9 * (high - low) <= t.get_loc() <= high + 1e-9 * (high - low)]
            boxes.sort(key=lambda b: b[0].get_points()[0][across])
            for (a, a_text), (b, b_text) in zip(boxes, boxes[1:], strict=False):
                if a.get_points()[1][across] > b.get_points()[0][across] + SLACK_PX:
                    wrong.append(f"tick labels run into each other: {a_text!r}, {b_text!r}")
    return wrong


@pytest.mark.parametrize("demo", DEMOS)
def test_no_drawn_text_is_raw_math_or_outside_its_figure(demo_data, demo):
    data = demo_data[demo]
    drawn, wrong = 0, {}
    for name, plot in PLOTS:
        try:
            fig = plot(data)
        except PlotSkipped:
            continue
        drawn += 1
        found = faults(fig) + overlapping_ticks(fig)
        plt.close(fig)
        if found:
            wrong[name] = found[:5]
    assert drawn >= 4
    assert wrong == {}


def test_the_checks_see_raw_math_and_a_cut_title():
    """Negative control: a log axis with matplotlib's own (math text) tick labels drawn
    unparsed, and a title far wider than its figure, are both caught."""
    with plt.rc_context({"text.parse_math": False}):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot([1, 1e4], [1, 2])
        ax.set_xscale("log")
        ax.set_title("a title far too long for a figure three inches wide, cut at both ends")
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        texts = [(t.get_text(), t.get_window_extent(renderer)) for t in fig.findobj(Text)
                 if t.get_visible() and t.get_text().strip()]
    assert any(RAW_MATH.search(text) for text, _ in texts)
    assert any(extent.x0 < 0 and extent.x1 > fig.bbox.x1 for _, extent in texts)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_xlabel("KV (1.2e+02 GiB)")
    assert faults(fig) == ["a number in exponent notation 'KV (1.2e+02 GiB)'"]
    plt.close(fig)


def test_the_gib_axis_of_large_capacities_reads_plainly():
    """Swept capacities of 1M and 2M tokens at 128 KiB a token are 122 and 244 GiB of KV:
    the top axis labels them 122 and 244 (whole GiB keep their digits), where a `.2g` format
    drew 1.2e+02 and 2.4e+02."""
    geometry = KVGeometry("llama-3.1-8b", "bf16", 1, "h100-sxm", 131072, 131072, 80e9)
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([1e6, 2e6], [0.5, 0.6])
    value_ticks(ax.xaxis, [1e6, 2e6])  # the bottom axis as the plots tick it: 1M, 2M
    gib_axis(ax, geometry, pd.Series([1e6, 2e6]))
    texts = [text for text, _ in drawn_texts(fig)]
    assert "122" in texts and "244" in texts
    assert faults(fig) == []
    plt.close(fig)


def test_a_sweep_of_seven_replica_counts_labels_each_panel_with_its_own(tmp_path):
    """Seven runs of 1-64 replicas draw seven panels of resident tokens; each axis names its
    own run's replicas (`16 replicas summed`), where every axis named all seven counts, a
    label taller than its panel that ran out of the figure."""
    counts = [1, 2, 4, 8, 16, 32, 64]
    spec = tmp_path / "replicas.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "replicas",
        "base": {"trace": {"path": str(Path("traces/demo_chat.jsonl").resolve()),
                           "max_requests": 40},
                 "model": {"name": "llama-3.1-8b"}, "hardware": {"gpu": "h100-sxm"},
                 "cache": {"capacity_tokens": 20000}},
        "grid": {"engine.replicas": counts}}))
    out = tmp_path / "out"
    run_sweep(load_spec(spec), out, ExecutorOptions(n_jobs=1))
    fig = cache_tokens_over_time(load_report_data(out))
    labels = sorted((ax.get_title(), ax.get_ylabel()) for ax in fig.axes if ax.has_data())
    assert len(labels) == 7
    for title, label in labels:
        n = int(title.rsplit("=", 1)[1])
        assert label == ("resident tokens (tokens)" if n == 1 else
                         f"resident tokens (tokens, {n} replicas summed)"), title
    assert faults(fig) == []
    plt.close(fig)


def test_a_week_of_traffic_reads_in_days(tmp_path):
    """The demo trace slowed to span about six days: time axes read in days (0-6 d, not
    100000 200000 ... s run together), the arrival bins in hours, and nothing overlaps."""
    from cli_helpers import invoke

    from prefixsim.report.plots_requests import workload

    out = tmp_path / "week"
    result = invoke("run", "--trace", "traces/demo_chat.jsonl", "--max-requests", 40,
                    "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--rate-scale", 0.00034,
                    "-o", out, "--quiet")
    assert result.exit_code == 0, result.output
    data = load_report_data(out)
    assert 5 * 86400 <= data.frames("requests")["week"]["arrival_s"].max() <= 7 * 86400
    tokens = cache_tokens_over_time(data)
    assert tokens.axes[0].get_xlabel() == "time (d)"
    assert max(max(line.get_xdata(), default=0) for line in tokens.axes[0].get_lines()) < 7
    arrivals = workload(data).axes[2]
    assert arrivals.get_xlabel() == "arrival time (d)"
    assert arrivals.get_legend().get_texts()[0].get_text().endswith(" h")  # bins of 4.5 h
    for fig in (tokens, arrivals.figure):
        assert faults(fig) + overlapping_ticks(fig) == []
        plt.close(fig)


@pytest.mark.parametrize(("span_s", "unit"), [(299, "s"), (300, "min"), (17_999, "min"),
                                              (18_000, "h"), (431_999, "h"), (432_000, "d")])
def test_time_units_by_span(span_s, unit):
    from prefixsim.report.figures import time_unit

    size, name = time_unit(span_s)
    assert name == unit and size == {"s": 1, "min": 60, "h": 3600, "d": 86400}[unit]


def test_trace_plots_read_plainly(tmp_path, monkeypatch):
    """`trace inspect --plot` on six days of sessions: every figure finished as the report's
    (no `10^2` math text, no exponent, nothing cut, no tick labels run together), times in
    days and round times (1 min, 1 h), bins named in minutes or hours."""
    from prefixsim.report import trace_plots
    from prefixsim.trace.record import Request

    kept = []
    monkeypatch.setattr(trace_plots.plt, "close", kept.append)  # keep each saved figure
    day = 86400.0
    requests = [Request(i, i * 6 * day / 300, 64 + 16 * (i % 7), 8, (1, 2, 100 + i % 40), 16,
                        f"s{i % 40}") for i in range(300)]
    paths = trace_plots.plot_characterisation(requests, tmp_path, title="week")
    assert len(paths) == len(kept) == 7
    figures = {path.stem: fig for path, fig in zip(paths, kept, strict=True)}
    arrivals = figures["arrival_rate"].axes[0]
    assert arrivals.get_xlabel() == "time since start (d)"
    assert arrivals.get_legend().get_texts()[0].get_text() == "requests/s (9.57 h bins)"
    ttl = figures["hit_rate_vs_ttl"].axes[0]
    assert [t.get_text() for t in ttl.get_xticklabels()][:3] == ["1 s", "10 s", "1 min"]
    monkeypatch.undo()  # plt.close closes again
    for name, fig in figures.items():
        assert faults(fig) + overlapping_ticks(fig) == [], name
        if name == "objective_vs_parameters":
            host = next(a for a in fig.axes if "host" in a.get_xlabel())
            ticks = [t.get_text() for t in host.get_xticklabels() if t.get_text()]
            assert ticks and all(t.endswith("k") or t == "0" for t in ticks), ticks
        plt.close(fig)


def test_a_tunes_plots_show_a_share_in_percent(tmp_path):
    """A tune maximising the token hit rate (a share, 0-1): its history and its
    objective-against-parameter panels tick the objective in % as their label says (they
    ticked 0.3 ... 0.7 under "% of prompt tokens"), with nothing cut or run together; a
    linear token knob is ticked 10k, 30k (it read 5000 10000 ... 35000 on a 4-inch panel)."""
    from prefixsim.tune import parse_tune_spec, run_tune
    from prefixsim.tune.plots import tune_view

    demo = str(Path("traces/demo_chat.jsonl").resolve())
    spec = parse_tune_spec({
        "base": {"trace": {"path": demo}, "cache_only": True},
        "objectives": {"cache_token_hit_rate": "maximize"}, "trials": 8,
        "sampler": {"name": "random", "seed": 0},
        "space": {"cache.policy": ["lru", "s3fifo"],
                  "cache.capacity_tokens": {"int": [2000, 30000], "log": True},
                  "cache.host_capacity_tokens": {"int": [4000, 36000], "step": 2000}}})
    out = tmp_path / "tune"
    run_tune(spec, out, workers=ExecutorOptions(n_jobs=1), keep_requests=False)
    data, plots = tune_view(out, load_report_data(out))
    for name in ("optimisation_history", "objective_vs_parameters"):
        fig = dict(plots)[name](data)
        for ax in (a for a in fig.axes if a.get_visible()):
            fig.canvas.draw()
            ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
            assert ticks and all(t.endswith("%") for t in ticks), (name, ticks)
        assert faults(fig) + overlapping_ticks(fig) == [], name
        if name == "objective_vs_parameters":
            host = next(a for a in fig.axes if "host" in a.get_xlabel())
            ticks = [t.get_text() for t in host.get_xticklabels() if t.get_text()]
            assert ticks and all(t.endswith("k") or t == "0" for t in ticks), ticks
        plt.close(fig)


@pytest.mark.parametrize(("column", "label"), [
    ("p99_ttft_ms", "p99 TTFT (ms)"), ("mean_e2el_ms", "mean E2EL (ms)"),
    ("median_itl_ms", "median ITL (ms)"), ("kv_pool_tokens", "KV pool (tokens)"),
    ("num_requests", "num requests (count)"), ("request_throughput", "request throughput (per s)"),
    ("cache_belady_token_hit_rate", "cache belady token hit rate (share)"),
    ("cache_ttl_s", "TTL (s)"), ("tpot_slo_attainment", "TPOT slo attainment"),
    ("request_goodput", "request goodput (requests per s)"),
    ("cache_evictions", "cache evictions (pages)"), ("replica1_cache_expirations",
                                                     "replica1 cache expirations (pages)"),
])
def test_axis_labels_write_metric_names_as_vllm_does(column, label):
    from prefixsim.report.figures import axis_label

    assert axis_label(column) == label


@pytest.mark.parametrize(("values", "scale"), [([120.0, 201.0, 3200.0], "log"),
                                               ([120.0, 201.0, 1190.0], "linear")])
def test_a_latency_axis_goes_log_past_ten_times(values, scale):
    """3,200 ms beside 120 and 201 (26x) squashed the two small ones onto one line."""
    from prefixsim.report.figures import readable_ticks

    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], values)
    readable_ticks(ax.yaxis, "p99_ttft_ms", pd.Series(values))
    assert ax.get_yscale() == scale
    assert faults(fig) + overlapping_ticks(fig) == []
    plt.close(fig)


@pytest.mark.parametrize(("values", "labels"), [
    ([11.0, 105.0, 420.0], {"10", "20", "50", "100", "200"}),  # two powers of ten: 2x, 5x
    ([11.0, 2000.0, 9000.0], {"10", "100", "1k"}),  # three: powers of ten only
])
def test_a_log_axis_over_few_decades_labels_2x_and_5x(values, labels):
    """A TPOT axis of 10-420 ms ticked 10 and 100 alone left its highest points above every
    label; one spanning three or more decades keeps its powers of ten only."""
    from prefixsim.report.figures import readable_ticks

    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], values)
    readable_ticks(ax.yaxis, "p99_tpot_ms", pd.Series(values))
    finish_figure(fig)
    fig.canvas.draw()
    low, high = sorted(ax.get_ylim())
    shown = [t.label1.get_text() for t in ax.yaxis.get_major_ticks() + ax.yaxis.get_minor_ticks()
             if low <= t.get_loc() <= high and t.label1.get_text()]
    assert labels <= set(shown), shown
    assert all(label[0] in "125" for label in shown), shown
    assert len(labels) > 3 or not [label for label in shown if label[0] != "1"], shown
    assert faults(fig) + overlapping_ticks(fig) == []
    plt.close(fig)


@pytest.mark.parametrize(("interval", "widened"), [
    ((7.0, 480.0), (7.0, 500.0)),  # 480 is 2.4x the last label (200): out to 500
    ((6.5, 450.0), (5.0, 500.0)),  # 6.5 is 1.54x below the first (10): down to 5
    ((9.0, 210.0), (9.0, 210.0)),  # each end within 1.5x of a label: as it was
    ((120.0, 480.0), (100.0, 500.0)),
    ((0.8, 3.0), (0.8, 3.0)),  # 3.0 is exactly 1.5x the 2 label: kept
    ((11.0, 19.0), (11.0, 19.0)),  # no 1-2-5 value inside: nothing to measure from
])
def test_a_log_axis_ticked_1_2_5_ends_at_labelled_values(interval, widened):
    from prefixsim.report.figures import one_two_five_around

    assert one_two_five_around(*interval) == pytest.approx(widened)


@pytest.mark.parametrize("inverted", [False, True])
def test_the_highest_points_of_a_few_decade_axis_sit_below_a_label(inverted):
    """TPOT p99 at 330-400 ms beside p50 at 7-80 ms: the axis used to stop at 488 (the
    data and matplotlib's margin) with 200 its highest label; it now runs to a labelled 500
    (an inverted axis stays inverted); an axis over many decades keeps its own ends, and so
    does one whose limits the plot set itself."""
    from prefixsim.report.figures import readable_ticks

    fig, (few, many) = plt.subplots(1, 2)
    values = [7.5, 80.0, 330.0, 400.0]
    few.plot([1, 2, 3, 4], values)
    readable_ticks(few.yaxis, "p99_tpot_ms", pd.Series(values))
    if inverted:
        few.invert_yaxis()
    many.plot([1, 2], [250.0, 1.9e6])
    many.set_yscale("log")
    before = many.get_ylim()
    chosen, (chosen_ax, _) = plt.subplots(1, 2)
    chosen_ax.plot([1, 2, 3, 4], values)
    readable_ticks(chosen_ax.yaxis, "p99_tpot_ms", pd.Series(values))
    chosen_ax.set_ylim(7.0, 420.0)  # a plot's own cut (the ECDFs': at p99.9)
    finish_figure(chosen)
    assert chosen_ax.get_ylim() == (7.0, 420.0)
    plt.close(chosen)
    finish_figure(fig)
    fig.canvas.draw()
    low, high = sorted(few.get_ylim())
    assert high == pytest.approx(500.0) and low <= 7.5
    assert (few.get_ylim()[0] > few.get_ylim()[1]) == inverted
    shown = [t.label1.get_text() for t in few.yaxis.get_major_ticks()
             + few.yaxis.get_minor_ticks() if low <= t.get_loc() <= high * (1 + 1e-9)
             and t.label1.get_text()]
    assert "500" in shown and "200" in shown, shown
    assert many.get_ylim() == before
    assert faults(fig) + overlapping_ticks(fig) == []
    plt.close(fig)


def test_the_cluster_table_blanks_what_a_run_does_not_run(demo_data):
    """The cluster demo's comparison: a split run's replicas (1, unused) and a colocated
    run's prefill and decode counts are blank, its pool reads `unbounded`, not
    `{"capacity_tokens": null}`."""
    from prefixsim.report.table import comparison, shown_columns

    data = demo_data["cluster_demo"]
    frame = comparison(data)
    replicas = frame["engine_replicas"].tolist()
    assert replicas[:2] == [4, 4] and all(v is None for v in replicas[2:])
    prefill = frame["engine_prefill_replicas"].tolist()
    assert prefill[:2] == [None, None] and prefill[2:] == [2, 2, 1, 1]
    pool = dict((key, fmt) for key, _, _, fmt in shown_columns(frame, data))["cache_pool"]
    assert [pool(v) for v in frame["cache_pool"]] == ["-", "unbounded"] * 3


@pytest.mark.parametrize(("largest", "expected"), [
    (0.012, ["0.0%", "0.2%", "0.4%", "0.6%", "0.8%", "1.0%", "1.2%"]),  # was 0% 0% 0% 1% ...
    (0.0031, ["0.00%", "0.05%", "0.10%", "0.15%", "0.20%", "0.25%", "0.30%"]),
    (1.0, ["0%", "20%", "40%", "60%", "80%", "100%"]),  # whole per cents: as before
])
def test_a_share_axis_has_the_decimals_its_ticks_need(largest, expected):
    """The cluster report's link busy shares (0-1.2% of a run) were ticked 0% 0% 0% 1% 1%."""
    from prefixsim.report.figures import percent_axis

    fig, ax = plt.subplots()
    ax.barh([0, 1], [0, largest])
    percent_axis(ax.xaxis)
    finish_figure(fig)
    fig.canvas.draw()
    low, high = ax.get_xlim()
    shown = [t.get_text() for t in ax.get_xticklabels() if low <= t.get_position()[0] <= high]
    assert shown == expected
    assert faults(fig) + overlapping_ticks(fig) == []
    plt.close(fig)
