"""The `prefixsim run` flags made from the config fields that name one (config/flags.py).

`config_options` adds a click option per flagged field (its type, choices and help from
the field and its metadata; the help ends with the dotted keys and the default);
`config_overrides` turns the parsed values into the dotted config overrides (None = not
given, so the config file's value stands) and `load_flagged_config` loads the config with
them, naming the flag in an error about a value it gave; `config_dests` names the options
of some config sections for the --help sections (cli/help_sections.py).
The flags that are not config keys (--config, --output, ...) are cli/run.py's.
"""

from __future__ import annotations

import enum
import functools
import re
import typing
from collections.abc import Callable, Iterator
from typing import Any

import click

from prefixsim.config import RunConfig, load_config
from prefixsim.config.flags import FlaggedField, flagged_fields
from prefixsim.config.section import value_kinds
from prefixsim.config.units import examples, quantity, unit_of
from prefixsim.errors import InputError, within, yaml_scalar


@functools.cache
def _flagged() -> tuple[FlaggedField, ...]:
    return tuple(flagged_fields(RunConfig))


def dest(field: FlaggedField) -> str:
    """The click parameter name of a flagged field (`cache.pool.ttl_s` -> cache_pool_ttl_s)."""
    return field.meta.get("dest", field.key.replace(".", "_"))


def config_dests(*groups: str) -> tuple[str, ...]:
    """The parameter names of the flags of these top-level config sections (or metadata
    `section`s), group by group in the order given, fields in their order."""
    return tuple(dest(field) for group in groups for field in _flagged()
                 if field.meta.get("section", field.top) == group)


def config_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add a click option for every flagged config field to a click command."""
    for field in reversed(_flagged()):
        command = _option(field)(command)
    return command


def _option(field: FlaggedField) -> Callable[..., Any]:
    meta = field.meta
    settings: dict[str, Any] = {"help": help_text(field)}
    if "metavar" in meta:
        settings["metavar"] = meta["metavar"]
    if meta.get("multiple"):
        settings["multiple"] = True
    kinds = value_kinds(field.field.annotation)
    choices = meta.get("choices") or _choices(field.field.annotation)
    if meta.get("kind") == "path":
        settings["type"] = click.Path(dir_okay=False)
    elif meta.get("kind") == "text":
        pass
    elif choices:
        settings["type"] = click.Choice(choices)
    elif bool in kinds:
        settings.update(is_flag=True, default=None)
    elif unit_of(field.key.rsplit(".", 1)[-1]) and kinds & {int, float}:
        settings["type"] = Quantity(unit_of(field.key.rsplit(".", 1)[-1]) or "",
                                    float not in kinds, meta.get("min"))
    elif int in kinds:
        settings["type"] = click.IntRange(min=meta["min"]) if "min" in meta else int
    elif float in kinds:
        settings["type"] = float
    return click.option(meta["flag"], dest(field), **settings)


class Quantity(click.ParamType):
    """A number, or one with a unit suffix (`5k` tokens, `5m`, `40GiB`), read by the config's
    own parser (config/units.py) into the field's measure; `least` its least value."""

    def __init__(self, unit: str, integer: bool, least: int | None = None) -> None:
        self.unit, self.integer, self.least = unit, integer, least
        self.name = {"gib": "GIB", "milliseconds": "MS"}.get(unit, unit.upper())

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int | float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        try:
            number = quantity(str(value), self.unit, self.integer, bare=True)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if self.least is not None and number < self.least:
            self.fail(f"must be >= {self.least}, got {value!r}", param, ctx)
        return number


def help_text(field: FlaggedField) -> str:
    """The field's text, then its dotted keys and its default: `Seconds an unused page stays
    cached; no TTL by default (cache.ttl_s).`, `Tensor-parallel GPUs per replica
    (hardware.tp; 1).` (a default of None, False or empty goes unsaid)."""
    keys = " and ".join((field.key, *field.meta.get("also", ())))
    default = field.meta.get("shown_default", field.field.default)
    if isinstance(default, enum.Enum):
        default = default.value
    if isinstance(default, float):
        default = f"{default:g}"
    shown = "" if default is None or default is False or default == {} else f"; {default}"
    return f"{field.meta['help']} ({keys}{shown})."


def _choices(annotation: Any) -> list[str] | None:
    """The values a Literal or an Enum field admits, else None."""
    for arg in typing.get_args(annotation) or (annotation,):
        if isinstance(arg, type) and issubclass(arg, enum.Enum):
            return [member.value for member in arg]
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return None


def config_overrides(values: dict[str, Any]) -> dict[str, Any]:
    """Dotted config overrides from the parsed values of the flagged fields' options."""
    overrides: dict[str, Any] = {}
    for _, part in _overrides_by_flag(values):
        overrides.update(part)
    return overrides


def _overrides_by_flag(values: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each flag with the dotted overrides its parsed value makes."""
    for field in _flagged():
        parse = _PARSERS[field.meta.get("parse", "same")]
        yield field.meta["flag"], parse(field, values.get(dest(field)))


def load_flagged_config(config_path: str | None, values: dict[str, Any]) -> RunConfig:
    """The run config of `--config` (if any) with the flags' parsed `values` on top; an error
    about a value a flag gave names that flag beside the key: `--ttl (cache.ttl_s): must be
    > 0, got -1.0` (a file's own values keep their file and line: config/run_config.py)."""
    given: dict[str, str] = {}  # dotted key -> the flag that gave it
    overrides: dict[str, Any] = {}
    for flag, part in _overrides_by_flag(values):
        overrides.update(part)
        given.update((key, flag) for key, value in part.items() if value is not None)
    try:
        return load_config(config_path, overrides)
    except InputError as exc:
        raise named_by_flag(exc, given) from None


def named_by_flag(exc: InputError, given: dict[str, str]) -> InputError:
    """`exc` with its field named by the flag that set it (`--ttl (cache.ttl_s)`) when it
    names no file and its field is, or lies below, a key a flag in `given` set; else `exc`."""
    if exc.file is not None or exc.field is None:
        return exc
    flags = [flag for key, flag in given.items() if within(exc.field, key)]
    if not flags:
        return exc
    return InputError(exc.message, field=f"{flags[0]} ({exc.field})")


def _same(field: FlaggedField, value: Any) -> dict[str, Any]:
    """The value for the field's key and any further keys it sets (`also`)."""
    return {key: value for key in (field.key, *field.meta.get("also", ()))}


def _tokens_or_unbounded(field: FlaggedField, value: str | None) -> dict[str, Any]:
    """A whole number or `unbounded` (the config checks the number)."""
    if value is None or value == "unbounded":
        return {field.key: value}
    try:
        return {field.key: quantity(value, "tokens", integer=True, bare=True)}
    except ValueError:
        raise InputError(f"expected a number of tokens ({examples('tokens')}) or 'unbounded',"
                         f" got {value!r}", field=field.meta["flag"]) from None


def _params(field: FlaggedField, values: tuple[str, ...] | None) -> dict[str, Any]:
    return {field.key: parse_params(values or (), field.meta["flag"])}


def _goodput(field: FlaggedField, values: tuple[str, ...] | None) -> dict[str, Any]:
    return parse_goodput(values or ())


def parse_goodput(values: tuple[str, ...]) -> dict[str, float]:
    """`ttft:500 tpot:50` -> {"engine.goodput_ttft_ms": 500, "engine.goodput_tpot_ms": 50}."""
    out: dict[str, float] = {}
    for item in (part for value in values for part in re.split(r"[\s,]+", value) if part):
        name, _, number = item.partition(":")
        if name not in ("ttft", "tpot"):
            raise InputError(f"expected ttft:MS or tpot:MS, got {item!r}", field="--goodput")
        try:  # milliseconds, or with a unit: ttft:2s (config/units.py)
            out[f"engine.goodput_{name}_ms"] = quantity(number, "milliseconds", bare=True)
        except ValueError:
            raise InputError(f"not a number of milliseconds: {item!r}",
                             field="--goodput") from None
    return out


def parse_params(values: tuple[str, ...], flag: str) -> dict[str, Any] | None:
    """`KEY=VALUE` pairs (values read as YAML scalars) into a mapping; None when empty."""
    if not values:
        return None
    params: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise InputError(f"expected KEY=VALUE, got {item!r}", field=flag)
        try:
            params[key] = yaml_scalar(raw)
        except ValueError as exc:
            raise InputError(f"{key}: {exc}", field=flag) from None
    return params


_PARSERS: dict[str, Callable[[FlaggedField, Any], dict[str, Any]]] = {
    "same": _same, "tokens_or_unbounded": _tokens_or_unbounded, "params": _params,
    "goodput": _goodput,
}
