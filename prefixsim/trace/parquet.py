"""Reader for the Parquet traces `prefixsim trace convert` writes (Mooncake columns:
timestamp in ms, input_length, output_length, hash_ids, session_id, block_size, and an
optional `namespace`: docs/cache-semantics.md R2, pages of different namespaces never match)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from prefixsim.errors import InputError
from prefixsim.trace.fields import (
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
    chains = ChainCheck()
    requests: list[Request] = []
    row_no = 0
    for batch in handle.iter_batches(batch_size=65536):
        for row in batch.to_pylist():
            row_no += 1
            if ctx.full(len(requests)):
                return requests
            where = {"file": str(path), "line": row_no}
            try:
                arrival_s = as_time(row["timestamp"], "timestamp", where) / 1000.0
                input_tokens = as_int(row["input_length"], "input_length", where, minimum=1)
                output_tokens = as_int(row["output_length"], "output_length", where)
                ids = id_list(row["hash_ids"], "hash_ids", where)
                block = ctx.options.block_size or row.get("block_size") or 512
                check_page_count(len(ids), input_tokens, block, where)
                namespace = namespace_field(row, where)
                chains.check(ids, where, namespace=namespace)
            except InputError as error:
                ctx.bad(error)
                continue
            session = row.get("session_id")
            requests.append(Request(len(requests), arrival_s, input_tokens, output_tokens,
                                    tuple(ids), block, session, namespace))
    return requests

