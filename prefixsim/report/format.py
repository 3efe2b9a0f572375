"""Numbers formatted for people: 5,000 tokens, 37.4%, +4.6 pp, 1.23 s, $0.32.

Each function takes one value (None or NaN gives "-") and returns the text a table or the
header shows; the raw value stays available for sorting (table.py). Nothing here decides
which figures to show.
"""

from __future__ import annotations

MISSING = "-"


def missing(value: object) -> bool:
    """None, NaN and pandas' NA all count as missing."""
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN and NA
    except (TypeError, ValueError):
        return False


def integer(value: object) -> str:
    """5000 -> 5,000 (floats that are whole numbers too)."""
    if missing(value):
        return MISSING
    number = float(value)  # type: ignore[arg-type]
    return f"{number:,.0f}" if number.is_integer() else f"{number:,.1f}"


def percent(value: object, digits: int = 1) -> str:
    """A share: 0.374 -> 37.4%."""
    if missing(value):
        return MISSING
    return f"{float(value):.{digits}%}"  # type: ignore[arg-type]


def points(value: object) -> str:
    """A difference of two shares in percentage points: 0.046 -> +4.6 pp."""
    if missing(value):
        return MISSING
    number = float(value) * 100  # type: ignore[arg-type]
    return "0.0 pp" if abs(number) < 0.05 else f"{number:+.1f} pp"


def seconds(value: object) -> str:
    """A TTL or short time: 300 -> 300 s, 0.5 -> 0.5 s; missing -> none."""
    if missing(value):
        return "none"
    return f"{float(value):,.4g} s"  # type: ignore[arg-type]


def duration(value: object) -> str:
    """A span of time: 717 -> 12.0 min (717 s), 86400 -> 24.0 h."""
    if missing(value):
        return MISSING
    number = float(value)  # type: ignore[arg-type]
    if number < 120:
        return f"{number:,.1f} s"
    if number < 2 * 3600:
        return f"{number / 60:,.1f} min ({number:,.0f} s)"
    return f"{number / 3600:,.1f} h ({number:,.0f} s)"


def milliseconds(value: object) -> str:
    """A latency in ms: 35.8 -> 36 ms, 5.2 -> 5.2 ms, 2383 -> 2.38 s."""
    if missing(value):
        return MISSING
    number = float(value)  # type: ignore[arg-type]
    if number >= 1000:
        return f"{number / 1000:,.2f} s"
    return f"{number:.1f} ms" if number < 10 else f"{number:,.0f} ms"


def gpu_seconds(value: object) -> str:
    """GPU time: 7.9069 -> 7.9 s."""
    if missing(value):
        return MISSING
    return f"{float(value):,.1f} s"  # type: ignore[arg-type]


def usd(value: object) -> str:
    """Dollars: 0.3249 -> $0.32, 0.004 -> $0.0040, 1234.5 -> $1,234.50."""
    if missing(value):
        return MISSING
    number = float(value)  # type: ignore[arg-type]
    sign = "-" if number < 0 else ""
    number = abs(number)
    return f"{sign}${number:.4f}" if 0 < number < 0.01 else f"{sign}${number:,.2f}"


def rate(value: object, unit: str = "req/s") -> str:
    """A throughput: 0.3654 -> 0.37 req/s."""
    if missing(value):
        return MISSING
    number = float(value)  # type: ignore[arg-type]
    return f"{number:,.3g} {unit}" if number < 100 else f"{number:,.0f} {unit}"


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
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
