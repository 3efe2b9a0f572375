"""Session-id patterns matched in bounded time (prefixsim/cache/session_regex.py,
docs/input-rules.md I7): which engine compiles a pattern, when a match runs under the
interval timer, the made-up ids the probe tries, the per-id memo and the one-line errors.
The CLI's refusals of hostile patterns are in tests/hardening/."""

from __future__ import annotations

import re
import signal
import threading

import pytest

from prefixsim.cache import session_regex
from prefixsim.cache.session_regex import SessionPattern, compile_pattern, probe_texts, timed_search
from prefixsim.errors import InputError

SLOW = "^(b|b)*$"  # backtracks exponentially on "bbb...b!"


class FakeRe2:
    """Stands in for google-re2: compiles to a tagged tuple, refuses backreferences."""

    @staticmethod
    def compile(pattern: str) -> tuple[str, str]:
        if "\\1" in pattern:
            raise ValueError("re2 has no backreferences")
        return ("re2", pattern)


def test_re2_compiles_a_pattern_when_installed_and_re_takes_what_it_refuses(monkeypatch):
    monkeypatch.setattr(session_regex, "_re2", FakeRe2)
    assert compile_pattern("^s[0-9]+$") == ("re2", "^s[0-9]+$")
    assert compile_pattern(r"(a)\1") == re.compile(r"(a)\1")


def test_without_re2_the_pattern_is_pythons(monkeypatch):
    monkeypatch.setattr(session_regex, "_re2", None)
    assert compile_pattern("^s[0-9]+$") == re.compile("^s[0-9]+$")


@pytest.fixture
def timer_calls(monkeypatch):
    """Every setitimer call (still made, so a slow match is stopped)."""
    calls: list[tuple[int, float]] = []
    real = signal.setitimer

    def spy(which: int, seconds: float, *rest: float):
        calls.append((which, seconds))
        return real(which, seconds, *rest)

    monkeypatch.setattr(signal, "setitimer", spy)
    return calls


def test_a_match_in_the_main_thread_is_timed_and_the_timer_disarmed(timer_calls):
    """A `re` pattern in the main thread: the timer is armed for the timeout, then set to
    0 (disarmed), and the SIGALRM handler put back."""
    before = signal.getsignal(signal.SIGALRM)
    assert timed_search(re.compile("s[0-9]"), "user s12", timeout_s=0.25) is True
    assert timed_search(re.compile("s[0-9]"), "user t", timeout_s=0.25) is False
    assert timer_calls == [(signal.ITIMER_REAL, 0.25), (signal.ITIMER_REAL, 0)] * 2
    assert signal.getsignal(signal.SIGALRM) is before


def test_a_match_past_its_time_raises_slow_pattern():
    with pytest.raises(session_regex.SlowPattern):
        timed_search(re.compile(SLOW), "b" * 40 + "!", timeout_s=0.05)


def test_an_re2_pattern_is_not_timed(timer_calls):
    """re2 runs in linear time: its patterns (not `re.Pattern`) are matched untimed."""

    class Linear:
        def search(self, text):
            return "hit" if text == "yes" else None

    assert timed_search(Linear(), "yes") is True and timed_search(Linear(), "no") is False
    assert timer_calls == []


def test_off_the_main_thread_a_match_is_untimed(timer_calls):
    """A worker thread cannot take SIGALRM: the match runs without the timer."""
    results: list[object] = []

    def work() -> None:
        try:
            results.extend([timed_search(re.compile("s[0-9]"), "s1"),
                            timed_search(re.compile("s[0-9]"), "t")])
        except Exception as error:  # noqa: BLE001 - the assertion below shows it
            results.append(error)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert results == [True, False] and timer_calls == []


def test_probe_texts_known_answer():
    """`^(qX|q)*$` names q and X: ids of 64 a's, 0's, X's and q's (sorted after "a", "0"),
    each ended by NUL, and "a0Xq" repeated 64 // 4 + 1 = 17 times, then NUL."""
    end = "\x00"
    assert probe_texts("^(qX|q)*$") == [
        "a" * 64 + end, "0" * 64 + end, "X" * 64 + end, "q" * 64 + end, "a0Xq" * 17 + end]


def test_probe_texts_try_at_most_32_characters():
    """40 distinct letters: "a", "0" and the first 30 letters, so 32 runs and one mixed."""
    letters = "bcdefghijklmnopqrstuvwxyzBCDEFGHIJKLMNOP"
    texts = probe_texts(letters)
    assert len(texts) == 33
    assert texts[-1] == ("a0" + "".join(sorted(letters))[:30]) * 3 + "\x00"


def test_the_probe_error_says_how_long_and_why():
    with pytest.raises(ValueError, match=re.escape(
            "takes over 0.1 s on a 65-character id (it backtracks exponentially); write it "
            "without overlapping repeats")):
        session_regex.probe(SLOW)


def test_a_slow_match_is_one_input_error_naming_the_pattern_id_and_field():
    """The id is quoted to its first 40 characters."""
    pattern = SessionPattern(SLOW)
    session = "b" * 45 + "!"
    with pytest.raises(InputError) as caught:
        pattern.search(session)
    assert caught.value.message == (
        f"'{SLOW}' took over 0.1 s on session id '{'b' * 40}' (it backtracks "
        "exponentially); write it without overlapping repeats")
    assert caught.value.field == "cache.classes.session_regex"


def test_results_are_remembered_per_id(monkeypatch):
    """A second search of an id reads the memo: no match is run."""
    pattern = SessionPattern("^s[0-9]+$")
    assert pattern.search("s12") is True and pattern.search("t12") is False
    assert pattern.memo == {"s12": True, "t12": False}

    def no_match(*args):
        raise AssertionError("matched again")

    monkeypatch.setattr(session_regex, "timed_search", no_match)
    assert pattern.search("s12") is True and pattern.search("t12") is False


def test_the_memo_starts_over_when_full(monkeypatch):
    """MEMO_LIMIT 2: after "a" and "b", a third id clears the memo first."""
    monkeypatch.setattr(session_regex, "MEMO_LIMIT", 2)
    pattern = SessionPattern("a")
    for text in ("a", "b"):
        pattern.search(text)
    assert pattern.memo == {"a": True, "b": False}
    pattern.search("ca")
    assert pattern.memo == {"ca": True}
