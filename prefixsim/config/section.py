"""The base of every config section: frozen, unknown keys refused, numbers strictly typed.

Pydantic's lax mode would read `capacity_tokens: true` as 1 and `ttl_s: "300"` as 300.0; a
section here takes a number only as a YAML/JSON number (an integral float for an integer
field is still fine), so a boolean or a string where a number belongs is an error naming the
key; a number where a boolean belongs likewise, and a number that is not finite (`.nan`,
`.inf`) where a number belongs. Fields typed `str` take what pydantic takes.
`registered` is the validator of a field that names a plug-in of a registry; `FieldError`
(errors.py) is how a check of the whole section names the field at fault.
See docs/architecture.md.
"""

from __future__ import annotations

import math
import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from prefixsim.config.units import quantity, unit_of
from prefixsim.registry import Registry

# An integer setting must fit in 64 bits: results are stored as int64 columns
# (docs/input-rules.md I4; 10**30 tokens once failed only after every run had finished).
INT64_LIMIT = 1 << 63


def value_kinds(annotation: Any) -> set[type]:
    """The plain types an annotation admits (`int | None` -> {int, NoneType})."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return {kind for arg in typing.get_args(annotation) for kind in value_kinds(arg)}
    if origin is typing.Literal:
        return {type(arg) for arg in typing.get_args(annotation)}
    return {annotation} if isinstance(annotation, type) else set()


class Section(BaseModel):
    """A frozen config section that refuses unknown keys and loosely typed numbers."""

    model_config = ConfigDict(frozen=True, extra="forbid", protected_namespaces=())

    @field_validator("*", mode="before")
    @classmethod
    def _strict_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        kinds = value_kinds(cls.model_fields[info.field_name].annotation)
        unit = unit_of(info.field_name)  # "5k" tokens, "5m", "40GiB": config/units.py
        if isinstance(value, str) and unit and kinds & {int, float} and str not in kinds:
            value = quantity(value, unit, integer=float not in kinds)
        if isinstance(value, bool):
            if kinds & {int, float} and bool not in kinds:
                raise ValueError(f"expected {_number(kinds)}, got {value!r}")
        elif isinstance(value, str):
            if kinds & {int, float} and str not in kinds:
                raise ValueError(f"expected {_number(kinds)}, got {value!r}")
            if bool in kinds and not kinds & {int, float, str}:
                raise ValueError(f"expected true or false, got {value!r}")
        elif isinstance(value, int | float):
            if bool in kinds and not kinds & {int, float, str}:
                raise ValueError(f"expected true or false, got {value!r}")
            if kinds & {int, float} and not math.isfinite(value):  # `.nan`, `.inf`, `1e400`
                raise ValueError(f"must be a finite number, got {value}")
            if int in kinds and float not in kinds and not -INT64_LIMIT <= value < INT64_LIMIT:
                raise ValueError(f"must fit in 64 bits (below 2^63), got {value:.4g}")
        return value


def registered(registry: Registry, *fields: str) -> Any:
    """A validator of `fields`: a name registered in `registry` (None passes); else the error
    lists the valid names (docs/architecture.md: config checks plug-in names)."""
    def check(cls: type, value: str | None) -> str | None:
        return value if value is None else registry.check(value)
    return field_validator(*fields)(check)


def _number(kinds: set[type]) -> str:
    return "an integer" if int in kinds and float not in kinds else "a number"
