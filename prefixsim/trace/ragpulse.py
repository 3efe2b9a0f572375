"""Reader for RAGPulse traces (`0_trace.jsonl` and its id -> length tables beside it).

Each request's `hash_ids` is an object of *content-chunk* id lists (`sys_prompt`,
`passages_ids`, `history`, `web_search`, `user_input`, in that order in the prompt); the
tables `1_sys_prompt.jsonl` ... `5_web_search.jsonl` give each chunk's `token_length`. Chunk
ids are not chained: one passage can sit at any position. This reader lays the chunks out as
one token stream, cuts it into pages of `block_size` tokens (default 16) and names each page
by (its parent page's id, the chunk pieces it holds), so two requests share a page exactly
when they share the chunk sequence up to the end of that page. The `input_length` minus the
chunks' total (6-12 template tokens) is a private tail. `timestamp` is seconds, stored as a
string; the file is not sorted (the loader sorts by time).
"""

from __future__ import annotations

import json
from hashlib import blake2b
from pathlib import Path

from prefixsim.errors import InputError
from prefixsim.trace.fields import (
    as_time,
    decode_json_line,
    int_field,
    require,
    session_field,
)
from prefixsim.trace.readers import (
    DEFAULT_BLOCK_SIZES,
    FOLDER_SNIFFERS,
    READERS,
    ReadContext,
    numbered_lines,
    read_json_lines,
    sniffer,
    trace_files,
)
from prefixsim.trace.record import Request

DEFAULT_BLOCK_SIZES["ragpulse"] = 16
PARTS = ("sys_prompt", "passages_ids", "history", "web_search", "user_input")
TRACE_NAME = "0_trace.jsonl"


def _is_trace_line(obj: object) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("hash_ids"), dict)


def _first_object(path: Path) -> object:
    try:
        with path.open("r", encoding="utf-8-sig") as handle:
            for raw in handle:
                if raw.strip():
                    return json.loads(raw)
    except (UnicodeDecodeError, ValueError, OSError, RecursionError):
        return None
    return None


def _split(path: Path) -> tuple[Path, list[Path]]:
    """The trace file and the table files of a RAGPulse file or folder."""
    folder = path if path.is_dir() else path.parent
    if path.is_dir():
        named = folder / TRACE_NAME
        candidates = [named] if named.is_file() else [
            p for p in trace_files(folder)
            if p.suffix == ".jsonl" and _is_trace_line(_first_object(p))
        ]
        if len(candidates) != 1:
            raise InputError("expected one RAGPulse trace (0_trace.jsonl) in the folder",
                             file=str(folder))
        path = candidates[0]
    tables = [p for p in trace_files(folder) if p != path and p.suffix == ".jsonl"
              and not _is_trace_line(_first_object(p))]
    return path, tables


def _read_tables(tables: list[Path]) -> dict[int, int]:
    lengths: dict[int, int] = {}
    for table in tables:
        for line_no, raw in numbered_lines(table):
            where = {"file": str(table), "line": line_no}
            obj = decode_json_line(raw, where)
            keys = [k for k in obj if k.endswith("_id")]
            if len(keys) != 1:
                raise InputError("expected one *_id field", **where)
            chunk = int_field(obj, keys[0], where, maximum=1 << 62)
            length = int_field(obj, "token_length", where, minimum=1)
            if lengths.setdefault(chunk, length) != length:
                raise InputError(f"id {chunk} has two lengths", field=keys[0], **where)
    return lengths


class ChunkPager:
    """Cuts a chunk sequence into chained pages of `block_size` tokens."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        # a 16-byte digest of (parent id, pieces) -> page id: Python's hash() of the tuple
        # is 64 bits and equal for ids 2^61 - 1 apart, which once shared unrelated pages
        self.ids: dict[bytes, int] = {}
        self.next_private = -1  # private (never shared) pages count down from -1

    def page_ids(self, chunks: list[tuple[int, int]], input_tokens: int) -> tuple[int, ...]:
        size, ids, out = self.block_size, self.ids, []
        parent, pieces, fill = -1, [], 0
        for chunk, length in chunks:
            offset = 0
            while offset < length:
                take = min(size - fill, length - offset)
                pieces.append((chunk, offset, offset + take))
                offset += take
                fill += take
                if fill == size:
                    key = blake2b(repr((parent, pieces)).encode(), digest_size=16).digest()
                    parent = ids.setdefault(key, len(ids))
                    out.append(parent)
                    pieces, fill = [], 0
        num_pages = -(-input_tokens // size)
        while len(out) < num_pages:  # the partial page and the template tail: private
            out.append(self.next_private)
            self.next_private -= 1
        return tuple(out)


def read_ragpulse(path: Path, ctx: ReadContext) -> list[Request]:
    if not path.exists():
        raise InputError("no such file", file=str(path))
    trace, tables = _split(path)
    lengths = _read_tables(tables)
    pager = ChunkPager(ctx.block_size("ragpulse"))

    def parse(obj: dict, request_id: int, where: dict) -> Request:
        arrival_s = as_time(require(obj, "timestamp", where), "timestamp", where,
                            allow_string=True)
        input_tokens = int_field(obj, "input_length", where, minimum=1)
        output_tokens = int_field(obj, "output_length", where)
        parts = require(obj, "hash_ids", where)
        if not isinstance(parts, dict):
            raise InputError("expected an object of id lists", field="hash_ids", **where)
        chunks = _chunks(parts, lengths, where)
        total = sum(length for _, length in chunks)
        if total > input_tokens:
            raise InputError(f"{input_tokens} is less than its chunks' {total} tokens",
                             field="input_length", **where)
        ctx.charge_pages(-(-input_tokens // pager.block_size), where)
        session = session_field(obj, where, ("session_id",))
        return Request(  # the pager names pages only once the line has passed every check
            request_id=request_id, arrival_s=arrival_s, input_tokens=input_tokens,
            output_tokens=output_tokens, page_ids=pager.page_ids(chunks, input_tokens),
            page_size_tokens=pager.block_size,
            session_id=session,
        )

    return read_json_lines(trace, ctx, parse)


READERS.register("ragpulse")(read_ragpulse)


def _chunks(parts: dict, lengths: dict[int, int], where: dict) -> list[tuple[int, int]]:
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise InputError(f"unknown part {unknown[0]!r} (valid: {', '.join(PARTS)})",
                         field="hash_ids", **where)
    chunks = []
    for part in PARTS:
        ids = parts.get(part, [])
        if not isinstance(ids, list):
            raise InputError("expected a list of ids", field=f"hash_ids.{part}", **where)
        for chunk in ids:
            if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk not in lengths:
                raise InputError(f"id {chunk!r} is in no id -> length table beside the trace",
                                 field=f"hash_ids.{part}", **where)
            chunks.append((chunk, lengths[chunk]))
    return chunks


def _looks_like_ragpulse(first: object, text: str, path: Path) -> bool:
    return _is_trace_line(first)


sniffer("ragpulse")(_looks_like_ragpulse)


def _is_ragpulse_folder(folder: Path) -> bool:
    return (folder / TRACE_NAME).is_file() or any(
        p.suffix == ".jsonl" and _is_trace_line(_first_object(p)) for p in trace_files(folder)
    )


FOLDER_SNIFFERS.append(("ragpulse", _is_ragpulse_folder))
