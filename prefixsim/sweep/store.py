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
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# temporary files are created 0600; results get the modes of any file or folder made here
FILE_MODE = 0o666 & ~_umask()
DIR_MODE = 0o777 & ~_umask()


def check_sweep_folder(out_dir: Path) -> None:
    """`out_dir` is a folder or absent, and its `runs/` is not a symlink (InputError)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError("exists and is not a folder", file=str(out_dir))
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


def clean_staging(out_dir: Path) -> None:
    """Remove half-written run folders left by a killed sweep."""
    runs = out_dir / RUNS
    if runs.is_symlink():
        raise InputError("runs/ is a symlink; refusing to clean inside it", file=str(out_dir))
    if runs.is_dir():
        for item in runs.glob(f"{STAGING_PREFIX}*"):
            shutil.rmtree(item, ignore_errors=True) if item.is_dir() else item.unlink()


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
    try:
        return json.loads((path / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_summary(path: Path) -> dict[str, Any] | None:
    """A run folder's summary.json as a mapping, or None when it is absent or damaged."""
    try:
        summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None


def finished_ids(out_dir: Path, points: Sequence[SweepPoint]) -> set[str]:
    """Run ids of `points` whose folder holds a successful run with a readable summary (a
    folder that lost its summary.json is run again, docs/input-rules.md I14)."""
    done = set()
    for point in points:
        path = run_dir(out_dir, point.run_id)
        meta = read_run_meta(path)
        if meta is not None and meta.get("status") == OK and read_summary(path) is not None:
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
    """Mixed-type object columns (e.g. numbers and names) become strings."""
    for column in frame.columns:
        if frame[column].dtype == object:
            kinds = {type(v) for v in frame[column] if v is not None and v == v}
            if len(kinds) > 1 or (kinds and not kinds <= {str, bool, int, float}):
                frame[column] = [None if v is None else str(v) for v in frame[column]]
    return frame


def sweep_table(out_dir: Path, points: Sequence[SweepPoint], keys: Sequence[str]) -> pd.DataFrame:
    """One row per point that has a folder, in plan order: ids, status, swept keys, scalars.

    A swept key that a point does not set shows the point's effective value (the base's).
    """
    rows = []
    for point in points:
        path = run_dir(out_dir, point.run_id)
        meta = read_run_meta(path)
        if meta is None:
            continue
        row: dict[str, object] = {"run_id": point.run_id, "status": meta.get("status"),
                                  "error": meta.get("error")}
        effective = point.config.model_dump(mode="json")
        for key in keys:
            value = point.params[key] if key in point.params else _dotted(effective, key)
            row[column_name(key)] = value if _is_scalar(value) else json.dumps(value)
        summary = read_summary(path) if meta.get("status") == OK else None
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
