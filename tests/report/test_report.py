"""Reports: which plots are drawn or skipped, what they show, the HTML, `prefixsim plot`.
(The comparison table, header, formats and panels: test_report_parts.py; what a browser
shows: test_browser.py.)"""

import base64
import dataclasses
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

import prefixsim.sweep.runner
from prefixsim.cli import app
from prefixsim.report import PLOTS, PlotSkipped, build_report, load_report_data
from prefixsim.report.figures import finish_figure, png_bytes
from prefixsim.sweep import ExecutorOptions, load_spec, parse_spec, run_sweep

BASE = {"trace": {"path": "traces/demo_chat.jsonl"}, "cache_only": True}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def demo_sweep(tmp_path_factory):
    """The bundled demo spec, run once for the module."""
    out = tmp_path_factory.mktemp("report") / "demo"
    run_sweep(load_spec("traces/sweeps/demo.yaml"), out, ExecutorOptions(n_jobs=1))
    return out


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def _check_labels(fig):
    """Every panel has a title and axis labels (with a unit in parentheses), and a legend
    names what is drawn: every panel's own, or one for the figure (latency against load of
    several runs, right of its top right panel)."""
    shared_legend = sum(ax.get_legend() is not None for ax in fig.axes) == 1 and \
        fig.axes[0].get_title().startswith("TTFT vs")
    for ax in fig.axes:
        assert ax.get_title() or fig._suptitle is not None
        assert "(" in ax.get_xlabel() or ax.get_xlabel() == "run"
        assert "(" in ax.get_ylabel() or "share" in ax.get_ylabel() or ax.get_ylabel() == "run" \
            or (ax.get_ylabel() == "" and not any(t.get_text() for t in ax.get_yticklabels())
                and ax is not fig.axes[0])  # a panel beside the first, sharing its runs
        assert ax.get_legend() is not None or shared_legend


def test_report_of_the_demo_sweep(demo_sweep):
    result = invoke("report", demo_sweep)
    assert result.exit_code == 0, result.output
    html = (demo_sweep / "report.html").read_text()
    pngs = sorted(p.stem for p in (demo_sweep / "plots").glob("*.png"))
    assert set(pngs) == {"policy_zoo", "hit_rate_vs_ttl", "idle_ages", "session_hit_rates",
                         "session_idle_gaps", "cache_tokens_over_time", "evictions_over_time",
                         "expirations_over_time", "cost", "workload"}
    embedded = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(embedded) == len(pngs) == html.count("<img")
    on_disk = {(demo_sweep / "plots" / f"{n}.png").read_bytes() for n in pngs}
    assert {base64.b64decode(e) for e in embedded} == on_disk
    assert all(b.startswith(PNG_SIGNATURE) for b in on_disk)
    # self-contained: nothing loaded from outside (the price page is named as text only)
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', html)
    assert html.count("<script") == 1 and "fetch(" not in html and "XMLHttp" not in html
    assert "p99_ttft_vs_capacity" in html and "cache-only runs have no timing" in html
    assert "<summary>spec.yaml</summary>" in html and "cache.capacity_tokens" in html
    assert "skipped p99_ttft_vs_capacity" in result.output
    assert "skipped tier_hits: no lower tier" in result.output


def test_policy_zoo_shows_the_sweep_values_and_the_regret(demo_sweep):
    """Known answer: one curve per policy holding exactly the sweep's rows sorted by
    capacity; Belady (the runs' cache_belady_token_hit_rate, equal for both policies at a
    capacity) dashed above every point; the unbounded hit rate dotted above all; the right
    panel is Belady minus each policy in percentage points, point by point."""
    data = load_report_data(demo_sweep)
    fig = dict(PLOTS)["policy_zoo"](data)
    _check_labels(fig)
    left, right = fig.axes
    assert left.get_xscale() == right.get_xscale() == "log"
    table = data.ok
    curves = {line.get_label(): line for line in left.get_lines()}
    regrets = {line.get_label(): line for line in right.get_lines() if line.get_label()[0] != "_"}
    bounded = table[table["cache_capacity_tokens"].notna()]
    assert set(bounded["cache_policy"]) == {"lru", "s3fifo"} and set(regrets) == {
        "policy=lru", "policy=s3fifo"}
    for policy, rows in bounded.groupby("cache_policy"):
        rows = rows.sort_values("cache_capacity_tokens")
        line = curves[f"policy={policy}"]
        np.testing.assert_allclose(line.get_xdata(), rows["cache_capacity_tokens"])
        np.testing.assert_allclose(line.get_ydata(), rows["cache_token_hit_rate"])
        np.testing.assert_allclose(regrets[f"policy={policy}"].get_ydata(), 100 * (
            rows["cache_belady_token_hit_rate"] - rows["cache_token_hit_rate"]))
    belady = curves["Belady, offline bound at each capacity"]
    assert belady.get_linestyle() == "--" and len(belady.get_xdata()) == 5
    by_capacity = bounded.groupby("cache_capacity_tokens")["cache_belady_token_hit_rate"]
    assert (by_capacity.nunique() == 1).all()  # the bound does not depend on the policy
    np.testing.assert_allclose(belady.get_ydata(), by_capacity.first())
    assert (bounded["cache_token_hit_rate"] <= bounded["cache_belady_token_hit_rate"]).all()
    unbounded = curves["unbounded cache"]
    assert unbounded.get_linestyle() == ":"
    top = bounded["cache_unbounded_token_hit_rate"].iloc[0]
    np.testing.assert_allclose(unbounded.get_ydata(), top)
    assert bounded["cache_belady_token_hit_rate"].max() <= top + 1e-12


def _fake_sweep(root):
    """A sweep folder with the columns other components add (timing, tiers, cost, a
    shared pool and disaggregated serving, load stages)."""
    rng = np.random.default_rng(0)
    rows, runs = [], root / "runs"
    points = [(p, c, None) for p in ("lru", "belady") for c in (1000, 4000, None)]
    points += [("lru", None, ttl) for ttl in (10, 60, 300)]
    for i, (policy, capacity, ttl) in enumerate(points):
        run_id = f"r{i}"
        (runs / run_id).mkdir(parents=True)
        n = 50
        cached = rng.integers(0, 100, n)
        pd.DataFrame({"request_id": range(n), "session_id": [f"s{k % 7}" for k in range(n)],
                      "arrival_s": np.sort(rng.uniform(0, 100, n)),
                      "input_tokens": np.full(n, 100), "output_tokens": rng.integers(1, 50, n),
                      "cached_tokens": cached, "ttft_ms": 200 - cached + rng.uniform(0, 5, n),
                      "tpot_ms": rng.uniform(5, 10, n), "e2el_ms": rng.uniform(300, 900, n)}
                     ).to_parquet(runs / run_id / "requests.parquet")
        pd.DataFrame({"time_s": np.arange(10.0), "cached_tokens": np.arange(10) * 10,
                      "evictions": np.arange(10), "expirations": np.arange(10) // 3}
                     ).to_parquet(runs / run_id / "timeseries.parquet")
        stages = [{"stage": k, "rate": rate, "duration_s": 10.0, "request_throughput": rate,
                   "p50_ttft_ms": 40.0 * rate, "p99_ttft_ms": 90.0 * rate,
                   "p50_tpot_ms": 8.0, "p99_tpot_ms": 9.0} for k, rate in enumerate((1.0, 2.0))]
        (runs / run_id / "summary.json").write_text(json.dumps({"stages": stages}))
        rows.append({"run_id": run_id, "status": "ok", "error": None, "cache_policy": policy,
                     "cache_capacity_tokens": capacity, "cache_ttl_s": ttl,
                     "cache_token_hit_rate": 0.1 * i + (0 if capacity else 0.5),
                     "p99_ttft_ms": 100.0 - i, "cache_hit_tokens_hbm": 10 * i,
                     "cache_hit_tokens_host": 5, "cost_total_usd": 1.0 + i,
                     "cost_no_cache_usd": 3.0 + i, "cache_hit_age_p10_s": 1.0,
                     "cache_hit_age_p50_s": 5.0, "cache_hit_age_p90_s": 20.0 + i,
                     "cache_evicted_age_p10_s": 2.0, "cache_evicted_age_p50_s": 9.0,
                     "cache_evicted_age_p90_s": 30.0, "mean_ttft_ms": 50.0 + i,
                     "mean_tpot_ms": 8.0, "p99_tpot_ms": 12.0, "replicas": 4,
                     "cache_pool_link_busy_share": 0.01 * i if i % 2 else None,
                     "prefill_replicas": 2 if i % 3 == 0 else None,
                     "decode_replicas": 2 if i % 3 == 0 else None,
                     "kv_transfer_busy_share": 0.02 if i % 3 == 0 else None})
    pd.DataFrame(rows).to_parquet(root / "sweep.parquet")
    (root / "sweep.json").write_text(json.dumps(
        {"name": "fake",
         "swept_columns": ["cache_policy", "cache_capacity_tokens", "cache_ttl_s"]}))
    return root


def test_every_plot_draws_when_its_columns_exist(tmp_path):
    data = load_report_data(_fake_sweep(tmp_path / "fake"))
    for _name, plot in PLOTS:
        fig = plot(data)
        _check_labels(fig)
    report = build_report(data)
    assert report.skipped == {} and list(report.pngs) == [name for name, _ in PLOTS]
    fig = dict(PLOTS)["policy_zoo"](data)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    # belady runs are the bound, not a policy curve: lru at 1000 / 4000 (rows r0, r1: 0.0,
    # 0.1) against belady's runs r3, r4 (0.3, 0.4), so the regret is 30 pp at both
    assert "policy=belady" not in lines and lines["policy=lru"].get_linestyle() == "-"
    np.testing.assert_allclose(lines["Belady, offline bound at each capacity"].get_ydata(),
                               [0.3, 0.4])
    np.testing.assert_allclose(fig.axes[1].get_lines()[0].get_ydata(), [30.0, 30.0])
    # tiers: run i hits 10 i tokens in HBM and 5 in the host tier, so the host serves 100%
    # of run 0's hits, 33.3% of run 1's, ... 5.9% of run 8's: each run's own share beside its
    # bar (the legend's pooled share, 11.1% of all runs' hits, read as a run's); a tier no
    # run has (disk) is not listed
    data.table["cache_hit_tokens_disk"] = 0
    tiers = dict(PLOTS)["tier_hits"](data)
    assert [t.get_text() for t in tiers.axes[0].get_legend().get_texts()] == ["hbm", "host"]
    shares = [t.get_text() for t in tiers.axes[0].texts]
    assert shares[:2] == ["host 100.0% of its hits", "host 33.3% of its hits"]
    assert shares[-1] == "host 5.9% of its hits" and len(shares) == len(data.ok)
    assert tiers.axes[0].get_xlim()[1] > 85 * 1.4  # room right of the longest bar (85)
    ecdf = dict(PLOTS)["latency_ecdfs"](data)
    # a row per latency, a column per policy (the swept column with the fewest values)
    assert [ax.get_title().split("\n")[0] for ax in ecdf.axes] == [
        f"ECDF of {name}: policy={policy}" for name in ("TTFT", "TPOT", "E2EL")
        for policy in ("lru", "belady")]
    # the two panels of a row share one x range (they compared two scales side by side)
    for row in range(3):
        assert ecdf.axes[2 * row].get_xlim() == ecdf.axes[2 * row + 1].get_xlim()


def test_report_of_a_single_run_skips_sweep_plots(tmp_path):
    out = tmp_path / "run"
    assert invoke("run", "--trace", BASE["trace"]["path"], "--cache-only", "--cache-tokens",
                  20000, "-o", out, "--quiet").exit_code == 0
    data = load_report_data(out)
    assert data.kind == "run" and len(data.table) == 1
    with pytest.raises(PlotSkipped, match="2 or more distinct bounded cache_capacity_tokens "
                       r"\(an unbounded run is drawn as a line"):
        dict(PLOTS)["policy_zoo"](data)
    result = invoke("report", out)
    assert result.exit_code == 0, result.output
    html = (out / "report.html").read_text()
    assert "cache_token_hit_rate" in html and (out / "plots" / "workload.png").is_file()


def test_plot_command(demo_sweep, tmp_path):
    target = tmp_path / "custom.png"
    result = invoke("plot", demo_sweep, "--var-x", "cache_capacity_tokens", "--var-y",
                    "cache_evictions", "--curve-by", "cache_policy", "--filter-by",
                    "cache_policy=lru", "--scale-x", "log", "-o", target)
    assert result.exit_code == 0, result.output
    assert target.read_bytes().startswith(PNG_SIGNATURE)
    result = invoke("plot", demo_sweep, "--var-x", "cache_capacity_tokens", "--var-y",
                    "cache_token_hit_rate", "--col-by", "cache_policy", "--scale-x", "log")
    assert result.exit_code == 0, result.output
    panels = demo_sweep / "plots" / "cache_token_hit_rate-vs-cache_capacity_tokens.png"
    assert panels.read_bytes().startswith(PNG_SIGNATURE)
    # the four unbounded runs have no x: the note says so (they were dropped silently)
    assert "note: 4 of 14 runs not drawn: 4 with cache_capacity_tokens unbounded" in \
        result.output
    result = invoke("plot", demo_sweep, "--var-x", "cache_capacity_tokens", "--var-y",
                    "cache_evictions", "-o", tmp_path / "p.txt")  # was a PNG named .txt
    assert result.exit_code == 2 and result.output == \
        f"prefixsim: error: --output: expected a .png file, got '{tmp_path / 'p.txt'}'\n"
    assert not (tmp_path / "p.txt").exists()
    result = invoke("plot", demo_sweep, "--var-x", "nope", "--var-y", "cache_evictions")
    assert result.exit_code == 2 and "--var-x: no column 'nope' (columns: " in result.output
    result = invoke("plot", demo_sweep, "--var-x", "capacity_tokens", "--var-y", "hitrate")
    assert result.exit_code == 2 and "--var-x: no column 'capacity_tokens'; did you mean " \
        "'cache_capacity_tokens'? (columns: run_id, " in result.output
    result = invoke("plot", demo_sweep, "--var-x", "cache_capacity_tokens", "--var-y",
                    "cache_evictions", "--filter-by", "cache_policy=nope")
    assert result.exit_code == 2 and "no runs left" in result.output
    result = invoke("plot", demo_sweep, "--var-x", "cache_capacity_tokens", "--var-y", "error")
    assert result.exit_code == 2 and "nothing to plot: no error" in result.output  # all empty
    assert invoke("report", tmp_path / "absent").exit_code == 2


def test_panels_of_a_plot_share_their_y_range(demo_sweep):
    """--col-by panels read side by side: each on its own range (0.54-0.56 beside 0.68-0.96)
    looked alike; they now share one."""
    from prefixsim.report import xy_figure

    table = load_report_data(demo_sweep).ok
    fig = xy_figure(table, "cache_capacity_tokens", "cache_token_hit_rate",
                    col_by="cache_policy", scale_x="log")
    limits = {ax.get_ylim() for ax in fig.axes}
    assert len(fig.axes) == 2 and len(limits) == 1
    plt.close(fig)


def test_a_log_time_axis_carries_its_unit_in_its_ticks(demo_sweep):
    """A log TTL axis is ticked 10 s / 30 s / 2 min, so its label no longer says `(s)` (the
    ticks' units contradicted it); a linear one keeps it."""
    from prefixsim.report import xy_figure

    table = load_report_data(demo_sweep).ok
    fig = xy_figure(table, "cache_ttl_s", "cache_token_hit_rate", scale_x="log")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "TTL (log scale)"
    assert ax.get_title().endswith(" vs TTL")
    linear = xy_figure(table, "cache_ttl_s", "cache_token_hit_rate")
    assert linear.axes[0].get_xlabel() == "TTL (s)"
    plt.close("all")


def test_timed_sweep_draws_the_latency_plots(tmp_path):
    """The bundled timed spec (trimmed to 80 requests): latency, timeseries and tier plots
    are drawn from the timed engine's columns without report changes."""
    spec = yaml.safe_load(open("traces/sweeps/timed_demo.yaml"))
    spec["base"]["trace"]["max_requests"] = 80
    spec["grid"]["cache.capacity_tokens"] = [10000, 160000]
    out = tmp_path / "timed"
    result = run_sweep(dataclasses.replace(parse_spec(spec), root=Path("traces/sweeps")), out,
                       ExecutorOptions(n_jobs=1))
    assert not result.failed, result.failed
    report = build_report(load_report_data(out))
    assert {"policy_zoo", "p99_ttft_vs_capacity", "latency_ecdfs", "cache_tokens_over_time",
            "evictions_over_time", "ttft_vs_cached_fraction"} <= set(report.pngs), report.skipped
    assert "timed runs record evictions but not expirations" in report.skipped[
        "expirations_over_time"]
    fig = dict(PLOTS)["p99_ttft_vs_capacity"](load_report_data(out))
    _check_labels(fig)
    table = pd.read_parquet(out / "sweep.parquet")
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    rows = table[table["router_name"] == "prefix_aware"].sort_values("cache_capacity_tokens")
    np.testing.assert_allclose(lines["router=prefix_aware"].get_ydata(), rows["p99_ttft_ms"])


def test_report_lists_failed_runs_and_draws_the_rest(tmp_path, monkeypatch):
    # a broken trace stops a sweep before any run (check_traces); skipping that read stands
    # for a trace that breaks only as its run reads it, to draw failed runs among others
    monkeypatch.setattr(prefixsim.sweep.runner, "check_trace", lambda config, read: None)
    missing = str(tmp_path / "broken.jsonl")  # exists (a missing trace stops a sweep first)
    (tmp_path / "broken.jsonl").write_text(
        '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1]}\n')
    spec = parse_spec({"base": BASE, "grid": {"trace.path": [BASE["trace"]["path"], missing],
                                               "cache.capacity_tokens": [5000, 20000]}})
    out = tmp_path / "sweep"
    run_sweep(spec, out, ExecutorOptions(n_jobs=1))
    result = invoke("report", out)
    assert result.exit_code == 0, result.output
    html = (out / "report.html").read_text()
    failed = html[html.index("Failed runs"):html.index("</ul>", html.index("Failed runs"))]
    assert failed.count("needs ceil(600/512)") == 2  # and again in the table of every column
    assert (out / "plots" / "policy_zoo.png").is_file()
    data = load_report_data(out)
    line = dict(PLOTS)["policy_zoo"](data).axes[0].get_lines()[0]
    assert len(line.get_xdata()) == 2  # the two successful runs only


def test_log_axes_are_labelled_in_plain_text(demo_sweep):
    """The policy zoo's log capacity axis is ticked at the swept capacities and labelled as
    people read them (5k ... 80k), never as matplotlib's `10^4` math text."""
    fig = dict(PLOTS)["policy_zoo"](load_report_data(demo_sweep))
    finish_figure(fig)
    fig.canvas.draw()
    axis = fig.axes[0].xaxis
    low, high = sorted(axis.get_view_interval())
    shown = [t.label1.get_text() for t in axis.get_major_ticks() + axis.get_minor_ticks()
             if low <= t.get_loc() <= high and t.label1.get_text()]
    assert shown and not [s for s in shown if "$" in s or "mathdefault" in s], shown
    assert shown == ["5k", "10k", "20k", "40k", "80k"]


def test_a_dollar_in_a_swept_string_is_drawn_as_written(tmp_path):
    """A `$` in a run's label is escaped, not parsed as math text: the figure saves (an
    unbalanced `$\\foo{$` would fail the math parser) and its text keeps the `$`."""
    data = load_report_data(_fake_sweep(tmp_path / "fake"))
    data.table["cache_policy"] = data.table["cache_policy"].replace("lru", "$\\foo{$")
    fig = dict(PLOTS)["idle_ages"](data)
    assert png_bytes(fig).startswith(PNG_SIGNATURE)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert any("\\$\\foo{\\$" in label for label in labels), labels


def test_idle_ages_under_a_millisecond_are_drawn_at_a_tick_that_says_so(tmp_path):
    """The histogram's lowest bin is [0, ~1 ms): a p10 hit age of 0.12 ms was drawn at an
    unlabelled 1 ms, as if measured there. Such ages sit at the floor, ticked `< 1 ms`;
    without them the axis keeps its round times only."""
    from prefixsim.report.plots_runs import AGE_FLOOR_S

    data = load_report_data(_fake_sweep(tmp_path / "fake"))
    plain = dict(PLOTS)["idle_ages"](data)
    plain.canvas.draw()
    assert "< 1 ms" not in [t.get_text() for t in plain.axes[0].get_xticklabels()]
    data.table["cache_hit_age_p10_s"] = 1.2e-4
    data.table.loc[0, "cache_hit_age_p50_s"] = 6e-4
    fig = dict(PLOTS)["idle_ages"](data)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert ax.get_xticks()[0] == AGE_FLOOR_S
    assert ax.get_xticklabels()[0].get_text() == "< 1 ms"
    assert ax.get_xlim()[0] < AGE_FLOOR_S
    hit_dots = next(line for line in ax.get_lines() if line.get_label() == "idle age at a hit")
    assert hit_dots.get_xdata()[0] == AGE_FLOOR_S
    assert png_bytes(fig).startswith(PNG_SIGNATURE)


def test_the_cluster_figure_draws_latencies_as_dots_and_shares_in_percent(tmp_path):
    """TTFT bars on a log axis (70k-250k ms) had lengths that meant nothing, the legends
    covered the last bars and the link share read 0.02: latencies are now dots (mean, p99)
    joined per run, each legend sits under its panel, the link share axis is in %."""
    data = load_report_data(_fake_sweep(tmp_path / "fake"))
    fig = dict(PLOTS)["cluster"](data)
    fig.canvas.draw()
    ttft, tpot, links = fig.axes
    for ax in (ttft, tpot):
        assert not [p for p in ax.patches if p.get_width() > 0]  # no bars
        dots = {line.get_label(): line for line in ax.get_lines()}
        assert {"mean", "p99"} <= set(dots)
        assert len(dots["mean"].get_xdata()) == len(data.ok)
    for ax in fig.axes:
        legend = ax.get_legend().get_window_extent()
        assert legend.y1 <= ax.get_window_extent().y0  # under the panel, over no data
    assert links.xaxis.get_major_formatter()(0.02, 0) == "2%"
    assert png_bytes(fig).startswith(PNG_SIGNATURE)


def test_idle_gaps_of_a_run_that_fell_behind_say_so(tmp_path):
    """A timed replay that falls behind the trace's times (200 demo requests on one L4):
    a session's next request arrives before the previous one finished, so its gap is
    negative. The figure counts it as 0 (any TTL keeps a prefix still in use) and says how
    many, so the jump at the left edge is explained; a run that kept up says nothing."""
    out = tmp_path / "behind"
    result = invoke("run", "--trace", "traces/demo_chat.jsonl", "--gpu", "l4",
                    "--max-requests", 200, "--replicas", 1, "-o", out, "--quiet")
    assert result.exit_code == 0, result.output
    fig = dict(PLOTS)["session_idle_gaps"](load_report_data(out))
    texts = [t.get_text() for t in fig.axes[0].texts]
    share = re.search(r"before the previous finished: (\d+)%", "\n".join(texts))
    assert share and 20 <= int(share.group(1)) <= 80
    kept = tmp_path / "kept"
    result = invoke("run", "--trace", "traces/demo_chat.jsonl", "--max-requests", 200,
                    "-o", kept, "--quiet")
    assert result.exit_code == 0, result.output
    fig = dict(PLOTS)["session_idle_gaps"](load_report_data(kept))
    assert "before the previous finished" not in "\n".join(t.get_text()
                                                            for t in fig.axes[0].texts)


def test_workload_lengths_read_as_numbers_a_reader_knows(tmp_path):
    """Agent prompts of 20k-700k tokens: a linear axis ticked 100k, 200k (not 100000 ...
    run together); outputs from a few tokens to 10k: log bins on a log axis (linear bins put
    nearly all in the first); requests rejected for the model's context produced no output,
    so they are counted in the legend instead of drawn at 0."""
    trace = tmp_path / "agent.jsonl"
    assert invoke("trace", "generate", "--preset", "agent", "--requests", 300,
                  "-o", trace).exit_code == 0
    out = tmp_path / "run"
    result = invoke("run", "--trace", trace, "--model", "llama-3.1-8b", "--replicas", 2,
                    "-o", out, "--quiet")
    assert result.exit_code == 0, result.output
    frame = pd.read_parquet(out / "requests.parquet")
    rejected = int((frame["status"] == "rejected").sum())
    assert rejected > 0
    fig = dict(PLOTS)["workload"](load_report_data(out))
    png_bytes(fig)  # drawn as the report draws it
    inputs, outputs = fig.axes[:2]
    assert inputs.get_xscale() == "linear" and outputs.get_xscale() == "log"
    labels = [t.get_text() for t in inputs.get_xticklabels() if t.get_text()]
    assert labels and all(label.endswith("k") or label == "0" for label in labels), labels
    legend = outputs.get_legend().get_texts()[0].get_text()
    assert legend == f"{len(frame) - rejected:,} requests ({rejected:,} rejected not shown: " \
                     "no output)"
    assert outputs.get_xlabel() == "output (tokens, log scale)"


def test_the_arrival_rate_panel_steps_every_bin_from_zero_and_marks_stages(tmp_path):
    """A staged load (2 then 8 req/s): the last bin was a riser only, the axis began at the
    lowest rate (2.2-3.9 req/s looked like a swing), the stages were not marked. Every bin is
    a step (stairs), the axis starts at 0, a dotted line marks the second stage's start."""
    out = tmp_path / "staged"
    config = tmp_path / "staged.yaml"
    config.write_text(yaml.safe_dump({
        "trace": {"path": BASE["trace"]["path"], "max_requests": 60}, "cache_only": False,
        "load": {"type": "poisson", "seed": 0,
                 "stages": [{"rate": 2, "duration_s": 10}, {"rate": 8, "duration_s": 5}]}}))
    assert invoke("run", "--config", config, "-o", out, "--quiet").exit_code == 0
    fig = dict(PLOTS)["workload"](load_report_data(out))
    rate = fig.axes[2]
    assert rate.get_ylim()[0] == 0
    stairs = [p for p in rate.patches if type(p).__name__ == "StepPatch"]
    assert len(stairs) == 1 and len(stairs[0].get_data().edges) == \
        len(stairs[0].get_data().values) + 1  # the last bin closed
    marks = [line for line in rate.get_lines() if line.get_label() == "load stage starts"]
    assert len(marks) == 1 and marks[0].get_xdata()[0] == pytest.approx(10.0)
    png_bytes(fig)


@pytest.mark.parametrize(("gap_ms", "corner"), [(1_000, "lower right"), (7_200_000, "upper left")])
def test_the_idle_gap_summary_sits_where_the_curve_is_not(tmp_path, gap_ms, corner):
    """Sessions whose requests come 1 s apart (the ECDF climbs at the left) or 2 h apart (at
    the right: over RAGPulse's week of sessions the box sat across both TTL lines, under an
    empty upper left): the summary box takes the corner the curve leaves empty, and no point
    of the curve lies inside it."""
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps(
        {"timestamp": 10 * s + gap_ms * turn * (1 + s / 50), "input_length": 1024 * (turn + 1),
         "output_length": 4, "hash_ids": [1000 * s + k for k in range(2 * turn + 2)],
         "session_id": f"s{s}"}) + "\n"
        for turn in range(4) for s in range(40)))
    out = tmp_path / "run"
    assert invoke("run", trace, "--cache-only", "-o", out, "--quiet").exit_code == 0
    fig = dict(PLOTS)["session_idle_gaps"](load_report_data(out))
    finish_figure(fig)
    fig.canvas.draw()
    ax = fig.axes[0]
    (box,) = ax.texts
    x, y = box.get_position()
    assert ("upper left" if (x, y) == (0.02, 0.96) else "lower right") == corner
    extent = box.get_bbox_patch().get_window_extent()
    curve = ax.lines[0]
    points = ax.transData.transform(curve.get_xydata())
    assert not any(extent.contains(px, py) for px, py in points)
    plt.close(fig)


@pytest.mark.parametrize(("share", "shown"), [
    (0.0, "0%"), (0.003, "< 1%"), (0.005, "< 1%"), (0.006, "1%"), (0.5, "50%"),
    (0.996, "> 99%"), (0.995, "> 99%"), (1.0, "100%"),
])
def test_a_share_that_is_not_zero_never_reads_zero(share, shown):
    """The idle-gap box read '> 1 h: 0%' for 0.3% of gaps beside a curve running on to a
    day; likewise nothing short of all reads 100%."""
    from prefixsim.report.format import share_text

    assert share_text(share) == shown
