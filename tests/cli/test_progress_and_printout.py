"""Progress lines in a log and the run's printed result block, by hand with a fake clock
(prefixsim/cli/progress.py, prefixsim/cli/run_output.py)."""

from pathlib import Path

import pytest

from prefixsim.cli import progress as progress_module
from prefixsim.cli.progress import LINE_EVERY_S, Progress
from prefixsim.cli.run_output import prefix_model_note, print_summary


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(progress_module.time, "monotonic", fake)
    return fake


def test_a_log_gets_a_line_at_most_every_thirty_seconds_and_one_when_done(clock, capsys):
    bar = Progress("sweep", "runs", total=8)
    assert bar.bar is None and bar.lines  # stderr is no terminal under pytest
    bar.update(2)
    clock.now += LINE_EVERY_S - 0.5
    bar.update()
    assert capsys.readouterr().err == ""
    clock.now += 0.5
    bar.set_postfix({"failed": 1, "best": "lru"})
    bar.update()
    assert capsys.readouterr().err == "prefixsim: sweep: 4/8 runs (50%), failed 1, best lru, 30 s\n"
    clock.now += 10  # the next line waits another thirty seconds from the last
    bar.update(4)
    assert capsys.readouterr().err == ""
    clock.now += 20
    bar.close()
    assert capsys.readouterr().err == "prefixsim: sweep: 8/8 runs (100%), failed 1, best lru, " \
                                      "60 s, done\n"
    bar.close()  # once only
    assert capsys.readouterr().err == ""


def test_a_short_job_prints_nothing_and_an_open_count_no_share(clock, capsys):
    with Progress("trace", "requests") as bar:
        bar.update(1_234_567)
        clock.now += LINE_EVERY_S - 1
    assert capsys.readouterr().err == ""
    bar = Progress("trace", "requests")
    bar.update(1_234_567)
    clock.now += LINE_EVERY_S
    bar.update(0)
    assert capsys.readouterr().err == "prefixsim: trace: 1,234,567 requests, 30 s\n"
    bar.reset(2_000)
    assert (bar.total, bar.count) == (2_000, 0)
    bar.update(1_000)
    clock.now += LINE_EVERY_S
    bar.update(0)
    assert capsys.readouterr().err == "prefixsim: trace: 1,000/2,000 requests (50%), 60 s\n"


def test_quiet_shows_nothing(clock, capsys):
    bar = Progress("sweep", "runs", total=2, quiet=True)
    assert bar.bar is None and not bar.lines
    bar.update(2)
    clock.now += 10 * LINE_EVERY_S
    bar.update(0)
    bar.close()
    assert capsys.readouterr().err == ""


def test_a_terminal_gets_a_bar(monkeypatch, capsys):
    monkeypatch.setattr(progress_module.sys.stderr, "isatty", lambda: True, raising=False)
    bar = Progress("sweep", "runs", total=3)
    assert bar.bar is not None and not bar.lines
    bar.set_postfix({"failed": 0})
    bar.update(3)
    assert (bar.bar.n, bar.bar.total, bar.bar.unit, bar.bar.desc) == (3, 3, "runs", "sweep")
    assert bar.bar.postfix == "failed=0" and bar.bar.leave is False
    kept = Progress("trace", "requests", leave=True)
    assert kept.bar.leave is True
    kept.close()
    bar.reset(5)
    assert (bar.bar.n, bar.bar.total) == (0, 5)
    bar.close()
    assert bar.bar is None


def test_the_result_block_in_vllm_order_with_warnings_and_notes(capsys):
    summary = {"mode": "timed", "mean_ttft_ms": 12.3456, "completed": 1200,
               "failed": 0, "cache_policy": "lru", "cache_ttl_s": None,
               "not_printed": 5, "kept_up_warning": "fell behind at 40 req/s",
               "cost_model_warning": "profile from a CPU",
               "cost_model_borrowed": "decode_attention from h100",
               "timeseries_warning": "binned by 10 s",
               "trace_prefix_model": "shared:512"}
    print_summary(summary, Path("results/x"))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "=" * 17 + " prefixsim result (timed) " + "=" * 17
    assert out[1:6] == [
        "completed:" + " " * 34 + f"{'1,200':>16}",
        "failed:" + " " * 37 + f"{'0':>16}",
        "mean_ttft_ms:" + " " * 31 + f"{'12.35':>16}",
        "cache_policy:" + " " * 31 + f"{'lru':>16}",
        "cache_ttl_s:" + " " * 32 + f"{'-':>16}"]
    assert out[6:] == [
        "=" * 60,
        "warning: fell behind at 40 req/s",
        "warning: profile from a CPU",
        "note: profile parts borrowed: decode_attention from h100",
        "note: binned by 10 s",
        "note: " + prefix_model_note("shared:512"),
        "results: results/x"]
    assert all(len(line) == 60 for line in out[:7])


def test_prefix_model_notes():
    assert prefix_model_note("none").startswith("this trace holds prompt lengths only, no "
                                                "prefix ids: every prompt is distinct")
    assert prefix_model_note("shared:512") == (
        "the cache hits come from a synthetic prefix model, shared:512: the trace holds "
        "prompt lengths only")
