"""The trace writers (trace/write.py) by hand: a Mooncake line as written, timestamps in
whole or microsecond milliseconds, and Parquet tables of the declared schema from requests
and from columns alike (a column of no sessions is still text)."""

from __future__ import annotations

import pyarrow as pa

from prefixsim.trace.columns import as_columns
from prefixsim.trace.record import Request
from prefixsim.trace.write import PARQUET_SCHEMA, mooncake_lines, parquet_table, timestamp_ms


def test_timestamps_in_milliseconds():
    assert timestamp_ms(1.5) == 1500 and isinstance(timestamp_ms(1.5), int)
    assert timestamp_ms(0.0012344) == 1.234  # rounded to the microsecond
    assert timestamp_ms(0.0012346) == 1.235


def test_a_mooncake_line_as_written():
    plain = Request(0, 1.5, 600, 3, (7, 8), 512)
    other = Request(1, 2.0000004, 20, 1, (9, 10), 16, "chat-1", "tenant")
    assert list(mooncake_lines([plain, other])) == [
        '{"timestamp": 1500, "input_length": 600, "output_length": 3, "hash_ids": [7, 8]}\n',
        '{"timestamp": 2000, "input_length": 20, "output_length": 1, "hash_ids": [9, 10], '
        '"session_id": "chat-1", "block_size": 16, "namespace": "tenant"}\n']


def test_parquet_tables_have_the_schema_from_requests_and_columns():
    requests = [Request(0, 1.5, 600, 3, (7, 8), 512), Request(1, 2.0, 20, 1, (9,), 512)]
    for source in (requests, as_columns(requests)):
        table = parquet_table(source)
        assert table.schema == PARQUET_SCHEMA
        assert table.column("session_id").to_pylist() == [None, None]
        assert table.column("namespace").to_pylist() == [None, None]
        assert table.column("hash_ids").to_pylist() == [[7, 8], [9]]
        assert table.column("timestamp").to_pylist() == [1500.0, 2000.0]
    named = parquet_table([Request(0, 0.0, 10, 1, (1,), 16, "s", "n")])
    assert named.column("session_id").type == pa.string()
    assert named.to_pylist()[0]["block_size"] == 16
