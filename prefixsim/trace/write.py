"""Serialise requests as Mooncake JSONL lines or a Parquet table (the CLI writes the files).

Mooncake rows: `timestamp` in integer ms (a float with µs when not a whole ms),
`input_length`, `output_length`, `hash_ids`, plus `session_id` when known, `namespace` when
set and `block_size` when the pages are not Mooncake's 512 tokens (the Mooncake reader
honours it). Parquet always has the `namespace` column (null when unset).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

import pyarrow as pa

from prefixsim.trace.columns import RequestColumns
from prefixsim.trace.mooncake import DEFAULT_BLOCK_SIZE
from prefixsim.trace.record import Request

PARQUET_SCHEMA = pa.schema([
    ("timestamp", pa.float64()),
    ("input_length", pa.int64()),
    ("output_length", pa.int64()),
    ("hash_ids", pa.list_(pa.int64())),
    ("session_id", pa.string()),
    ("block_size", pa.int64()),
    ("namespace", pa.string()),
])


def timestamp_ms(arrival_s: float) -> int | float:
    ms = round(arrival_s * 1000.0, 3)
    return int(ms) if ms == int(ms) else ms


def mooncake_row(request: Request) -> dict[str, object]:
    row: dict[str, object] = {
        "timestamp": timestamp_ms(request.arrival_s),
        "input_length": request.input_tokens,
        "output_length": request.output_tokens,
        "hash_ids": list(request.page_ids),
    }
    if request.session_id is not None:
        row["session_id"] = request.session_id
    if request.page_size_tokens != DEFAULT_BLOCK_SIZE:
        row["block_size"] = request.page_size_tokens
    if request.namespace is not None:
        row["namespace"] = request.namespace
    return row


def mooncake_lines(requests: Iterable[Request]) -> Iterator[str]:
    """One JSON line (with its newline) per request."""
    for request in requests:
        yield json.dumps(mooncake_row(request), separators=(", ", ": ")) + "\n"


def parquet_table(requests: Iterable[Request]) -> pa.Table:
    """The requests as a Mooncake-shaped Arrow table (timestamp in ms); columns go
    across as arrays, without a Request per row."""
    if isinstance(requests, RequestColumns):
        return _columns_table(requests)
    columns: dict[str, list] = {name: [] for name in PARQUET_SCHEMA.names}
    for r in requests:
        columns["timestamp"].append(r.arrival_s * 1000.0)
        columns["input_length"].append(r.input_tokens)
        columns["output_length"].append(r.output_tokens)
        columns["hash_ids"].append(list(r.page_ids))
        columns["session_id"].append(r.session_id)
        columns["block_size"].append(r.page_size_tokens)
        columns["namespace"].append(r.namespace)
    return pa.table(columns, schema=PARQUET_SCHEMA)


def _columns_table(columns: RequestColumns) -> pa.Table:
    count = len(columns)
    # int32 offsets, as the schema's list type has (a trace holds < 2^31 pages: MAX_TRACE_PAGES)
    ids = pa.ListArray.from_arrays(pa.array(columns.page_start, type=pa.int32()),
                                   pa.array(columns.page_ids, type=pa.int64()))
    nulls = pa.nulls(count, pa.string())
    return pa.table({
        "timestamp": pa.array(columns.arrival_s * 1000.0, type=pa.float64()),
        "input_length": pa.array(columns.input_tokens, type=pa.int64()),
        "output_length": pa.array(columns.output_tokens, type=pa.int64()),
        "hash_ids": ids,
        "session_id": columns.sessions if columns.sessions is not None else nulls,
        "block_size": pa.array(columns.page_size_tokens, type=pa.int64()),
        "namespace": columns.namespaces if columns.namespaces is not None else nulls,
    }, schema=PARQUET_SCHEMA)
