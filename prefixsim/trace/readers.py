"""The registry of trace readers and the one entry point that loads a trace file.

A reader is a function `read(path, block_size, max_requests) -> list[Request]` registered
under its format name. Readers stream the file line by line and keep only request records;
they raise `InputError` naming the file, line and field of the first bad record.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from prefixsim.errors import InputError
from prefixsim.registry import Registry
from prefixsim.trace.record import Request

TraceReader = Callable[[Path, int | None, int | None], list[Request]]

READERS: Registry[list[Request]] = Registry("trace format")

# Tokens per page id of each format when the user gives no --block-size (filled by readers).
DEFAULT_BLOCK_SIZES: dict[str, int] = {}


def detect_format(path: Path) -> str:
    """Guess the format of `path` from its first non-empty line."""
    with open_trace(path) as handle:
        for raw in handle:
            line = raw.strip()
            if not line:
                continue
            if line.startswith("{") and '"hash_ids"' in line:
                return "mooncake"
            break
    raise InputError("cannot detect the trace format; pass --trace-format", file=str(path))


def open_trace(path: Path):
    """Open a trace file for reading text, with a clear error when it is missing."""
    if not path.exists():
        raise InputError("no such file", file=str(path))
    if path.is_dir():
        raise InputError("is a directory, expected a trace file", file=str(path))
    return path.open("r", encoding="utf-8", errors="strict")


def load_trace(
    path: str | Path,
    format: str | None = None,
    block_size: int | None = None,
    max_requests: int | None = None,
) -> list[Request]:
    """Read a trace file into request records sorted by arrival (stable on file order)."""
    path = Path(path)
    name = format or detect_format(path)
    if name not in READERS:
        raise InputError(
            f"unknown trace format {name!r} (valid: {', '.join(READERS.names())})",
            field="trace.format",
        )
    requests = READERS.build(name, path=path, block_size=block_size, max_requests=max_requests)
    return sorted(requests, key=lambda r: r.arrival_s)
