"""Which config fields `prefixsim run` offers as flags: the metadata, and a walk over it.

A field gets a flag by being declared `option(default, "--name", "text", ...)`: one text is
both the field's description and the flag's help, to which the CLI (cli/config_options.py)
appends the dotted key and the default; it turns every such field into a click option and
its value into the dotted override, so a new config key needs this one edit to reach the
CLI. The metadata is plain data (strings, lists, numbers): this module knows nothing of click.
See docs/architecture.md (config, cli).
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo

FLAG_KEYS = ("dest", "also", "choices", "min", "kind", "multiple", "metavar", "parse",
             "section", "shown_default")


def option(default: Any, name: str, text: str, **extra: Any) -> Any:
    """A config field offered as the flag `name` of `prefixsim run`, described by `text`.

    `text` (no closing period) is the field's description and the flag's help; the CLI
    appends the dotted key and the default. `extra` holds the flag's metadata (`FLAG_KEYS`):
    `dest` (the parameter name; the dotted key with `_` for `.`), `also` (further dotted keys
    the flag sets), `choices`, `min` (an integer's least value), `kind` (`text` or `path`:
    instead of the field's own type), `multiple`, `metavar`, `parse` (a named parser of
    cli/config_options.py), `section` (`run` or `output`: a --help section other than the
    config section's) and `shown_default` (the default as the help shows it); the rest of
    `extra` goes to pydantic's `Field` (`ge`, `allow_inf_nan`, `default_factory`, ...).
    """
    meta = {key: extra.pop(key) for key in FLAG_KEYS if key in extra}
    return Field(default, description=text,
                 json_schema_extra={"cli": {"flag": name, "help": text, **meta}}, **extra)


@dataclass(frozen=True)
class FlaggedField:
    """One config field offered as a flag: its dotted key, its field and the metadata."""

    key: str
    field: FieldInfo
    meta: dict[str, Any]

    @property
    def top(self) -> str:
        """The top-level config key (`cache` for `cache.pool.ttl_s`)."""
        return self.key.split(".")[0]


def flagged_fields(model: type[BaseModel], prefix: str = "") -> Iterator[FlaggedField]:
    """Every field of `model` and its nested sections that names a flag, in field order."""
    for name, field in model.model_fields.items():
        key = prefix + name
        extra = field.json_schema_extra
        if isinstance(extra, dict) and "cli" in extra:
            yield FlaggedField(key, field, dict(extra["cli"]))  # type: ignore[arg-type]
        for section in _sections(field.annotation):
            yield from flagged_fields(section, key + ".")


def _sections(annotation: Any) -> list[type[BaseModel]]:
    """The config sections a field holds (`PoolConfig | None` -> [PoolConfig]; a list of
    sections, such as request classes, is not one)."""
    if typing.get_origin(annotation) in (list, dict, tuple):
        return []
    args = typing.get_args(annotation) or (annotation,)
    return [arg for arg in args if isinstance(arg, type) and issubclass(arg, BaseModel)]
