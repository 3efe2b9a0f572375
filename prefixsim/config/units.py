"""Unit suffixes on config values: `5k` tokens, `2M` tokens, `5m`, `1h`, `300s`, `40GiB`.

A field's unit comes from its name (docs/input-rules.md I4): `..._tokens` counts tokens
(`k`/`K` = 10^3, `M` = 10^6, `G` = 10^9, `T` = 10^12), `..._s` and `..._ms` are durations
(`ms`, `s`, `m`/`min`, `h`, `d`), `..._gib` is a size in GiB (`B`, `KB`/`MB`/`GB`/`TB` in
powers of 1000, `KiB`/`MiB`/`GiB`/`TiB` in powers of 1024). Rates (`..._per_s`,
`..._gb_s`) take none. `quantity` is the one parser: the config sections call it on a
string value (config/section.py), and `prefixsim run`'s flags of such fields too
(cli/config_options.py), so a config file and the command line read `5k` alike.
A bare number in a string (`"300"`) is no quantity: a config file writes numbers as numbers.
"""

from __future__ import annotations

import math
import re

# unit kind -> suffix -> multiplier into the field's own unit
_SCALES: dict[str, dict[str, float]] = {
    "tokens": {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12},
    "seconds": {"ms": 1e-3, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400},
    "milliseconds": {"ms": 1, "s": 1e3, "m": 6e4, "min": 6e4, "h": 3.6e6},
    "gib": {"B": 2**-30, "KB": 1e3 / 2**30, "MB": 1e6 / 2**30, "GB": 1e9 / 2**30,
            "TB": 1e12 / 2**30, "KiB": 2**-20, "MiB": 2**-10, "GiB": 1, "TiB": 2**10},
}
_EXAMPLES = {"tokens": "5k, 2M", "seconds": "300s, 5m, 1h", "milliseconds": "500ms, 2s",
             "gib": "512MiB, 40GiB"}
_QUANTITY = re.compile(r"\s*([-+]?[0-9][0-9_]*(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+)\s*"
                       r"([A-Za-z]*)\s*")


def unit_of(field_name: str) -> str | None:
    """The unit kind a field's name gives it (`capacity_tokens` -> tokens), or None."""
    if field_name.endswith("_tokens"):
        return "tokens"
    if field_name.endswith("_ms"):
        return "milliseconds"
    if field_name.endswith("_gib"):
        return "gib"
    if field_name.endswith("_s") and not field_name.endswith(("_per_s", "_gb_s")):
        return "seconds"
    return None


def examples(unit: str) -> str:
    """Two or three values with suffixes, for help and error texts."""
    return _EXAMPLES[unit]


def quantity(text: str, unit: str, integer: bool = False,
             bare: bool = False) -> int | float:
    """`text` ("5k", "2.5M", "5m", "40GiB"; "1200" too when `bare`) in the unit's own
    measure; a whole number as int when `integer`. ValueError (its message names the
    accepted suffixes) for anything else, a fraction where a whole number belongs, or a
    value out of range."""
    scales = {"": 1, **_SCALES[unit]} if bare else _SCALES[unit]
    match = _QUANTITY.fullmatch(text)
    if match is None or match.group(2) not in scales:
        raise ValueError(f"expected a number, or one with a unit ({examples(unit)}; units: "
                         f"{', '.join(s for s in scales if s)}), got {text!r}")
    value = float(match.group(1).replace("_", "")) * scales[match.group(2)]
    if not math.isfinite(value):
        raise ValueError(f"must be finite, got {text!r}")
    if not integer:
        return value
    whole = round(value)
    if abs(value - whole) > 1e-9 * max(1.0, abs(value)):
        raise ValueError(f"expected a whole number of {unit}, got {text!r} = {value:g}")
    return int(whole)
