"""The report's parts: numbers formatted for people, the comparison table's derived
columns, the header, small multiples that hold every run, and the session figures'
arithmetic. Known answers are worked in the docstrings; the demo sweep is run once."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.report import PLOTS, PlotSkipped, load_report_data
from prefixsim.report.data import short_name, show_swept
from prefixsim.report.figures import MAX_RUNS_PER_PANEL, run_panels
from prefixsim.report.format import (
    capacity,
    duration,
    gib,
    integer,
    milliseconds,
    percent,
    plain,
    points,
    rate,
    seconds,
    significant,
    usd,
)
from prefixsim.report.header import header_sections
from prefixsim.report.html import _table
from prefixsim.report.plots_requests import idle_gaps_s, long_ttl_break_even, session_rates
from prefixsim.report.table import (
    comparison,
    comparison_notes,
    identical_runs,
    shown_columns,
)
from prefixsim.sweep import ExecutorOptions, load_spec, parse_spec, run_sweep

OVER_TIME = ("cache_tokens_over_time", "evictions_over_time", "expirations_over_time")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("parts") / "demo"
    run_sweep(load_spec("traces/sweeps/demo.yaml"), out, ExecutorOptions(n_jobs=1),
              command="prefixsim sweep X")
    return load_report_data(out)


@pytest.fixture(scope="module")
def lru_only(tmp_path_factory):
    """40 demo requests, cache-only, LRU at two capacities: no other policy, no TTL, no tiers."""
    out = tmp_path_factory.mktemp("parts") / "lru_only"
    run_sweep(parse_spec({"base": {"trace": {"path": "traces/demo_chat.jsonl",
                                             "max_requests": 40}, "cache_only": True},
                          "grid": {"cache.capacity_tokens": [5000, 20000]}}), out,
              ExecutorOptions(n_jobs=1))
    return load_report_data(out)


def test_numbers_for_people():
    assert (integer(5000.0), integer(1234567), integer(None)) == ("5,000", "1,234,567", "-")
    assert (percent(0.374), percent(float("nan")), points(0.046), points(-0.0131)) == (
        "37.4%", "-", "+4.6 pp", "-1.3 pp")
    assert points(0.0001) == "0.0 pp"
    assert (milliseconds(35.76), milliseconds(5.24), milliseconds(2383.4)) == (
        "36 ms", "5.2 ms", "2.38 s")
    assert (seconds(300.0), seconds(None), capacity(None), capacity(5000.0)) == (
        "300 s", "none", "unbounded", "5,000")
    assert (duration(720.0), duration(30.0), duration(86400.0)) == (
        "12.0 min (720 s)", "30.0 s", "24.0 h (86,400 s)")
    assert (usd(0.3249), usd(-0.11), usd(0.004), rate(0.3654)) == (
        "$0.32", "-$0.11", "$0.0040", "0.365 req/s")


EXPONENT = r"\de[+-]?\d"  # 1.2e+02, 8.64e+04, 1e-05: what a `g` format falls back to


def test_significant_digits_by_hand():
    """3 significant digits: 123.4 -> 123, 0.6104 -> 0.61 (zeros dropped), 99.96 -> 100,
    1e-5 -> 0.00001; whole numbers keep every digit (86,400 at 3 digits); 0, inf, nan as
    written."""
    assert [significant(v, 3) for v in (123.4, 0.6104, 99.96, 1e-5, 86400.0, -0.00123)] == [
        "123", "0.61", "100", "0.00001", "86,400", "-0.00123"]
    assert [significant(v, 2) for v in (150.0, 0.0, float("inf"), float("nan"))] == [
        "150", "0", "inf", "nan"]


def test_numbers_never_in_exponent_notation():
    """A day-long TTL, a 150 GiB pool, a 1,000 GiB boundary, a tiny rate: formats that
    fell back to `g` printed 8.64e+04 s, 1e+03 GiB and 1e-05 req/s."""
    assert (seconds(86400.0), seconds(12345.0), seconds(1.23456)) == (
        "86,400 s", "12,345 s", "1.235 s")
    assert (gib(150.4), gib(999.6), gib(0.6104), gib(1e-5)) == (
        "150 GiB", "1,000 GiB", "0.61 GiB", "0.00001 GiB")
    assert (rate(1e-5), rate(99.96), rate(1234.5)) == ("0.00001 req/s", "100 req/s",
                                                        "1,234 req/s")
    assert (milliseconds(999.7), milliseconds(9.96), milliseconds(9.94)) == (
        "1.00 s", "10 ms", "9.9 ms")
    assert (plain(1e-6), plain(12345.6), plain(0.5)) == ("0.000001", "12,346", "0.5")


@given(st.floats(min_value=-1e15, max_value=1e15, allow_nan=False, allow_infinity=False),
       st.integers(min_value=1, max_value=8))
@settings(max_examples=300, deadline=None)
def test_significant_is_the_number_without_an_exponent(number, digits):
    text = significant(number, digits)
    assert not re.search(EXPONENT, text)
    if number:
        assert float(text.replace(",", "")) == pytest.approx(number, rel=10.0 ** (1 - digits),
                                                              abs=1e-300)


def test_comparison_against_lru_and_belady(demo):
    """s3fifo at 20,000 tokens against lru at 20,000 (same TTL: none): vs LRU = their
    difference; gap closed = (s3fifo - lru) / (belady - lru). lru rows are the baseline,
    blank (never "0.0 pp" against themselves), and so are the unbounded TTL runs (all lru);
    at 80,000 Belady is within 1 pp of LRU, so the share is blank too. The capacity is
    also given in GiB of KV and as shares of HBM and of the working set."""
    frame = comparison(demo).set_index("run_id")
    table = demo.ok.set_index("run_id")

    def run(policy, capacity):
        rows = table[(table["cache_policy"] == policy)
                     & (table["cache_capacity_tokens"] == capacity)]
        assert len(rows) == 1
        return rows.index[0]

    s3, lru = run("s3fifo", 20000), run("lru", 20000)
    hit = table["cache_token_hit_rate"]
    belady = table.loc[lru, "cache_belady_token_hit_rate"]
    assert frame.loc[s3, "vs_lru"] == pytest.approx(hit[s3] - hit[lru])
    assert frame.loc[s3, "belady_gap_closed"] == pytest.approx(
        (hit[s3] - hit[lru]) / (belady - hit[lru]))
    assert np.isnan(frame.loc[lru, "vs_lru"]) and np.isnan(frame.loc[lru, "belady_gap_closed"])
    unbounded = list(table.index[table["cache_capacity_tokens"].isna()])
    assert len(unbounded) == 4 and frame.loc[unbounded, "vs_lru"].isna().all()
    assert frame.loc[unbounded, "belady_gap_closed"].isna().all()
    assert np.isnan(frame.loc[run("s3fifo", 80000), "belady_gap_closed"])
    # llama-3.1-8b (the default model), bf16: 131,072 bytes a token; demo_chat's working set
    # is its distinct prefix tokens
    assert frame.loc[lru, "capacity_kv_gib"] == pytest.approx(20000 * 131072 / 2**30)
    assert frame.loc[lru, "capacity_working_set_share"] == pytest.approx(
        20000 / table.loc[lru, "trace_distinct_prefix_tokens"])
    titles = [title for _, title, _, _ in shown_columns(comparison(demo), demo)]
    assert titles[:7] == ["run", "policy", "capacity (tokens)", "KV (GiB)", "share of HBM",
                          "share of working set", "TTL"]
    assert "p99 TTFT" not in titles  # cache-only: no timing, said in the notes
    assert any("p99 TTFT" in n and "no timing" in n for n in comparison_notes(frame, demo))


def test_comparison_of_lru_only_runs_has_no_policy_columns(lru_only):
    """Two LRU capacities: nothing to compare with LRU, so no vs-LRU column."""
    frame = comparison(lru_only)
    assert "vs_lru" not in frame and len(frame) == 2
    assert any("no other policy than LRU" in n for n in comparison_notes(frame, lru_only))


def test_header_says_what_the_runs_ran_on(demo):
    """Trace facts from the summaries (264 requests, the unbounded no-TTL run's rate) and
    the configs (file name, format, page size); the GPU from config.yaml (cache-only
    summaries have none); the sweep's command from sweep.json."""
    sections = {title: dict(rows) for title, rows in header_sections(demo)}
    trace = sections["Trace"]
    assert (trace["trace"], trace["format"], trace["page size"], trace["requests"]) == (
        "demo_chat.jsonl", "mooncake", "512 tokens", "264")
    plain = demo.ok[demo.ok["cache_ttl_s"].isna()]["cache_unbounded_token_hit_rate"].iloc[0]
    assert trace["unbounded hit rate"] == f"{plain:.1%} (no capacity limit, no TTL)"
    assert trace["distinct prefix tokens"] == f"{demo.ok['trace_distinct_prefix_tokens'][0]:,}"
    hardware = sections["Hardware and model"]
    assert (hardware["GPU"], hardware["model"], hardware["replicas"]) == (
        "h100-sxm", "llama-3.1-8b", "1")
    runs = sections["Runs"]
    assert runs["runs"] == "14" and runs["command"] == "prefixsim sweep X"
    assert runs["prices"].startswith("Claude Sonnet 4 list prices of 2025-06")


def test_header_says_whether_the_timed_runs_kept_up(demo, tmp_path):
    """Cache-only runs say nothing; a sweep of timed runs counts those that fell behind
    (a flood at 200 requests/s on one replica against two replicas at the trace's pace);
    one run gives its warnings in full. The comparison table has the column and a note."""
    assert "kept up" not in dict(header_sections(demo)[2][1])
    out = tmp_path / "timed"
    run_sweep(parse_spec({"base": {"trace": {"path": "traces/demo_chat.jsonl"},
                                   "engine": {"sample_interval_s": None}},
                          "runs": [{"engine.replicas": 2},
                                   {"load": {"type": "constant", "rate": 200.0}}]}),
              out, ExecutorOptions(n_jobs=1))
    data = load_report_data(out)
    runs = dict(header_sections(data)[2][1])
    assert runs["kept up"].startswith("no for 1 of 2 timed runs")
    hardware = dict(header_sections(data)[1][1])  # the engine's limits on an H100
    assert hardware["serving engine"] == "vllm-v1"
    assert hardware["batch limits"] == "1,024 running requests, 8,192 tokens a step"
    assert "serving engine" not in dict(header_sections(demo)[1][1])  # cache-only
    frame = comparison(data)
    assert sorted(frame["kept_up"].tolist()) == [False, True]
    assert any("did not keep up" in note for note in comparison_notes(frame, data))
    flooded = data.ok[data.ok["kept_up"].astype(object).eq(False)]["run_id"].iloc[0]
    one = load_report_data(out / "runs" / flooded)
    line = dict(header_sections(one)[2][1])["kept up"]
    assert line.startswith("no; the fleet did not keep up: the queue grew: ")
    steady = data.ok[data.ok["kept_up"].astype(object).eq(True)]["run_id"].iloc[0]
    assert dict(header_sections(load_report_data(out / "runs" / steady))[2][1])[
        "kept up"] == "yes"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["lru", "s3fifo", "fifo"]),
                          st.sampled_from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]),
                          st.sampled_from([None, 10.0, 60.0])), min_size=1, max_size=40,
                unique=True))
def test_panels_hold_every_run_once(points_):
    """Every run is in exactly one panel, no panel holds more than ten, and a panel's runs
    share the value of the column it groups by."""
    table = pd.DataFrame([{"run_id": f"r{i}", "cache_policy": p, "cache_capacity_tokens": c,
                           "cache_ttl_s": t} for i, (p, c, t) in enumerate(points_)])
    swept = ["cache_policy", "cache_capacity_tokens", "cache_ttl_s"]
    panels = run_panels(table, swept, list(table["run_id"]))
    placed = [r for p in panels for r in p.runs]
    assert sorted(placed) == sorted(table["run_id"]) and len(placed) == len(set(placed))
    assert all(1 <= len(p.runs) <= MAX_RUNS_PER_PANEL for p in panels)
    rows = table.set_index("run_id")
    for panel in panels:
        if panel.group_by is not None:
            assert rows.loc[panel.runs, panel.group_by].map(str).nunique() == 1


def test_every_over_time_legend_names_every_run(demo):
    """Each over-time figure draws every demo run whose quantity is not zero throughout
    and names the others as left out: all 14 hold tokens; the 4 unbounded runs never
    evict; only the 3 with a TTL expire. A panel titled col=V names in its legend every
    drawn run with that value by its other swept values (those that differ within the
    panel), and nothing else."""
    table = demo.ok.set_index("run_id")
    every = list(demo.ok["run_id"])
    unbounded = list(table.index[table["cache_capacity_tokens"].isna()])
    with_ttl = list(table.index[table["cache_ttl_s"].notna()])
    left_out = {"cache_tokens_over_time": [], "evictions_over_time": unbounded,
                "expirations_over_time": [r for r in every if r not in with_ttl]}
    for name in OVER_TIME:
        fig = dict(PLOTS)[name](demo)
        assert fig.prefixsim_left_out == left_out[name], name
        drawn = [r for r in every if r not in left_out[name]]
        assert fig.prefixsim_runs == drawn, name
        named = []
        for ax in fig.axes:
            title = ax.get_title().split(": ", 1)
            column = next((c for c in demo.swept if len(title) == 2
                           and title[1].startswith(short_name(c) + "=")), None)
            runs = drawn if column is None else [
                r for r in drawn if title[1] == f"{short_name(column)}="
                f"{show_swept(column, table.loc[r, column])}"]
            omit = () if column is None else (column,)
            legend = [t.get_text() for t in ax.get_legend().get_texts()]
            assert legend == [demo.label(r, omit, runs) for r in runs], name
            named += runs
        assert sorted(named) == sorted(drawn), name


def test_plots_without_data_are_skipped_with_a_reason(lru_only):
    """No TTL and no tiers: the expirations and tier plots say why instead of drawing."""
    with pytest.raises(PlotSkipped, match="no run expired a page"):
        dict(PLOTS)["expirations_over_time"](lru_only)
    with pytest.raises(PlotSkipped, match="no lower tier"):
        dict(PLOTS)["tier_hits"](lru_only)
    with pytest.raises(PlotSkipped, match="no run set a TTL"):
        dict(PLOTS)["hit_rate_vs_ttl"](lru_only)


def test_session_figures_arithmetic():
    """Session a: requests at 0 (10 tokens, 0 cached) and 100 (30 tokens, 15 cached):
    hit rate 15/40 = 0.375, one gap of 100 s. Session b: at 5 and 4000 s (cache-only: from
    arrival to arrival) with 20 cached of 20+20: 0.5, a gap of 3995 s. A request without a
    session counts in neither. With finish times (timed), a gap runs from the previous
    finish: 100 - 2 = 98 s."""
    frame = pd.DataFrame({"session_id": ["a", "b", "a", "b", None],
                          "arrival_s": [0.0, 5.0, 100.0, 4000.0, 50.0],
                          "input_tokens": [10, 20, 30, 20, 99], "cached_tokens": [0, 0, 15, 20, 9]})
    assert session_rates(frame).to_dict() == {"a": 0.375, "b": 0.5}
    assert sorted(idle_gaps_s(frame)) == [100.0, 3995.0]
    timed = frame.assign(finish_s=[2.0, 6.0, 101.0, 4001.0, 51.0])
    assert sorted(idle_gaps_s(timed)) == [98.0, 3994.0]
    behind = frame.assign(finish_s=[120.0, 6.0, 130.0, 4001.0, 51.0])
    assert sorted(idle_gaps_s(behind)) == [-20.0, 3994.0]  # a arrived again before it finished


def test_long_ttl_break_even_known_answer():
    """Anthropic: a 1-h write costs 6.00 against 3.75 for 5 min (+2.25 per Mtok); it saves
    a 5-minute rewrite, 3.75 - 0.30 = 3.45, when the next use falls in (5 min, 1 h]: it
    pays for itself when 2.25 / 3.45 = 65.2% of writes do. OpenAI has no dearer 1-h class,
    so Anthropic's prices are used."""
    assert long_ttl_break_even("anthropic") == (pytest.approx(2.25 / 3.45), "anthropic")
    assert long_ttl_break_even("openai")[1] == "anthropic"
    assert long_ttl_break_even("anthropic-haiku")[0] == pytest.approx(0.6 / 0.92)


def test_the_lru_reference_matches_capacity_ttl_and_trace_part():
    """Nothing swept (a tune's headline runs). gdsf at 1,000 tokens on the first half of the
    trace has one LRU twin (same capacity, TTL and half): 0.5 - 0.25 = +25 pp; gdsf on the
    second half has two LRU twins (ambiguous): blank; gdsf at 2,000 has none: blank."""
    from prefixsim.report.data import ReportData

    rows = [("g1", "gdsf", 1000, "0-0.5", 0.5), ("l1", "lru", 1000, "0-0.5", 0.25),
            ("g2", "gdsf", 1000, "0.5-1", 0.6), ("l2", "lru", 1000, "0.5-1", 0.3),
            ("l3", "lru", 1000, "0.5-1", 0.35), ("g3", "gdsf", 2000, "0-0.5", 0.7)]
    table = pd.DataFrame([{"run_id": r, "status": "ok", "cache_policy": p,
                           "cache_capacity_tokens": c, "cache_ttl_s": None,
                           "trace_time_window": w, "cache_token_hit_rate": h}
                          for r, p, c, w, h in rows])
    data = ReportData(title="t", kind="sweep", table=table, swept=[], run_dirs={})
    vs = comparison(data).set_index("run_id")["vs_lru"]
    assert vs["g1"] == pytest.approx(0.25) and np.isnan(vs["l1"])  # LRU: the baseline
    assert np.isnan(vs["g2"]) and np.isnan(vs["g3"])


def test_capacity_is_per_replica_wherever_it_comes_from():
    """A summary counts cache_capacity_tokens over all replicas (4 x 20,000 = 80,000); a
    swept capacity is the config's, per replica. Not swept: divided by the replicas
    (80,000 / 4, 40,000 / 2), a cache-only row (no replicas) and an unbounded one as they
    are. Swept: left alone."""
    from prefixsim.report.data import per_replica_capacity

    table = pd.DataFrame({"cache_capacity_tokens": [80_000, 40_000, 5_000, None],
                          "replicas": [4, 2, None, 4]})
    out = per_replica_capacity(table, [])
    assert out["cache_capacity_tokens"].tolist()[:3] == [20_000, 20_000, 5_000]
    assert pd.isna(out["cache_capacity_tokens"].iloc[3])
    assert per_replica_capacity(table, ["cache_capacity_tokens"]) is table


def test_policy_zoo_is_skipped_when_no_curve_has_two_capacities():
    """Two policies at one capacity each (the cluster demo's shape): only the bounds would
    be drawn, an empty chart, so the plot is skipped with its reason."""
    from prefixsim.report.data import ReportData
    from prefixsim.report.plots import policy_zoo

    table = pd.DataFrame({"run_id": ["a", "b"], "status": ["ok", "ok"],
                          "cache_policy": ["lru", "s3fifo"],
                          "cache_capacity_tokens": [10_000, 20_000],
                          "cache_token_hit_rate": [0.4, 0.5],
                          "cache_unbounded_token_hit_rate": [0.8, 0.8]})
    data = ReportData(title="t", kind="sweep", table=table,
                      swept=["cache_policy", "cache_capacity_tokens"], run_dirs={})
    with pytest.raises(PlotSkipped, match="no curve"):
        policy_zoo(data)


def test_a_value_that_does_not_apply_is_aligned_with_its_column():
    """'-' (None or NaN) sits right in a numeric column and left in a text one."""
    frame = pd.DataFrame({"run_id": ["a", "b"], "hit": [0.5, None], "policy": ["lru", None],
                          "rate": [float("nan"), 2.0]}).astype(object)
    frame = frame.where(frame.notna(), None)
    columns = [(key, key, "", lambda v: "-" if v is None else plain(v))
               for key in ("run_id", "hit", "policy", "rate")]
    cells = re.findall(r"<td([^>]*)>([^<]*)</td>", _table(frame, columns))
    assert cells == [(' class="text"', "a"), ("", "0.5"), (' class="text"', "lru"),
                     ("", "-"), (' class="text"', "b"), ("", "-"), (' class="text"', "-"),
                     ("", "2")]


def test_ttft_against_the_cached_share_reads_0_to_100_or_says_none_was_cached(tmp_path):
    """A trace that shares no prefix (Azure's lengths alone): every share is 0, which the
    figure drew as one column on an axis of -4% to 4%; it now says so instead. Where some
    prefix was reused, the share axis spans 0-100% whatever the points hold."""
    unshared = tmp_path / "unshared.jsonl"
    unshared.write_text("".join(json.dumps(
        {"timestamp": 500 * i, "input_length": 1024, "output_length": 4,
         "hash_ids": [10 * i, 10 * i + 1]}) + "\n" for i in range(6)))
    figures = {}
    for name, trace in (("unshared", unshared), ("shared", Path("traces/demo_chat.jsonl"))):
        out = tmp_path / name
        run_sweep(parse_spec({"base": {"trace": {"path": str(trace.resolve()),
                                                 "max_requests": 30},
                                       "model": {"name": "llama-3.1-8b"}},
                              "grid": {"engine.replicas": [1]}}), out,
                  ExecutorOptions(n_jobs=1))
        figures[name] = load_report_data(out)
    with pytest.raises(PlotSkipped, match=r"^no request was served a token from the cache"):
        dict(PLOTS)["ttft_vs_cached_fraction"](figures["unshared"])
    fig = dict(PLOTS)["ttft_vs_cached_fraction"](figures["shared"])
    assert fig.axes[0].get_xlim() == (-0.03, 1.03)
    plt.close(fig)


def test_each_runs_idle_age_bars_sit_around_its_label(lru_only):
    """One band per run, its bars (hit +0.22, eviction 0, expiry -0.22) inside it: a single
    run's hit bar was drawn at the top edge, far from its label (the range autoscaled)."""
    fig = dict(PLOTS)["idle_ages"](lru_only)
    ax = fig.axes[0]
    assert ax.get_ylim() == (-0.5, len(lru_only.ok) - 0.5)
    assert list(ax.get_yticks()) == list(range(len(lru_only.ok)))[::-1]
    plt.close(fig)


def test_runs_with_identical_results_are_named_under_the_table(tmp_path):
    """Policies at a capacity nothing is evicted from run the same (80 demo requests fit in
    1M tokens): their lines lie on each other in every plot, so the notes name them; at 10k
    LRU and LFU keep different pages (120,832 hit tokens against 118,272). Wall time and
    the code path (how a run ran) are not compared."""
    out = tmp_path / "twins"
    run_sweep(parse_spec({"base": {"trace": {"path": "traces/demo_chat.jsonl",
                                             "max_requests": 80}, "cache_only": True},
                          "grid": {"cache.policy": ["lru", "lfu"],
                                   "cache.capacity_tokens": [10000, 1000000]}}), out,
              ExecutorOptions(n_jobs=1))
    data = load_report_data(out)
    twins = identical_runs(data)
    assert [[data.label(r) for r in group] for group in twins] == [
        ["policy=lru, capacity=1M", "policy=lfu, capacity=1M"]]
    notes = comparison_notes(comparison(data), data)
    assert "Runs with identical results (every figure equal; in the plots one hides the " \
        "other): policy=lru, capacity=1M = policy=lfu, capacity=1M." in notes
    data.table.loc[data.table["run_id"] == twins[0][0], "wall_time_s"] = 99.0
    assert identical_runs(data) == twins
    data.table.loc[data.table["run_id"] == twins[0][0], "cache_hit_tokens"] += 1
    assert identical_runs(data) == []


def test_goodput_is_a_column_where_a_run_set_its_slos(demo):
    """A run with --goodput computed request_goodput (2.04 against 2.84 req/s throughput)
    that no table column showed. Shown where a run has it; absent, the note says why: no
    SLO set on a timed run, no timing on cache-only ones."""
    frame = comparison(demo)
    assert "request_goodput" not in frame
    assert "p50 TTFT, p99 TTFT, throughput, goodput, kept up: cache-only runs have no " \
        "timing" in comparison_notes(frame, demo)[0]
    timed = frame.assign(p99_ttft_ms=100.0)
    assert "goodput: no run set goodput SLOs (--goodput)" in \
        comparison_notes(timed, demo)[0]
    with_slo = timed.assign(request_goodput=2.04)
    titles = [t for _, t, _, _ in shown_columns(with_slo, demo)]
    assert "goodput" in titles
    assert not any("goodput" in note for note in comparison_notes(with_slo, demo)[:1])


def test_a_value_every_run_shares_is_said_once_not_in_a_column(lru_only):
    """Two LRU capacities without a TTL: policy and TTL hold one value in every run, so they
    are a note ('Every run: policy lru; TTL none.') instead of columns (seven such columns
    pushed the results off a 1400 px page); the capacity, which varies, stays a column with
    its KV and shares."""
    frame = comparison(lru_only)
    titles = [t for _, t, _, _ in shown_columns(frame, lru_only)]
    assert "policy" not in titles and "TTL" not in titles
    assert titles[:5] == ["run", "capacity (tokens)", "KV (GiB)", "share of HBM",
                          "share of working set"]
    assert comparison_notes(frame, lru_only)[0] == "Every run: policy lru; TTL none."
    one = frame[frame["cache_capacity_tokens"] == 5000]
    note = comparison_notes(one.assign(run_id=["x"]), lru_only)  # one run: its own table
    assert not note[0].startswith("Every run")
    two = pd.concat([one, one.assign(run_id="y")], ignore_index=True)
    assert comparison_notes(two, lru_only)[0] == (
        "Every run: policy lru; capacity 5,000 tokens (0.61 GiB of KV, 0.8% of HBM, "
        f"{percent(two['capacity_working_set_share'].iloc[0])} of the working set); TTL none.")
    assert "capacity (tokens)" not in [t for _, t, _, _ in shown_columns(two, lru_only)]


def test_ttft_against_cached_share_draws_every_runs_points_interleaved(tmp_path):
    """Drawn run after run, the last run's points covered the others' (4 x 1,500 in a router
    sweep): every run's points are one scatter in a seeded shuffled order, coloured per
    run, the legend naming each run's colour."""
    out = tmp_path / "routers"
    run_sweep(parse_spec({"base": {"trace": {"path": str(Path("traces/demo_chat.jsonl")
                                                           .resolve()), "max_requests": 60},
                                   "model": {"name": "llama-3.1-8b"},
                                   "engine": {"replicas": 2}},
                          "grid": {"router.name": ["round_robin", "prefix_aware"],
                                   "cache.capacity_tokens": [5000, 20000, 80000]}}), out,
              ExecutorOptions(n_jobs=1))
    fig = dict(PLOTS)["ttft_vs_cached_fraction"](load_report_data(out))
    ax = fig.axes[0]  # a panel per router (the fewest values), its three capacities in it
    (points,) = [c for c in ax.collections if c.get_gid() == "requests"]
    colours = [tuple(c) for c in points.get_facecolors()]
    assert len(colours) == 180 and len(set(colours)) == 3
    assert len(set(colours[:60])) == 3  # the first third holds every run's points
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["capacity=5k", "capacity=20k", "capacity=80k"]
    plt.close(fig)
