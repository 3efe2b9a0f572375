"""Run a capacity search: probes as sweep points on a sweep executor, judged, stored.

Each probe is a normal run: a sweep point (`make_point`: the config with the knob's value,
validated, its id from the parameters) run by the sweep's worker (`run_point`, which calls
`prefixsim.pipeline.simulate`) on the executor `ExecutorOptions` names; the probes of one
round run at once (as many as there are workers). Every probe is stored as a run folder
with the sweep's atomic `write_run`, and the folder ends as a sweep folder (`sweep.json`,
`spec.yaml`, `sweep.parquet`; so `prefixsim report DIR` draws it) plus `capacity.parquet`
(one row per probe) and `capacity.json` (the answer). The plot is plot.py's; the folder
is chosen, and made atomic, by the CLI.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from prefixsim.capacity.knob import Knob, base_mapping, knob_for
from prefixsim.capacity.search import SearchResult, find_threshold
from prefixsim.capacity.verdict import Verdict, judge
from prefixsim.config import RunConfig
from prefixsim.errors import InputError
from prefixsim.metrics.kept_up import KEPT_UP_SHARE, rejection_limit
from prefixsim.pipeline import check_trace
from prefixsim.report.format import significant
from prefixsim.report.plots_load import PLOTTED_KEYS
from prefixsim.sweep import OK, RunOutcome, run_point
from prefixsim.sweep.executors import LOCAL_WORKERS, ExecutorOptions, default_jobs
from prefixsim.sweep.spec import SweepPoint, make_point
from prefixsim.sweep.store import (
    sweep_table,
    write_parquet_atomic,
    write_run,
    write_sweep_meta,
    write_text_atomic,
)
from prefixsim.sweep.worker import FAILED

MAX_WIDTH = 8  # probes per round at most, however many workers there are
FLAT_PROBES = 3  # failing probes nearest the passing side that floor_note compares
FLAT_SPAN = 4.0  # ... spanning at least this factor of the knob (two doublings)
FLAT_TOLERANCE = 1e-3  # ... whose failing SLO figures agree within this (relative)
PROBE_COLUMNS = ("probe", "round", "knob", "value", "config_value", "offered_rate",
                 "achieved_rate", "passed", "reasons", "run_id")


@dataclass(frozen=True)
class CapacityQuestion:
    """What to search (`rate` or `replicas`) on which config, under which SLOs (summary key
    -> most ms), goodput share (of the offered requests, or None) and relative tolerance."""

    config: RunConfig
    search: str
    slos: dict[str, float] = field(default_factory=dict)
    goodput_share: float | None = None
    tolerance: float = 0.05


class _Unservable(Exception):
    """No value of the knob can pass, so the search stops at `value`: a probe rejected more
    requests than a passing run may (each too long for a replica's KV pool or the model's
    context: no value of the knob changes which requests those are), or the SLO figures the
    probes fail stopped moving with the knob (`floor_note`)."""

    def __init__(self, value: float, note: str) -> None:
        super().__init__(note)
        self.value = value
        self.note = note


@dataclass
class CapacityAnswer:
    """The answer (`capacity.json`'s content) and one row per probe."""

    summary: dict[str, Any]
    probes: pd.DataFrame


def check_question(question: CapacityQuestion) -> Knob:
    """The knob, after checking the question (InputError naming the flag, before any run)."""
    if not 0 < question.tolerance < 1:
        raise InputError("expected a relative tolerance between 0 and 1", field="--tolerance")
    if question.goodput_share is not None:
        engine = question.config.engine
        if not 0 < question.goodput_share <= 1:
            raise InputError("expected a share in (0, 1]", field="--goodput-share")
        if engine.goodput_ttft_ms is None and engine.goodput_tpot_ms is None:
            raise InputError("needs the goodput SLOs: --goodput ttft:MS and/or tpot:MS",
                             field="--goodput-share")
    knob = knob_for(question.config, question.search)
    check_trace(question.config)  # every probe reads it: refused before any probe runs
    load = question.config.load
    if load.closed_loop and not question.slos and question.goodput_share is None:
        raise InputError(f"a {load.type} load is a closed loop: its users wait for their "
                         "answers, so no queue builds and every probe keeps up; give the "
                         "latency it must hold (--slo, e.g. p99_ttft_ms:2000, or "
                         "--goodput-share)", field="--slo")
    return knob


def run_capacity(question: CapacityQuestion, out_dir: Path,
                 workers: ExecutorOptions = LOCAL_WORKERS, *,
                 on_probe: Callable[[dict[str, Any]], None] | None = None,
                 command: str | None = None) -> CapacityAnswer:
    """Search, storing every probe in `out_dir` (a new folder the caller made atomic)."""
    knob = check_question(question)
    runner = workers.build()
    runner.open()
    rows: list[dict[str, Any]] = []
    points: list[SweepPoint] = []
    start_warnings: list[str] = []  # vLLM would not start the probes' replicas (one limit)
    base = base_mapping(question.config)
    fn = functools.partial(run_point, keep_requests=True)
    judged: dict[float, Verdict | None] = {}

    def probe(values: Sequence[float]) -> list[bool]:
        todo = [make_point(base, knob.params(v)) for v in values]
        verdicts: dict[int, Verdict | None] = {}
        latencies: dict[int, dict[str, Any]] = {}
        outcomes: dict[int, RunOutcome] = {}
        for index, outcome in runner.map_unordered(fn, todo):
            if isinstance(outcome, BaseException):
                outcome = RunOutcome(run_id=todo[index].run_id, params=todo[index].params,
                                     status=FAILED, error=f"worker lost: {outcome}")
            write_run(out_dir, outcome)
            outcomes[index] = outcome
            verdicts[index] = _verdict(outcome, question)
            latencies[index] = {k: outcome.summary.get(k) for k in PLOTTED_KEYS}
            if "max_model_len_warning" in outcome.summary:
                start_warnings.append(outcome.summary["max_model_len_warning"])
        round_number = 1 + max((r["round"] for r in rows), default=0)
        for index, value in enumerate(values):
            row = _row(len(rows), round_number, knob, value, todo[index], verdicts[index],
                       outcomes[index].error)
            row.update(latencies[index])
            rows.append(row)
            if on_probe is not None:
                on_probe(row)
        points.extend(todo)
        failed = [outcome for outcome in outcomes.values() if outcome.status != OK]
        if round_number == 1 and len(failed) == len(outcomes) and \
                len({outcome.error for outcome in failed}) == 1 and \
                all(outcome.bad_input for outcome in failed):  # the input's fault, not the knob's
            raise InputError(f"{failed[0].error} (no probe can run: it fails at any "
                             f"{knob.key})")
        for index, value in enumerate(values):
            if _unservable(outcomes[index]):
                raise _Unservable(value, _unservable_note(outcomes[index].summary, knob))
            judged[value] = verdicts[index]
        floor = floor_note(judged, knob, question.slos)
        if floor is not None:
            raise _Unservable(floor[0], floor[1])
        return [row["passed"] for row in rows[-len(values):]]

    unservable = None
    try:
        width = min(MAX_WIDTH, workers.n_jobs or default_jobs())
        result = find_threshold(probe, knob.space(question.tolerance, width))
    except _Unservable as stop:
        result = SearchResult(good=None, bad=stop.value)
        unservable = stop.note
    finally:
        runner.close()
    table = pd.DataFrame(rows)
    table = table[[*PROBE_COLUMNS, *(c for c in table.columns if c not in PROBE_COLUMNS)]] \
        if rows else pd.DataFrame(columns=list(PROBE_COLUMNS))
    summary = _answer(question, knob, result, table)
    if unservable is not None:
        summary["note"] = unservable
    if start_warnings:
        summary["max_model_len_warning"] = start_warnings[0]
    _write_folder(out_dir, question, knob, points, table, summary, command)
    return CapacityAnswer(summary=summary, probes=table)


def _unservable(outcome: RunOutcome) -> bool:
    """Whether a finished probe rejected more than a passing run may (rejection depends on
    a request's length and a replica's limits, never on the replicas or the rate)."""
    summary = outcome.summary if outcome.status == OK else {}
    total = summary.get("num_requests") or 0
    return bool(total) and (summary.get("rejected") or 0) > (1 - KEPT_UP_SHARE) * total


def _unservable_note(summary: dict[str, Any], knob: Knob) -> str:
    limit, remedy = rejection_limit(summary.get("kv_pool_tokens_per_replica"),
                                    summary.get("max_model_len"))
    return (f"stopped: {summary['rejected']:,} of {summary['num_requests']:,} requests are "
            f"longer than {limit} at any {knob.key}, more than {1 - KEPT_UP_SHARE:.0%} of "
            f"them, so no probe can pass; {remedy}")


def floor_note(judged: dict[float, Verdict | None], knob: Knob,
               slos: dict[str, float]) -> tuple[float, str] | None:
    """While no probe has passed: whether the SLO figures stopped moving with the knob, so
    that no value of it can pass. Holds when the FLAT_PROBES probes nearest the passing side
    (the lowest rates, the most replicas), spanning at least FLAT_SPAN times the knob,
    failed their SLOs and nothing else (they kept up), the same SLOs each, with each failing
    figure within FLAT_TOLERANCE of the others: halving the rate or doubling the replicas
    twice no longer lowers it (what the requests take with no queue to wait in, the trace's
    own bursts, or a router that keeps sending them to one replica). Returns (the value
    nearest the passing side, the note) or None (docs/load.md, capacity)."""
    verdicts = {value: v for value, v in judged.items() if v is not None and not v.passed}
    if len(verdicts) < max(FLAT_PROBES, len(judged)):  # one passed, or failed to run
        return None
    nearest = sorted(verdicts, reverse=knob.search == "replicas")[:FLAT_PROBES]
    if max(nearest) < FLAT_SPAN * min(nearest):
        return None
    failing = [_slo_failures(verdicts[value], slos) for value in nearest]
    keys = set(failing[0])
    if not keys or any(set(f) != keys or len(f) != len(verdicts[v].reasons)
                       for f, v in zip(failing, nearest, strict=True)):
        return None  # no SLO failed, not the same ones, or the probe also fell behind
    for key in keys:
        figures = [f[key] for f in failing]
        if max(figures) > (1 + FLAT_TOLERANCE) * min(figures):
            return None
    moved = "lowering the rate" if knob.search == "rate" else "adding replicas"
    stays = "; ".join(f"{key} stays {significant(failing[0][key], 4)} ms (SLO "
                      f"{significant(slos[key], 6)})" for key in sorted(keys))
    span = " to ".join(significant(knob.to_config(v), 6) for v in (nearest[-1], nearest[0]))
    return nearest[0], (f"stopped: {stays} at {knob.key} {span}; {moved} no longer lowers "
                        "it (what the requests take with no queue to wait in, with the "
                        "trace's own bursts and routing), so no probe can pass; a looser "
                        "SLO, a faster GPU, more tensor parallelism or a smaller model "
                        "would")


def _slo_failures(verdict: Verdict, slos: dict[str, float]) -> dict[str, float]:
    """The SLO figures a judged probe fails, by key (a missing figure counts as no floor)."""
    out: dict[str, float] = {}
    for key, limit in slos.items():
        value = verdict.figures.get(key)
        if value is not None and value > limit:
            out[key] = float(value)
    return out


def _verdict(outcome: RunOutcome, question: CapacityQuestion) -> Verdict | None:
    if outcome.status != OK:
        return None
    return judge(outcome.summary, outcome.requests, question.slos, question.goodput_share)


def _row(number: int, round_number: int, knob: Knob, value: float, point: SweepPoint,
         verdict: Verdict | None, error: str | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "probe": number, "round": round_number, "knob": knob.key, "value": value,
        "config_value": knob.to_config(value), "run_id": point.run_id,
        "offered_rate": verdict.offered_rate if verdict else math.nan,
        "achieved_rate": verdict.achieved_rate if verdict else math.nan,
        "passed": bool(verdict and verdict.passed),
        "reasons": "; ".join(verdict.reasons) if verdict
        else f"the run failed: {error}" if error else "the run failed",
    }
    if verdict is not None:
        row.update(verdict.figures)
    return row


def _answer(question: CapacityQuestion, knob: Knob, result: SearchResult,
            table: pd.DataFrame) -> dict[str, Any]:
    def probe_of(value: float | None) -> dict[str, Any]:
        if value is None:
            return {}
        return table[table["value"] == value].iloc[0].to_dict()

    best, nearest_fail = probe_of(result.good), probe_of(result.bad)
    whole = question.search == "replicas"
    summary: dict[str, Any] = {
        "search": question.search, "knob": knob.key, "knob_meaning": knob.label,
        "answer": _whole(result.good) if whole else result.good,
        "answer_config_value": best.get("config_value"),
        "answer_run_id": best.get("run_id"),
        "offered_rate": best.get("offered_rate"), "achieved_rate": best.get("achieved_rate"),
        "first_failing": _whole(result.bad) if whole else result.bad,
        "first_failing_reasons": nearest_fail.get("reasons"),
        "slos": question.slos, "goodput_share": question.goodput_share,
        "tolerance": question.tolerance if question.search == "rate" else "exact",
        "probes": len(table), "rounds": int(table["round"].max()) if len(table) else 0,
    }
    if result.good is None:
        summary["note"] = "no probe passed within the knob's range"
    elif result.bad is None:
        summary["note"] = "no probe failed within the knob's range (the answer is its limit)"
    return {k: _plain(v) for k, v in summary.items()}


def _whole(value: float | None) -> int | None:
    return None if value is None else int(value)


def _plain(value: Any) -> Any:
    """numpy scalars as Python ones, nan as None (JSON)."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _write_folder(out_dir: Path, question: CapacityQuestion, knob: Knob,
                  points: list[SweepPoint], table: pd.DataFrame, summary: dict[str, Any],
                  command: str | None) -> None:
    unique = list({p.run_id: p for p in points}.values())
    spec = {"name": f"capacity-{question.search}", "base": base_mapping(question.config),
            "grid": {}, "runs": [p.params for p in unique]}
    write_sweep_meta(out_dir, spec["name"], [knob.key], unique,
                     yaml.safe_dump(spec, sort_keys=False), command)
    write_parquet_atomic(out_dir / "sweep.parquet", sweep_table(out_dir, unique, [knob.key]))
    write_parquet_atomic(out_dir / "capacity.parquet", table)
    write_text_atomic(out_dir / "capacity.json", json.dumps(summary, indent=2) + "\n")
