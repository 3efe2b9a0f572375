"""The lengths-only CSV readers (trace/lengths.py) at their edges: prefix models by hand,
the wall clock of Azure's timestamps, rows skipped or refused word for word, and where a
read stops."""

from __future__ import annotations

import time
from pathlib import Path

from fakes import refusal

from prefixsim.trace import ReadOptions, detect_format, read_trace
from prefixsim.trace.fields import MAX_TOKENS
from prefixsim.trace.lengths import PrefixModel, _WallClock, check_prefix_model

HEADER = "Timestamp,Request tokens,Response tokens\n"


def burstgpt(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "b.csv"
    path.write_text(header + body)
    return path


# ------------------------------------------------------------------ prefix models
def test_prefix_model_specs():
    assert check_prefix_model("none") == 0
    assert check_prefix_model("shared:1") == 1
    assert check_prefix_model(f"shared:{MAX_TOKENS}") == MAX_TOKENS
    for spec in ("other:64", "shared:0", f"shared:{MAX_TOKENS + 1}", "shared:", "shared:x",
                 "shared:٣", "shared"):
        assert refusal(check_prefix_model, spec) == (
            f"trace.prefix_model: unknown prefix model {spec!r} (valid: none, shared:TOKENS "
            f"with 1 <= TOKENS <= {MAX_TOKENS})")


def test_page_ids_of_a_shared_prefix_by_hand():
    # 64 shared tokens at 16 a page: pages 0-3 are everyone's; the rest are made up in turn
    model = PrefixModel("shared:64", 16)
    assert model.page_ids(100) == (0, 1, 2, 3, 4, 5, 6)  # 7 pages: 4 shared + 3 new
    assert model.page_ids(40) == (0, 1, 7)  # shorter than the prefix: 2 full shared pages
    assert model.page_ids(64) == (0, 1, 2, 3)
    assert model.page_ids(10) == (8,)  # no full page: nothing shared
    assert model.label == "synthetic shared:64 (not in the trace)"


def test_page_ids_without_a_prefix_model_share_nothing():
    model = PrefixModel("none", 1)  # even at one token a page, page 0 is no one's prefix
    assert model.page_ids(2) == (0, 1) and model.page_ids(1) == (2,)
    assert model.label == "none (lengths only: no prefix sharing)"


# ------------------------------------------------------------------ Azure's wall clock
def test_the_wall_clock_counts_from_the_first_row():
    clock = _WallClock()
    assert clock("2023-11-16 18:15:46.5000000", {}, "TIMESTAMP") == 0.0
    assert clock("2023-11-16 18:15:48", {}, "TIMESTAMP") == 1.5  # no fraction: .0
    assert clock(" 2023-11-16 18:15:46.25 ", {}, "TIMESTAMP") == -0.25
    assert clock("2023-11-17 18:15:46.5", {}, "TIMESTAMP") == 86400.0
    assert refusal(clock, "2023-11-16 18:15:46.5x", {"file": "a.csv", "line": 3},
                   "TIMESTAMP") == \
        "a.csv:3: TIMESTAMP: expected a date and time, got '2023-11-16 18:15:46.5x'"
    assert refusal(clock, "yesterday", {}, "TIMESTAMP") == \
        "TIMESTAMP: expected a date and time, got 'yesterday'"


def test_the_wall_clock_is_utc_not_the_machine_s_zone(monkeypatch):
    # across the start of daylight saving in New York, local clocks skip an hour
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        clock = _WallClock()
        clock("2023-03-12 01:59:00", {}, "TIMESTAMP")
        assert clock("2023-03-12 03:01:00", {}, "TIMESTAMP") == 62 * 60
    finally:
        monkeypatch.undo()
        time.tzset()


# ------------------------------------------------------------------ rows
def test_blank_rows_are_skipped_and_the_rows_after_them_read(tmp_path):
    path = burstgpt(tmp_path, "0,10,1\n\n,,\n  , ,\n1,1,0\n")
    data = read_trace(path)
    assert [(r.arrival_s, r.input_tokens, r.output_tokens) for r in data.requests] == \
        [(0.0, 10, 1), (1.0, 1, 0)]  # a one-token prompt is a prompt


def test_bad_rows_word_for_word(tmp_path):
    path = burstgpt(tmp_path, "0,10\n")
    assert refusal(read_trace, path) == f"{path}:2: has 2 columns, expected 3"
    path = burstgpt(tmp_path, "soon,10,1\n")
    assert refusal(read_trace, path) == f"{path}:2: Timestamp: expected a number, got 'soon'"
    path = burstgpt(tmp_path, "0,0,1\n")
    assert refusal(read_trace, path) == f"{path}:2: Request tokens: must be >= 1, got 0"
    path = burstgpt(tmp_path, "0,10,1\n", header="Timestamp,Response tokens\n")
    assert refusal(read_trace, path, "burstgpt") == f"{path}:1: Request tokens: missing column"


def test_a_skipped_row_does_not_end_the_read(tmp_path):
    path = burstgpt(tmp_path, "0,10,1\n1,x,1\n2,20,1\n")
    data = read_trace(path, options=ReadOptions(skip_bad_lines=True))
    assert [r.input_tokens for r in data.requests] == [10, 20] and data.skipped_lines == 1


def test_max_requests_stops_a_csv_read(tmp_path):
    path = burstgpt(tmp_path, "".join(f"{i},10,1\n" for i in range(5)))
    assert len(read_trace(path, options=ReadOptions(max_requests=2)).requests) == 2


def test_pages_are_charged_whole(tmp_path):
    # 17 tokens at 16 a page are 2 pages: two such prompts need 4, over a budget of 3
    path = burstgpt(tmp_path, "0,17,1\n1,17,1\n")
    assert refusal(read_trace, path, options=ReadOptions(max_pages=3)) == (
        f"{path}:3: Request tokens: the trace needs more than 3 pages; read fewer requests "
        "(--max-requests), coarser pages (--block-size) or raise --max-trace-pages")
    assert len(read_trace(path, options=ReadOptions(max_pages=4)).requests) == 2


def test_a_csv_that_is_not_utf8_or_not_csv(tmp_path):
    path = tmp_path / "b.csv"
    path.write_bytes(HEADER.encode() + b"0,10,1\n1,1\xff,1\n")
    assert refusal(read_trace, path, "burstgpt") == f"{path}:3: not a UTF-8 text file"
    path.write_text(HEADER + '0,10,"' + "x" * 200_000 + '"\n')
    assert refusal(read_trace, path, "burstgpt") == \
        f"{path}: not valid CSV (field larger than field limit (131072))"


def test_quoted_headers_are_detected(tmp_path):
    path = burstgpt(tmp_path, "0,10,1\n", header='"Timestamp","Request tokens","Response '
                                                 'tokens"\n')
    assert detect_format(path) == "burstgpt"


def test_burstgpt_sessions_from_either_column(tmp_path):
    # BurstGPT's release names the column "Session ID"; a file written by other tools
    # "session_id"; column names are matched whatever their case
    for column in ("Session ID", "session_id", "SESSION_ID"):
        path = burstgpt(tmp_path, "0,10,2,a\n1,12,3,b\n",
                        header=f"Timestamp,Request tokens,Response tokens,{column}\n")
        assert [r.session_id for r in read_trace(path, "burstgpt").requests] == ["a", "b"]
