"""The comparison table: one row per run, the figures that answer "which policy, how much
cache, what TTL, and how far from the best possible".

Per run: policy, capacity, TTL and the other swept values; the token-weighted and the
request-weighted hit rate; the difference from the LRU run at the same capacity, TTL, other
swept values and trace part (`match_columns`; blank when there is none, or several, and for
LRU itself, the baseline); the share of the LRU-to-Belady gap it closes, (hit - LRU) /
(Belady - LRU), Belady being the run's own `--bounds` figure or a `belady` run at the same
values; cost and prefill GPU-seconds saved against no cache; p50/p99 TTFT and request
throughput (timed runs); the capacity in GiB of KV and as shares of HBM and of the working
set (units.py). `comparison` computes the raw
values (a DataFrame, for tests and sorting); `COLUMNS` says how each is titled and
formatted (format.py). Columns no run has are left out, and `comparison_notes` says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefixsim.metrics.schema import numeric_key
from prefixsim.report.data import ReportData, applies, short_name, show_swept
from prefixsim.report.figures import show_value
from prefixsim.report.format import (
    capacity,
    gib,
    gpu_seconds,
    integer,
    milliseconds,
    missing,
    percent,
    plain,
    points,
    rate,
    seconds,
    usd,
    yes_no,
)
from prefixsim.report.units import HBM_SHARE, KV_GIB, WORKING_SET_SHARE, capacity_units

POLICY = "cache_policy"
HIT_RATE = "cache_token_hit_rate"
BELADY = "cache_belady_token_hit_rate"
BASELINE = "lru"
MIN_GAP = 0.01  # below 1 pp between LRU and Belady, "share of the gap" is noise


@dataclass(frozen=True)
class Column:
    """A column of the comparison table: raw key, header, tooltip, formatter."""

    key: str
    title: str
    tip: str
    fmt: Callable[[object], str] = plain


COLUMNS: tuple[Column, ...] = (
    Column(HIT_RATE, "hit rate (token-weighted)",
           "cache_hit_tokens / cache_query_tokens: the share of prefill saved", percent),
    Column("cache_request_weighted_hit_rate", "hit rate (request-weighted)",
           "mean over requests of cached / input tokens", percent),
    Column("vs_lru", "vs LRU",
           "hit rate minus LRU's at the same other settings, percentage points", points),
    Column("belady_gap_closed", "LRU-to-Belady gap closed",
           "(hit - LRU) / (Belady - LRU) at the same capacity; blank where Belady is within "
           "1 pp of LRU", percent),
    Column(BELADY, "Belady (offline bound)", "offline Belady at the same capacity", percent),
    Column("cost_saved_usd", "cost saved vs no cache",
           "the price of the same requests without a cache minus with it", usd),
    Column("prefill_gpu_s_saved", "prefill GPU-s saved vs no cache",
           "GPU-seconds of prefill the hits saved against recomputing every prompt "
           "(cost model)", gpu_seconds),
    Column("p50_ttft_ms", "p50 TTFT", "median time to first token", milliseconds),
    Column("p99_ttft_ms", "p99 TTFT", "99th percentile time to first token", milliseconds),
    Column("request_throughput", "throughput", "completed requests per simulated second",
           rate),
    Column("request_goodput", "goodput", "completed requests per simulated second that met "
           "every --goodput SLO (TTFT, TPOT)", rate),
    Column("kept_up", "kept up", "the fleet kept up with the load: at least 98% of the "
           "requests completed and, open loop, no growing TTFT queue (docs/load.md)", yes_no),
    Column("cache_evictions", "evictions", "pages evicted for space", integer),
    Column("cache_expirations", "expirations", "pages freed by TTL expiry", integer),
)
UNIT_COLUMNS: tuple[Column, ...] = (
    Column(KV_GIB, "KV (GiB)", "the capacity's KV bytes for the run's model, KV element type "
           "and tensor parallelism (per replica)", gib),
    Column(HBM_SHARE, "share of HBM", "one GPU's part of that KV over the GPU's memory",
           percent),
    Column(WORKING_SET_SHARE, "share of working set",
           "capacity over the trace's distinct prefix tokens", percent),
)
SWEPT_FORMATS: dict[str, Callable[[object], str]] = {
    "cache_capacity_tokens": capacity, "cache_ttl_s": seconds,
    "cache_only": lambda value: "-" if missing(value) else show_swept("cache_only", value)}
SWEPT_TITLES = {"cache_policy": "policy", "cache_capacity_tokens": "capacity (tokens)",
                "cache_ttl_s": "TTL", "router_name": "router", "cache_only": "mode",
                "engine_replicas": "replicas"}
MISSING_WHY = {
    "p50_ttft_ms": "timing", "p99_ttft_ms": "timing", "request_throughput": "timing",
    "kept_up": "timing", "request_goodput": "goodput",
    "cost_saved_usd": "pricing", BELADY: "bounds", "belady_gap_closed": "bounds",
    "vs_lru": "policies",
}
WHY_TEXT = {
    "timing": "cache-only runs have no timing",
    "pricing": "no run was priced with --pricing",
    "bounds": "no Belady bound, which cache-only runs with --bounds or belady runs give",
    "policies": "no other policy than LRU to compare",
    "goodput": "no run set goodput SLOs (--goodput)",
}


def match_columns(table: pd.DataFrame, swept: list[str]) -> list[str]:
    """What a run and its reference (the LRU or belady run it is compared with) share:
    capacity, TTL, every other swept value but the policy, and the part of the trace
    (`trace_time_window`, a tune's train and test parts)."""
    columns = ["cache_capacity_tokens", "cache_ttl_s", *swept, "trace_time_window"]
    return [c for c in dict.fromkeys(columns) if c != POLICY and c in table]


def reference_rates(table: pd.DataFrame, swept: list[str], policy: str) -> pd.Series:
    """Per row, the hit rate of the one `policy` run with the same match_columns; NaN when
    there is none or more than one (no guessing which)."""
    if POLICY not in table or not len(table):
        return pd.Series(np.nan, index=table.index)
    columns = match_columns(table, swept)
    found: dict[tuple[str, ...], list[float]] = {}
    for _, row in table[table[POLICY].astype(str) == policy].iterrows():
        found.setdefault(_key(row, columns), []).append(row[HIT_RATE])
    return table.apply(lambda r: (lambda v: v[0] if v and len(v) == 1 else np.nan)(
        found.get(_key(r, columns))), axis=1)


def belady_reference(table: pd.DataFrame, swept: list[str]) -> pd.Series:
    """Belady's hit rate at each row's capacity: the row's own bound (`--bounds`), else the
    hit rate of a `belady` policy run with the same match_columns; NaN when neither."""
    own = table[BELADY] if BELADY in table else pd.Series(np.nan, index=table.index)
    return own.where(own.notna(), reference_rates(table, swept, "belady"))


def _key(row: pd.Series, columns: list[str]) -> tuple[str, ...]:
    return tuple(show_value(row[c]) for c in columns)


ALWAYS_TOLD = ("cache_policy", "cache_capacity_tokens", "cache_ttl_s")  # swept or not


def identity_columns(data: ReportData) -> list[str]:
    """What tells the runs apart: policy, capacity and TTL always (a reader needs them even
    where a sweep holds them fixed), then the other swept columns."""
    fixed = [c for c in ALWAYS_TOLD if c in data.ok]
    return fixed + [c for c in data.swept if c not in fixed]


def comparison(data: ReportData) -> pd.DataFrame:
    """Raw values of the comparison table, one row per successful run, in plan order."""
    table = data.ok.reset_index(drop=True)
    out = table[["run_id", *[c for c in identity_columns(data) if c in table]]].copy()
    # blank where a value means nothing to its run (data.applies): a cache-only run's
    # router, a split run's replicas, a colocated run's unset prefill and decode counts
    for column in out.columns[1:]:
        kept = [applies(column, row) for _, row in table.iterrows()]
        out[column] = out[column].astype(object).where(kept, None)
    units = capacity_units(data)
    for column in UNIT_COLUMNS:
        out[column.key] = units[column.key].reindex(out["run_id"]).to_numpy()
    for column in COLUMNS:
        if column.key in table:
            out[column.key] = table[column.key]
    if HIT_RATE not in table:
        return out
    policies = table[POLICY].astype(str) if POLICY in table else pd.Series("", table.index)
    if (policies == BASELINE).all():  # nothing but LRU: no comparison to make
        return out
    lru_rate = reference_rates(table, data.swept, BASELINE)
    itself = (policies == BASELINE).to_numpy()  # LRU is the baseline, not compared with itself
    out["vs_lru"] = (table[HIT_RATE] - lru_rate).where(~itself)
    belady = belady_reference(table, data.swept)
    gap = belady - lru_rate
    out["belady_gap_closed"] = np.where((gap >= MIN_GAP) & ~itself, (table[HIT_RATE] - lru_rate)
                                        / gap.where(gap >= MIN_GAP, 1.0), np.nan)
    if belady.notna().any():
        out[BELADY] = belady
    return out


def _swept_format(column: str) -> Callable[[object], str]:
    """A swept value as the table shows it: a mapping as the labels show it (a pool's
    `{"capacity_tokens": null}` as unbounded), anything else plain."""

    def shown(value: object) -> str:
        if isinstance(value, (str, dict)) and str(value).startswith("{"):
            return show_swept(column, value)
        return plain(value)

    return shown


def shown_columns(frame: pd.DataFrame, data: ReportData) -> list[tuple[str, str, str, Callable]]:
    """(key, title, tip, formatter) of the columns to show: the run, the swept values, then
    every metric column that at least one run has."""
    shown = [("run_id", "run", "run id (runs/<run id>/ in the sweep folder)", plain)]
    per_replica = "replicas" in data.ok and data.ok["replicas"].fillna(1).gt(1).any()
    fixed = set(fixed_columns(frame))
    for column in identity_columns(data):
        if column in frame and column not in fixed:
            title = SWEPT_TITLES.get(column, short_name(column))
            if column == "cache_capacity_tokens" and per_replica:
                title = "capacity per replica (tokens)"
            shown.append((column, title, column, SWEPT_FORMATS.get(column, _swept_format(column))))
            if column == "cache_capacity_tokens":
                shown += [(c.key, c.title, c.tip, c.fmt) for c in UNIT_COLUMNS
                          if c.key in frame and frame[c.key].notna().any()]
    for column in COLUMNS:
        if column.key in frame and frame[column.key].notna().any():
            shown.append((column.key, column.title, column.tip, column.fmt))
    return shown


def fixed_columns(frame: pd.DataFrame) -> list[str]:
    """The policy, capacity and TTL columns that hold one value in every run of a table of
    several: said once in the notes, not in a column each (seven columns of one value pushed
    the hit rate, p99 TTFT and kept up off a 1400 px page)."""
    if len(frame) < 2:
        return []
    return [c for c in ALWAYS_TOLD
            if c in frame and frame[c].astype(str).nunique(dropna=False) == 1]


def _fixed_note(frame: pd.DataFrame, data: ReportData) -> str | None:
    """`Every run: policy lru; capacity 20,000 tokens per replica (2.44 GiB of KV, ...)`."""
    fixed = fixed_columns(frame)
    if not fixed:
        return None
    per_replica = "replicas" in data.ok and data.ok["replicas"].fillna(1).gt(1).any()
    parts = []
    for column in fixed:
        value = frame[column].iloc[0]
        if column == "cache_capacity_tokens":
            text = f"capacity {capacity(value)}"
            if not missing(value):
                text += " tokens" + (" per replica" if per_replica else "")
                units = [f"{c.fmt(frame[c.key].iloc[0])} {label}" for c, label in
                         zip(UNIT_COLUMNS, ("of KV", "of HBM", "of the working set"),
                             strict=True) if c.key in frame and not missing(frame[c.key].iloc[0])]
                if units:
                    text += f" ({', '.join(units)})"
            parts.append(text)
        else:
            title = SWEPT_TITLES.get(column, short_name(column))
            parts.append(f"{title} {SWEPT_FORMATS.get(column, _swept_format(column))(value)}")
    return f"Every run: {'; '.join(parts)}."


def comparison_notes(frame: pd.DataFrame, data: ReportData) -> list[str]:
    """Sentences under the table: what every run shares, what was left out and why, what
    the baseline is."""
    notes = []
    shared = _fixed_note(frame, data)
    if shared is not None:
        notes.append(shared)
    absent: dict[str, list[str]] = {}
    for column in COLUMNS:
        if column.key not in frame or frame[column.key].isna().all():
            why = MISSING_WHY.get(column.key, "other")
            if column.key == "belady_gap_closed" and "vs_lru" not in frame:
                why = "policies"  # Belady may be there; there is no LRU gap to close
            if why == "goodput" and ("p99_ttft_ms" not in frame
                                     or frame["p99_ttft_ms"].isna().all()):
                why = "timing"  # cache-only runs: no latency to hold to an SLO
            absent.setdefault(why, []).append(column.title)
    if absent:
        parts = [f"{', '.join(titles)}: {WHY_TEXT.get(why, 'no run has them')}"
                 for why, titles in absent.items()]
        notes.append(f"Not shown, as no run has them: {'; '.join(parts)}.")
    if "kept_up" in frame and frame["kept_up"].astype(object).eq(False).any():
        notes.append("A run marked no under kept up did not keep up with its load: its TTFT "
                     "queue grew, so its latencies measure a backlog rather than the server, "
                     "or more than 2% of its requests were rejected (docs/load.md, kept up).")
    if "vs_lru" in frame and frame["vs_lru"].notna().any():
        notes.append("vs LRU and the gap closed compare each run with the LRU run at the "
                     "same capacity, TTL and other swept values (blank for LRU itself, the "
                     "baseline, and where there is none); the gap closed is also blank where "
                     "Belady is within 1 pp of LRU. Cost and GPU-seconds saved are against "
                     "the same requests with no cache.")
    twins = identical_runs(data)
    if twins:
        shown = "; ".join(" = ".join(data.label(r) for r in group) for group in twins)
        notes.append(f"Runs with identical results (every figure equal; in the plots one "
                     f"hides the other): {shown}.")
    notes.append("Click a column header to sort; the run column stays in view when the "
                 "table scrolls sideways.")
    return notes


TIMING_KEYS = ("wall_time_s", "simulated_s_per_wall_s", "code_path", "compiled_modules",
               "prefixsim_version", "command")  # how a run ran, not what it found


def identical_runs(data: ReportData) -> list[list[str]]:
    """Groups of two or more successful runs whose summaries agree on every figure (the
    schema's numeric keys but TIMING_KEYS; swept values may differ: a router that falls
    back to another's choice, a setting nothing reads in this trace), in plan order."""
    table = data.ok
    figures = [c for c in table.columns if numeric_key(c) and c not in TIMING_KEYS
               and table[c].notna().any()]
    if len(table) < 2 or not figures:
        return []
    groups: dict[tuple, list[str]] = {}
    for _, row in table.iterrows():
        key = tuple(None if pd.isna(row[c]) else row[c] for c in figures)
        groups.setdefault(key, []).append(str(row["run_id"]))
    return [runs for runs in groups.values() if len(runs) > 1]
