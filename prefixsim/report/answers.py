"""The answer box at the top of a sweep report: what to pick, read off the comparison table.

Each answer is one question, one line of answer and the table cells it rests on (run id,
column), which the page highlights:

- best policy per capacity: the online policy with the highest token hit rate among runs
  at the same capacity and other swept values (the comparison's `match_columns`), and its
  gain over LRU there in percentage points, with the prefill GPU-seconds (or, priced, the
  dollars) it saves beyond LRU's; "LRU" when no policy beats it;
- smallest capacity reaching 95% of the unbounded hit rate, per online policy;
- shortest TTL within 1 pp of no TTL: against the run without a TTL at the same other
  values;
- headroom to Belady: the largest gap between the best online policy and the offline bound
  at one capacity;
- most saved against no cache (priced runs): the run whose cache saves the most dollars
  against the same requests uncached, or, where every run's cache costs more than none
  (writes priced above reads: a long TTL's write class), the one that loses least, said so;
- lowest p99 TTFT (timed runs): the run with the lowest p99 time to first token;
- a capacity folder's answer, first: the fewest replicas or the highest rate that held the
  SLOs and kept up (capacity.json), the nearest probe that failed and why, or the note
  saying why no probe could pass.

An answer whose runs are not in the sweep (one policy only, no TTL swept, no bound) is left
out. `answers_of` works on a frame of raw values (`table.comparison`'s, plus the unbounded
hit rate), `answers` on a report's runs; html.py lays them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from prefixsim.report.data import ReportData, show_swept, swept_text
from prefixsim.report.format import (
    gpu_seconds,
    milliseconds,
    percent,
    seconds,
    significant,
    usd,
)
from prefixsim.report.table import comparison

POLICY = "cache_policy"
CAPACITY = "cache_capacity_tokens"
TTL = "cache_ttl_s"
HIT_RATE = "cache_token_hit_rate"
BELADY = "cache_belady_token_hit_rate"
UNBOUNDED = "cache_unbounded_token_hit_rate"
OFFLINE = ("belady",)
SHARE_OF_UNBOUNDED = 0.95
TTL_TOLERANCE = 0.01  # 1 pp


@dataclass(frozen=True)
class Answer:
    """One entry of the box: the question, its answer (one part per group of runs), the
    (run id, column) cells behind it."""

    question: str
    parts: tuple[str, ...]  # one per capacity, policy or group of runs
    cells: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def answer(self) -> str:
        return "; ".join(self.parts)


def _online(frame: pd.DataFrame) -> pd.DataFrame:
    if POLICY not in frame:
        return frame
    return frame[~frame[POLICY].astype(str).isin(OFFLINE)]


def _context(frame: pd.DataFrame, swept: list[str], row: pd.Series, leave: tuple[str, ...]
             ) -> str:
    """The row's other swept values (but `leave`) that vary in `frame` and apply to the
    row, as `mode=timed, router=prefix_aware`, or ``."""
    shown = [c for c in swept if c not in leave and c in frame
             and frame[c].astype(str).nunique(dropna=False) > 1]
    return swept_text(row, shown)


def _groups(frame: pd.DataFrame, columns: list[str]):
    columns = [c for c in columns if c in frame]
    if not columns:
        yield frame
        return
    keys = frame[columns].astype(str).apply(tuple, axis=1)
    for key in dict.fromkeys(keys):
        yield frame[keys == key]


def best_policy(frame: pd.DataFrame, swept: list[str]) -> Answer | None:
    """Best online policy at each capacity (and other swept values), its gain over LRU."""
    online = _online(frame)
    if POLICY not in online or online[POLICY].nunique() < 2 or HIT_RATE not in online:
        return None
    bounded = online[online[CAPACITY].notna()] if CAPACITY in online else online
    others = [c for c in swept if c not in (POLICY,)]
    parts, cells = [], []
    for group in _groups(bounded, others):
        if group[POLICY].nunique() < 2 or group[HIT_RATE].isna().all():
            continue
        best = group.loc[group[HIT_RATE].idxmax()]
        lru = group[group[POLICY].astype(str) == "lru"]
        where = ", ".join(x for x in (
            _context(bounded, swept, best, (POLICY, CAPACITY)),
            f"{show_swept(CAPACITY, best[CAPACITY])} tokens" if CAPACITY in group else "") if x)
        if len(lru) == 1 and str(best[POLICY]) != "lru":
            gain = best[HIT_RATE] - lru.iloc[0][HIT_RATE]
            if gain < 0.0005:
                parts.append(f"{where}: LRU (tied)")
                continue
            extra = _saving(best, lru.iloc[0])
            parts.append(f"{where}: {best[POLICY]} +{gain * 100:.1f} pp over LRU{extra}")
        elif str(best[POLICY]) == "lru":
            parts.append(f"{where}: LRU (no policy beats it)")
        else:
            parts.append(f"{where}: {best[POLICY]} ({percent(best[HIT_RATE])})")
        cells.append((str(best["run_id"]), HIT_RATE))
    if not parts:
        return None
    return Answer("Best policy per capacity", tuple(parts), tuple(cells))


def _saving(best: pd.Series, lru: pd.Series) -> str:
    """`, $0.12 cheaper than LRU` (priced; `dearer` when it costs more: a saving `more
    than LRU`'s read wrong where both caches cost more than none) or `, saving 1.2 s more
    prefill GPU time than LRU`, else ``."""
    if "cost_saved_usd" in best and pd.notna(best.get("cost_saved_usd")) \
            and pd.notna(lru.get("cost_saved_usd")):
        difference = float(best["cost_saved_usd"] - lru["cost_saved_usd"])
        return f", {usd(abs(difference))} {'cheaper' if difference >= 0 else 'dearer'} " \
            "than LRU"
    key = "prefill_gpu_s_saved"
    if key in best and pd.notna(best.get(key)) and pd.notna(lru.get(key)):
        return f", saving {gpu_seconds(best[key] - lru[key])} more prefill GPU time than LRU"
    return ""


def smallest_capacity(frame: pd.DataFrame, swept: list[str]) -> Answer | None:
    """Per online policy, the smallest capacity whose hit rate reaches 95% of the unbounded
    cache's (same other values; runs without a TTL)."""
    if CAPACITY not in frame or UNBOUNDED not in frame or HIT_RATE not in frame:
        return None
    online = _online(frame)
    if TTL in online:
        online = online[online[TTL].isna()]
    bounded = online[online[CAPACITY].notna()]
    if bounded[CAPACITY].nunique() < 2:
        return None
    others = [c for c in swept if c != CAPACITY]
    parts, cells = [], []
    for group in _groups(bounded, others):
        if group[CAPACITY].nunique() < 2:
            continue
        target = SHARE_OF_UNBOUNDED * group[UNBOUNDED].max()
        name = _context(bounded, swept, group.iloc[0], (CAPACITY,)) or "all runs"
        reached = group[group[HIT_RATE] >= target].sort_values(CAPACITY)
        if reached.empty:
            top = group.sort_values(CAPACITY).iloc[-1]
            parts.append(f"{name}: not within the swept capacities (at "
                         f"{show_swept(CAPACITY, top[CAPACITY])}: {percent(top[HIT_RATE])})")
            continue
        row = reached.iloc[0]
        parts.append(f"{name}: {show_swept(CAPACITY, row[CAPACITY])} tokens "
                     f"({percent(row[HIT_RATE])} of {percent(group[UNBOUNDED].max())})")
        cells.append((str(row["run_id"]), CAPACITY))
    if not parts:
        return None
    return Answer("Smallest capacity reaching 95% of the unbounded hit rate", tuple(parts),
                  tuple(cells))


def shortest_ttl(frame: pd.DataFrame, swept: list[str]) -> Answer | None:
    """The shortest TTL whose hit rate is within 1 pp of the run without a TTL at the same
    other values."""
    if TTL not in frame or frame[TTL].isna().all() or frame[TTL].notna().all():
        return None
    others = [c for c in swept if c != TTL]
    parts, cells = [], []
    for group in _groups(_online(frame), others):
        plain = group[group[TTL].isna()]
        timed = group[group[TTL].notna()].sort_values(TTL)
        if len(plain) != 1 or timed.empty:
            continue
        reference = plain.iloc[0][HIT_RATE]
        close = timed[timed[HIT_RATE] >= reference - TTL_TOLERANCE]
        name = _context(frame, swept, plain.iloc[0], (TTL,))
        prefix = f"{name}: " if name else ""
        if len(close):
            row = close.iloc[0]
            cells.append((str(row["run_id"]), TTL))
            text = (f"{seconds(row[TTL])} ({percent(row[HIT_RATE])} against "
                    f"{percent(reference)} without a TTL)")
        else:
            row = timed.iloc[-1]
            text = (f"none of the swept TTLs (longest, {seconds(row[TTL])}: "
                    f"{percent(row[HIT_RATE])} against {percent(reference)})")
        parts.append(prefix + text)
    if not parts:
        return None
    return Answer("Shortest TTL within 1 pp of no TTL", tuple(parts), tuple(cells))


def belady_headroom(frame: pd.DataFrame, swept: list[str]) -> Answer | None:
    """The largest gap between the best online policy and Belady at one capacity."""
    if BELADY not in frame or frame[BELADY].isna().all() or CAPACITY not in frame:
        return None
    online = _online(frame)
    online = online[online[CAPACITY].notna() & online[BELADY].notna()]
    if online.empty:
        return None
    others = [c for c in swept if c != POLICY]
    gaps = []
    for group in _groups(online, others):
        best = group.loc[group[HIT_RATE].idxmax()]
        gaps.append((float(best[BELADY] - best[HIT_RATE]), best))
    gap, best = max(gaps, key=lambda g: g[0])
    policy = f"{best[POLICY]} " if POLICY in best else ""
    where = ", ".join(x for x in (show_swept(CAPACITY, best[CAPACITY]),
                                  _context(online, swept, best, (POLICY, CAPACITY))) if x)
    smallest = min(g for g, _ in gaps)
    least = ((f"at least {smallest * 100:.1f} pp elsewhere",) if smallest * 100 >= 0.05 else
             ("none elsewhere: the best policy matches Belady at some capacity",)
             ) if len(gaps) > 1 else ()
    return Answer("Headroom to Belady (offline bound)",
                  (f"at most {gap * 100:.1f} pp, at {where} ({policy}{percent(best[HIT_RATE])} "
                   f"against {percent(best[BELADY])})", *least),
                  ((str(best["run_id"]), BELADY),))


def most_saved(frame: pd.DataFrame, swept: list[str]) -> Answer | None:
    """The priced run of an online policy whose cache saves the most against no cache (or
    loses least)."""
    online = _online(frame)
    if "cost_saved_usd" not in online or online["cost_saved_usd"].isna().all():
        return None
    best = online.loc[online["cost_saved_usd"].idxmax()]
    text = _saved_text(frame, swept, best)
    cells = [(str(best["run_id"]), "cost_saved_usd")]
    ttls = online["cache_ttl_s"] if "cache_ttl_s" in online else None
    if ttls is not None and pd.isna(best["cache_ttl_s"]) and ttls.notna().any():
        # no TTL is billed at 5-minute writes (R17), a retention no provider sells
        sold = online[ttls.notna()]
        sold = sold[sold["cost_saved_usd"].notna()]
        if len(sold):
            second = sold.loc[sold["cost_saved_usd"].idxmax()]
            text += ("; no TTL is priced at 5-minute writes, a retention no provider sells; "
                     f"of the runs with a TTL, {_saved_text(frame, swept, second)}")
            cells.append((str(second["run_id"]), "cost_saved_usd"))
    return Answer("Most saved vs no cache", (text,), tuple(cells))


def _saved_text(frame: pd.DataFrame, swept: list[str], row: pd.Series) -> str:
    """What the run of `row` saves against no cache, or that it costs more (then every run
    does: it is the best)."""
    where = _context(frame, swept, row, ()) or str(row["run_id"])
    saved = float(row["cost_saved_usd"])
    return f"{where}: saves {usd(saved)}" if saved > 0 else (
        f"none: every run's cache costs more than none; least, {where}: "
        f"{usd(-saved)} more")


def lowest_ttft(frame: pd.DataFrame, swept: list[str]) -> Answer | None:
    """The run with the lowest p99 TTFT (timed runs) among those that kept up with their
    load (`kept_up`); where none did, the lowest anyway, said so (a fleet that falls behind
    has no steady TTFT to compare). Runs tied with it are named."""
    if "p99_ttft_ms" not in frame or frame["p99_ttft_ms"].isna().all():
        return None
    timed = frame[frame["p99_ttft_ms"].notna()]
    kept = timed[timed["kept_up"].astype(object).ne(False)] if "kept_up" in timed else timed
    pool = kept if len(kept) else timed
    best = pool.loc[pool["p99_ttft_ms"].idxmin()]
    where = _context(frame, swept, best, ()) or str(best["run_id"])
    p50 = f", p50 {milliseconds(best['p50_ttft_ms'])}" if "p50_ttft_ms" in best else ""
    text = f"{where}: {milliseconds(best['p99_ttft_ms'])}{p50}"
    tied = pool[(pool["p99_ttft_ms"] == best["p99_ttft_ms"])
                & (pool["run_id"] != best["run_id"])]
    if len(tied):
        names = [_context(frame, swept, row, ()) or str(row["run_id"])
                 for _, row in tied.iterrows()]
        text += f" (tied with {names[0]})" if len(names) == 1 else \
            f" (tied with {len(names)} other runs)"
    if not len(kept):
        text = f"none kept up with its load (every queue grew); the lowest anyway, {text}"
    elif len(kept) < len(timed):
        text += f" (of the {len(kept)} runs that kept up)" if len(kept) > 1 else \
            " (the one run that kept up)"
    return Answer("Lowest p99 TTFT", (text,), ((str(best["run_id"]), "p99_ttft_ms"),))


ANSWERS = (best_policy, smallest_capacity, shortest_ttl, belady_headroom, most_saved,
           lowest_ttft)


def answers_of(frame: pd.DataFrame, swept: list[str]) -> list[Answer]:
    """Every answer the runs of `frame` (one row per run: run_id, the swept values, raw
    figures) support, in order."""
    if frame.empty or "run_id" not in frame:
        return []
    found = [answer(frame.reset_index(drop=True), swept) for answer in ANSWERS]
    return [a for a in found if a is not None]


def capacity_answer(found: dict) -> Answer:
    """A capacity search's answer (capacity.json) as the box's first entry (module
    docstring); the answer's probe's cell of its first SLO (or p99 TTFT) is highlighted."""
    replicas = found.get("search") == "replicas"
    question = "Capacity: fewest replicas" if replicas else "Capacity: highest rate"
    slos = found.get("slos") or {}
    held = " and ".join(f"{key} <= {significant(limit, 6)} ms" for key, limit in slos.items())
    if found.get("goodput_share") is not None:
        held = " and ".join(x for x in (held, f"goodput share >= {found['goodput_share']:g}")
                            if x)
    condition = f"held {held} and kept up" if held else "kept up"
    if found.get("answer") is None:
        note = str(found.get("note") or "no probe passed")
        return Answer(question, ("none: " + note.removeprefix("stopped: "),))

    def knob(value: float) -> str:
        if replicas:
            return f"{int(value):,} replicas"
        return f"{found.get('knob', 'rate')} = {significant(value, 4)}"

    text = knob(found["answer"]) + f" {condition}"
    if not replicas and found.get("offered_rate") is not None:
        text += f" (offered {significant(found['offered_rate'], 4)} requests/s)"
    parts = [text]
    if found.get("first_failing") is not None:
        parts.append(f"{knob(found['first_failing'])} failed: {found.get('first_failing_reasons')}")
    elif found.get("note"):
        parts.append(str(found["note"]))
    column = next(iter(slos), "p99_ttft_ms")
    cells = ((str(found["answer_run_id"]), column),) if found.get("answer_run_id") else ()
    return Answer(question, tuple(parts), cells)


def answers(data: ReportData) -> list[Answer]:
    """The answers for a report's successful runs (none for a single run); a capacity
    folder's own answer first."""
    if data.kind != "sweep":
        return []
    found = [capacity_answer(data.capacity.answer)] if data.capacity is not None else []
    if len(data.ok) < 2:
        return found
    frame = comparison(data)
    if UNBOUNDED in data.ok:
        frame[UNBOUNDED] = data.ok[UNBOUNDED].to_numpy()
    return found + answers_of(frame, list(data.swept))
