"""Reader for the Parquet traces `prefixsim trace convert` writes (Mooncake columns:
timestamp in ms, input_length, output_length, hash_ids, session_id, block_size, and an
optional `namespace`: docs/cache-semantics.md R2, pages of different namespaces never match).

Before any row is decoded, the file's metadata bounds what loading it costs: the number of
hash ids (list elements) in all row groups must stay within MAX_TRACE_PAGES, and no row group
may average more than MAX_PAGES_PER_REQUEST ids a row (a 2 kB file can hold 10^8 zero ids).
Rows are decoded in small batches."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from prefixsim.errors import InputError
from prefixsim.trace.fields import (
    MAX_PAGES_PER_REQUEST,
    MAX_TRACE_PAGES,
    ChainCheck,
    as_int,
    as_time,
    check_page_count,
    id_list,
    namespace_field,
)
from prefixsim.trace.readers import DEFAULT_BLOCK_SIZES, READERS, ReadContext
from prefixsim.trace.record import Request

DEFAULT_BLOCK_SIZES["parquet"] = 512
REQUIRED = ("timestamp", "input_length", "output_length", "hash_ids")


@READERS.register("parquet")
def read_parquet(path: Path, ctx: ReadContext) -> list[Request]:
    if not path.is_file():
        raise InputError("no such file", file=str(path))
    try:
        handle = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"not a readable Parquet file ({exc})", file=str(path)) from None
    names = handle.schema_arrow.names
    for name in REQUIRED:
        if name not in names:
            raise InputError("missing column", file=str(path), field=name)
    _check_sizes(path, handle)
    chains = ChainCheck()
    requests: list[Request] = []
    row_no = 0
    try:
        for batch in handle.iter_batches(batch_size=4096):
            if not _read_batch(batch.to_pylist(), row_no, path, ctx, chains, requests):
                break
            row_no += batch.num_rows
    except (pa.ArrowException, OSError) as exc:  # a damaged page deep in the file
        message = " ".join(str(exc).split())
        raise InputError(f"not a readable Parquet file ({message})", file=str(path)) from None
    return requests


def _read_batch(rows: list[dict], row_no: int, path: Path, ctx: ReadContext,
                chains: ChainCheck, requests: list[Request]) -> bool:
    """Validate and append one decoded batch (`row_no`: rows before it); False once
    max_requests are read."""
    for row in rows:
        row_no += 1
        if ctx.full(len(requests)):
            return False
        where = {"file": str(path), "line": row_no}
        try:
            arrival_s = as_time(row["timestamp"], "timestamp", where) / 1000.0
            input_tokens = as_int(row["input_length"], "input_length", where, minimum=1)
            output_tokens = as_int(row["output_length"], "output_length", where)
            ids = id_list(row["hash_ids"], "hash_ids", where)
            # a row's own page size wins, as in Mooncake JSONL (`run` always passes the
            # resolved default, which used to hide every row's block_size)
            block = (ctx.options.block_size or 512) if row.get("block_size") is None \
                else as_int(row["block_size"], "block_size", where, minimum=1)
            check_page_count(len(ids), input_tokens, block, where)
            namespace = namespace_field(row, where)
            chains.check(ids, where, namespace=namespace)
        except InputError as error:
            ctx.bad(error)
            continue
        session = row.get("session_id")
        requests.append(Request(len(requests), arrival_s, input_tokens, output_tokens,
                                tuple(ids), block, session, namespace))
    return True


def _check_sizes(path: Path, handle: pq.ParquetFile) -> None:
    """Refuse a file whose hash-id lists would not fit the caps, from metadata alone."""
    meta = handle.metadata
    leaf = next((i for i in range(meta.num_columns)
                 if meta.schema.column(i).path.split(".")[0] == "hash_ids"), None)
    if leaf is None:
        return
    total = 0
    for group in range(meta.num_row_groups):
        chunk = meta.row_group(group)
        values = chunk.column(leaf).num_values
        total += values
        if values > MAX_PAGES_PER_REQUEST * max(chunk.num_rows, 1):
            raise InputError(f"row group {group} holds {values:,} hash ids for {chunk.num_rows} "
                             f"rows, more than {MAX_PAGES_PER_REQUEST:,} a request",
                             file=str(path), field="hash_ids")
    if total > MAX_TRACE_PAGES:
        raise InputError(f"holds {total:,} hash ids, more than {MAX_TRACE_PAGES:,}; convert "
                         "fewer requests or coarser pages", file=str(path), field="hash_ids")
