"""Atomic writes shared by every subcommand: a file or a results folder appears complete or
not at all, with the permissions an ordinary file or folder gets (the temporary ones that
`tempfile` makes are private). Choosing what to write is each subcommand's job."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_file(path: Path, write: Callable[[Path], None]) -> None:
    """`write(temp)` fills a temporary sibling of `path`, renamed onto `path` when done."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(handle)
    try:
        write(Path(temp))
        os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def write_bytes(path: Path, content: bytes) -> None:
    write_file(path, lambda temp: temp.write_bytes(content))


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_folder(out_dir: Path, fill: Callable[[Path], None], owned: frozenset[str]) -> None:
    """`fill(staging)` writes a results folder's files into a staging sibling. A new
    `out_dir` is that folder renamed into place; into an existing one each file is moved
    atomically, and files named in `owned` that this write did not produce are removed, so
    no result of an earlier run is left beside the new ones (nothing else is touched)."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        os.chmod(staging, 0o777 & ~_umask())
        fill(staging)
        if out_dir.exists():
            written = {item.name for item in staging.iterdir()}
            for item in staging.iterdir():
                os.replace(item, out_dir / item.name)
            for stale in owned - written:
                (out_dir / stale).unlink(missing_ok=True)
            staging.rmdir()
        else:
            os.rename(staging, out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
