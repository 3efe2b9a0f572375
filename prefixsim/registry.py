"""Name -> class registries for plug-ins (eviction policies, trace readers, routers, ...).

A plug-in registers itself with a decorator in its own module; the CLI and the config accept
exactly the registry keys. Resolving a bad name fails at load time, listing the valid names.
This module holds no plug-ins itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """A named collection of plug-in factories of one kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Class decorator: make `factory` buildable as `name` (lowercase, unique)."""
        if name != name.lower():
            raise ValueError(f"{self.kind} names are lowercase: {name!r}")

        def decorate(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._factories[name] = factory
            return factory

        return decorate

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def check(self, name: str) -> str:
        """Return `name` if registered, else raise ValueError listing the valid names."""
        if name not in self._factories:
            valid = ", ".join(self.names())
            raise ValueError(f"unknown {self.kind} {name!r} (valid: {valid})")
        return name

    def factory(self, name: str) -> Callable[..., T]:
        """The factory (usually the class) registered as `name`."""
        return self._factories[self.check(name)]

    def build(self, name: str, **params: Any) -> T:
        """Instantiate the plug-in registered as `name` with `params`."""
        return self._factories[self.check(name)](**params)
