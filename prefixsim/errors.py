"""Errors that reach the user as one line (exit code 2), and the one reader of user YAML.

`InputError` carries where the bad input is (file, line, field) so the CLI can print a
single message that names it. Internal failures are ordinary exceptions and exit with 1.
`read_yaml` reads every YAML file a user gives (configs, sweep specs, presets, prices) with
the same checks, so each problem with one becomes such an error (`read_yaml_lines` also
gives each key's line, which `located` adds to an error found later about that file);
`validation_message` words a schema's (pydantic's) error as the readers word theirs, and
`field_of` names its key (a model's check that belongs to one field raises `FieldError`).
A write that the user's disk refuses (full, over `ulimit -f`, a name too long, no
permission) is the user's to fix too: `naming_the_file` makes it name the file,
`is_users_os_error` says it exits 2 (docs/input-rules.md I19).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml


class InputError(Exception):
    """Invalid user input: a trace line, a config key, an option value or a missing file."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.field = field

    def __str__(self) -> str:
        where = ""
        if self.file is not None:
            where = str(self.file)
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        field = f"{self.field}: " if self.field else ""
        return f"{where}{field}{self.message}"


# ------------------------------------------------------------------------ user YAML files
# Caps on what one YAML file a user gives (run config, sweep spec, presets, prices, workload
# presets) may hold: bytes on disk and values once its aliases are expanded (a few aliases
# nested in each other can stand for billions of values).
MAX_YAML_BYTES = 1 << 20
MAX_YAML_VALUES = 100_000


def read_yaml(path: str | Path) -> Any:
    """The YAML document in `path` (safe loading), every problem an `InputError` naming the
    file and line: missing or unreadable, not UTF-8 (a BOM is fine), over MAX_YAML_BYTES, not
    valid YAML, a key given twice in one mapping, or more than MAX_YAML_VALUES values once
    aliases are expanded."""
    return read_yaml_lines(path)[0]


def read_yaml_lines(path: str | Path) -> tuple[Any, Mapping[str, int]]:
    """`read_yaml(path)` and the line of each of its keys (`key_lines`, worked out when
    first asked for: most files are read without an error to name), so that a value found
    wrong later can be named with its line (`located`)."""
    path = Path(path)
    where = str(path)
    if not path.is_file():
        raise InputError("no such file", file=where)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_YAML_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", file=where) from None
    if len(raw) > MAX_YAML_BYTES:
        raise InputError(f"larger than {MAX_YAML_BYTES:,} bytes; not a config file", file=where)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError("not a UTF-8 text file", file=where) from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as exc:
        raise InputError("key given twice in one mapping", file=where, line=exc.line,
                         field=exc.key) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"not valid YAML ({' '.join(str(problem).split())})", file=where,
                         line=line) from None
    except RecursionError:
        raise InputError("not valid YAML (too deeply nested)", file=where) from None
    if _count_values(data, MAX_YAML_VALUES) > MAX_YAML_VALUES:
        raise InputError(f"holds more than {MAX_YAML_VALUES:,} values once its aliases are "
                         "expanded", file=where)
    return data, KeyLines(text)


class KeyLines(Mapping[str, int]):
    """`key_lines(text)` as a mapping, composed on first use."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._lines: dict[str, int] | None = None

    @property
    def lines(self) -> dict[str, int]:
        if self._lines is None:
            self._lines = key_lines(self.text)
        return self._lines

    def __getitem__(self, key: str) -> int:
        return self.lines[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.lines)

    def __len__(self) -> int:
        return len(self.lines)


def key_lines(text: str) -> dict[str, int]:
    """The line (1-based) of every key of the YAML document `text`, by its dotted path:
    `cache`, `cache.ttl_s`; a list's items by their index (`runs.0`, `runs.0.cache.policy`);
    a key written with dots is one step (`grid.cache.ttl_s` is the key `cache.ttl_s` under
    `grid`). A node reached again through an alias is walked once; text that is not valid
    YAML has no lines."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return {}
    lines: dict[str, int] = {}
    walked: set[int] = set()
    stack: list[tuple[str, Any]] = [("", root)]
    while stack and len(lines) <= MAX_YAML_VALUES:
        prefix, node = stack.pop()
        if id(node) in walked:
            continue
        walked.add(id(node))
        if isinstance(node, yaml.MappingNode):
            children = [(str(key.value), key, value) for key, value in node.value]
        elif isinstance(node, yaml.SequenceNode):
            children = [(str(index), item, item) for index, item in enumerate(node.value)]
        else:
            continue
        below = [(f"{prefix}.{name}" if prefix else name, marked, value)
                 for name, marked, value in children]
        for dotted, marked, _ in below:
            lines.setdefault(dotted, marked.start_mark.line + 1)
        # walked in the order written: an aliased node under its first path
        stack.extend((dotted, value) for dotted, _, value in reversed(below))
    return lines


def line_of(lines: Mapping[str, int], dotted: str) -> int | None:
    """The line of the dotted key `dotted`, else of its longest prefix that has one (a
    value the file does not hold: its section's line), else None."""
    parts = dotted.split(".")
    for count in range(len(parts), 0, -1):
        line = lines.get(".".join(parts[:count]))
        if line is not None:
            return line
    return None


def within(dotted: str, key: str) -> bool:
    """Whether the dotted key `dotted` is `key` or lies below it (`cache.ttl_s` within
    `cache`)."""
    return dotted == key or dotted.startswith(f"{key}.")


def located(exc: InputError, file: str | None, lines: Mapping[str, int],
            elsewhere: Iterable[str] = ()) -> InputError:
    """`exc` naming the line of its field when it names the file `file` (whose keys are at
    `lines`), has no line yet, and its field's value came from that file: not from one of
    the dotted keys `elsewhere` (set on the command line) at, above or below the field."""
    field = exc.field
    if exc.line is not None or field is None or file is None or exc.file != file:
        return exc
    if any(within(key, field) or within(field, key) for key in elsewhere):
        return exc
    line = line_of(lines, field)
    if line is None:
        return exc
    return InputError(exc.message, file=exc.file, line=line, field=field)


class _DuplicateKey(Exception):
    def __init__(self, key: str, line: int) -> None:
        super().__init__(key)
        self.key, self.line = key, line


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key repeated within one mapping (YAML would keep the last),
    and reads a plain number with an exponent as a number (see EXPONENT_FLOAT)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: SafeLoader reports it
                break
            if duplicate:
                raise _DuplicateKey(str(key), key_node.start_mark.line + 1)
        return super().construct_mapping(node, deep=deep)


# A plain (unquoted) scalar with an exponent: `1e300`, `5e-3`, `1.5E3`. PyYAML follows YAML
# 1.1, whose floats need a dot and a signed exponent (`1.0e+300`), so it read these as
# strings and a config refused `rate: 1e300` as `expected a number, got '1e300'`; YAML 1.2
# (and JSON) read them as numbers. A quoted `"1e300"` stays a string (refused where a
# number belongs, docs/input-rules.md I4), and so does any scalar without an exponent.
EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", EXPONENT_FLOAT,
                                    list("-+0123456789."))


def yaml_scalar(text: str) -> Any:
    """One value written on the command line (`KEY=VALUE`), read as a config file reads it;
    ValueError when it is not YAML."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as exc:
        problem = f"key {exc.key!r} given twice"
    except RecursionError:
        problem = "too deeply nested"
    except yaml.YAMLError as exc:
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
    raise ValueError(f"not a YAML value ({problem}): {quoted(text)}")


def quoted(text: str, limit: int = 60) -> str:
    """`text` quoted as Python writes it, its first `limit` characters only when longer, so a
    refusal stays one readable line: `'[[[[...'... (5,000 characters)`."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


def _count_values(data: Any, budget: int) -> int:
    """Values in `data` counting every alias again, stopping once past `budget`."""
    count = 0
    stack = [data]
    while stack and count <= budget:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set):
            stack.extend(item)
    return count


# ------------------------------------------------------------------ writes the disk refuses
# Errors of a write the user can fix (space, quota, `ulimit -f`, a name over the file
# system's limit, permissions, a read-only mount): one line and exit 2, like bad input.
USERS_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.ENAMETOOLONG,
                          errno.EACCES, errno.EPERM, errno.EROFS})
_ARROW_ERRNO = re.compile(r"\[errno (\d+)\]", re.IGNORECASE)


class FieldError(ValueError):
    """A model-level check's failure that belongs to one field of the model (a preset name
    checked against the section's presets file, a prompt too long for its pages): the
    error names `model.field` instead of the model (`field_of`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def field_of(error: Mapping[str, Any], key: str) -> str:
    """The dotted key a pydantic error names: `key` (its location), or `key.field` when a
    FieldError raised it."""
    raised = (error.get("ctx") or {}).get("error")
    if isinstance(raised, FieldError):
        return f"{key}.{raised.field}" if key else raised.field
    return key


# pydantic's numeric bound errors: (operator, the context key holding the bound)
_BOUNDS = {"greater_than_equal": (">=", "ge"), "greater_than": (">", "gt"),
           "less_than_equal": ("<=", "le"), "less_than": ("<", "lt")}


def validation_message(error: Mapping[str, Any]) -> str:
    """One pydantic error (an item of `ValidationError.errors()`) as one line's message: a
    bound as the readers word it (`must be >= 1, got 0`), a check's own text without
    pydantic's "Value error, ", anything else with the value it got (`(got 'x')`)."""
    kind, value = error["type"], error.get("input")
    if kind in _BOUNDS:
        op, key_of_bound = _BOUNDS[kind]
        bound = error["ctx"][key_of_bound]
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)  # "> 0", not "> 0.0"
        return f"must be {op} {bound}, got {value!r}"
    message = error["msg"].removeprefix("Value error, ")
    if kind != "value_error" and not isinstance(value, dict):
        message += f" (got {value!r})"
    return message


def os_error_number(exc: OSError) -> int | None:
    """`exc`'s errno; Arrow's write errors hold it only in their text (`[errno 28] ...`)."""
    if exc.errno is not None:
        return exc.errno
    found = _ARROW_ERRNO.search(str(exc))
    return int(found.group(1)) if found else None


def is_users_os_error(exc: OSError) -> bool:
    return os_error_number(exc) in USERS_ERRNOS


@contextlib.contextmanager
def naming_the_file(path: str | Path) -> Iterator[None]:
    """Within the block an OSError that names no file (a full disk while Arrow or a stream
    writes) is raised again naming `path`, with its errno and the system's words for it."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None:
            raise
        number = os_error_number(exc)
        words = os.strerror(number) if number is not None else " ".join(str(exc).split())
        raise OSError(number, words, str(path)) from exc
