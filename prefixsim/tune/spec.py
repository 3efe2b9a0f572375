"""Tune specs: a base run config, a search space of dotted keys, objectives, constraints.

A spec is a YAML mapping (docs/results.md, "A tune spec"):

```yaml
name: demo
base: {trace: {path: ../demo_chat.jsonl}, cache_only: true}   # a run config, as sweep's
space:                                    # dotted key -> a list (categorical) or a range
  cache.policy: [lru, s3fifo]
  cache.capacity_tokens: {int: [5000, 40000], log: true}
  cache.policy_params.small_fraction: {float: [0.05, 0.5], when: {cache.policy: s3fifo}}
objectives: {cache_token_hit_rate: maximize}              # summary key -> direction
constraints: ["cache.capacity_tokens + cache.host_capacity_tokens <= 40000"]
trials: 50
sampler: {name: tpe, seed: 0}                             # tpe, cmaes, nsga2, random, grid
```

Everything is checked here, before anything runs or is written: the spec's keys, every knob
(each choice and both ends of each range are validated as points on top of `base`, with
the knobs a `when:` names set to an allowed value), objective and constraint keys (summary
keys of docs/results.md, or dotted config keys), the sampler's name. Errors name the file,
the line of the offending key and the field (`space.cache.ttl_s`). Points are built by the
sweep's `make_point` (seeds derive from the parameters, relative trace paths start at the
spec's folder). This module reads the spec file and nothing else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from prefixsim.cache import POLICIES
from prefixsim.config import RunConfig, read_config_file
from prefixsim.errors import InputError, KeyLines, line_of
from prefixsim.metrics.schema import schema_key
from prefixsim.sweep.spec import make_point, without_point
from prefixsim.tune.constraints import Constraint, parse_constraint
from prefixsim.tune.samplers import SAMPLERS
from prefixsim.tune.space import Knob, parse_knob, probe_points

SPEC_KEYS = ("name", "base", "space", "objectives", "constraints", "trials", "sampler")
DIRECTIONS = {"maximize": "maximize", "maximise": "maximize", "max": "maximize",
              "minimize": "minimize", "minimise": "minimize", "min": "minimize"}


@dataclass(frozen=True)
class Objective:
    """A summary key to optimise and its direction (`maximize` or `minimize`)."""

    key: str
    direction: str


@dataclass(frozen=True)
class SamplerSpec:
    """Which Optuna sampler, its seed and extra constructor options."""

    name: str = "tpe"
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TuneSpec:
    """A parsed and validated tune spec."""

    name: str
    base: dict[str, Any]
    knobs: list[Knob]
    objectives: list[Objective]
    constraints: list[Constraint]
    trials: int
    sampler: SamplerSpec
    root: Path | None = None  # the spec file's folder: relative trace paths start there
    text: str = ""  # the spec as given (written beside the results)


class _Where:
    """Builds InputErrors that name the spec file and the line of a field."""

    def __init__(self, source: str | None, lines: Mapping[str, int]) -> None:
        self.source, self.lines = source, lines

    def error(self, message: str, field: str) -> InputError:
        """The error at the line of `field`, else of its longest dotted prefix with a line."""
        return InputError(message, file=self.source, line=line_of(self.lines, field),
                          field=field)


def _objectives(data: Any, where: _Where) -> list[Objective]:
    if isinstance(data, str):
        data = {data: "maximize"}
    if not isinstance(data, dict) or not data:
        raise where.error("expected a mapping of summary keys to maximize or minimize",
                          "objectives")
    objectives = []
    for key, direction in data.items():
        if schema_key(str(key)) is None:
            raise where.error("unknown objective: not a summary key (see docs/results.md)",
                              f"objectives.{key}")
        if str(direction).lower() not in DIRECTIONS:
            raise where.error(f"expected maximize or minimize, got {direction!r}",
                              f"objectives.{key}")
        objectives.append(Objective(str(key), DIRECTIONS[str(direction).lower()]))
    return objectives


def _sampler(data: Any, num_objectives: int, where: _Where) -> SamplerSpec:
    if data is None:
        data = {}
    if isinstance(data, str):
        data = {"name": data}
    if not isinstance(data, dict):
        raise where.error("expected a sampler name or a mapping with name: and seed:",
                          "sampler")
    options = dict(data)
    name = str(options.pop("name", "tpe")).lower()
    seed = options.pop("seed", 0)
    if name not in SAMPLERS:
        raise where.error(f"unknown sampler {name!r} (valid: {', '.join(SAMPLERS.names())})",
                          "sampler")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise where.error(f"must be an integer >= 0, got {seed!r}", "sampler")
    if name == "cmaes" and num_objectives > 1:
        raise where.error("cmaes optimises one objective; use nsga2 or tpe", "sampler")
    return SamplerSpec(name=name, seed=seed, options=options)


def parse_tune_spec(data: Any, source: str | None = None, name: str = "tune",
                    root: Path | None = None, text: str = "") -> TuneSpec:
    """Check a spec mapping completely (see the module docstring)."""
    where = _Where(source, KeyLines(text) if text else {})  # composed if an error asks
    if not isinstance(data, dict):
        raise InputError("expected a mapping with base:, space: and objectives:", file=source)
    for key in data:
        if key not in SPEC_KEYS:
            raise where.error(f"unknown key (valid: {', '.join(SPEC_KEYS)})", str(key))
    base = data.get("base") or {}
    if not isinstance(base, dict):
        raise where.error("expected a run config mapping", "base")
    space = data.get("space")
    if not isinstance(space, dict) or not space:
        raise where.error("expected a mapping of dotted keys to a list or a range", "space")
    knobs: list[Knob] = []
    for key, value in space.items():
        knobs.append(parse_knob(str(key), value, knobs, where.error))
    objectives = _objectives(data.get("objectives"), where)
    constraints = data.get("constraints") or []
    if not isinstance(constraints, list):
        raise where.error("expected a list of constraints such as 'p99_ttft_ms <= 2000'",
                          "constraints")
    parsed = [parse_constraint(c, f"constraints.{i}", where.error)
              for i, c in enumerate(constraints)]
    trials = data.get("trials", 50)
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise where.error(f"must be an integer >= 1, got {trials!r}", "trials")
    sampler = _sampler(data.get("sampler"), len(objectives), where)
    spec = TuneSpec(name=str(data.get("name") or name), base=base, knobs=knobs,
                    objectives=objectives, constraints=parsed, trials=trials,
                    sampler=sampler, root=root,
                    text=text or yaml.safe_dump({"name": str(data.get("name") or name),
                                                 **data}, sort_keys=False))
    _validate_points(spec, where)
    return spec


def _validate_points(spec: TuneSpec, where: _Where) -> None:
    """Build the base alone and every probe point of every knob; check constraint keys."""
    try:
        base = make_point(spec.base, {}, where.source, spec.root)
    except InputError as exc:
        raise where.error(without_point(exc.message),
                          f"base.{exc.field}" if exc.field else "base") from None
    _refuse_offline(base.config, "base", where)
    for knob in spec.knobs:
        for params in probe_points(knob, spec.knobs):
            try:
                point = make_point(spec.base, params, where.source, spec.root)
            except InputError as exc:
                inner = without_point(exc.message)
                if exc.field and exc.field != knob.key:
                    inner = f"{exc.field}: {inner}"
                value = params[knob.key]
                raise where.error(f"{inner} (at {knob.key}={value!r})",
                                  f"space.{knob.key}") from None
            _refuse_offline(point.config, f"space.{knob.key}", where)
    effective = base.config.model_dump(mode="json")
    knob_keys = {k.key for k in spec.knobs}
    for i, constraint in enumerate(spec.constraints):
        for term in constraint.config_terms:
            if term not in knob_keys and not _has_dotted(effective, term):
                raise where.error(f"{term}: not a config key", f"constraints.{i}")


def _refuse_offline(config: RunConfig, field: str, where: _Where) -> None:
    """An offline policy (belady: it reads the trace's future) is a bound, not a candidate:
    its figures, held-out ones too, know what is to come (docs/results.md "A tune spec")."""
    pool = config.cache.pool
    for key, name in (("cache.policy", config.cache.policy),
                      ("cache.pool.policy", pool.policy if pool is not None else None)):
        if name is not None and getattr(POLICIES.factory(name), "offline", False):
            raise where.error(f"{key}={name} is an offline policy (it knows the future): a "
                              "bound to compare against, not a tuning candidate", field)


def _has_dotted(tree: dict[str, Any], dotted: str) -> bool:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def load_tune_spec(path: str | Path) -> TuneSpec:
    """Read and validate a tune spec file."""
    path = Path(path)
    data = read_config_file(path)
    text = path.read_text(encoding="utf-8")
    return parse_tune_spec(data, source=str(path), name=path.stem, root=path.parent,
                           text=text)


def with_base(spec: TuneSpec, dotted: str, value: Any) -> TuneSpec:
    """`spec` with one more key set in its base (e.g. the train part's trace window)."""
    base = yaml.safe_load(yaml.safe_dump(spec.base))  # a deep, plain copy
    node = base
    *parents, leaf = dotted.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return dataclasses.replace(spec, base=base)
