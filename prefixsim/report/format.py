"""Numbers formatted for people: 5,000 tokens, 37.4%, +4.6 pp, 1.23 s, $0.32.

Each function takes one value (None or NaN gives "-") and returns the text a table or the
header shows; the raw value stays available for sorting (table.py). Nothing here decides
which figures to show.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

MISSING = "-"


def missing(value: object) -> bool:
    """None, NaN and pandas' NA all count as missing."""
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN and NA
    except (TypeError, ValueError):
        return False


def significant(number: float, digits: int) -> str:
    """`number` to `digits` significant digits, with thousands separators and never in
    exponent notation, which `g` formats switch to (1.2e+02 GiB, 8.64e+04 s): 123.4 -> 123,
    86400 -> 86,400, 0.00001 -> 0.00001, 0.610 -> 0.61 (trailing zeros dropped). Whole
    numbers keep every digit (12,345 at 3 digits)."""
    if number == 0 or not math.isfinite(number):
        return f"{number:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(number))))
    text = f"{number:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def short_number(number: float) -> str:
    """A count in a label or tick: 5000 -> 5k, 2500000 -> 2.5M, 0.5 -> 0.5 (6 significant
    digits at most, never in exponent notation)."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(number) >= size:
            return f"{significant(number / size, 6)}{suffix}"
    return significant(number, 6)


def _number(shown: str = MISSING) -> Callable[[Callable[..., str]], Callable[..., str]]:
    """A formatter of a float that is given any value: a missing one is shown as `shown`,
    any other is converted with float() first."""

    def decorate(format_number: Callable[..., str]) -> Callable[..., str]:
        @functools.wraps(format_number)
        def formatter(value: object, *args: Any, **kwargs: Any) -> str:
            if missing(value):
                return shown
            return format_number(float(value), *args, **kwargs)  # type: ignore[arg-type]

        return formatter

    return decorate


@_number()
def integer(number: float) -> str:
    """5000 -> 5,000 (floats that are whole numbers too)."""
    return f"{number:,.0f}" if number.is_integer() else f"{number:,.1f}"


@_number()
def percent(number: float, digits: int = 1) -> str:
    """A share: 0.374 -> 37.4%."""
    return f"{number:.{digits}%}"


def share_text(share: float) -> str:
    """A share in whole per cent, but one that is not zero never as 0% (nor one short of
    all as 100%): `< 1%`, `> 99%` (a tail of 0.3% of gaps over an hour read 0% beside a
    curve running on to a day)."""
    text = f"{share:.0%}"
    if share > 0 and text == "0%":
        return "< 1%"
    if share < 1 and text == "100%":
        return "> 99%"
    return text


@_number()
def points(share: float) -> str:
    """A difference of two shares in percentage points: 0.046 -> +4.6 pp."""
    number = share * 100
    return "0.0 pp" if abs(number) < 0.05 else f"{number:+.1f} pp"


@_number(shown="none")
def seconds(number: float) -> str:
    """A TTL or short time: 300 -> 300 s, 0.5 -> 0.5 s, 86400 -> 86,400 s; missing -> none."""
    return f"{significant(number, 4)} s"


@_number()
def duration(number: float) -> str:
    """A span of time: 717 -> 12.0 min (717 s), 86400 -> 24.0 h."""
    if number < 120:
        return f"{number:,.1f} s"
    if number < 2 * 3600:
        return f"{number / 60:,.1f} min ({number:,.0f} s)"
    return f"{number / 3600:,.1f} h ({number:,.0f} s)"


@_number()
def milliseconds(number: float) -> str:
    """A latency in ms: 35.8 -> 36 ms, 5.2 -> 5.2 ms, 2383 -> 2.38 s, 999.7 -> 1.00 s (a
    value that rounds to 1,000 ms is shown in seconds)."""
    if number >= 999.5:
        return f"{number / 1000:,.2f} s"
    return f"{number:.1f} ms" if number < 9.95 else f"{number:,.0f} ms"


@_number()
def gib(number: float) -> str:
    """Bytes in GiB: 0.6104 -> 0.61 GiB, 12.5 -> 12.5 GiB, 999.7 -> 1,000 GiB."""
    return f"{significant(number, 3)} GiB"


@_number()
def gpu_seconds(number: float) -> str:
    """GPU time: 7.9069 -> 7.9 s."""
    return f"{number:,.1f} s"


@_number()
def usd(number: float) -> str:
    """Dollars: 0.3249 -> $0.32, 0.004 -> $0.0040, 1234.5 -> $1,234.50."""
    sign = "-" if number < 0 else ""
    number = abs(number)
    return f"{sign}${number:.4f}" if 0 < number < 0.01 else f"{sign}${number:,.2f}"


@_number()
def rate(number: float, unit: str = "req/s") -> str:
    """A throughput: 0.3654 -> 0.365 req/s, 1234.5 -> 1,234 req/s."""
    return f"{significant(number, 3)} {unit}"


def yes_no(value: object) -> str:
    """A flag: yes or no (missing: "-")."""
    return MISSING if missing(value) else ("yes" if value else "no")


def capacity(value: object) -> str:
    """A cache capacity in tokens: missing means unbounded."""
    return "unbounded" if missing(value) else integer(value)


def plain(value: object) -> str:
    """Anything else: whole floats without .0, other floats with 4 significant digits."""
    if missing(value):
        return MISSING
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return f"{value:,.0f}"
        return significant(value, 4)
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
