"""Resuming a sweep folder whose runs were named by an older release.

A run id is a readable part and a hash of the whole config (spec.py); only the readable
part has changed between releases (`none-10-239960da` became `lru-unbounded-ttl10-239960da`),
so a folder under `runs/` whose hash part matches exactly one planned point, and whose own
name is planned by no point, is the same run under its old name: `adopt_renamed_runs` moves
it to the new name (and its run.json's `run_id` with it) before the resume looks for
finished runs. A hash part shared by two planned points, or a folder that already exists
under the new name, is left alone (then that run simply runs again). A folder whose hash
part matches no planned point is a run of another config (another spec, or defaults that
changed, such as the scheduler limits): `foreign_runs` names those, left as they are.
Touches only `runs/<old id>/`; reading and writing the rest of the folder is store.py's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from prefixsim.sweep.spec import SweepPoint, id_hash
from prefixsim.sweep.store import RUNS, run_dir


def adopt_renamed_runs(out_dir: Path, points: Sequence[SweepPoint]) -> list[tuple[str, str]]:
    """Rename `runs/<old id>/` to `runs/<new id>/` for every run of `points` found under an
    older id with the same hash part; returns the (old, new) pairs renamed."""
    runs = out_dir / RUNS
    if not runs.is_dir() or runs.is_symlink():
        return []
    planned = {p.run_id for p in points}
    hashes = Counter(id_hash(p.run_id) for p in points)
    by_hash = {id_hash(p.run_id): p.run_id for p in points if hashes[id_hash(p.run_id)] == 1}
    renamed = []
    for folder in sorted(runs.iterdir()):
        old = folder.name
        new = by_hash.get(id_hash(old))
        if (new is None or old in planned or old.startswith(".") or folder.is_symlink()
                or not folder.is_dir() or run_dir(out_dir, new).exists()):
            continue
        folder.rename(run_dir(out_dir, new))
        _rename_in_meta(run_dir(out_dir, new) / "run.json", new)
        renamed.append((old, new))
    return renamed


def foreign_runs(out_dir: Path, points: Sequence[SweepPoint]) -> list[str]:
    """The run folders under `runs/` that are no point of `points` (after adoption), sorted:
    runs of another config, which a resume neither reuses nor removes."""
    runs = out_dir / RUNS
    if not runs.is_dir() or runs.is_symlink():
        return []
    planned = {p.run_id for p in points}
    return sorted(f.name for f in runs.iterdir()
                  if f.is_dir() and not f.is_symlink() and not f.name.startswith(".")
                  and f.name not in planned)


def _rename_in_meta(path: Path, run_id: str) -> None:
    """Set run.json's `run_id` to the new id (a damaged or absent file is left as it is)."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(meta, dict):
        meta["run_id"] = run_id
        path.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
