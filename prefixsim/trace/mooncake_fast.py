"""The fast path of the Mooncake JSONL reader: Arrow's JSON parser straight into columns.

The file is parsed in blocks by Arrow (C++, both cores); each block's columns are checked at
once with numpy (types from Arrow's schema, no nulls in the required fields, value ranges,
ceil(input / block) ids a row) and its ids' chaining is checked (trace/chains.py). Anything
unusual (a line that is not valid JSON, a field of another type or null, a number written as
a string or a float, a bool among the ids, a namespace, both `session_id` and `chat_id`,
ids that are not chained) makes it give up and return None: the reader then reads the file
with the exact per-line checks of mooncake.py, which name the line and field (or skip bad
lines), so both paths accept exactly the same traces and build the same requests (tested
against each other).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from prefixsim.trace import readers
from prefixsim.trace.chains import ChunkChains
from prefixsim.trace.columns import RequestColumns, concat_columns
from prefixsim.trace.fields import MAX_TIME, MAX_TOKENS
from prefixsim.trace.readers import ReadContext

BLOCK_BYTES = 16 << 20  # what Arrow parses at a time
SCAN_BYTES = 1 << 20  # what the nesting scan reads at a time
REQUIRED = ("timestamp", "input_length", "output_length", "hash_ids")


def read_fast(path: Path, ctx: ReadContext, given_block: int) -> RequestColumns | None:
    """The requests of a well-formed Mooncake file as columns, or None (see docstring)."""
    try:
        if not _shallow(path):
            return None
        reader = pj.open_json(path, read_options=pj.ReadOptions(block_size=BLOCK_BYTES))
        parts: list[RequestColumns] = []
        chains = ChunkChains()
        rows = 0
        limit = ctx.options.max_requests
        for batch in reader:
            if limit is not None and rows + batch.num_rows > limit:
                batch = batch.slice(0, limit - rows)
            columns = columns_of(batch, given_block)
            if columns is None:
                return None
            starts = columns.page_start[:-1][np.diff(columns.page_start) > 0]
            if not chains.check(columns.page_ids, starts):
                return None
            parts.append(columns)
            rows += batch.num_rows
            report_progress(ctx, rows)
            if limit is not None and rows >= limit:
                break
    except (pa.ArrowException, OSError, ValueError):  # not plain JSON lines: the exact path
        return None
    if not rows:
        return None  # empty: let the exact path say so
    return concat_columns(parts)


def report_progress(ctx: ReadContext, rows: int) -> None:
    """Tell the progress callback about `rows` read, in the exact path's units."""
    step = readers.PROGRESS_EVERY
    for count in range(ctx.reported + step, rows + 1, step):
        ctx.full(count)


def restart_progress(ctx: ReadContext) -> None:
    """Take back what a fast path reported before it gave up (the exact path starts over)."""
    if ctx.reported and ctx.options.on_progress is not None:
        ctx.options.on_progress(-ctx.reported)
    ctx.reported = 0


def _shallow(path: Path) -> bool:
    """Whether Arrow may parse the file: no line opens more than two brackets (`{` and `[`:
    a Mooncake line nests two deep; Arrow's parser recurses on nesting and a deep line would
    overflow its stack) and its first value is an object (`record_lines`). The exact path's
    parser refuses what Arrow may not see with an error naming the line."""
    return record_lines(path) is not None


NOT_JSON_SPACE = re.compile(rb"[^ \t\r\n]")  # the first byte of a value (no copy made)


def record_lines(path: Path) -> int | None:
    """The lines that open a bracket (a plain file's records), or None when a line opens
    more than two (see `_shallow`), is longer than readers.MAX_LINE_CHARS bytes (the exact
    path then refuses it, naming the line: /dev/zero is never read to its end), or the
    file's first value is not an object: Arrow's JSON reader (pyarrow 26) crashes the
    process on a file whose first value is `null`, and refuses other non-objects anyway."""
    carry = 0
    records = 0
    line_bytes = 0  # bytes of the line the last block ended in
    opened = False  # whether the first byte that is not JSON whitespace has been seen
    with path.open("rb") as handle:
        while block := handle.read(SCAN_BYTES):
            data = np.frombuffer(block, dtype=np.uint8)
            if not opened:
                first = NOT_JSON_SPACE.search(block)
                if first is not None:
                    if block[first.start()] != 123:  # "{"
                        return None
                    opened = True
            opens = np.flatnonzero((data == 91) | (data == 123))
            ends = np.flatnonzero(data == 10)
            if len(ends):  # each line that ends here, the first with what came before
                lengths = np.diff(ends, prepend=-1 - line_bytes) - 1
                if lengths.max() > readers.MAX_LINE_CHARS:
                    return None
                line_bytes = len(data) - 1 - ends[-1]
            else:
                line_bytes += len(data)
            if line_bytes > readers.MAX_LINE_CHARS:
                return None
            per_line = np.bincount(np.searchsorted(ends, opens), minlength=len(ends) + 1)
            per_line[0] += carry
            if per_line.max() > 2:
                return None
            records += int(np.count_nonzero(per_line[:-1]))
            carry = int(per_line[-1]) if len(ends) else int(per_line[0])
    return records + (carry > 0)


def columns_of(batch: pa.RecordBatch, given_block: int) -> RequestColumns | None:
    """One Arrow batch of Mooncake-shaped columns as RequestColumns (request ids from 0),
    or None unless every row is plain (types, no nulls, not even among the ids, ranges,
    ceil(input / block) ids)."""
    try:
        names = batch.schema.names
    except UnicodeDecodeError:  # a field name that is not UTF-8: the exact path names its line
        return None
    if any(name not in names for name in REQUIRED):
        return None
    field = {name: batch.column(name) for name in names}
    if any(field[name].null_count for name in REQUIRED):
        return None
    stamp, ids = field["timestamp"], field["hash_ids"]
    if not (pa.types.is_int64(stamp.type) or pa.types.is_float64(stamp.type)) \
            or not pa.types.is_int64(field["input_length"].type) \
            or not pa.types.is_int64(field["output_length"].type) \
            or not (pa.types.is_list(ids.type) and pa.types.is_int64(ids.type.value_type)):
        return None
    if "namespace" in field and field["namespace"].null_count < len(batch):
        return None
    timestamps = stamp.to_numpy(zero_copy_only=False)
    inputs = field["input_length"].to_numpy()
    outputs = field["output_length"].to_numpy()
    if not (np.all(np.isfinite(timestamps)) and np.all((timestamps >= 0)
                                                       & (timestamps <= MAX_TIME))
            and np.all((inputs >= 1) & (inputs <= MAX_TOKENS))
            and np.all((outputs >= 0) & (outputs <= MAX_TOKENS))):
        return None
    blocks = np.full(len(batch), given_block, dtype=np.int64)
    if "block_size" in field:
        given = field["block_size"]
        if not (pa.types.is_int64(given.type) or pa.types.is_null(given.type)):
            return None
        if given.null_count < len(batch):
            values = given.to_numpy(zero_copy_only=False)
            set_ = ~np.isnan(values) if values.dtype.kind == "f" else np.ones(len(values), bool)
            blocks[set_] = values[set_].astype(np.int64)
            if np.any((blocks < 1) | (blocks > MAX_TOKENS)):
                return None
    values = ids.flatten()
    if values.null_count:  # a null among the ids (`[1, null]`): the exact path names it
        return None
    offsets = ids.offsets.to_numpy().astype(np.int64)
    offsets = offsets - offsets[0]
    counts = np.diff(offsets)
    if np.any(counts != -(-inputs // blocks)):
        return None
    sessions = _sessions(field)
    if sessions is False:
        return None
    flat = values.to_numpy()
    return RequestColumns(np.arange(len(batch), dtype=np.int64), timestamps / 1000.0,
                          inputs.astype(np.int64, copy=False),
                          outputs.astype(np.int64, copy=False), blocks, offsets,
                          flat.astype(np.int64, copy=False), sessions, None)


def _sessions(field: dict) -> pa.Array | None | bool:
    """The session ids as strings (None: no row has one; False: the exact path must
    decide, e.g. both session_id and chat_id given, or ids that are not text or integers)."""
    if "session_id" in field and "chat_id" in field:
        return False
    column = field.get("session_id", field.get("chat_id"))
    if column is None or column.null_count == len(column):
        return None
    if pa.types.is_string(column.type):
        try:
            column.validate(full=True)  # Arrow's JSON parser lets bytes that are not UTF-8 by
        except pa.ArrowInvalid:
            return False  # the exact path names the line
        return column
    if pa.types.is_int64(column.type):
        return pc.cast(column, pa.string())
    return False
