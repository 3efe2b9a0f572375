"""A sweep's folder on disk: one folder per finished run, `sweep.parquet`, `sweep.json`.

```
DIR/spec.yaml            the spec as given
DIR/sweep.json           name, swept keys and run ids in plan order (what the report reads)
DIR/sweep.parquet        one row per run: run_id, status, error, swept keys, summary scalars
DIR/runs/<run_id>/       run.json (status, error, params), summary.json, config.yaml,
                         requests.parquet, timeseries.parquet (when not empty)
```

Every write is atomic: a run folder is built under a temporary name and renamed into place,
files are written beside their target and `os.replace`d. A run folder therefore exists only
when complete, so killing a sweep loses no finished run and `--resume` reruns exactly the
points whose folder is missing or says `failed`. Files and folders get the modes the umask
gives ordinary ones. `DIR/.lock` is held (flock) by the sweep writing the folder, so a second
one into the same folder is refused; the kernel drops the lock when the holder dies. A
symlinked `runs/` is refused (a resume would otherwise clean staging entries in its target).
A tune's folder may be shared by processes at once: `read_run` reads a run folder as one
snapshot while another writer replaces it, and a tune cleans only stale staging entries.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from prefixsim._version import __version__
from prefixsim.errors import InputError, naming_the_file
from prefixsim.sweep.spec import SweepPoint, column_name
from prefixsim.sweep.worker import OK, RunOutcome

DAMAGED = "damaged"  # a finished run whose summary.json is gone or unreadable

RUNS = "runs"
STAGING_PREFIX = ".tmp-"
LOCK = ".lock"
REPLACING_WAIT_S = 5.0  # longest a reader waits for a folder another writer is replacing
STALE_STAGING_S = 600.0  # a shared tune folder's staging entries older than this are litter


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# temporary files are created 0600; results get the modes of any file or folder made here
FILE_MODE = 0o666 & ~_umask()
DIR_MODE = 0o777 & ~_umask()


RUN_SUMMARY = "summary.json"  # what `prefixsim run` writes at the top of its folder
SWEEP_MARKS = ("sweep.json", "sweep.parquet")  # what a sweep, tune or capacity folder holds


def check_sweep_folder(out_dir: Path) -> None:
    """`out_dir` is a folder or absent, holds no single run's results (its summary.json
    would sit beside the sweep's, and `report` would read one of the two), and its `runs/`
    is not a symlink (InputError)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError("exists and is not a folder", file=str(out_dir))
    if (out_dir / RUN_SUMMARY).exists():
        raise InputError(f"holds a run's results ({RUN_SUMMARY}); a sweep's would mix with "
                         "them: choose another -o folder", file=str(out_dir))
    if (out_dir / RUNS).is_symlink():
        raise InputError("runs/ is a symlink; a sweep folder's runs/ must be a real folder",
                         file=str(out_dir))


@contextlib.contextmanager
def lock_sweep_folder(out_dir: Path) -> Iterator[None]:
    """Create `out_dir` and hold its lock file for the block; InputError when another sweep
    holds it (its pid is named)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    except OSError as exc:
        raise InputError(f"cannot create the sweep lock ({exc.strerror})",
                         file=str(path)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            raise InputError(f"another sweep (pid {holder}) is writing this folder; wait for "
                             "it or choose another -o folder", file=str(out_dir)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` via a temporary sibling and one rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=STAGING_PREFIX, dir=path.parent)
    try:
        with naming_the_file(path), os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temp, FILE_MODE)
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def write_parquet_atomic(path: Path, frame: pd.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=STAGING_PREFIX, dir=path.parent)
    os.close(handle)
    try:
        with naming_the_file(path):
            frame.to_parquet(temp, index=False)
        os.chmod(temp, FILE_MODE)
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def run_dir(out_dir: Path, run_id: str) -> Path:
    return out_dir / RUNS / run_id


def clean_staging(out_dir: Path, older_than_s: float = 0.0) -> None:
    """Remove half-written run folders left by a killed sweep. A tune's folder may be shared
    by processes writing at once (they hold no lock), so a tune passes `older_than_s`
    (STALE_STAGING_S) and leaves the staging folders another process is filling."""
    runs = out_dir / RUNS
    if runs.is_symlink():
        raise InputError("runs/ is a symlink; refusing to clean inside it", file=str(out_dir))
    if not runs.is_dir():
        return
    now = time.time()
    for item in runs.glob(f"{STAGING_PREFIX}*"):
        try:
            if older_than_s > 0 and now - item.lstat().st_mtime < older_than_s:
                continue
            shutil.rmtree(item, ignore_errors=True) if item.is_dir() else item.unlink()
        except FileNotFoundError:
            pass  # its writer moved or removed it meanwhile


def _move_into_place(staging: Path, target: Path) -> None:
    """Rename the finished `staging` folder to `target`, replacing a folder there. Two
    writers of one run (two processes resuming one tune, both re-running its base) may race:
    each moves the folder it finds aside to a name of its own and tries again, so the last
    complete folder wins and neither fails on the other's move."""
    while True:
        try:
            os.rename(staging, target)  # fails while a non-empty folder is there
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        old = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}old.{target.name}.",
                                    dir=target.parent))
        try:
            os.rename(target, old)  # onto the empty folder just made: replaces it
        except FileNotFoundError:
            pass  # another writer moved it first
        shutil.rmtree(old, ignore_errors=True)


def write_run(out_dir: Path, outcome: RunOutcome) -> Path:
    """Store one outcome as `runs/<run_id>/`, replacing an older folder of that id."""
    target = run_dir(out_dir, outcome.run_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{outcome.run_id}.",
                                    dir=target.parent))
    os.chmod(staging, DIR_MODE)
    try:
        with naming_the_file(target):
            _fill_run(staging, outcome)
        _move_into_place(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _fill_run(staging: Path, outcome: RunOutcome) -> None:
    if outcome.status == OK:
        (staging / "summary.json").write_text(
            json.dumps(outcome.summary, indent=2, default=str) + "\n", encoding="utf-8")
        if not outcome.requests.empty:
            outcome.requests.to_parquet(staging / "requests.parquet", index=False)
        if not outcome.timeseries.empty:
            outcome.timeseries.to_parquet(staging / "timeseries.parquet", index=False)
    (staging / "config.yaml").write_text(outcome.config_yaml, encoding="utf-8")
    meta = {"run_id": outcome.run_id, "status": outcome.status, "error": outcome.error,
            "params": outcome.params, "wall_time_s": outcome.wall_time_s}
    (staging / "run.json").write_text(json.dumps(meta, indent=2, default=str) + "\n",
                                      encoding="utf-8")


def read_run_meta(path: Path) -> dict[str, Any] | None:
    """A run folder's run.json, or None when the folder is absent or unreadable."""
    found = read_run(path)
    return None if found is None else found.meta


@dataclass(frozen=True)
class RunFiles:
    """What one run folder held, all read from the same folder."""

    meta: dict[str, Any]
    summary: dict[str, Any] | None  # None when the run failed or summary.json is damaged
    config_text: str | None


_REPLACED = object()  # the folder was being replaced while it was read


def read_run(path: Path) -> RunFiles | None:
    """run.json, summary.json and config.yaml of one run folder as one snapshot, or None
    when the folder or its run.json is absent or unreadable.

    Another process may be replacing the folder (two tunes on one folder both re-run the
    base, `_move_into_place`): for a moment there is no folder, or the one just opened is
    being removed. A read that lands there while a staging folder of that run exists waits
    for the new folder (up to REPLACING_WAIT_S), so it never pairs one writer's run.json with
    a missing summary."""
    deadline = time.monotonic() + REPLACING_WAIT_S
    while True:
        found = _read_run_once(path)
        if found is not _REPLACED:
            return found  # type: ignore[return-value]
        if time.monotonic() > deadline:
            return None
        time.sleep(0.005)


def _read_run_once(path: Path) -> RunFiles | None | object:
    try:
        folder = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        return _REPLACED if _being_replaced(path) else None
    except OSError:
        return None
    try:
        def read(name: str) -> str | None:
            try:
                with open(name, encoding="utf-8",
                          opener=lambda p, flags: os.open(p, flags, dir_fd=folder)) as handle:
                    return handle.read()
            except FileNotFoundError:
                return None
        meta = _json_mapping(read("run.json"))
        ok = meta is not None and meta.get("status") == OK
        summary = _json_mapping(read("summary.json")) if ok else None
        config = read("config.yaml")
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(folder)
    if (meta is None or (ok and summary is None) or config is None) and _being_replaced(path):
        return _REPLACED
    return None if meta is None else RunFiles(meta, summary, config)


def _json_mapping(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _being_replaced(path: Path) -> bool:
    """A writer of this run id is filling a staging folder or removing the old one."""
    mine = (f"{STAGING_PREFIX}{path.name}.", f"{STAGING_PREFIX}old.{path.name}.")
    try:
        return any(entry.name.startswith(mine) for entry in os.scandir(path.parent))
    except OSError:
        return False


def finished_ids(out_dir: Path, points: Sequence[SweepPoint]) -> set[str]:
    """Run ids of `points` whose folder holds a successful run with a readable summary (a
    folder that lost its summary.json is run again, docs/input-rules.md I14)."""
    done = set()
    for point in points:
        path = run_dir(out_dir, point.run_id)
        found = read_run(path)
        if found is not None and found.meta.get("status") == OK and found.summary is not None:
            done.add(point.run_id)
    return done


def _dotted(tree: dict[str, Any], key: str) -> object:
    """The value at a dotted key of a nested mapping (None where absent)."""
    node: object = tree
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _parquet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Mixed-type object columns (e.g. numbers and names) become strings; a missing cell
    (None, or the NaN a row without the key gets) stays missing, not the text "nan"."""
    for column in frame.columns:
        if frame[column].dtype == object:
            kinds = {type(v) for v in frame[column] if v is not None and v == v}
            if len(kinds) > 1 or (kinds and not kinds <= {str, bool, int, float}):
                frame[column] = [None if v is None or v != v else str(v)
                                 for v in frame[column]]
    return frame


def sweep_table(out_dir: Path, points: Sequence[SweepPoint], keys: Sequence[str]) -> pd.DataFrame:
    """One row per point that has a folder, in plan order: ids, status, swept keys, scalars.

    A swept key that a point does not set shows the point's effective value (the base's).
    """
    rows = []
    for point in points:
        path = run_dir(out_dir, point.run_id)
        found = read_run(path)
        if found is None:
            continue
        meta = found.meta
        row: dict[str, object] = {"run_id": point.run_id, "status": meta.get("status"),
                                  "error": meta.get("error")}
        effective = point.config.model_dump(mode="json")
        for key in keys:
            value = point.params[key] if key in point.params else _dotted(effective, key)
            row[column_name(key)] = value if _is_scalar(value) else json.dumps(value)
        summary = found.summary
        if meta.get("status") == OK and summary is None:
            row["status"], row["error"] = DAMAGED, "summary.json missing or unreadable"
        if summary is not None:
            for key, value in summary.items():
                if key not in row and _is_scalar(value):
                    row[key] = value
        rows.append(row)
    return _parquet_safe(pd.DataFrame(rows))


def write_sweep_meta(out_dir: Path, name: str, keys: Sequence[str],
                     points: Sequence[SweepPoint], spec_yaml: str,
                     command: str | None = None) -> None:
    meta = {"name": name, "swept_keys": list(keys),
            "swept_columns": [column_name(k) for k in keys],
            "run_ids": [p.run_id for p in points],
            "prefixsim_version": __version__, "command": command}
    write_text_atomic(out_dir / "spec.yaml", spec_yaml)
    write_text_atomic(out_dir / "sweep.json", json.dumps(meta, indent=2) + "\n")


def read_sweep_meta(out_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((out_dir / "sweep.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
