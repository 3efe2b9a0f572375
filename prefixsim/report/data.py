"""What a report reads: a run folder or a sweep folder, as one table plus per-run frames.

A sweep folder has `sweep.parquet` (one row per run), `sweep.json` (name, swept keys, the
command) and `runs/<run_id>/`; a run folder has `summary.json` and is read as a one-row
table. Per-run `requests.parquet`, `timeseries.parquet` and `config.yaml` are read on demand
and may be absent (then the plots or header lines needing them say so). This module reads
files only; it never writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from prefixsim.errors import InputError


@dataclass
class ReportData:
    """One row per run in `table`; `swept` names the columns that vary by design."""

    title: str
    kind: str  # "sweep" or "run"
    table: pd.DataFrame
    swept: list[str]
    run_dirs: dict[str, Path]
    config_text: str = ""  # the sweep's spec.yaml or the run's config.yaml
    meta: dict = field(default_factory=dict)  # sweep.json (a sweep) or {} (a run)
    _frames: dict[tuple[str, str], pd.DataFrame | None] = field(default_factory=dict)
    _configs: dict[str, dict | None] = field(default_factory=dict)

    @property
    def ok(self) -> pd.DataFrame:
        """Rows of successful runs."""
        if "status" not in self.table:
            return self.table
        return self.table[self.table["status"] == "ok"]

    def frame(self, run_id: str, name: str) -> pd.DataFrame | None:
        """`requests` or `timeseries` of one run, or None when it was not written."""
        key = (run_id, name)
        if key not in self._frames:
            path = self.run_dirs[run_id] / f"{name}.parquet"
            self._frames[key] = pd.read_parquet(path) if path.is_file() else None
        return self._frames[key]

    def config(self, run_id: str) -> dict | None:
        """The effective config.yaml of one run as a mapping, or None when absent."""
        if run_id not in self._configs:
            path = self.run_dirs[run_id] / "config.yaml"
            loaded = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
            self._configs[run_id] = loaded if isinstance(loaded, dict) else None
        return self._configs[run_id]

    def frames(self, name: str, limit: int | None = None) -> dict[str, pd.DataFrame]:
        """`name` frames of successful runs that have one (plan order, at most `limit`)."""
        found: dict[str, pd.DataFrame] = {}
        for run_id in self.ok["run_id"]:
            frame = self.frame(run_id, name)
            if frame is not None and not frame.empty:
                found[run_id] = frame
                if limit is not None and len(found) >= limit:
                    break
        return found

    def label(self, run_id: str, omit: tuple[str, ...] = ()) -> str:
        """A short legend label: the run's swept values (but `omit`), else its id."""
        columns = [c for c in self.swept if c not in omit]
        if not columns:
            return run_id
        row = self.table[self.table["run_id"] == run_id].iloc[0]
        return ", ".join(f"{short_name(c)}={show_swept(c, row[c])}" for c in columns if c in row)


def short_name(column: str) -> str:
    """`cache_capacity_tokens` -> `capacity`, `router_name` -> `router`, `cache_ttl_s` ->
    `ttl`: a column name short enough for a legend."""
    name = column.removeprefix("cache_")
    for suffix in ("_tokens", "_name", "_s"):
        name = name.removesuffix(suffix)
    return name or column


def show_swept(column: str, value: object) -> str:
    """A swept value as a label shows it: a missing capacity is `unbounded`."""
    text = _show(value)
    return "unbounded" if text == "none" and column == "cache_capacity_tokens" else text


def _show(value: object) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "none"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def load_report_data(path: str | Path) -> ReportData:
    """Read a sweep folder (sweep.parquet) or a run folder (summary.json)."""
    folder = Path(path)
    if not folder.is_dir():
        raise InputError("no such folder (expected a run or sweep results folder)",
                         file=str(folder))
    if (folder / "sweep.parquet").is_file():
        table = pd.read_parquet(folder / "sweep.parquet")
        meta_path = folder / "sweep.json"
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
        swept = [c for c in meta.get("swept_columns", []) if c in table]
        run_dirs = {rid: folder / "runs" / rid for rid in table.get("run_id", [])}
        name = meta.get("name") or folder.name
        kind = meta.get("kind", "sweep")  # a tune folder has the sweep layout
        return ReportData(title=f"prefixsim {kind}: {name}", kind="sweep", table=table,
                          swept=swept, run_dirs=run_dirs,
                          config_text=_read_text(folder / "spec.yaml"), meta=meta)
    if (folder / "summary.json").is_file():
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        scalars = {k: v for k, v in summary.items()
                   if v is None or isinstance(v, (bool, int, float, str))}
        table = pd.DataFrame([{"run_id": folder.name, "status": "ok", **scalars}])
        return ReportData(title=f"prefixsim run: {folder.name}", kind="run", table=table,
                          swept=[], run_dirs={folder.name: folder},
                          config_text=_read_text(folder / "config.yaml"))
    raise InputError("not a results folder (no sweep.parquet or summary.json)",
                     file=str(folder))
