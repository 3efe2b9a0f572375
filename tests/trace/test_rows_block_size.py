"""The page size a converted trace's rows state (`block_size` on each row, written by
`prefixsim trace convert` for pages other than 512 tokens) is the one a run records: the
readers always used it, but config.yaml and the report's header said the format's 512."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

from prefixsim.cli import app
from prefixsim.config import load_config
from prefixsim.pipeline.inputs import resolve_trace_defaults
from prefixsim.trace.readers import rows_block_size

ROWS = [{"timestamp": 0, "input_length": 40, "output_length": 3, "hash_ids": [1, 2, 3],
         "block_size": 16},
        {"timestamp": 500, "input_length": 20, "output_length": 3, "hash_ids": [1, 2],
         "block_size": 16}]


def jsonl(path, rows=ROWS):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(("value", "expected"), [
    (16, 16), (1, 1), (0, None), (-4, None), (True, None), ("16", None), (16.0, None),
    (None, None)])
def test_the_first_rows_block_size_or_none(tmp_path, value, expected):
    row = {**ROWS[0], "block_size": value}
    assert rows_block_size(jsonl(tmp_path / "t.jsonl", [row]), "mooncake") == expected


def test_none_without_the_field_a_file_or_the_format(tmp_path):
    plain = [{k: v for k, v in r.items() if k != "block_size"} for r in ROWS]
    assert rows_block_size(jsonl(tmp_path / "plain.jsonl", plain), "mooncake") is None
    assert rows_block_size(tmp_path / "nothere.jsonl", "mooncake") is None
    assert rows_block_size(tmp_path, "mooncake") is None  # a folder
    (tmp_path / "junk.jsonl").write_text("not json\n")
    assert rows_block_size(tmp_path / "junk.jsonl", "mooncake") is None
    assert rows_block_size(jsonl(tmp_path / "t.jsonl"), "azure") is None  # not read there
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    assert rows_block_size(tmp_path / "bad.parquet", "parquet") is None


def test_a_parquet_files_first_row(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    assert rows_block_size(path, "parquet") == 16
    pq.write_table(pa.Table.from_pylist([{k: v for k, v in r.items() if k != "block_size"}
                                         for r in ROWS]), path)
    assert rows_block_size(path, "parquet") is None


def test_the_resolved_config_says_the_rows_page_size(tmp_path):
    trace = jsonl(tmp_path / "t.jsonl")

    def resolved(**keys):
        return resolve_trace_defaults(load_config(None, {"trace.path": str(trace), **keys}))

    assert resolved().trace.block_size == 16
    assert resolved(**{"trace.block_size": 32}).trace.block_size == 32  # given: kept
    plain = jsonl(tmp_path / "plain.jsonl", [{k: v for k, v in r.items() if k != "block_size"}
                                             for r in ROWS])
    config = resolve_trace_defaults(load_config(None, {"trace.path": str(plain)}))
    assert config.trace.block_size == 512


def test_a_converted_traces_run_records_16_and_its_config_repeats_it(tmp_path):
    trace = jsonl(tmp_path / "t.jsonl")
    runner = CliRunner()
    first = runner.invoke(app, ["run", str(trace), "--cache-only", "-o", str(tmp_path / "a"),
                                "--quiet"])
    assert first.exit_code == 0, first.output
    config = yaml.safe_load((tmp_path / "a" / "config.yaml").read_text())
    assert config["trace"]["block_size"] == 16
    again = runner.invoke(app, ["run", "--config", str(tmp_path / "a" / "config.yaml"),
                                "-o", str(tmp_path / "b"), "--quiet"])
    assert again.exit_code == 0, again.output
    summaries = [json.loads((tmp_path / name / "summary.json").read_text())
                 for name in ("a", "b")]
    for summary in summaries:
        for key in ("wall_time_s", "command", "simulated_s_per_wall_s"):
            summary.pop(key, None)
    assert summaries[0] == summaries[1]
    assert summaries[0]["cache_hit_tokens"] == 20 - 1  # r1 hits its 2 pages less the last token
