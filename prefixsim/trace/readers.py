"""The registry of trace readers, format detection and the one entry point that loads a trace.

A reader is a function `read(path, ctx) -> Sequence[Request]` (a list, or `RequestColumns`
from a fast path) registered under its format name.
`ctx` (a `ReadContext`) carries the user's `ReadOptions`, counts skipped bad lines and
collects labels that must reach the summary (e.g. a synthetic prefix model). Readers stream
their file line by line and keep only request records; a bad record raises `InputError`
naming file, line and field, unless `skip_bad_lines` is set, in which case `ctx.bad(...)`
counts it and the reader moves on. Formats are detected from content, not file names.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from prefixsim.errors import InputError
from prefixsim.registry import Registry
from prefixsim.trace.columns import RequestColumns
from prefixsim.trace.fields import MAX_MADE_UP_PAGES, MAX_PAGES_PER_REQUEST, decode_json_line
from prefixsim.trace.namespaces import separate_namespaces
from prefixsim.trace.record import Request

TraceReader = Callable[[Path, "ReadContext"], Sequence[Request]]

READERS: Registry[Sequence[Request]] = Registry("trace format")

# Tokens per page id of each format when the user gives no --block-size (filled by readers).
DEFAULT_BLOCK_SIZES: dict[str, int] = {}

# Content sniffers: (format, test(first_line_object_or_None, header_text, path)) in order.
Sniffer = Callable[[object, str, Path], bool]
SNIFFERS: list[tuple[str, Sniffer]] = []

PARQUET_MAGIC = b"PAR1"
PROGRESS_EVERY = 10000  # requests between progress callbacks

# The longest line a JSON-lines reader holds (32 Mi characters: 2^20 hash ids of up to 20
# digits and a little more; docs/input-rules.md I7).
MAX_LINE_CHARS = 1 << 25

# How many bytes of a file detection looks at.
SNIFF_BYTES = 65536


@dataclass(frozen=True)
class ReadOptions:
    """How to read a trace. Format-specific knobs are ignored by formats that lack them.

    block_size          tokens per page id in the file (the format's default when None)
    max_requests        stop after this many requests (in file order)
    skip_bad_lines      skip and count malformed records instead of failing on the first
    prefix_model        lengths-only formats (azure, burstgpt, vidur): "none" (no sharing)
                        or a synthetic model "shared:TOKENS" (every prompt starts with the
                        same TOKENS-token prefix); synthetic models are labelled in results
    session_rate_per_s  kv-cache-tester: conversations start as a Poisson process of this
                        rate (seeded by `seed`); the files carry no absolute time
    seed                seed of any modelling choice a reader makes
    max_pages           the trace's page budget (trace.max_pages): hash ids a Parquet file
                        holds and page ids a reader makes up; None: MAX_TRACE_PAGES and
                        MAX_MADE_UP_PAGES (trace/fields.py)
    on_progress         called with the number of requests read since the last call
    """

    block_size: int | None = None
    max_requests: int | None = None
    skip_bad_lines: bool = False
    prefix_model: str = "none"
    session_rate_per_s: float = 1.0 / 60.0
    seed: int = 0
    max_pages: int | None = None
    on_progress: Callable[[int], None] | None = field(default=None, compare=False)


@dataclass
class ReadContext:
    """What a reader gets besides its path: options, the bad-line counter, labels."""

    options: ReadOptions
    skipped_lines: int = 0
    first_skipped: InputError | None = None
    reported: int = 0  # requests already reported to on_progress
    pages: int = 0  # page ids made up so far (charge_pages)
    labels: dict[str, object] = field(default_factory=dict)

    def bad(self, error: InputError) -> None:
        """A malformed record: raise it, or count it when skipping bad lines."""
        if not self.options.skip_bad_lines:
            raise error
        self.skipped_lines += 1
        if self.first_skipped is None:
            self.first_skipped = error

    def full(self, count: int) -> bool:
        """True once `count` requests reach `max_requests` (readers call it per record)."""
        if count >= self.reported + PROGRESS_EVERY and self.options.on_progress is not None:
            self.options.on_progress(count - self.reported)
            self.reported = count
        limit = self.options.max_requests
        return limit is not None and count >= limit

    def charge_pages(self, num_pages: int, where: dict, key: str = "input_length") -> None:
        """Count page ids a reader is about to make up for one request; InputError past
        MAX_PAGES_PER_REQUEST for it or the made-up page budget for the trace (memory stays
        bounded whatever a short line claims)."""
        if num_pages > MAX_PAGES_PER_REQUEST:
            raise InputError(f"needs {num_pages:,} pages, more than {MAX_PAGES_PER_REQUEST:,} "
                             "per request (is --block-size right?)", field=key, **where)
        self.pages += num_pages
        budget = self.options.max_pages or MAX_MADE_UP_PAGES
        if self.pages > budget:
            raise InputError(f"the trace needs more than {budget:,} pages; read fewer requests "
                             "(--max-requests), coarser pages (--block-size) or raise "
                             "--max-trace-pages", field=key, **where)

    def block_size(self, format_name: str) -> int:
        return self.options.block_size or DEFAULT_BLOCK_SIZES[format_name]


# A trace whose arrivals span more than this (about 31.7 years) has the wrong time unit.
MAX_SPAN_S = 1e9


@dataclass(frozen=True)
class TraceData:
    """A loaded trace: requests in arrival order plus what reading it found out.

    `time_shift_s`: seconds subtracted from every arrival so the trace starts at t = 0 (an
    absolute epoch clock becomes trace time). `reordered_rows`: records that arrived before an
    earlier record of the file (they were sorted into arrival order)."""

    requests: Sequence[Request]  # a list, or RequestColumns from a reader's fast path
    format: str
    skipped_lines: int = 0
    labels: dict[str, object] = field(default_factory=dict)
    time_shift_s: float = 0.0
    reordered_rows: int = 0


def sniffer(name: str) -> Callable[[Sniffer], Sniffer]:
    """Register a content test for format `name` (tried in registration order). The
    readers call it (and `READERS.register`) after a function, not as its decorator:
    mutation testing skips decorated functions (README, "Testing")."""

    def decorate(test: Sniffer) -> Sniffer:
        SNIFFERS.append((name, test))
        return test

    return decorate


def open_trace(path: Path):
    """Open a trace file for reading text, with a clear error when it is missing or
    gzip-compressed."""
    if not path.exists():
        raise InputError("no such file", file=str(path))
    if path.is_dir():
        raise InputError("is a directory, expected a trace file", file=str(path))
    try:
        with path.open("rb") as handle:
            refuse_compressed(path, handle.read(len(GZIP_MAGIC)))
        return path.open("r", encoding="utf-8-sig", errors="strict", newline="")
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", file=str(path)) from None


GZIP_MAGIC = b"\x1f\x8b"  # the first bytes of every gzip file (RFC 1952)


def refuse_compressed(path: Path, head: bytes) -> None:
    """An InputError when `head` (the file's first bytes) starts a gzip file: the readers
    read text, so say how to make it text rather than "binary content"."""
    if head.startswith(GZIP_MAGIC):
        shown = path.name if path.suffix == ".gz" else f"-c {path.name} > TRACE"
        raise InputError(f"gzip-compressed; decompress it first (gunzip {shown}) and give "
                         "the decompressed file", file=str(path))


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) for each non-blank line, read a line at a time with at most
    MAX_LINE_CHARS held (a 1 GB line, or /dev/zero, is refused, not loaded); binary content
    is an InputError naming the line (docs/input-rules.md I7)."""
    line_no = 0
    with open_trace(path) as handle:
        try:
            while raw := handle.readline(MAX_LINE_CHARS + 1):
                line_no += 1
                if len(raw) > MAX_LINE_CHARS and not raw.endswith("\n"):
                    raise InputError(f"line longer than {MAX_LINE_CHARS:,} characters; not a "
                                     "trace line", file=str(path), line=line_no)
                if raw.strip():
                    yield line_no, raw
        except UnicodeDecodeError:
            raise InputError("not a UTF-8 text file", file=str(path),
                             line=first_undecodable_line(path)) from None


def first_undecodable_line(path: Path) -> int | None:
    """The number of the first line that is not UTF-8 (text reading decodes ahead by
    blocks, so its error does not say which line)."""
    with path.open("rb") as handle:
        line_no = 0
        while raw := handle.readline(MAX_LINE_CHARS + 1):
            line_no += 1
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return line_no
    return None


def read_json_lines(
    path: Path, ctx: ReadContext, parse: Callable[[dict, int, dict], Request]
) -> list[Request]:
    """Stream a JSON-lines trace: `parse(obj, request_id, where)` validates one decoded line
    and builds its request, raising InputError (with `where`: file and line) when it is bad;
    a bad line stops the read, or is counted and skipped under skip_bad_lines."""
    requests: list[Request] = []
    for line_no, raw in numbered_lines(path):
        if ctx.full(len(requests)):
            break
        where = {"file": str(path), "line": line_no}
        try:
            requests.append(parse(decode_json_line(raw, where), len(requests), where))
        except InputError as error:
            ctx.bad(error)
    return requests


def _head(path: Path) -> tuple[object, str]:
    """The first non-blank line decoded as JSON (or None) and the file's first bytes."""
    with path.open("rb") as handle:
        data = handle.read(SNIFF_BYTES)
    refuse_compressed(path, data)
    if b"\x00" in data:
        raise InputError("binary content; not a trace file", file=str(path))
    text = data.decode("utf-8", errors="replace").lstrip("\ufeff")
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        obj = json.loads(first)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        obj = None
    return obj, text


def rows_block_size(path: str | Path, format_name: str) -> int | None:
    """The page size a Mooncake JSONL or Parquet file's first row states in its own
    `block_size` (what `prefixsim trace convert` writes for pages other than 512 tokens, and
    what the readers use for that row over any --block-size), or None where it states none
    or cannot be read here (the reader then says what is wrong)."""
    path = Path(path)
    value: object = None
    try:
        if format_name == "mooncake" and path.is_file():
            first, _ = _head(path)
            value = first.get("block_size") if isinstance(first, dict) else None
        elif format_name == "parquet" and path.is_file():
            handle = pq.ParquetFile(path)
            if "block_size" in handle.schema_arrow.names and handle.metadata.num_row_groups:
                column = handle.read_row_group(0, columns=["block_size"]).column(0)
                value = column[0].as_py() if len(column) else None
    except (InputError, OSError, ValueError, pa.ArrowException):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def detect_format(path: str | Path) -> str:
    """Guess the format of a file or folder from its content."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such file or folder", file=str(path))
    if path.is_dir():
        return detect_folder(path)
    try:
        with path.open("rb") as handle:
            if handle.read(4) == PARQUET_MAGIC:
                return "parquet"
        obj, text = _head(path)
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", file=str(path)) from None
    for name, test in SNIFFERS:
        if test(obj, text, path):
            return name
    raise InputError(
        f"cannot detect the trace format from its first line ({_first_line_shown(obj, text)});"
        f" pass --trace-format ({', '.join(READERS.names())})",
        file=str(path),
    )


FIRST_LINE_SHOWN = 80  # characters of an undetected file's first line in its refusal


def _first_line_shown(obj: object, text: str) -> str:
    """What the format detection saw: a JSON object's keys, else the first line (cut)."""
    if isinstance(obj, dict):
        return "keys " + ", ".join(map(str, list(obj)[:12])) + (", ..." if len(obj) > 12 else "")
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not first:
        return "empty"
    return first if len(first) <= FIRST_LINE_SHOWN else first[:FIRST_LINE_SHOWN] + " ..."


# Folder layouts a reader can take whole: (format, test(folder)).
FOLDER_SNIFFERS: list[tuple[str, Callable[[Path], bool]]] = []


def trace_files(folder: Path) -> list[Path]:
    """The visible regular files of a folder, sorted by name."""
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))


def detect_folder(folder: Path) -> str:
    for name, test in FOLDER_SNIFFERS:
        if test(folder):
            return name
    raise InputError(
        "this folder is not one trace (a RAGPulse or kv-cache-tester folder); "
        "give one of its files",
        file=str(folder),
    )


# Formats whose page ids come from a declared prefix model (filled by trace/lengths.py).
PREFIX_MODEL_FORMATS: set[str] = set()


def check_prefix_model_format(format_name: str, prefix_model: str) -> None:
    """A synthetic prefix model on a format that has its own page ids would be ignored yet
    written to the run's config: refused (docs/input-rules.md I8)."""
    if prefix_model != "none" and format_name not in PREFIX_MODEL_FORMATS:
        raise InputError(f"{prefix_model!r} applies to lengths-only traces "
                         f"({', '.join(sorted(PREFIX_MODEL_FORMATS))}); a {format_name} trace "
                         "has its own page ids", field="trace.prefix_model")


def read_trace(
    path: str | Path,
    format: str | None = None,
    options: ReadOptions | None = None,
) -> TraceData:
    """Read a trace file or folder into requests sorted by arrival (stable on file order).

    Every command sees time one way: arrivals are shifted so the first is at t = 0 (seconds;
    `TraceData.time_shift_s` says by how much) and records out of order are counted
    (`reordered_rows`). Request ids are renumbered 0.. in arrival order. When any request has
    a namespace, page ids are renumbered per (namespace, id) (trace/namespaces.py,
    docs/cache-semantics.md R2).
    """
    path = Path(path)
    options = options or ReadOptions()
    if options.block_size is not None and options.block_size < 1:
        raise InputError(f"must be >= 1, got {options.block_size}", field="trace.block_size")
    name = format or detect_format(path)
    if name not in READERS:
        raise InputError(
            f"unknown trace format {name!r} (valid: {', '.join(READERS.names())})",
            field="trace.format",
        )
    check_prefix_model_format(name, options.prefix_model)
    ctx = ReadContext(options)
    requests = READERS.build(name, path=path, ctx=ctx)
    if not requests:
        where = ctx.first_skipped
        raise InputError(
            "the trace holds no requests"
            + (f" ({ctx.skipped_lines} bad lines skipped, first: {where})" if where else ""),
            file=str(path),
        )
    if isinstance(requests, RequestColumns):
        return _columns_data(requests, path, name, ctx)
    reordered = _reordered(requests)
    order = sorted(range(len(requests)), key=lambda i: requests[i].arrival_s)
    start = requests[order[0]].arrival_s
    end = requests[order[-1]].arrival_s
    if end - start > MAX_SPAN_S:
        raise InputError(
            f"arrivals span {end - start:.3g} s (over {MAX_SPAN_S:g} s, ~31 years): is the "
            "time unit right?", file=str(path), field="timestamp")
    shift = -start
    ordered = []
    for new_id, index in enumerate(order):
        request = requests[index]
        requests[index] = None  # type: ignore[call-overload]  (free as we go)
        if request.request_id != new_id or shift:
            request = replace(request, request_id=new_id, arrival_s=request.arrival_s + shift)
        ordered.append(request)
    return TraceData(separate_namespaces(ordered), name, ctx.skipped_lines, ctx.labels,
                     time_shift_s=start, reordered_rows=reordered)


def _columns_data(columns: RequestColumns, path: Path, name: str,
                  ctx: ReadContext) -> TraceData:
    """read_trace's arrival order, time shift and renumbering, on columns (a reader that
    gives columns gives no namespaces)."""
    arrivals = columns.arrival_s
    latest = np.maximum.accumulate(arrivals)
    reordered = int(np.sum(arrivals[1:] < latest[:-1]))
    start, end = float(arrivals.min()), float(arrivals.max())
    if end - start > MAX_SPAN_S:
        raise InputError(
            f"arrivals span {end - start:.3g} s (over {MAX_SPAN_S:g} s, ~31 years): is the "
            "time unit right?", file=str(path), field="timestamp")
    if reordered:
        columns = columns.take(np.argsort(arrivals, kind="stable"))
    return TraceData(columns.renumbered(-start), name, ctx.skipped_lines, ctx.labels,
                     time_shift_s=start, reordered_rows=reordered)


def _reordered(requests: list[Request]) -> int:
    """Records that arrive before some record earlier in the file."""
    latest = float("-inf")
    count = 0
    for request in requests:
        if request.arrival_s < latest:
            count += 1
        else:
            latest = request.arrival_s
    return count


def load_trace(
    path: str | Path,
    format: str | None = None,
    block_size: int | None = None,
    max_requests: int | None = None,
    skip_bad_lines: bool = False,
) -> Sequence[Request]:
    """Read a trace into its requests sorted by arrival (see `read_trace`).

    Returns a `Sequence[Request]`: a list of records, or, on the Mooncake and Parquet fast
    paths, a read-only `RequestColumns` (trace/columns.py) that builds each record when it
    is read. Index, iterate or slice it; call `list(...)` where a list is needed."""
    options = ReadOptions(block_size=block_size, max_requests=max_requests,
                          skip_bad_lines=skip_bad_lines)
    return read_trace(path, format, options).requests
