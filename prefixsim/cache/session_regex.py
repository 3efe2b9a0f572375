"""Session-id patterns of request classes, matched in bounded time (docs/input-rules.md I7).

A pattern comes from a user's config, so it may backtrack exponentially (`^(a|a)*$`, which
no blacklist of shapes catches). Where google-re2 is installed (`import re2`, optional) the
pattern is compiled by it: linear time, nothing to bound. Otherwise Python's `re` runs each
match under a timer: in the main thread an interval timer (SIGALRM; the regex engine checks
signals while it backtracks) stops a match after MATCH_TIMEOUT_S, which becomes one
InputError naming the pattern. `probe` runs the pattern on made-up hostile ids when the
config is read, so most such patterns are refused before any work. Results are kept per
session id (ids repeat), so the timer is armed once per distinct id. Off the main thread (a
Dask worker's thread) no timer can stop a match; the driver probed the pattern first.

Owned here: compiling and matching. Left out: which class a request falls in (classes.py).
"""

from __future__ import annotations

import re
import signal
import threading
from typing import Any

from prefixsim.errors import InputError

try:  # optional: pip install google-re2
    import re2 as _re2  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the environment
    _re2 = None

MATCH_TIMEOUT_S = 0.1
PROBE_CHARS = 64  # length of each made-up id `probe` tries
MEMO_LIMIT = 100_000  # distinct session ids remembered before the memo starts over
FIELD = "cache.classes.session_regex"


class SlowPattern(Exception):
    """A match ran past MATCH_TIMEOUT_S."""


def compile_pattern(pattern: str) -> Any:
    """The compiled pattern: re2's where installed and it takes the pattern, else re's
    (raises re.error for a bad pattern)."""
    if _re2 is not None:
        try:
            return _re2.compile(pattern)
        except Exception:  # noqa: BLE001 - re2 lacks backreferences etc.: re, under the timer
            pass
    return re.compile(pattern)


def timed_search(compiled: Any, text: str, timeout_s: float = MATCH_TIMEOUT_S) -> bool:
    """Whether `compiled` finds a match in `text`; SlowPattern past `timeout_s` (in the main
    thread; elsewhere the match is not timed)."""
    if threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "setitimer") or not isinstance(compiled, re.Pattern):
        return compiled.search(text) is not None
    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return compiled.search(text) is not None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _expire(signum: int, frame: object) -> None:
    raise SlowPattern


def probe_texts(pattern: str) -> list[str]:
    """Made-up session ids that make a backtracking pattern slow: long runs of each
    character the pattern names (and of a letter and a digit), each ended by a character
    that cannot match."""
    chars = sorted({c for c in pattern if c.isprintable() and c not in "\\^$.*+?()[]{}|"})
    chars = ["a", "0", *chars][:32]
    texts = [c * PROBE_CHARS + "\x00" for c in chars]
    texts.append("".join(chars) * (PROBE_CHARS // max(len(chars), 1) + 1) + "\x00")
    return texts


def probe(pattern: str) -> None:
    """Raise ValueError when the pattern takes over MATCH_TIMEOUT_S on a `probe_texts` id
    (checked only in the main thread, where a match can be stopped)."""
    compiled = compile_pattern(pattern)
    for text in probe_texts(pattern):
        try:
            timed_search(compiled, text)
        except SlowPattern:
            raise ValueError(f"takes over {MATCH_TIMEOUT_S:g} s on a {len(text)}-character id "
                             "(it backtracks exponentially); write it without overlapping "
                             "repeats") from None


class SessionPattern:
    """A compiled session regex whose matches are bounded in time and remembered per id."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.compiled = compile_pattern(pattern)
        self.memo: dict[str, bool] = {}

    def search(self, text: str) -> bool:
        """Whether the pattern matches somewhere in `text`; InputError (one line, naming the
        pattern) when a match runs past MATCH_TIMEOUT_S."""
        found = self.memo.get(text)
        if found is None:
            try:
                found = timed_search(self.compiled, text)
            except SlowPattern:
                raise InputError(
                    f"{self.pattern!r} took over {MATCH_TIMEOUT_S:g} s on session id "
                    f"{text[:40]!r} (it backtracks exponentially); write it without "
                    "overlapping repeats", field=FIELD) from None
            if len(self.memo) >= MEMO_LIMIT:
                self.memo.clear()
            self.memo[text] = found
        return found
