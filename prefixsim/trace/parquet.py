"""Reader for the Parquet traces `prefixsim trace convert` writes (Mooncake columns:
timestamp in ms, input_length, output_length, hash_ids, session_id, block_size, and an
optional `namespace`: docs/cache-semantics.md R2, pages of different namespaces never match).

Before any row is decoded, the file's metadata bounds what loading it costs: the number of
hash ids (list elements) in all row groups must stay within the trace's page budget
(MAX_TRACE_PAGES unless --max-trace-pages), and no row group
may average more than MAX_PAGES_PER_REQUEST ids a row (a 2 kB file can hold 10^8 zero ids).
A plain file is decoded a row group at a time straight into numpy columns (the next group
decoding while the last one's chains are checked); anything unusual sends it down the
row-by-row path, whose errors name the row and field."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from prefixsim.errors import InputError
from prefixsim.trace.chains import ChunkChains
from prefixsim.trace.columns import RequestColumns, concat_columns
from prefixsim.trace.fields import (
    MAX_PAGES_PER_REQUEST,
    MAX_TRACE_PAGES,
    ChainCheck,
    as_int,
    as_time,
    check_page_count,
    id_list,
    namespace_field,
    session_field,
)
from prefixsim.trace.mooncake_fast import columns_of, report_progress, restart_progress
from prefixsim.trace.readers import DEFAULT_BLOCK_SIZES, READERS, ReadContext
from prefixsim.trace.record import Request

DEFAULT_BLOCK_SIZES["parquet"] = 512
REQUIRED = ("timestamp", "input_length", "output_length", "hash_ids")
KNOWN = (*REQUIRED, "session_id", "block_size", "namespace")  # the columns the reader uses
# What opening a damaged file raises: Arrow's errors, the OS's, and a footer whose column
# name is not UTF-8 (pyarrow decodes the names as it opens the file).
UNREADABLE = (pa.ArrowException, OSError, UnicodeDecodeError)


def read_parquet(path: Path, ctx: ReadContext) -> Sequence[Request]:
    """The file's requests in row order: as columns when every row is plain (the fast
    path, `_read_columns`), else row by row with every check naming its row."""
    if not path.is_file():
        raise InputError("no such file", file=str(path))
    try:
        handle = pq.ParquetFile(path)
    except UNREADABLE as exc:
        raise InputError(f"not a readable Parquet file ({exc})", file=str(path)) from None
    names = handle.schema_arrow.names
    for name in REQUIRED:
        if name not in names:
            raise InputError("missing column", file=str(path), field=name)
    _check_sizes(path, handle, ctx.options.max_pages)
    fast = _read_columns(handle, ctx)
    if fast is not None:
        return fast
    restart_progress(ctx)
    chains = ChainCheck()
    requests: list[Request] = []
    row_no = 0
    try:
        for batch in handle.iter_batches(batch_size=4096):
            if not _read_batch(_decoded(batch, row_no, path), row_no, path, ctx, chains,
                               requests):
                break
            row_no += batch.num_rows
    except (pa.ArrowException, OSError) as exc:  # a damaged page deep in the file
        message = " ".join(str(exc).split())
        raise InputError(f"not a readable Parquet file ({message})", file=str(path)) from None
    return requests


READERS.register("parquet")(read_parquet)


def _read_columns(handle: pq.ParquetFile, ctx: ReadContext) -> RequestColumns | None:
    """The fast path: whole row groups decoded by Arrow into numpy columns and checked at
    once (mooncake_fast.columns_of, trace/chains.py), or None when anything is unusual (a
    column of another type, a null, a value out of range, a namespace, unchained ids): the
    row-by-row path then reads the file, so both accept the same files and build the same
    requests (tested against each other)."""
    names = [name for name in KNOWN if name in handle.schema_arrow.names]
    if not fast_sessions(handle.schema_arrow):
        return None  # the row path reads them (and refuses what is not text or an integer)
    meta = handle.metadata
    limit = ctx.options.max_requests
    total = meta.num_rows if limit is None else min(limit, meta.num_rows)
    page_ids = np.empty(_id_count(handle), dtype=np.int64)  # one array, filled group by group
    parts: list[RequestColumns] = []
    chains = ChunkChains()
    span = id_span(handle, total)
    if span is not None:
        chains.expect(*span)
    rows = pages = 0
    try:
        for table in _prefetched(handle, names):
            for batch in table.to_batches():
                if rows + batch.num_rows > total:
                    batch = batch.slice(0, total - rows)
                columns = columns_of(batch, ctx.options.block_size or 512)
                if columns is None:
                    return None
                starts = columns.page_start[:-1][np.diff(columns.page_start) > 0]
                if not chains.wait():
                    return None
                chains.check_async(columns.page_ids, starts)  # overlaps the next decode
                page_ids[pages:pages + columns.num_pages] = columns.page_ids
                pages += columns.num_pages
                columns.page_ids = page_ids[:0]  # the part keeps its other columns only
                parts.append(columns)
                rows += batch.num_rows
                report_progress(ctx, rows)
                if rows >= total:
                    break
            if rows >= total:
                break
        if not chains.wait() or not rows:
            return None
    except (pa.ArrowException, OSError, ValueError):  # damaged: the row path says where
        chains.wait()
        return None
    joined = concat_columns(parts)
    joined.page_ids = page_ids[:pages]
    return joined


def _prefetched(handle: pq.ParquetFile, names: list[str]) -> Iterator[pa.Table]:
    """The row groups in order, each decoded (Arrow, no GIL) while the last is checked."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        count = handle.metadata.num_row_groups
        pending = pool.submit(handle.read_row_group, 0, columns=names) if count else None
        for group in range(count):
            table = pending.result()
            if group + 1 < count:
                pending = pool.submit(handle.read_row_group, group + 1, columns=names)
            yield table


def fast_sessions(schema: pa.Schema) -> bool:
    """Whether a file's `session_id` column (if any) is one the fast path and the stream
    read (text, integers as their text, or nulls); else the row path decides."""
    if "session_id" not in schema.names:
        return True
    kind = schema.field("session_id").type
    return pa.types.is_string(kind) or pa.types.is_null(kind) or pa.types.is_int64(kind)


def id_span(handle: pq.ParquetFile, rows: int | None = None) -> tuple[int, int] | None:
    """(lowest, highest) hash id in the row groups holding the first `rows` rows (all when
    None), from their statistics; None when one has none. Only a hint: the chain check
    sizes its table by it."""
    meta = handle.metadata
    leaf = _hash_ids_leaf(meta)
    if leaf is None:
        return None
    low = high = None
    covered = 0
    for group in range(meta.num_row_groups):
        if rows is not None and covered >= rows:
            break
        row_group = meta.row_group(group)
        covered += row_group.num_rows
        stats = row_group.column(leaf).statistics
        if stats is None or not stats.has_min_max or not isinstance(stats.max, int):
            return None
        low = stats.min if low is None else min(low, stats.min)
        high = stats.max if high is None else max(high, stats.max)
    return None if low is None else (low, high)


def _hash_ids_leaf(meta: pq.FileMetaData) -> int | None:
    """The index of the `hash_ids` list's leaf column in the file's metadata (None: none)."""
    return next((i for i in range(meta.num_columns)
                 if meta.schema.column(i).path.split(".")[0] == "hash_ids"), None)


def _id_count(handle: pq.ParquetFile) -> int:
    """How many hash ids the file holds, from its metadata (checked by _check_sizes)."""
    meta = handle.metadata
    leaf = _hash_ids_leaf(meta)
    return sum(meta.row_group(g).column(leaf).num_values for g in range(meta.num_row_groups))


def _decoded(batch: pa.RecordBatch, row_no: int, path: Path) -> Iterator[dict | InputError]:
    """The batch's rows as dicts (`row_no`: rows before it); a row holding text that is
    not UTF-8 (Parquet stores the bytes as given; pyarrow raised UnicodeDecodeError on the
    whole batch) comes as the InputError naming its row and column."""
    try:
        rows = batch.to_pylist()
    except UnicodeDecodeError:
        rows = None
    if rows is not None:
        yield from rows
        return
    for index in range(batch.num_rows):
        one = batch.slice(index, 1)
        try:
            yield one.to_pylist()[0]
        except UnicodeDecodeError:
            bad = [name for name in one.schema.names if not _decodes(one.column(name))]
            yield InputError("not UTF-8 text", file=str(path), line=row_no + index + 1,
                             field=bad[0] if bad else None)


def _decodes(column: pa.Array) -> bool:
    try:
        column.to_pylist()
    except UnicodeDecodeError:
        return False
    return True


def _read_batch(rows: Iterable[dict | InputError], row_no: int, path: Path,
                ctx: ReadContext, chains: ChainCheck, requests: list[Request]) -> bool:
    """Validate and append one decoded batch (`row_no`: rows before it); False once
    max_requests are read."""
    for row in rows:
        row_no += 1
        if ctx.full(len(requests)):
            return False
        if isinstance(row, InputError):  # not decoded (_decoded)
            ctx.bad(row)
            continue
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
            session = session_field(row, where, keys=("session_id",))  # as text, as in JSON
        except InputError as error:
            ctx.bad(error)
            continue
        requests.append(Request(len(requests), arrival_s, input_tokens, output_tokens,
                                tuple(ids), block, session, namespace))
    return True


def _check_sizes(path: Path, handle: pq.ParquetFile, budget: int | None = None) -> None:
    """Refuse a file whose hash-id lists would not fit the caps (`budget`, else
    MAX_TRACE_PAGES, in all), from metadata alone."""
    meta = handle.metadata
    leaf = _hash_ids_leaf(meta)
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
    budget = budget or MAX_TRACE_PAGES
    if total > budget:
        raise InputError(f"holds {total:,} hash ids, more than {budget:,}; convert fewer "
                         "requests or coarser pages, or raise --max-trace-pages",
                         file=str(path), field="hash_ids")
