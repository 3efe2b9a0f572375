"""trace/readers.py's own work, read directly: the read context (bad lines, progress, page
budget), opening and sniffing files, and `read_trace`'s refusals, time shift and span check,
each refusal word for word."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import refusal

from prefixsim.errors import InputError
from prefixsim.trace import ReadOptions, detect_format, load_trace, read_trace, readers
from prefixsim.trace.fields import MAX_MADE_UP_PAGES, MAX_PAGES_PER_REQUEST
from prefixsim.trace.readers import (
    MAX_SPAN_S,
    PROGRESS_EVERY,
    ReadContext,
    check_prefix_model_format,
    detect_folder,
    numbered_lines,
    open_trace,
    trace_files,
)

WHERE = {"file": "t.jsonl", "line": 4}


def mooncake(path: Path, times: list[float], bad: int = 0) -> Path:
    rows = [json.dumps({"timestamp": t, "input_length": 10, "output_length": 1,
                        "hash_ids": [i]}) for i, t in enumerate(times)]
    path.write_text("not json\n" * bad + "\n".join(rows) + "\n")
    return path


# ------------------------------------------------------------------ the read context
def test_bad_lines_are_raised_or_counted_keeping_the_first():
    with pytest.raises(InputError, match="one"):
        ReadContext(ReadOptions()).bad(InputError("one"))
    ctx = ReadContext(ReadOptions(skip_bad_lines=True))
    first, second = InputError("one"), InputError("two")
    ctx.bad(first)
    ctx.bad(second)
    ctx.bad(second)
    assert ctx.skipped_lines == 3 and ctx.first_skipped is first


def test_progress_is_reported_every_so_many_requests():
    told: list[int] = []
    ctx = ReadContext(ReadOptions(on_progress=told.append, max_requests=3 * PROGRESS_EVERY))
    for count in range(3 * PROGRESS_EVERY + 1):
        if ctx.full(count):
            break
    assert count == 3 * PROGRESS_EVERY and told == [PROGRESS_EVERY] * 3
    quiet = ReadContext(ReadOptions())  # no callback: nothing to call, never full
    assert not any(quiet.full(c) for c in range(0, 5 * PROGRESS_EVERY, PROGRESS_EVERY))
    assert quiet.reported == 0


def test_page_charges_per_request_and_per_trace():
    ctx = ReadContext(ReadOptions())
    ctx.charge_pages(MAX_PAGES_PER_REQUEST, WHERE)  # the limit itself is allowed
    assert refusal(ctx.charge_pages, MAX_PAGES_PER_REQUEST + 1, WHERE) == (
        f"t.jsonl:4: input_length: needs {MAX_PAGES_PER_REQUEST + 1:,} pages, more than "
        f"{MAX_PAGES_PER_REQUEST:,} per request (is --block-size right?)")
    small = ReadContext(ReadOptions(max_pages=10))
    small.charge_pages(6, WHERE, "tokens")
    small.charge_pages(4, WHERE, "tokens")  # 10 of 10
    assert refusal(small.charge_pages, 1, WHERE, "tokens") == (
        "t.jsonl:4: tokens: the trace needs more than 10 pages; read fewer requests "
        "(--max-requests), coarser pages (--block-size) or raise --max-trace-pages")
    default = ReadContext(ReadOptions())
    default.pages = MAX_MADE_UP_PAGES
    with pytest.raises(InputError, match=f"more than {MAX_MADE_UP_PAGES:,} pages"):
        default.charge_pages(1, WHERE)


# ------------------------------------------------------------------ files
def test_open_trace_refusals(tmp_path):
    missing = tmp_path / "nope.jsonl"
    assert refusal(open_trace, missing) == f"{missing}: no such file"
    assert refusal(open_trace, tmp_path) == f"{tmp_path}: is a directory, expected a trace file"


def test_open_trace_strips_a_byte_order_mark(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes("\ufeff{}\n".encode())
    with open_trace(path) as handle:
        assert handle.read() == "{}\n"


def test_lines_are_numbered_blank_ones_skipped_and_long_ones_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(readers, "MAX_LINE_CHARS", 10)
    path = tmp_path / "t.txt"
    path.write_text("a\n\n   \nbbbbbbbbbb\ncccccccccc")  # the last: 10 characters, no newline
    assert list(numbered_lines(path)) == [(1, "a\n"), (4, "bbbbbbbbbb\n"), (5, "cccccccccc")]
    path.write_text("a\nbbbbbbbbbbb\n")  # 11 characters
    assert refusal(lambda: list(numbered_lines(path))) == \
        f"{path}:2: line longer than 10 characters; not a trace line"


def test_the_first_undecodable_line_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(readers, "MAX_LINE_CHARS", 10)
    path = tmp_path / "t.txt"
    path.write_bytes(b"0123456789\n0123456789\n01234\xff6789\n")
    assert refusal(lambda: list(numbered_lines(path))) == f"{path}:3: not a UTF-8 text file"


def test_detection_refusals(tmp_path):
    missing = tmp_path / "nope"
    assert refusal(detect_format, missing) == f"{missing}: no such file or folder"
    binary = tmp_path / "b.bin"
    binary.write_bytes(b"{\x00}")
    assert refusal(detect_format, binary) == f"{binary}: binary content; not a trace file"
    unknown = tmp_path / "u.txt"
    unknown.write_text("hello\n")
    valid = ", ".join(readers.READERS.names())
    assert refusal(detect_format, unknown) == (
        f"{unknown}: cannot detect the trace format from its first line (hello); pass "
        f"--trace-format ({valid})")
    csv = tmp_path / "u.csv"
    csv.write_text("time,prompt,completion\n1,2,3\n")
    assert "from its first line (time,prompt,completion); pass" in refusal(detect_format, csv)
    keyed = tmp_path / "u.jsonl"
    keyed.write_text('{"ts": 1, "prompt_len": 5}\n')
    assert "from its first line (keys ts, prompt_len); pass" in refusal(detect_format, keyed)
    long = tmp_path / "l.txt"
    long.write_text("x" * 200 + "\n")
    assert f"({'x' * 80} ...); pass" in refusal(detect_format, long)
    blank = tmp_path / "e.txt"
    blank.write_text("\n\n")
    assert "from its first line (empty); pass" in refusal(detect_format, blank)
    assert refusal(detect_folder, tmp_path) == (
        f"{tmp_path}: this folder is not one trace (a RAGPulse or kv-cache-tester folder); "
        "give one of its files")


def test_detection_reads_the_first_non_blank_line_after_a_mark(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"\xef\xbb\xbf\n\n" + mooncake(tmp_path / "x", [0.0]).read_bytes())
    assert detect_format(path) == "mooncake"
    parquet = tmp_path / "p.bin"
    parquet.write_bytes(b"PAR1 and the rest")
    assert detect_format(parquet) == "parquet"


def test_trace_files_are_the_visible_regular_files_by_name(tmp_path):
    for name in ("b.jsonl", "a.jsonl", ".hidden"):
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "sub").mkdir()
    assert [p.name for p in trace_files(tmp_path)] == ["a.jsonl", "b.jsonl"]


def test_a_prefix_model_on_a_trace_with_its_own_ids():
    check_prefix_model_format("azure", "shared:64")
    check_prefix_model_format("mooncake", "none")
    assert refusal(check_prefix_model_format, "mooncake", "shared:64") == (
        "trace.prefix_model: 'shared:64' applies to lengths-only traces (azure, burstgpt, "
        "vidur); a mooncake trace has its own page ids")


# ------------------------------------------------------------------ read_trace
def test_read_trace_refusals(tmp_path):
    path = mooncake(tmp_path / "t.jsonl", [0.0])
    assert refusal(read_trace, path, options=ReadOptions(block_size=0)) == \
        "trace.block_size: must be >= 1, got 0"
    assert refusal(read_trace, path, "mooncak") == (
        f"trace.format: unknown trace format 'mooncak' (valid: "
        f"{', '.join(readers.READERS.names())})")
    empty = mooncake(tmp_path / "e.jsonl", [], bad=2)
    first = f"{empty}:1: not valid JSON (Expecting value)"
    assert refusal(read_trace, empty, "mooncake", ReadOptions(skip_bad_lines=True)) == \
        f"{empty}: the trace holds no requests (2 bad lines skipped, first: {first})"
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n")
    assert refusal(read_trace, blank, "mooncake") == f"{blank}: the trace holds no requests"


def burstgpt(path: Path, times: list[float]) -> Path:
    path.write_text("Timestamp,Request tokens,Response tokens\n"
                    + "".join(f"{t!r},10,1\n" for t in times))
    return path


def mooncake_ms(path: Path, times_s: list[float]) -> Path:
    return mooncake(path, [t * 1000 for t in times_s])  # Mooncake's times are milliseconds


@pytest.mark.parametrize("write", [mooncake_ms, burstgpt])  # columns, and a list of records
def test_the_span_check_and_the_time_shift(tmp_path, write):
    late = 6e8  # start + end would pass 1e9 s: only the span counts
    data = read_trace(write(tmp_path / "t", [late + 10, late, late + MAX_SPAN_S]))
    assert data.time_shift_s == late and data.reordered_rows == 1
    assert [r.arrival_s for r in data.requests] == [0.0, 10.0, MAX_SPAN_S]
    assert [r.request_id for r in data.requests] == [0, 1, 2]
    too_long = write(tmp_path / "u", [late, late + MAX_SPAN_S * 1.5])
    assert refusal(read_trace, too_long) == (
        f"{too_long}: timestamp: arrivals span 1.5e+09 s (over 1e+09 s, ~31 years): is the "
        "time unit right?")


def test_load_trace_passes_its_options(tmp_path):
    path = mooncake(tmp_path / "t.bin", [0.0, 1.0], bad=1)
    requests = load_trace(path, format="mooncake", block_size=16, max_requests=1,
                          skip_bad_lines=True)
    assert len(requests) == 1 and requests[0].page_size_tokens == 16


def test_a_file_the_system_will_not_open_is_named(tmp_path, monkeypatch):
    path = mooncake(tmp_path / "t.jsonl", [0.0])

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "open", refuse)
    assert refusal(open_trace, path) == f"{path}: cannot read (Permission denied)"
    assert refusal(detect_format, path) == f"{path}: cannot read (Permission denied)"


def test_a_kv_cache_tester_file_that_is_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "conversation.json"
    path.write_bytes(b'{\n "requests": "\xff"\n}\n')
    assert refusal(read_trace, path, "kv-cache-tester") == f"{path}:2: not a UTF-8 text file"


def test_a_token_ids_line_without_tokens_names_the_first_key(tmp_path):
    from prefixsim.trace.tokenids import TOKEN_KEYS

    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({TOKEN_KEYS[0]: [1, 2]}) + "\n" + json.dumps({"x": 1}) + "\n")
    assert refusal(read_trace, path, "token-ids") == f"{path}:2: {TOKEN_KEYS[0]}: missing field"


# ------------------------------------------------------------ text the readers keep
MOONCAKE_ROW = '{"timestamp": 5, "input_length": 600, "output_length": 10, "hash_ids": [1, 3]'
SURROGATE = r'"\ud800"'  # a JSON escape of a lone surrogate: json.loads takes it


@pytest.mark.parametrize(("name", "text", "fmt", "where"), [
    ("m.jsonl", MOONCAKE_ROW + f', "session_id": {SURROGATE}}}', "mooncake",
     "m.jsonl:1: session_id"),
    ("m.jsonl", MOONCAKE_ROW + f', "chat_id": {SURROGATE}}}', "mooncake", "m.jsonl:1: chat_id"),
    ("m.jsonl", MOONCAKE_ROW + f', "namespace": "a{SURROGATE[1:]}}}', "mooncake",
     "m.jsonl:1: namespace"),
    ("t.jsonl", f'{{"prompt_token_ids": [1, 2], "session_id": {SURROGATE}}}', "token-ids",
     "t.jsonl:1: session_id"),
    ("c.json", f'{{"id": {SURROGATE}, "requests": [{{"t": 0, "in": 3, "hash_ids": []}}]}}',
     "kv-cache-tester", "c.json: id"),
    ("c.json", '{"id": "c", "requests": [{"type": "subagent", "t": 0, "agent_id": '
     f'{SURROGATE}, "requests": []}}]}}', "kv-cache-tester", "c.json: requests[0].agent_id"),
])
def test_a_lone_surrogate_in_kept_text_is_named(tmp_path, name, text, fmt, where):
    """`"\ud800"` was kept as a session id or namespace and failed only when the results
    were written (UnicodeEncodeError in engine/records.py, or pyarrow's in convert)."""
    path = tmp_path / name
    path.write_text(text + "\n")
    assert refusal(read_trace, path, fmt) == \
        f"{tmp_path}/{where}: holds a lone surrogate (\\ud800), which is not UTF-8 text"


def test_a_valid_surrogate_pair_is_one_character(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(MOONCAKE_ROW + r', "session_id": "\ud83d\ude00"}' + "\n")
    assert read_trace(path, "mooncake").requests[0].session_id == "\U0001f600"


def test_an_encoded_surrogate_in_a_csv_cell_is_not_utf8(tmp_path):
    """CSV cells are decoded strictly: the bytes of a surrogate never become text."""
    path = tmp_path / "b.csv"
    path.write_bytes(b"Timestamp,Request tokens,Response tokens,Session ID\n"
                     b"0,10,2,a\n1,10,2,\xed\xa0\x80\n")
    assert refusal(read_trace, path, "burstgpt") == f"{path}:3: not a UTF-8 text file"


@pytest.mark.parametrize("column", ["session_id", "namespace"])
@pytest.mark.parametrize("raw", [b"\xed\xa0\x80", b"\xff"])
def test_parquet_text_that_is_not_utf8_is_named_with_its_row(tmp_path, column, raw):
    """Parquet keeps the bytes it is given: the row path's to_pylist raised
    UnicodeDecodeError (a traceback on run and inspect)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    text = pa.array([b"a", raw], pa.binary()).view(pa.string())
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"timestamp": [0, 5], "input_length": [1000, 600],
                             "output_length": [10, 10], "hash_ids": [[1, 2], [1, 3]],
                             column: text}), path)
    assert refusal(read_trace, path) == f"{path}:2: {column}: not UTF-8 text"
    skipped = read_trace(path, options=ReadOptions(skip_bad_lines=True))
    assert len(skipped.requests) == 1 and skipped.skipped_lines == 1


@pytest.mark.parametrize(("name", "hint"), [("t.jsonl.gz", "gunzip t.jsonl.gz"),
                                            ("t.jsonl", "gunzip -c t.jsonl > TRACE")])
@pytest.mark.parametrize("fmt", [None, "mooncake", "burstgpt"])
def test_a_gzipped_trace_is_named_as_gzip(tmp_path, name, hint, fmt):
    """It said `binary content; not a trace file` with no hint (detection), or `not a
    UTF-8 text file` (a format given)."""
    import gzip
    path = tmp_path / name
    path.write_bytes(gzip.compress((MOONCAKE_ROW + "}\n").encode()))
    assert refusal(read_trace, path, fmt) == \
        f"{path}: gzip-compressed; decompress it first ({hint}) and give the decompressed file"
