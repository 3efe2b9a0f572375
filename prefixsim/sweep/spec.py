"""Sweep specs: a base run config, a grid of dotted keys and explicit points -> run points.

A spec is a YAML mapping with `base:` (a run config as `prefixsim run --config` takes it),
`grid:` (dotted key -> list of values; their Cartesian product) and optional `runs:` (a list
of dotted-key mappings, each one more point on top of `base`), plus an optional `name:`.
Every point is validated here, so a bad key or value fails before anything runs.

A relative `trace.path` is read relative to the spec file's folder (so a spec runs the same
from any working directory); a spec given as a mapping resolves it against the current one.

Run ids derive only from the parameters (never from order, time or executor): a readable
slug of the swept values (`lru-unbounded-ttl10`: `slug`) and a hash of the whole validated
config, which alone tells runs apart (an id's readable part may change between releases;
its hash part does not, see `id_hash`). A run has no randomness of its
own, so there is no per-run seed; the workload's (`trace.seed`) is the same for every run
unless the spec sweeps it.
This module reads the spec file and nothing else; it neither runs nor writes.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from prefixsim.config import RunConfig, build_config
from prefixsim.config.run_config import read_config_lines, set_dotted
from prefixsim.errors import InputError, located, within
from prefixsim.presets import GPUS, MODELS

SPEC_KEYS = ("name", "base", "grid", "runs")
SLUG_MAX_CHARS = 60
# The most runs one spec may ask for (each is validated, and later run, one by one).
MAX_POINTS = 10_000


@dataclass(frozen=True)
class SweepPoint:
    """One run of a sweep: its id, the swept parameters (dotted key -> value), its config."""

    run_id: str
    params: dict[str, Any]
    config: RunConfig


@dataclass(frozen=True)
class SweepSpec:
    """A parsed (not yet expanded) sweep spec."""

    name: str
    base: dict[str, Any]
    grid: dict[str, list[Any]]
    runs: list[dict[str, Any]]
    root: Path | None = None  # the spec file's folder: relative trace paths start there
    # the spec file's line of each dotted key (errors.key_lines; empty for a mapping given)
    lines: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)


def column_name(dotted: str) -> str:
    """The sweep.parquet column of a dotted key: `cache.policy` -> `cache_policy`."""
    return dotted.replace(".", "_")


def parse_spec(data: Any, source: str | None = None, name: str = "sweep") -> SweepSpec:
    """Check the shape of a spec mapping (values are validated later, per point)."""
    if not isinstance(data, dict):
        raise InputError("expected a mapping with base:, grid: and runs:", file=source)
    for key in data:
        if key not in SPEC_KEYS:
            raise InputError(f"unknown key (valid: {', '.join(SPEC_KEYS)})", file=source,
                             field=str(key))
    base = data.get("base") or {}
    grid = data.get("grid") or {}
    runs = data.get("runs") or []
    if not isinstance(base, dict):
        raise InputError("expected a run config mapping", file=source, field="base")
    if not isinstance(grid, dict):
        raise InputError("expected a mapping of dotted keys to lists", file=source, field="grid")
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise InputError("expected a non-empty list of values", file=source,
                             field=f"grid.{key}")
    if not isinstance(runs, list) or not all(isinstance(run, dict) for run in runs):
        raise InputError("expected a list of mappings of dotted keys", file=source, field="runs")
    if not grid and not runs:
        raise InputError("nothing to run: give grid: or runs:", file=source)
    return SweepSpec(name=str(data.get("name") or name), base=base,
                     grid={str(k): v for k, v in grid.items()},
                     runs=[{str(k): v for k, v in run.items()} for run in runs])


def load_spec(path: str | Path) -> SweepSpec:
    """Read and shape-check a sweep spec file; its errors name their lines."""
    path = Path(path)
    data, lines = read_config_lines(path)
    try:
        spec = parse_spec(data, source=str(path), name=path.stem)
    except InputError as exc:
        raise located(exc, str(path), lines) from None
    return dataclasses.replace(spec, root=path.parent, lines=lines)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value).encode("utf-8")).hexdigest()


_DEFAULT_DUMP = RunConfig().model_dump(mode="json")

# config keys added after run ids were first derived: left out of the id while at their
# defaults, so a run offered as before the key existed keeps its id (and `--resume` finds
# it). A new config key goes here too (tests/sweep/test_run_ids.py pins the demo's ids).
LATER_KEYS = ("load", "model.config_path", "serving", "trace.max_pages",
              "engine.disaggregation", "hardware.expert_parallel", "router.decode_router",
              "cache.tier_load", "scheduler.max_model_len")


# The scheduler limits were fixed defaults (8192 tokens, 256 running requests) before they
# became the serving engine's on the GPU (config/serving.py SchedulerConfig.limits); a run
# whose unset limits resolve to what it ran with then hashes them as it did.
FIXED_LIMITS = {"max_batched_tokens": 8192, "max_num_seqs": 256}


def _identity(config: RunConfig) -> dict[str, Any]:
    """What a run id hashes: the validated config, less the LATER_KEYS at their defaults,
    with unset scheduler limits as the fixed defaults they replaced where those are what
    the run uses (`_runs_as_before`)."""
    dump = config.model_dump(mode="json")
    defaults = _DEFAULT_DUMP
    for dotted in LATER_KEYS:
        *parents, leaf = dotted.split(".")
        node, default = dump, defaults
        for key in parents:
            node, default = node[key], default[key]
        if node[leaf] == default[leaf]:
            del node[leaf]
    if _runs_as_before(config):
        dump["scheduler"] = {**dump["scheduler"], **{
            key: value for key, value in FIXED_LIMITS.items()
            if dump["scheduler"][key] is None}}
    return dump


def _runs_as_before(config: RunConfig) -> bool:
    """Whether the run's unset scheduler limits resolve to FIXED_LIMITS where it uses them: a
    cache-only run uses the token budget only (its prefill savings), a timed run both. A
    GPU or model from a presets file or a config.json is not looked up here (its runs take
    new ids), nor is a mix of limits its run refuses."""
    presets = config.hardware.presets_file is None and config.model.config_path is None
    gpu = GPUS.get(config.hardware.gpu) if presets else None
    model = MODELS.get(config.model.name) if presets else None
    if gpu is None or model is None:
        return False
    try:
        resolved = config.scheduler.limits(config.serving.engine, gpu, model.max_model_len)
    except InputError:
        return False
    if config.cache_only:
        return resolved.max_batched_tokens == FIXED_LIMITS["max_batched_tokens"]
    return dataclasses.asdict(resolved) == FIXED_LIMITS


TIMED_ONLY_KEYS = ("router.name", "engine.replicas")  # nothing to a cache-only run


def slug(values: dict[str, Any]) -> str:
    """The readable part of a run id: each swept key's value as a reader names it
    (`slug_part`), joined by `-`, the mode first and the router and replicas left out of a
    cache-only run's: `lru-unbounded-ttl10`, `timed-lru-10k-replicas2-prefix-aware`."""
    cache_only = values.get("cache_only")
    ordered = sorted(values.items(), key=lambda item: item[0] != "cache_only")
    text = "-".join(part for dotted, value in ordered
                    if not (cache_only and dotted in TIMED_ONLY_KEYS)
                    and (part := slug_part(dotted, value)))
    text = re.sub(r"[^A-Za-z0-9.+-]+", "-", text).strip("-.")
    return re.sub(r"-{2,}", "-", text)[:SLUG_MAX_CHARS].strip("-.") or "run"


def slug_part(dotted: str, value: Any) -> str:
    """One value of a run id: a policy or router by its name, a capacity as 5k or
    `unbounded`, a TTL as ttl10 (none: nothing), `cache_only` as cache-only or timed, another
    number as its key and value (replicas2), a flag as its key (or no-key), a mapping as its
    key, an unset value as nothing."""
    leaf = dotted.rsplit(".", 1)[-1]
    name = leaf.removesuffix("_tokens").removesuffix("_s").removesuffix("_name")
    if dotted == "cache.capacity_tokens":
        return "unbounded" if value is None else _short_number(value)
    if value is None:
        return ""
    if dotted == "cache_only":
        return "cache-only" if value else "timed"
    if isinstance(value, bool):
        return name if value else f"no-{name}"
    if isinstance(value, (int, float)):
        number = _short_number(value) if leaf.endswith("_tokens") else f"{value:g}"
        return f"{name}{number}"
    if isinstance(value, (dict, list)):
        return name
    return str(value)


def _short_number(value: Any) -> str:
    """5000 -> 5k, 2500000 -> 2.5M, 512 -> 512."""
    number = float(value)
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(number) >= size:
            return f"{number / size:g}{suffix}"
    return f"{number:g}"


def id_hash(run_id: str) -> str:
    """The hash part of a run id (its last 8 characters after the last `-`)."""
    return run_id.rsplit("-", 1)[-1]


def _dotted_value(dump: dict[str, Any], dotted: str) -> Any:
    """The validated config's value at a dotted key (None where absent)."""
    node: Any = dump
    for key in dotted.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


_IN_POINT = " (in the point "


def without_point(message: str) -> str:
    """`make_point`'s message without the "(in the point ...)" it adds (for callers that name
    the point themselves, as a tune spec names its knob)."""
    return message.split(_IN_POINT)[0]


def make_point(base: dict[str, Any], params: dict[str, Any],
               source: str | None = None, root: Path | None = None,
               named: list[str] | None = None) -> SweepPoint:
    """Validate base + params into a point with its run id; a relative
    trace path is made absolute from `root` (the spec's folder; default: the current one);
    a value given with a unit is kept as its number (`_as_numbers`).
    The id's readable part names the validated values of the `named` dotted keys (default:
    the params' own; a sweep names every key any of its points sets, so a point that leaves
    the policy at its default still says `lru`); its hash part is the whole config's."""
    data = copy.deepcopy(base)
    for dotted, value in params.items():
        set_dotted(data, dotted, copy.deepcopy(value), source)
    try:
        config = build_config(data, source=source)
    except InputError as exc:
        where = ", ".join(f"{k}={v}" for k, v in params.items())
        raise InputError(f"{exc.message}{_IN_POINT}{where})", file=exc.file,
                         line=exc.line, field=exc.field) from None
    identity = _identity(config)
    dump = config.model_dump(mode="json")
    shown = {k: _dotted_value(dump, k) for k in (list(params) if named is None else named)}
    run_id = f"{slug(shown)}-{_digest(identity)[:8]}"
    trace = config.trace
    if trace.path is not None and not trace.path.is_absolute():
        # workers may start elsewhere (a cluster); the id keeps the path as written
        trace = trace.model_copy(update={
            "path": Path(os.path.abspath((root or Path()) / trace.path))})
        config = config.model_copy(update={"trace": trace})
    return SweepPoint(run_id=run_id, params=_as_numbers(params, dump), config=config)


def _as_numbers(params: dict[str, Any], dump: dict[str, Any]) -> dict[str, Any]:
    """The params with each value given with a unit (`200k`, `5m`, `40GiB`) as the number
    the validated config holds for it (200000, 300.0, ...): the sweep's table, plots and
    labels read numbers; other values as written (a trace path stays relative)."""
    out = dict(params)
    for key, value in params.items():
        number = _dotted_value(dump, key)
        if isinstance(value, str) and isinstance(number, (int, float)) \
                and not isinstance(number, bool):
            out[key] = number
    return out


def plan_size(spec: SweepSpec) -> int:
    """How many points `spec` asks for (the grid's product plus the explicit runs), from
    the list lengths alone: nothing is expanded."""
    return (math.prod(len(values) for values in spec.grid.values()) if spec.grid else 0) \
        + len(spec.runs)


def check_plan_size(spec: SweepSpec, source: str | None = None) -> int:
    """`plan_size(spec)`, refused in one line past MAX_POINTS (docs/input-rules.md I7)."""
    size = plan_size(spec)
    if size > MAX_POINTS:
        counts = " x ".join(str(len(v)) for v in spec.grid.values()) or "0"
        raise InputError(f"asks for {size:,} runs (grid {counts}, plus {len(spec.runs)} "
                         f"runs:), more than {MAX_POINTS:,}; split it into smaller sweeps",
                         file=source, field="grid")
    return size


def expand(spec: SweepSpec, source: str | None = None) -> list[SweepPoint]:
    """The grid's Cartesian product (last key varies fastest), then the explicit runs;
    a spec of more than MAX_POINTS is refused before any point is made.

    Points with equal configs (hence equal run ids) appear once.
    """
    try:
        check_plan_size(spec, source)
    except InputError as exc:
        raise located(exc, source, spec.lines) from None
    keys = list(spec.grid)
    combos = [dict(zip(keys, values, strict=True))
              for values in itertools.product(*(spec.grid[k] for k in keys))] if keys else []
    points: dict[str, SweepPoint] = {}
    named = swept_keys(spec)
    grid_at = [{key: f"grid.{key}.{index}" for key, index in zip(keys, indices, strict=True)}
               for indices in itertools.product(*(range(len(spec.grid[k])) for k in keys))
               ] if keys else []
    run_at = [{key: f"runs.{i}.{key}" for key in run} for i, run in enumerate(spec.runs)]
    for params, at in zip([*combos, *spec.runs], [*grid_at, *run_at], strict=True):
        try:
            point = make_point(spec.base, params, source, spec.root, named)
        except InputError as exc:  # named at the line of the value in the spec
            raise located(exc, source, point_lines(spec.lines, at)) from None
        points.setdefault(point.run_id, point)
    return list(points.values())


def point_lines(lines: Mapping[str, int], at: Mapping[str, str]) -> dict[str, int]:
    """The spec file's lines of one point's run-config keys: the base's keys (`base.X` at
    `X`), and each of the point's own keys at its value's place in the spec (`at`: key ->
    dotted path, `grid.cache.ttl_s.1` for a grid's second value, `runs.3.cache.ttl_s` for
    an explicit run's), with the keys inside that value, in place of the base's at or below
    the key."""
    out = {key.removeprefix("base."): line for key, line in lines.items()
           if key.startswith("base.")}
    for key, path in at.items():
        for shadowed in [k for k in out if within(k, key)]:
            del out[shadowed]
        out.update({key + inner[len(path):]: line for inner, line in lines.items()
                    if within(inner, path)})
    return out


def swept_keys(spec: SweepSpec) -> list[str]:
    """Every dotted key any point sets, in first-seen order."""
    keys = list(spec.grid)
    for run in spec.runs:
        keys += [k for k in run if k not in keys]
    return keys


def spec_to_yaml(spec: SweepSpec) -> str:
    """The spec as YAML (written beside the sweep's results)."""
    data = {"name": spec.name, "base": spec.base, "grid": spec.grid, "runs": spec.runs}
    return yaml.safe_dump(data, sort_keys=False)
