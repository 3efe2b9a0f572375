"""What a report reads: a run folder or a sweep folder, as one table plus per-run frames.

A sweep folder has `sweep.parquet` (one row per run), `sweep.json` (name, swept keys, the
command) and `runs/<run_id>/`; a run folder has `summary.json` and is read as a one-row
table. Per-run `requests.parquet`, `timeseries.parquet` and `config.yaml` are read on demand
and may be absent (then the plots or header lines needing them say so), and so is a run's
whole summary.json (its `stages` list, docs/load.md). A capacity folder is a sweep folder
with `capacity.parquet` (one row per probe) and `capacity.json` (the answer), read with it
into `capacity`. A sweep killed
before its first `sweep.parquet` is read from `sweep.json` and the finished run folders
(their run.json and summary.json). Run ids read from a table must be plain names (no `/`,
no `..`), and a run folder or `runs/` that is a symlink is refused, so a results folder from
someone else cannot make the report read outside it. This module reads files only; it
never writes.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import yaml

from prefixsim.config.units import quantity, unit_of
from prefixsim.errors import InputError
from prefixsim.metrics.schema import numeric_key
from prefixsim.report.format import short_number, significant

DAMAGED = "damaged"  # the status of a run whose files cannot be read (as sweep/store.py)
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


@dataclass(frozen=True)
class Capacity:
    """A capacity folder's `capacity.parquet` (probes) and `capacity.json` (answer)."""

    probes: pd.DataFrame
    answer: dict


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
    capacity: Capacity | None = None  # a capacity folder's probes and answer
    _frames: dict[tuple[str, str], pd.DataFrame | None] = field(default_factory=dict)
    _configs: dict[str, dict | None] = field(default_factory=dict)
    _summaries: dict[str, dict] = field(default_factory=dict)
    damaged: set[str] = field(default_factory=set)  # runs with a file that cannot be read

    def gaps(self) -> str | None:
        """One line saying how many planned runs are missing (no finished folder) and how
        many are damaged (a file that cannot be read), or None when none are
        (docs/input-rules.md I14: the report draws the rest)."""
        planned = self.meta.get("run_ids")
        present = set(self.table["run_id"]) if "run_id" in self.table else set()
        missing = [r for r in planned if r not in present] if isinstance(planned, list) else []
        damaged = set(self.damaged)
        if "status" in self.table:
            damaged |= set(self.table.loc[self.table["status"] == DAMAGED, "run_id"])
        if not missing and not damaged:
            return None
        total = len(planned) if isinstance(planned, list) else len(present)
        return (f"{len(missing)} of {total} runs missing, {len(damaged)} damaged; "
                "the report draws the rest")

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
            self._frames[key] = self._read_frame(run_id, self.run_dirs[run_id] / f"{name}.parquet")
        return self._frames[key]

    def _read_frame(self, run_id: str, path: Path) -> pd.DataFrame | None:
        """A run's Parquet file, or None when absent or damaged (the run is then counted
        as damaged)."""
        if not path.is_file():
            return None
        try:
            return pd.read_parquet(path)
        except (pa.ArrowException, OSError, ValueError):
            self.damaged.add(run_id)
            return None

    def config(self, run_id: str) -> dict | None:
        """The effective config.yaml of one run as a mapping, or None when absent."""
        if run_id not in self._configs:
            path = self.run_dirs[run_id] / "config.yaml"
            try:
                loaded = yaml.safe_load(path.read_text(encoding="utf-8")) \
                    if path.is_file() else None
            except (OSError, ValueError, yaml.YAMLError):
                self.damaged.add(run_id)
                loaded = None
            self._configs[run_id] = loaded if isinstance(loaded, dict) else None
        return self._configs[run_id]

    def summary(self, run_id: str) -> dict:
        """The whole summary.json of one run (lists such as `stages` included), or {} (a
        damaged one: unreadable, or a number's key holding something else)."""
        if run_id not in self._summaries:
            path = self.run_dirs[run_id] / "summary.json"
            summary = _json_or_none(path) if path.is_file() else {}
            if summary is None or misread_number(summary) is not None:
                summary = None
                self.damaged.add(run_id)
            self._summaries[run_id] = summary or {}
        return self._summaries[run_id]

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

    def label(self, run_id: str, omit: tuple[str, ...] = (),
              among: list[str] | None = None) -> str:
        """A short legend label: the run's swept values (but `omit`, and but those all of
        `among`, the runs it is drawn with, share), else its id."""
        columns = [c for c in self.swept if c not in omit and c in self.table]
        if among is not None and len(among) > 1:
            rows = self.table[self.table["run_id"].isin(among)]
            varying = [c for c in columns if rows[c].astype(str).nunique(dropna=False) > 1]
            columns = varying or columns
        if not columns:
            return run_id
        row = self.table[self.table["run_id"] == run_id].iloc[0]
        return swept_text(row, columns) or run_id


TIMED_ONLY = ("router_name", "engine_replicas", "replicas")  # nothing to a cache-only run
COLOCATED_ONLY = ("engine_replicas", "replicas")  # nothing to a disaggregated run
SPLIT_ONLY = ("engine_prefill_replicas", "prefill_replicas", "engine_decode_replicas",
              "decode_replicas")  # unset (none) in a colocated run


def applies(column: str, row: pd.Series) -> bool:
    """Whether `column` means something for the run of `row`: the router and the replicas
    do not for a cache-only run; `replicas` does not for a run split into prefill and
    decode replicas (it runs those), and the prefill and decode counts left unset do not
    for a colocated one (a label `replicas=1, prefill_replicas=2` or
    `replicas=4, prefill_replicas=none` says more than the run is)."""
    if column in TIMED_ONLY and _set(row, "cache_only") and bool(row["cache_only"]):
        return False
    if column in COLOCATED_ONLY and any(_set(row, c) for c in SPLIT_ONLY):
        return False
    return not (column in SPLIT_ONLY and not _set(row, column))


def _set(row: pd.Series, column: str) -> bool:
    """Whether the row holds a value in `column` (not missing, None or NaN)."""
    if column not in row:
        return False
    value = row[column]
    return value is not None and value == value


def swept_text(row: pd.Series, columns: list[str]) -> str:
    """`mode=timed, router=prefix_aware, capacity=10k`: the row's values of `columns` that
    apply to it, as every label and answer shows them."""
    return ", ".join(f"{short_name(c)}={show_swept(c, row[c])}" for c in columns
                     if applies(c, row))


def short_name(column: str) -> str:
    """`cache_capacity_tokens` -> `capacity`, `router_name` -> `router`, `cache_ttl_s` ->
    `ttl`, `engine_prefill_replicas` -> `prefill_replicas`: a column name short enough
    for a legend."""
    if column == "cache_only":
        return "mode"
    name = column.removeprefix("cache_").removeprefix("engine_")
    for suffix in ("_tokens", "_name", "_s"):
        name = name.removesuffix(suffix)
    return name or column


SHORT_TOKENS_FROM = 100_000  # a token count from here is shown as 200k, 2M (8192 as written)


def show_swept(column: str, value: object) -> str:
    """A swept value as every label and title shows it: a capacity as 5k or `unbounded`,
    other token counts (a host tier's capacity, a token budget) as 2M or `none`, a TTL as
    10 s or `none`, a mapping without its quotes, anything else as written."""
    text = json.dumps(value) if isinstance(value, dict) else _show(value)
    if column == "cache_capacity_tokens":
        return "unbounded" if text == "none" else short_number(float(value))  # type: ignore[arg-type]
    if unit_of(column) == "tokens" and isinstance(value, (int, float)) and text != "none" \
            and not isinstance(value, bool) and abs(value) >= SHORT_TOKENS_FROM:
        return short_number(float(value))
    if column == "cache_ttl_s" and text != "none":
        return f"{significant(float(value), 6)} s"  # type: ignore[arg-type]
    if column == "cache_only" and text != "none":
        return "cache-only" if text in ("True", "true", "1") else "timed"
    if text.startswith("{"):  # a mapping: {capacity_tokens: unbounded, ...}, not ...: null
        only = _capacity_only(text)
        if only is not None:  # a pool's {capacity_tokens: null} -> unbounded, 5000 -> 5k
            return show_swept("cache_capacity_tokens", only)
        return re.sub(r"(capacity_tokens: )null\b", r"\1unbounded", text.replace('"', ""))
    return text


def _capacity_only(text: str) -> float | None:
    """The capacity of a mapping that holds `capacity_tokens` only (NaN when null), else
    None."""
    try:
        mapping = json.loads(text)
    except ValueError:
        return None
    if not isinstance(mapping, dict) or set(mapping) != {"capacity_tokens"}:
        return None
    value = mapping["capacity_tokens"]
    if value is None:
        return math.nan
    return float(value) if isinstance(value, (int, float)) else None


def _show(value: object) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "none"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _read_text(path: Path) -> str:
    """A text file shown in the report (spec.yaml, config.yaml), damaged bytes replaced."""
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    except OSError:
        return ""


def load_report_data(path: str | Path) -> ReportData:
    """Read a sweep folder (sweep.parquet) or a run folder (summary.json)."""
    folder = Path(path)
    if not folder.is_dir():
        raise InputError("no such folder (expected a run or sweep results folder)",
                         file=str(folder))
    meta_path = folder / "sweep.json"
    if (folder / "sweep.parquet").is_file() or meta_path.is_file():
        meta = _read_json(meta_path) if meta_path.is_file() else {}
        table = _read_table(folder / "sweep.parquet")
        if table is None:  # killed before the first table refresh (or the table is damaged):
            table = _table_from_runs(folder, meta)  # read the finished run folders
        swept = [c for c in meta.get("swept_columns", []) if c in table]
        table = per_replica_capacity(_swept_numbers(table, swept), swept)
        run_dirs = {rid: _run_dir(folder, rid) for rid in table.get("run_id", [])}
        name = meta.get("name") or folder.name
        kind = meta.get("kind", "sweep")  # a tune folder has the sweep layout
        return ReportData(title=f"prefixsim {kind}: {name}", kind="sweep", table=table,
                          swept=swept, run_dirs=run_dirs,
                          config_text=_read_text(folder / "spec.yaml"), meta=meta,
                          capacity=_read_capacity(folder))
    if (folder / "summary.json").is_file():
        summary = _read_json(folder / "summary.json")
        fault = misread_number(summary)
        if fault is not None:
            raise InputError(fault, file=str(folder / "summary.json"))
        scalars = {k: v for k, v in summary.items()
                   if v is None or isinstance(v, (bool, int, float, str))}
        table = per_replica_capacity(
            pd.DataFrame([{"run_id": folder.name, "status": "ok", **scalars}]), [])
        return ReportData(title=f"prefixsim run: {folder.name}", kind="run", table=table,
                          swept=[], run_dirs={folder.name: folder},
                          config_text=_read_text(folder / "config.yaml"))
    raise InputError("not a results folder (no sweep.parquet or summary.json)",
                     file=str(folder))


def _swept_numbers(table: pd.DataFrame, swept: list[str]) -> pd.DataFrame:
    """Swept columns of values written with a unit (`200k`, `5m`: a sweep table from
    before the sweep kept their numbers) as those numbers, where every value reads as one
    in the unit the column's name gives (`cache_capacity_tokens`: tokens)."""
    for column in swept:
        unit = unit_of(column)
        values = table[column]
        if unit is None or pd.api.types.is_numeric_dtype(values):
            continue
        try:
            numbers = [None if v is None or v != v else
                       v if isinstance(v, (int, float)) and not isinstance(v, bool) else
                       quantity(str(v), unit, bare=True) for v in values]
        except ValueError:
            continue
        table = table.assign(**{column: pd.to_numeric(pd.Series(numbers, index=table.index))})
    return table


def per_replica_capacity(table: pd.DataFrame, swept: list[str]) -> pd.DataFrame:
    """`cache_capacity_tokens` per replica in every row, as a swept value (the config's
    `cache.capacity_tokens`) already is: a summary counts it over all replicas, so where the
    column comes from the summaries it is divided by their `replicas`."""
    column = "cache_capacity_tokens"
    if column in swept or column not in table or "replicas" not in table:
        return table
    replicas = pd.to_numeric(table["replicas"], errors="coerce").fillna(1).clip(lower=1)
    table = table.copy()
    table[column] = pd.to_numeric(table[column], errors="coerce") / replicas
    return table


def _read_table(path: Path) -> pd.DataFrame | None:
    """sweep.parquet, or None when it is absent or cannot be read (truncated, not Parquet)."""
    if not path.is_file():
        return None
    try:
        return pd.read_parquet(path)
    except (pa.ArrowException, OSError, ValueError):
        return None


def _read_capacity(folder: Path) -> Capacity | None:
    probes, answer = folder / "capacity.parquet", folder / "capacity.json"
    if not (probes.is_file() and answer.is_file()):
        return None
    return Capacity(pd.read_parquet(probes), _read_json(answer))


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        raise InputError("not a readable JSON file", file=str(path)) from None
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", file=str(path))
    return data


def _run_dir(folder: Path, run_id: object) -> Path:
    """`folder/runs/<run_id>`, refusing an id that is not a plain name and symlinks."""
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id) or ".." in run_id:
        raise InputError(f"not a run id: {run_id!r}", file=str(folder / "sweep.parquet"),
                         field="run_id")
    runs = folder / "runs"
    if runs.is_symlink() or (runs / run_id).is_symlink():
        raise InputError("is a symlink; a results folder's runs must be real folders",
                         file=str(runs if runs.is_symlink() else runs / run_id))
    return runs / run_id


def _table_from_runs(folder: Path, meta: dict) -> pd.DataFrame:
    """One row per finished run folder, in the plan's order: run_id, status, error, the
    swept parameters (dots as underscores) and the summary's scalars."""
    rows = []
    for run_id in meta.get("run_ids", []):
        path = _run_dir(folder, run_id)
        if not (path / "run.json").is_file():
            continue
        run = _json_or_none(path / "run.json")
        if run is None:
            rows.append({"run_id": run_id, "status": DAMAGED, "error": "run.json unreadable"})
            continue
        row: dict[str, object] = {"run_id": run_id, "status": run.get("status"),
                                  "error": run.get("error")}
        params = run.get("params")
        for key, value in (params if isinstance(params, dict) else {}).items():
            row[str(key).replace(".", "_")] = value if _scalar(value) else json.dumps(value)
        if run.get("status") == "ok":
            summary = _json_or_none(path / "summary.json")
            fault = None if summary is None else misread_number(summary)
            if summary is None:
                row["status"], row["error"] = DAMAGED, "summary.json missing or unreadable"
            elif fault is not None:
                row["status"], row["error"] = DAMAGED, f"summary.json: {fault}"
            else:
                row.update({k: v for k, v in summary.items() if k not in row and _scalar(v)})
        rows.append(row)
    if not rows:
        raise InputError("a sweep folder with no finished run yet", file=str(folder))
    return pd.DataFrame(rows)


def misread_number(summary: dict) -> str | None:
    """What is wrong with a summary whose key holds something else than the number the
    schema says it holds (a hand-edited `"cache_token_hit_rate": "abc"`), else None."""
    for key, value in summary.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if value is not None and not number and numeric_key(key):
            return f"{key}: expected a number, got {value!r}"
    return None


def _json_or_none(path: Path) -> dict | None:
    try:
        return _read_json(path)
    except InputError:
        return None


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))
