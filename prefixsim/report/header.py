"""The report's header: what the runs were run on, at a glance.

Three short lists: the trace (name, format, requests, how they were offered: the `load`
section of config.yaml, docs/load.md, absent = the trace's own times; time span, distinct
prefix tokens, unbounded hit rate), the hardware and model (mode, model, GPU, tensor parallelism,
replicas, router, cost model and profile), and the runs (how many, what was swept, prices,
the prefixsim version and the command). Values come from the summaries and, where a
summary lacks them (cache-only runs record no GPU), from the runs' config.yaml; a value
that differs between runs is shown as the list of its values. Plain strings out; html.py
lays them out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd

from prefixsim.report.data import ReportData, short_name
from prefixsim.report.format import duration, integer, percent, seconds, significant

Section = tuple[str, list[tuple[str, str]]]
MAX_SHOWN = 4


def _values(items: Iterable[object]) -> list[object]:
    seen: dict[str, object] = {}
    for item in items:
        if item is None or (isinstance(item, float) and item != item):
            continue
        seen.setdefault(str(item), item)
    return list(seen.values())


def _one_or_many(values: list[object], fmt: Callable[[object], str] = str) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return fmt(values[0])
    shown = ", ".join(fmt(v) for v in values[:MAX_SHOWN])
    more = f" and {len(values) - MAX_SHOWN} more" if len(values) > MAX_SHOWN else ""
    return f"varies: {shown}{more}"


class _Runs:
    """Summary columns and config values over the successful runs."""

    def __init__(self, data: ReportData) -> None:
        self.data = data
        self.table = data.ok if len(data.ok) else data.table
        self.configs = [c for c in (data.config(r) for r in self.table["run_id"]) if c]

    def column(self, name: str) -> list[object]:
        return _values(self.table[name]) if name in self.table else []

    def config(self, section: str, key: str) -> list[object]:
        return _values((c.get(section) or {}).get(key) for c in self.configs)

    def either(self, column: str, section: str, key: str) -> list[object]:
        return self.column(column) or self.config(section, key)

    def loads(self) -> list[object]:
        """Each run's load_text; trace loads at several rate scales (a capacity search's
        probes) as one line giving the scales' range."""
        loads = [c.get("load") if isinstance(c.get("load"), dict) else {} for c in self.configs]
        texts = _values(load_text(load) for load in loads)
        if len(texts) > 1 and all(load.get("type", "trace") == "trace" for load in loads):
            return [_trace_text([load.get("rate_scale", 1.0) for load in loads])]
        return texts


def _span(values: list[object], unit: str) -> str:
    """`4 req/s`, or `2-30 req/s` over stages."""
    numbers = [float(v) for v in values if isinstance(v, (int, float))]
    if not numbers:
        return ""
    low, high = significant(min(numbers), 6), significant(max(numbers), 6)
    return f"{low} {unit}" if low == high else f"{low}-{high} {unit}"


def _trace_text(scales: list[object]) -> str:
    scaled = _span(scales, "").strip()
    return "trace (recorded times)" if scaled in ("", "1") else \
        f"trace (recorded times, rate scaled by {scaled})"


def load_text(load: object) -> str:
    """How a run's requests were offered, from its config's `load` section (docs/load.md):
    `trace (recorded times)`, `poisson 4 req/s`, `constant 2-30 req/s, 3 stages`,
    `concurrency, 8 users`; no section is the trace load."""
    load = load if isinstance(load, dict) else {}
    kind = str(load.get("type") or "trace")
    if kind == "trace":
        return _trace_text([load.get("rate_scale", 1.0)])
    stages = [s for s in load.get("stages") or [] if isinstance(s, dict)]
    staged = f", {len(stages)} stages" if stages else ""
    if kind in ("poisson", "constant"):
        rates = [s.get("rate") for s in stages] or [load.get("rate")]
        return f"{kind} {_span(rates, 'req/s')}".rstrip() + staged
    users = _span([s.get("users") for s in stages] or [load.get("users")], "users")
    think = load.get("think_time_s")
    think = f", think {seconds(think)}" if isinstance(think, (int, float)) else ""
    return f"{kind}, {users or 'all sessions'}{staged}{think}"


def _unbounded(runs: _Runs) -> str:
    table = runs.table
    if "cache_unbounded_token_hit_rate" not in table:
        return "-"
    ttl = table["cache_ttl_s"] if "cache_ttl_s" in table else pd.Series(None, table.index)
    plain = _values(table.loc[ttl.isna(), "cache_unbounded_token_hit_rate"])
    if plain:
        return f"{_one_or_many(plain, percent)} (no capacity limit, no TTL)"
    rates = table.dropna(subset=["cache_unbounded_token_hit_rate"]).drop_duplicates("cache_ttl_s")
    return ", ".join(f"{percent(r.cache_unbounded_token_hit_rate)} at TTL {seconds(r.cache_ttl_s)}"
                     for r in rates.itertuples()) + " (no capacity limit)"


def trace_section(runs: _Runs) -> Section:
    paths = runs.config("trace", "path")
    names = _values(Path(str(p)).name for p in paths)
    rows = [("trace", _one_or_many(names)),
            ("format", _one_or_many(runs.config("trace", "format"))),
            ("page size", _one_or_many(runs.config("trace", "block_size"),
                                       lambda v: f"{integer(v)} tokens")),
            ("requests", _one_or_many(runs.column("num_requests"), integer)),
            ("load", _one_or_many(runs.loads()) if runs.configs else "-"),
            ("time span", _one_or_many(runs.column("trace_span_s"), duration)),
            ("distinct prefix tokens", _one_or_many(runs.column("trace_distinct_prefix_tokens"),
                                                    integer)),
            ("unbounded hit rate", _unbounded(runs))]
    if len(paths) == 1:
        rows.append(("path", str(paths[0])))
    return "Trace", rows


def hardware_section(runs: _Runs) -> Section:
    modes = runs.column("mode")
    timed = "timed" in modes
    mode_text = {"timed": "timed (continuous batching, cost model)",
                 "cache_only": "cache-only replay (no timing)"}
    rows = [("mode", _one_or_many(modes, lambda m: mode_text.get(str(m), str(m))))]
    rows += [("model", _one_or_many(runs.either("model", "model", "name"))),
             ("GPU", _one_or_many(runs.either("gpu", "hardware", "gpu"))),
             ("tensor parallel", _one_or_many(runs.either("tp", "hardware", "tp"), integer)),
             ("replicas", _one_or_many(runs.either("replicas", "engine", "replicas"), integer))]
    if timed:
        rows.append(("router", _one_or_many(runs.either("router", "router", "name"))))
        engines = runs.column("serving_engine")
        if engines:
            rows.append(("serving engine", _one_or_many(engines)))
        seqs, budgets = runs.column("max_num_seqs"), runs.column("max_batched_tokens")
        if seqs and budgets:
            rows.append(("batch limits", f"{_one_or_many(seqs, integer)} running requests, "
                                         f"{_one_or_many(budgets, integer)} tokens a step"))
        lengths = runs.column("max_model_len")
        if lengths:
            rows.append(("max model len", _one_or_many(lengths, lambda v: f"{integer(v)} tokens")))
        starts = runs.column("max_model_len_warning")
        if starts:
            rows.append(("note", _one_or_many(starts)))
    cost = _one_or_many(runs.either("cost_model", "cost_model", "name"))
    profile = runs.either("cost_model_profile", "cost_model", "profile")
    rows.append(("cost model", cost + (f", profile {_one_or_many(profile)}" if profile else "")))
    if not timed:
        rows.append(("note", "cache-only runs use the model and GPU only to price prefill "
                             "GPU-seconds"))
    return "Hardware and model", rows


def runs_section(runs: _Runs) -> Section:
    data = runs.data
    table = data.table
    failed = int((table["status"] != "ok").sum()) if "status" in table else 0
    rows = [("runs", f"{len(table)}" + (f" ({failed} failed)" if failed else "")),
            ("swept", " x ".join(short_name(c) for c in data.swept) or "-")]
    prices = runs.column("cost_prices_as_of")
    rows.append(("prices", _one_or_many(prices) if prices else "not priced (no --pricing)"))
    kept = _kept_up(runs)
    if kept is not None:
        rows.append(("kept up", kept))
    rows.append(("prefixsim", _one_or_many(runs.column("prefixsim_version"))))
    rows.append(("command", data.meta.get("command") or _one_or_many(runs.column("command"))))
    return "Runs", rows


def _kept_up(runs: _Runs) -> str | None:
    """Whether the timed runs' fleets kept up with their load (docs/load.md, kept up): one
    run's warnings in full, or how many of a sweep's runs did not (None: no timed run)."""
    table = runs.table
    if "kept_up" not in table:
        return None
    flags = table["kept_up"].astype(object)
    timed = flags[flags.notna()]
    if timed.empty:
        return None
    behind = timed.eq(False)
    if len(timed) == 1:
        row = table.loc[timed.index[0]]
        warnings = [str(row[key]) for key in ("rejected_warning", "kept_up_warning")
                    if key in table and isinstance(row[key], str)]
        return "; ".join(["no" if behind.all() else "yes", *warnings])
    if not behind.any():
        return f"yes, all {len(timed)} timed runs"
    return (f"no for {int(behind.sum())} of {len(timed)} timed runs (the table's kept up "
            "column; each run's summary says why)")


def header_sections(data: ReportData) -> list[Section]:
    """The header's sections, in order, as (title, [(label, value), ...])."""
    runs = _Runs(data)
    return [trace_section(runs), hardware_section(runs), runs_section(runs)]
