"""Constraints of a tune: `KEY + KEY ... <= NUMBER` (or `>=`) over config and summary keys.

A term with a dot is a dotted config key, read from the trial's effective config (e.g.
`cache.capacity_tokens + cache.host_capacity_tokens <= 40000`, a memory budget); one without
is a summary key (e.g. `p99_ttft_ms <= 2000`). A constraint over config keys only is checked
before the run: a trial that breaks it is not simulated. The violation is `lhs - bound` for
`<=` and `bound - lhs` for `>=`, so a trial is feasible when every violation is <= 0 (the
convention of Optuna's `Trial.set_constraint`). A null or missing value (an unbounded
capacity, a latency a cache-only run lacks) is an infinite violation: give such a knob a
numeric value. This module parses and evaluates; it neither runs nor writes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prefixsim.errors import InputError
from prefixsim.metrics.schema import schema_key

_FORM = re.compile(r"^\s*(?P<lhs>[^<>=]+?)\s*(?P<op><=|>=)\s*(?P<bound>[-+0-9.eE_]+)\s*$")
_TERM = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*$")


@dataclass(frozen=True)
class Constraint:
    """One parsed constraint: the sum of `terms` compared with `bound`."""

    text: str
    terms: tuple[str, ...]
    op: str
    bound: float

    @property
    def config_terms(self) -> tuple[str, ...]:
        return tuple(t for t in self.terms if "." in t)

    @property
    def before_run(self) -> bool:
        """True when every term is a config key (checked without simulating)."""
        return len(self.config_terms) == len(self.terms)

    def violation(self, config: Mapping[str, Any], summary: Mapping[str, Any] | None) -> float:
        """How far the trial is from meeting it (<= 0: met); `config` is the effective config
        as a nested mapping, `summary` the run's (None before the run)."""
        total = 0.0
        for term in self.terms:
            value = dotted(config, term) if "." in term else (summary or {}).get(term)
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value):
                return math.inf
            total += value
        return total - self.bound if self.op == "<=" else self.bound - total


def dotted(tree: Mapping[str, Any], key: str) -> Any:
    """The value at a dotted key of a nested mapping (None where absent)."""
    node: Any = tree
    for part in key.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def parse_constraint(text: Any, field: str, error: Callable[[str, str], InputError]
                     ) -> Constraint:
    """A constraint from its spec text; `error(message, field)` builds the InputError."""
    match = _FORM.match(text) if isinstance(text, str) else None
    if match is None:
        raise error("expected 'KEY [+ KEY ...] <= NUMBER' (or >=), e.g. 'p99_ttft_ms <= 2000'",
                    field)
    try:
        bound = float(match["bound"])
    except ValueError:
        raise error(f"not a number: {match['bound']!r}", field) from None
    terms = tuple(t.strip() for t in match["lhs"].split("+"))
    for term in terms:
        if not _TERM.match(term):
            raise error(f"not a key: {term!r}", field)
        if "." not in term and schema_key(term) is None:
            raise error(f"{term}: not a summary key (see docs/results.md)", field)
    return Constraint(text=" ".join(text.split()), terms=terms, op=match["op"], bound=bound)
