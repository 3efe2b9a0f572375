"""Name -> class registries for plug-ins (eviction policies, trace readers, routers, ...).

A plug-in registers itself with a decorator in its own module; the CLI and the config accept
exactly the registry keys. Resolving a bad name fails at load time, listing the valid names
and the closest one (`unknown_name`, which the preset tables' lookups use too). This module
holds no plug-ins itself.
"""

from __future__ import annotations

import difflib
import inspect
import math
import typing
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from prefixsim.errors import InputError

T = TypeVar("T")
MAX_BEGUN = 3  # names a bad one begins that `unknown_name` suggests, at most


def unknown_name(kind: str, name: str, valid: Iterable[str]) -> str:
    """`unknown policy 'lur' (did you mean 'lru'? valid: fifo, lru, ...)`: the message for a
    name that is not one of `valid`, suggesting those it begins (`h100` -> `h100-pcie` or
    `h100-sxm`; none past MAX_BEGUN: the valid list shows them), else the closest when one
    is close (difflib)."""
    names = sorted(valid)
    wanted = str(name).lower()
    begun = [n for n in names if wanted and n.lower().startswith(wanted)]
    close = (begun if len(begun) <= MAX_BEGUN else []) if begun else \
        difflib.get_close_matches(wanted, names, n=1, cutoff=0.6)
    hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
    return f"unknown {kind} {name!r} ({hint}valid: {', '.join(names)})"


class Registry(Generic[T]):
    """A named collection of plug-in factories of one kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}
        self._keywords: dict[str, tuple[str, ...]] = {}

    def register(self, name: str, keywords: Iterable[str] | None = None
                 ) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Class decorator: make `factory` buildable as `name` (lowercase, unique).
        `keywords`: every parameter name `check_params` lets a config set, where the factory
        takes a known set through `**params` (the cost models' parameter records); the
        others are refused and these are listed."""
        if name != name.lower():
            raise ValueError(f"{self.kind} names are lowercase: {name!r}")

        def decorate(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._factories[name] = factory
            if keywords is not None:
                self._keywords[name] = tuple(keywords)
            return factory

        return decorate

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def check(self, name: str) -> str:
        """Return `name` if registered, else raise ValueError listing the valid names (and
        the closest)."""
        if name not in self._factories:
            raise ValueError(unknown_name(self.kind, name, self._factories))
        return name

    def factory(self, name: str) -> Callable[..., T]:
        """The factory (usually the class) registered as `name`."""
        return self._factories[self.check(name)]

    def build(self, name: str, **params: Any) -> T:
        """Instantiate the plug-in registered as `name` with `params`."""
        return self._factories[self.check(name)](**params)

    def check_params(self, name: str, params: dict[str, Any], field: str,
                     supplied: tuple[str, ...] = ()) -> None:
        """Raise InputError naming `field.KEY` for a parameter the plug-in `name` does not
        take, or whose value is not of the annotated kind (a number as text, a boolean or a
        non-finite value for an `int`/`float` parameter). `supplied`: parameters the caller
        passes itself, which `params` may not set. Values are checked by the plug-in."""
        factory = self._factories[self.check(name)]
        target = factory.__init__ if isinstance(factory, type) else factory
        signature = inspect.signature(target)
        try:
            hints = typing.get_type_hints(target)
        except (NameError, TypeError):
            hints = {}
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        named = [p.name for p in signature.parameters.values()
                 if p.kind in kinds and p.name not in ("self", *supplied)]
        extra = next((p.name for p in signature.parameters.values()
                      if p.kind is inspect.Parameter.VAR_KEYWORD), None)
        keywords = self._keywords.get(name)
        for key, value in params.items():
            where = f"{field}.{key}"
            if key in named:
                hint = hints.get(key)
            elif extra is not None and key not in supplied and (keywords is None
                                                                or key in keywords):
                hint = hints.get(extra)
            else:  # the declared names where there are some: a compiled class's signature
                # may not show its named parameters
                takes = ", ".join(named if keywords is None else keywords) or "none"
                raise InputError(f"{self.kind} {name!r} takes no such parameter "
                                 f"(parameters: {takes})", field=where)
            if hint in (int, float):
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise InputError(f"expected a number, got {value!r}", field=where)
                if not math.isfinite(value):
                    raise InputError(f"must be finite, got {value!r}", field=where)
