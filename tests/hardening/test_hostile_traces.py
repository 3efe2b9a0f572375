"""Hostile and careless trace and pricing files (docs/input-rules.md I4, I6, I7, I8): each
is refused in one line naming the file, line or field and the limit, before the memory it
asks for is taken, or read correctly. Fixtures are written here, small on disk; the peak
memory of the large ones is measured by bench/hostile_rss.py, not here.
"""

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_helpers import DEMO, REPO, invoke, one_line_error

from prefixsim.trace import readers
from prefixsim.trace.fields import MAX_MADE_UP_PAGES, MAX_TRACE_PAGES

LINE = ('{{"timestamp": 1, "input_length": 10, "output_length": {out}, "hash_ids": [1], '
        '"session_id": {session}}}\n')


def zero_id_parquet(path: Path, rows: int, ids_per_row: int) -> Path:
    """`rows` one-row groups of `ids_per_row` zero ids each (zstd: a few kB on disk)."""
    schema = pa.schema([("timestamp", pa.float64()), ("input_length", pa.int64()),
                        ("output_length", pa.int64()), ("hash_ids", pa.list_(pa.int64()))])
    ids = pa.ListArray.from_arrays(pa.array([0, ids_per_row], pa.int32()),
                                   pa.array(np.zeros(ids_per_row, dtype=np.int64)))
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for row in range(rows):
            writer.write_table(pa.table({
                "timestamp": [float(row)], "input_length": [ids_per_row * 512],
                "output_length": [1], "hash_ids": ids}, schema=schema))
    return path


def test_a_small_parquet_declaring_too_many_hash_ids_is_refused_from_its_metadata(tmp_path):
    """33 rows of 2^20 ids: 2^25 + 2^20 ids in ~10 kB (such a file once took 6.7 GB)."""
    path = zero_id_parquet(tmp_path / "bomb.parquet", 33, 1 << 20)
    assert path.stat().st_size < 100_000
    one_line_error(invoke("trace", "inspect", path), "bomb.parquet", "hash_ids",
                   "34,603,008 hash ids", f"more than {MAX_TRACE_PAGES:,}")


def test_the_trace_page_budget_can_be_raised_or_lowered(tmp_path):
    out = tmp_path / "demo.parquet"
    assert invoke("trace", "convert", DEMO, out).exit_code == 0
    one_line_error(invoke("run", "--trace", out, "--cache-only", "--max-trace-pages", 10,
                          "-o", tmp_path / "r"), "demo.parquet", "more than 10;",
                   "--max-trace-pages")
    assert not (tmp_path / "r").exists()
    ok = invoke("run", "--trace", out, "--cache-only", "--max-trace-pages", 10**6,
                "-o", tmp_path / "r")
    assert ok.exit_code == 0, ok.output


def test_a_lengths_only_trace_of_huge_prompts_is_refused_before_its_pages_are_made(tmp_path):
    """120 rows of 2^24 context tokens (4.8 kB) with a synthetic prefix: 2^20 made-up pages
    a row, so the 2^22 budget stops it at the 5th row (line 6), after 4 rows' pages."""
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"] + [
        f"2023-11-16 18:15:{i % 60:02d}.{i:07d},{1 << 24},10" for i in range(120)]
    path = tmp_path / "azure.csv"
    path.write_text("\n".join(rows) + "\n")
    one_line_error(invoke("run", "--trace", path, "--prefix-model", "shared:1000",
                          "--cache-only", "-o", tmp_path / "r"),
                   "azure.csv:6", "ContextTokens", f"more than {MAX_MADE_UP_PAGES:,} pages")


def test_a_json_line_longer_than_the_cap_is_refused_not_loaded(tmp_path, monkeypatch):
    """The cap is 2^25 characters; here 1,000, on a 5,000-character line (a 1 GB line once
    ran out of memory at 3 GB)."""
    monkeypatch.setattr(readers, "MAX_LINE_CHARS", 1000)
    path = tmp_path / "long.jsonl"
    path.write_text(DEMO.read_text().splitlines()[0] + "\n"
                    + '{"hash_ids": [' + "1, " * 1700 + "1]}\n")
    one_line_error(invoke("trace", "inspect", path, "--trace-format", "mooncake"),
                   "long.jsonl:2", "longer than 1,000 characters")


def test_dev_zero_as_a_mooncake_trace_ends_in_one_line():
    """It once never ended: a NUL stream is one endless line."""
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero here")
    one_line_error(invoke("trace", "inspect", "/dev/zero", "--trace-format", "mooncake"),
                   "/dev/zero:1", "longer than")


def test_generating_a_trillion_requests_is_refused_before_anything_is_made(tmp_path):
    one_line_error(invoke("trace", "generate", "--preset", "chat", "--requests", 10**12,
                          "-o", tmp_path / "t.jsonl"), "--requests", "10,000,000",
                   "1,000,000,000,000")
    assert not (tmp_path / "t.jsonl").exists()


@pytest.mark.parametrize("command", ["inspect", "run"])
def test_a_session_id_that_is_not_utf8_is_named_with_its_line(tmp_path, command):
    path = tmp_path / "ff.jsonl"
    path.write_bytes(DEMO.read_bytes().splitlines(keepends=True)[0]
                     + LINE.format(out=1, session='"a\xffb"').encode("latin-1"))
    args = ("trace", "inspect", path) if command == "inspect" else \
        ("run", "--trace", path, "--cache-only", "-o", tmp_path / "r")
    one_line_error(invoke(*args), "ff.jsonl:2", "not a UTF-8 text file")


@pytest.mark.parametrize(("out", "session", "field", "got"), [
    ('"10"', '"s"', "output_length", "expected an integer, got '10'"),
    ("true", '"s"', "output_length", "expected an integer, got True"),
    ("1", '["a", "b"]', "session_id", "expected a string or an integer, got ['a', 'b']"),
    ("1", '{"a": 1}', "session_id", "expected a string or an integer"),
    ("1", "1.5", "session_id", "expected a string or an integer, got 1.5"),
])
def test_json_trace_fields_are_not_coerced(tmp_path, out, session, field, got):
    path = tmp_path / "t.jsonl"
    path.write_text(LINE.format(out=out, session=session))
    one_line_error(invoke("trace", "inspect", path), "t.jsonl:1", field, got)


def test_an_integer_session_id_is_still_text():
    """`chat_id: 7` is a session id, as before; only other shapes are refused."""
    from prefixsim.trace.fields import session_field
    assert session_field({"chat_id": 7}, {}) == "7"
    assert session_field({"session_id": "s"}, {}) == "s"
    assert session_field({}, {}) is None


PRICES = ("input_usd_per_mtok: 3\noutput_usd_per_mtok: 15\ncache_read_usd_per_mtok: {read}\n"
          "cache_write_usd_per_mtok: 3.75\ncache_write_1h_usd_per_mtok: 6\n"
          "min_cacheable_tokens: {minimum}\n")


@pytest.mark.parametrize(("read", "minimum", "field", "got"), [
    (".nan", 0, "cache_read_usd_per_mtok", "got nan"),
    (".inf", 0, "cache_read_usd_per_mtok", "got inf"),
    ("true", 0, "cache_read_usd_per_mtok", "got True"),
    ('"0.3"', 0, "cache_read_usd_per_mtok", "got '0.3'"),
    ("1.0e+308", 0, "cache_read_usd_per_mtok", "a finite number in [0, 1e+06], got 1e+308"),
    ("-0.3", 0, "cache_read_usd_per_mtok", "got -0.3"),
    ("0.3", 1.5, "min_cacheable_tokens", "must be an integer in [0, 9.22337e+18], got 1.5"),
    ("0.3", "true", "min_cacheable_tokens", "must be an integer in [0, 9.22337e+18], got True"),
    ("0.3", 10**30, "min_cacheable_tokens", "got 1000000000000000000000000000000"),
])
def test_a_pricing_file_has_finite_numbers_and_integer_counts(tmp_path, read, minimum, field,
                                                              got):
    """`.nan` once priced the run at NaN with exit 0, and `true` counted as 1; 10**30
    tokens (found by bench/fuzz.py) overflowed numpy after the run."""
    (tmp_path / "p.yaml").write_text(PRICES.format(read=read, minimum=minimum))
    one_line_error(invoke("run", "--trace", DEMO, "--cache-only", "--pricing",
                          tmp_path / "p.yaml", "-o", tmp_path / "r"), "p.yaml", field, got)
    assert not (tmp_path / "r").exists()


def test_a_good_pricing_file_still_prices_the_run(tmp_path):
    (tmp_path / "p.yaml").write_text(PRICES.format(read=0.3, minimum=1024))
    result = invoke("run", "--trace", DEMO, "--cache-only", "--pricing", tmp_path / "p.yaml",
                    "-o", tmp_path / "r")
    assert result.exit_code == 0, result.output


def test_a_synthetic_prefix_model_on_a_trace_with_page_ids_is_refused(tmp_path):
    """It was ignored on a Mooncake trace, yet written to config.yaml."""
    one_line_error(invoke("run", "--trace", DEMO, "--cache-only", "--prefix-model",
                          "shared:100", "-o", tmp_path / "r"),
                   "trace.prefix_model", "'shared:100'", "mooncake")
    one_line_error(invoke("run", "--trace", DEMO, "--cache-only", "--prefix-model",
                          "shared:100", "--no-stream", "-o", tmp_path / "r"),
                   "trace.prefix_model", "lengths-only")
    assert not (tmp_path / "r").exists()


def test_the_readme_converts_with_two_arguments():
    """`trace convert IN -o OUT` in the README failed: the command takes SOURCE OUT."""
    readme = (REPO / "README.md").read_text()
    lines = re.findall(r"prefixsim trace convert [^\n`]*", readme)
    assert lines and not [line for line in lines if " -o " in line]


def test_a_field_name_that_is_not_utf8_is_named_on_the_streamed_road(tmp_path):
    """Found by bench/fuzz.py: Arrow's JSON reader took the name, then its schema failed
    to decode it (a traceback on `run`, which streams a Mooncake file)."""
    path = tmp_path / "name.jsonl"
    lines = DEMO.read_bytes().splitlines(keepends=True)[:3]
    path.write_bytes(lines[0] + lines[1].replace(b'"session_id"', b'"s\xf8ssion_id"', 1)
                     + lines[2])
    one_line_error(invoke("run", "--trace", path, "--cache-only", "-o", tmp_path / "r"),
                   "name.jsonl:2", "not a UTF-8 text file")


@pytest.mark.parametrize("command", [("trace", "inspect"), ("run", "--cache-only", "--trace")])
def test_a_parquet_column_name_that_is_not_utf8_is_one_line(tmp_path, command):
    """Found by bench/fuzz.py: a Parquet footer whose column name is not UTF-8 made
    pyarrow raise UnicodeDecodeError while opening the file (a traceback on `trace
    inspect`). Both the whole-file reader and the streamed road now say it in one line."""
    good = tmp_path / "good.parquet"
    invoke("trace", "convert", DEMO, good)
    data = good.read_bytes()
    assert data.count(b"session_id") >= 1
    path = tmp_path / "name.parquet"
    path.write_bytes(data.replace(b"session_id", b"sess\xadon_id"))
    args = [*command, path] + (["-o", tmp_path / "r"] if command[0] == "run" else [])
    one_line_error(invoke(*args), "name.parquet", "not a readable Parquet file")
    assert not (tmp_path / "r").exists()


FIRST = '{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [1, 2]}\n'
RUNS = [("run", "--cache-only"), ("run",), ("run", "--cache-only", "--no-stream")]


@pytest.mark.parametrize("stamp", ["NaN", "Infinity"])
@pytest.mark.parametrize("command", RUNS)
def test_a_nan_or_infinite_timestamp_is_named_in_every_run(tmp_path, stamp, command):
    """The streamed cache-only run read the last line's NaN as its last arrival and failed
    in the timeseries grid (exit 1, a traceback); the other roads named the line."""
    path = tmp_path / "nan_ts.jsonl"
    path.write_text(FIRST + f'{{"timestamp": {stamp}, "input_length": 600, '
                    '"output_length": 10, "hash_ids": [1, 3]}\n')
    one_line_error(invoke(*command, path, "-o", tmp_path / "r"), "nan_ts.jsonl:2",
                   "timestamp", "must be a finite number >= 0")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("command", RUNS)
@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_a_null_among_the_hash_ids_is_named_in_every_run(tmp_path, command, kind):
    """A streamed run converted the ids with numpy's zero copy, which a null refuses:
    exit 1 and pyarrow's ArrowInvalid; the whole-trace readers named the row."""
    path = tmp_path / f"null_hash.{kind}"
    if kind == "jsonl":
        path.write_text(FIRST + '{"timestamp": 5, "input_length": 600, "output_length": 10, '
                        '"hash_ids": [1, null]}\n')
    else:
        pq.write_table(pa.table({"timestamp": [0, 5], "input_length": [1000, 600],
                                 "output_length": [10, 10],
                                 "hash_ids": pa.array([[1, 2], [1, None]],
                                                      pa.list_(pa.int64()))}), path)
    one_line_error(invoke(*command, path, "-o", tmp_path / "r"), f"null_hash.{kind}:2",
                   "hash_ids", "expected a list of integers")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("command", [*RUNS, ("trace", "inspect"), ("trace", "convert")])
def test_a_lone_surrogate_in_a_session_id_is_named(tmp_path, command):
    """`"session_id": "\ud800"` (the escape in the file) failed with UnicodeEncodeError in
    engine/records.py after the run, or in pyarrow in convert (exit 1)."""
    path = tmp_path / "sur.jsonl"
    path.write_text(FIRST + '{"timestamp": 5, "input_length": 600, "output_length": 10, '
                    '"hash_ids": [1, 3], "session_id": "\\ud800"}\n')
    out = tmp_path / ("out.parquet" if command[-1] == "convert" else "r")
    args = (*command, path) + ((out,) if command[-1] == "convert" else
                               () if command[-1] == "inspect" else ("-o", out))
    one_line_error(invoke(*args), "sur.jsonl:2", "session_id", "lone surrogate")
    assert not out.exists()


def test_a_gzipped_trace_says_to_gunzip_it(tmp_path):
    import gzip
    path = tmp_path / "demo.jsonl.gz"
    path.write_bytes(gzip.compress(DEMO.read_bytes()))
    one_line_error(invoke("run", "--cache-only", path, "-o", tmp_path / "r"),
                   "demo.jsonl.gz", "gzip-compressed", "gunzip demo.jsonl.gz")
    assert not (tmp_path / "r").exists()
