"""The knob a capacity search turns, and how one of its values becomes a run config.

`--search rate` turns the offered rate: `load.rate` (requests/s) when the config's load is
poisson or constant, else the trace's own arrival times scaled by a rate multiplier (2 =
twice the trace's rate: `load.rate_scale`). `--search replicas` turns
`engine.replicas` with the trace's own load. Owns the search space of each knob; the
search itself is search.py's, running the probes driver.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from prefixsim.capacity.search import SearchSpace
from prefixsim.config import RunConfig, config_to_yaml
from prefixsim.config.load import RATE_TYPES
from prefixsim.errors import InputError

SEARCHES = ("rate", "replicas")
MAX_REPLICAS = 4096  # engine.replicas' own limit
RATE_RANGE = 2.0 ** 20  # a rate is searched within start / RATE_RANGE .. start * RATE_RANGE
SIGNIFICANT_DIGITS = 6  # rate values probed are rounded to this (tidy run ids)


@dataclass(frozen=True)
class Knob:
    """A dotted config key, the value it takes for a searched value, and where to start."""

    search: str
    key: str
    start: float
    to_config: Callable[[float], Any]
    label: str  # what the searched value means, for tables and plots

    def space(self, tolerance: float, width: int) -> SearchSpace:
        if self.search == "replicas":
            return SearchSpace(start=self.start, passes_below=False, lowest=1,
                               highest=MAX_REPLICAS, integer=True, width=width)
        return SearchSpace(start=self.start, passes_below=True,
                           lowest=self.start / RATE_RANGE, highest=self.start * RATE_RANGE,
                           tolerance=tolerance, width=width)

    def params(self, value: float) -> dict[str, Any]:
        """The dotted override of one probe."""
        return {self.key: self.to_config(value)}


def knob_for(config: RunConfig, search: str) -> Knob:
    """The knob `search` turns on `config` (InputError naming --search when it cannot)."""
    if config.cache_only:
        raise InputError("a capacity search needs a timed run (not cache_only)",
                         field="--search")
    if search == "replicas":
        if config.engine.prefill_replicas is not None:
            raise InputError("--search replicas turns engine.replicas; this config splits "
                             "prefill_replicas and decode_replicas", field="--search")
        return Knob("replicas", "engine.replicas", 1.0, lambda n: int(n), "replicas")
    if search != "rate":
        raise InputError(f"unknown search {search!r} (valid: {', '.join(SEARCHES)})",
                         field="--search")
    load = config.load
    kind = load.type
    if kind in RATE_TYPES and not load.stages:
        return Knob("rate", "load.rate", float(load.rate), _tidy, "load.rate (requests/s)")
    if kind != "trace":
        raise InputError(f"--search rate turns a trace, poisson or constant load's rate, not "
                         f"a {'staged ' if load.stages else ''}{kind} load", field="--search")
    base = load.rate_scale
    return Knob("rate", "load.rate_scale", 1.0, lambda m: _tidy(base * m),
                "rate multiplier of the trace (x the config's rate)")


def base_mapping(config: RunConfig) -> dict[str, Any]:
    """The config as a plain mapping that `make_point` validates again with each probe's
    override (the effective config, as `prefixsim run --config` reads it)."""
    return yaml.safe_load(config_to_yaml(config))


def _tidy(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")
