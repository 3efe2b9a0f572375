"""Atomic writes shared by every subcommand: a file or a results folder appears complete or
not at all, with the permissions an ordinary file or folder gets (the temporary ones that
`tempfile` makes are private). Output locations are checked before any work starts
(`check_output_dir`, `check_output_file`), so an unwritable one fails in a second, not after
the simulation; an OS error making the staging sibling or renaming it into place (a place
the checks could not foresee: `/proc`, a folder where a file goes) names the output asked
for, never the staging name, and is the user's to fix (`placing`, exit 2). A default results
folder is never reused: `write_folder(..., fresh=True)`
takes the first of `NAME`, `NAME-2`, ... that does not exist when the results are moved in
(the rename fails on a folder another run just filled, and the next name is tried). Choosing
what to write is each subcommand's job."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from prefixsim.errors import InputError, is_users_os_error, naming_the_file

MAX_FRESH_NAMES = 1000
NAME_MAX_BYTES = 255  # one path component, on every common file system
STAGING_NAME_CHARS = 60  # of the target's name kept in its staging sibling's name


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# errors of making a staging sibling of an output or renaming it into place that say the
# output cannot be at that place (besides the disk's refusals, errors.USERS_ERRNOS)
PLACE_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST,
                          errno.ENOTEMPTY, errno.EINVAL, errno.EXDEV})


@contextlib.contextmanager
def placing(target: Path) -> Iterator[None]:
    """Within the block (making the staging sibling of `target`, the output the user asked
    for, or renaming it onto `target`) an OSError names `target`: one where `target` cannot
    be (PLACE_ERRNOS) becomes an InputError, any other is raised again naming it."""
    try:
        yield
    except OSError as exc:
        words = exc.strerror or str(exc)
        if exc.errno not in PLACE_ERRNOS or is_users_os_error(exc):
            raise OSError(exc.errno, words, str(target)) from exc
        if exc.errno in (errno.EISDIR, errno.EEXIST, errno.ENOTEMPTY) and target.is_dir():
            raise InputError("is a folder, expected a file name", file=str(target)) from None
        raise InputError(f"cannot write here ({words})", file=str(target)) from None


def write_file(path: Path, write: Callable[[Path], None]) -> None:
    """`write(temp)` fills a temporary sibling of `path`, renamed onto `path` when done."""
    with placing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(prefix=f".{path.name[:STAGING_NAME_CHARS]}.",
                                        dir=path.parent)
    os.close(handle)
    try:
        with naming_the_file(path):
            write(Path(temp))
        os.chmod(temp, 0o666 & ~_umask())
        with placing(path):
            os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def write_bytes(path: Path, content: bytes) -> None:
    write_file(path, lambda temp: temp.write_bytes(content))


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def _existing_ancestor(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _check_names(path: Path) -> None:
    """No part of `path` is longer than a file system allows (checked before anything asks
    the file system about `path`, which would fail on it with fewer words)."""
    for part in Path(os.path.abspath(path)).parts:
        if len(os.fsencode(part)) > NAME_MAX_BYTES:
            raise InputError(f"a name longer than {NAME_MAX_BYTES} bytes ({part[:20]}...)",
                             file=str(path))


def _check_writable(path: Path, shown: Path) -> None:
    base = _existing_ancestor(path)
    if not base.is_dir():
        raise InputError(f"cannot write here: {base} is not a folder", file=str(shown))
    if not os.access(base, os.W_OK | os.X_OK):
        raise InputError(f"cannot write here: no write permission in {base}", file=str(shown))


def check_output_dir(path: Path) -> None:
    """A results folder can be made (or written into) at `path`: InputError otherwise."""
    _check_names(path)
    if path.exists() and not path.is_dir():
        raise InputError("exists and is not a folder", file=str(path))
    _check_writable(path, path)


def check_output_file(path: Path) -> None:
    """A file can be written at `path` (a temporary sibling renamed onto it)."""
    _check_names(path)
    if path.is_dir():
        raise InputError("is a folder, expected a file name", file=str(path))
    _check_writable(path.parent, path)


def write_folder(out_dir: Path, fill: Callable[[Path], None], owned: frozenset[str],
                 fresh: bool = False) -> Path:
    """`fill(staging)` writes a results folder's files into a staging sibling. A new
    `out_dir` is that folder renamed into place; into an existing one each file is moved
    atomically, and files named in `owned` that this write did not produce are removed, so
    no result of an earlier run is left beside the new ones (nothing else is touched).
    With `fresh`, an existing folder is never written into: the results go to the first of
    `out_dir`, `out_dir-2`, ... free at that moment. Returns the folder written."""
    made = [folder for folder in (out_dir.parent, *out_dir.parent.parents)
            if not folder.exists()]  # the folders this write creates (removed if it fails)
    with placing(out_dir):
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name[:STAGING_NAME_CHARS]}.",
                                        dir=out_dir.parent))
    try:
        os.chmod(staging, 0o777 & ~_umask())
        try:
            with naming_the_file(out_dir):
                fill(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            for folder in made:  # innermost first; only while empty
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise
        if fresh:
            return _rename_fresh(staging, out_dir)
        if out_dir.exists():
            _move_into(staging, out_dir, owned)
            return out_dir
        try:
            os.rename(staging, out_dir)
        except OSError as exc:  # another writer made it meanwhile: write into it
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not out_dir.is_dir():
                raise
            _move_into(staging, out_dir, owned)
        return out_dir
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _move_into(staging: Path, out_dir: Path, owned: frozenset[str]) -> None:
    """Move each file of `staging` into the existing `out_dir` atomically and remove the
    `owned` files this write did not produce."""
    written = {item.name for item in staging.iterdir()}
    for item in staging.iterdir():
        os.replace(item, out_dir / item.name)
    for stale in owned - written:
        (out_dir / stale).unlink(missing_ok=True)
    staging.rmdir()


def _rename_fresh(staging: Path, out_dir: Path) -> Path:
    for number in range(1, MAX_FRESH_NAMES + 1):
        target = out_dir if number == 1 else out_dir.with_name(f"{out_dir.name}-{number}")
        if target.exists() or target.is_symlink():
            continue
        try:
            os.rename(staging, target)  # fails if another run filled `target` meanwhile
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR):
                continue
            raise
        return target
    raise InputError(f"{MAX_FRESH_NAMES} results folders of this name already exist",
                     file=str(out_dir))
