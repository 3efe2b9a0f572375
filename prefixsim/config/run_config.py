"""The run configuration: frozen, validated sections, from YAML and CLI overrides.

Each component gets only its own section. Keys are the user-facing names
(`trace.path`, `cache.capacity_tokens`, ...); unknown keys and bad values raise `InputError`
naming the dotted key. Plug-in names are checked against their registries here, at the edge.
This module does not build plug-ins or read traces.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from prefixsim.cache import POLICIES, CacheMode, TTLMode, check_policy_params
from prefixsim.cache.session_regex import probe
from prefixsim.config.flags import option
from prefixsim.config.load import LoadConfig
from prefixsim.config.section import Section, registered
from prefixsim.config.serving import (
    CostModelConfig,
    EngineConfig,
    HardwareConfig,
    ModelConfig,
    RouterConfig,
    SchedulerConfig,
    ServingConfig,
)
from prefixsim.costmodel import COST_MODELS
from prefixsim.errors import (
    InputError,
    field_of,
    located,
    read_yaml_lines,
    validation_message,
    within,
)
from prefixsim.presets import MODELS, check_tensor_parallel
from prefixsim.registry import Registry
from prefixsim.router import ROUTERS
from prefixsim.trace import READERS
from prefixsim.trace.fields import MAX_TOKENS
from prefixsim.trace.lengths import check_prefix_model


class TraceConfig(Section):
    """Which trace to replay and how to cut its prompts into pages."""

    path: Path | None = option(None, "--trace", "Trace file to replay")
    format: str | None = option(None, "--trace-format", "Trace format; auto-detected by default",
                                choices=READERS.names())
    block_size: int | None = option(
        None, "--block-size", "Tokens per trace hash id (page); by default the format's own (512 "
        "for Mooncake)", ge=1, le=MAX_TOKENS)
    max_requests: int | None = option(None, "--max-requests", "Replay only the first N requests",
                                      ge=1)
    time_window: tuple[float, float] | None = Field(
        None, description="replay only [start, end) of the trace's time span, as fractions "
        "0 <= start < end <= 1 (e.g. [0, 0.5]: the first half; a train/test split by time)",
    )
    skip_bad_lines: bool = option(False, "--skip-bad-lines",
                                  "Skip malformed trace records and report how many")
    max_pages: int | None = option(
        None, "--max-trace-pages", "Page budget of the trace, checked before it is loaded: "
        "hash ids a Parquet file holds (2^25 by default) and page ids made up for "
        "lengths-only and RAGPulse traces (2^22); docs/input-rules.md I7", ge=1)
    prefix_model: str = option("none", "--prefix-model",
                               "Lengths-only traces: none or synthetic shared:TOKENS")
    session_rate_per_s: float = option(
        1.0 / 60.0, "--session-rate", "kv-cache-tester: conversations start as a modelled "
        "Poisson process of this rate per second", gt=0, le=1e6, shown_default="1/60")
    seed: int = option(
        0, "--trace-seed", "Seed of the workload's modelled randomness: conversation starts of "
        "kv-cache-tester folders, request-class shares; a sweep keeps it for every run so they "
        "see one workload", ge=0, min=0)

    _known_format = registered(READERS, "format")

    @field_validator("time_window")
    @classmethod
    def _fractions(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not 0.0 <= value[0] < value[1] <= 1.0:
            raise ValueError(f"expected [start, end] with 0 <= start < end <= 1, got "
                             f"{list(value)}")
        return value

    @field_validator("prefix_model")
    @classmethod
    def _known_prefix_model(cls, value: str) -> str:
        check_prefix_model(value)
        return value


class RequestClassConfig(Section):
    """A request class (cache/classes.py): the first class whose conditions all hold."""

    name: str = Field(description="label of the class")
    ttl_s: float | None = Field(
        None, ge=0, allow_inf_nan=False,
        description="TTL of its pages (0: its prompts are not kept); null = cache.ttl_s"
    )
    priority: int = Field(0, description="priority of its pages (the priority policy)")
    session_regex: str | None = Field(None, description="condition: regex on the session id")
    min_input_tokens: int | None = Field(None, ge=0, description="condition: prompt >= this")
    share: float | None = Field(
        None, gt=0, le=1, description="condition: this seeded fraction of sessions"
    )

    @field_validator("session_regex")
    @classmethod
    def _valid_regex(cls, value: str | None) -> str | None:
        if value is not None:
            if len(value) > 1000:
                raise ValueError("longer than 1000 characters")
            try:
                probe(value)  # compiled, then timed on hostile ids (docs/input-rules.md I7)
            except (re.error, RecursionError, OverflowError) as exc:
                raise ValueError(f"not a regular expression ({exc})") from None
        return value


class PoolConfig(Section):
    """A KV pool shared by every replica (cache/pool.py; docs/cache-semantics.md R18)."""

    capacity_tokens: int | None = option(
        None, "--pool-tokens", "A KV pool shared by every replica, below HBM: its capacity in "
        "tokens, or `unbounded` (the default); docs/cache-semantics.md R18", ge=0,
        kind="text", parse="tokens_or_unbounded")
    policy: str = option("lru", "--pool-policy",
                         "The shared pool's eviction policy")
    ttl_s: float | None = option(None, "--pool-ttl", "Seconds an unused pool page stays; none "
                                 "by default", ge=0, allow_inf_nan=False)
    read_gb_s: float = option(
        25.0, "--pool-bandwidth", "Each replica's link to the pool (an RDMA 200 Gb/s "
        "NIC), GB/s per GPU, both directions", gt=0, allow_inf_nan=False,
        also=["cache.pool.write_gb_s"])
    write_gb_s: float = Field(
        25.0, gt=0, allow_inf_nan=False, description="HBM -> pool bandwidth per GPU, GB/s")
    latency_s: float = option(0.0001, "--pool-latency", "Seconds of latency (setup) per pool "
                              "transfer", ge=0, allow_inf_nan=False)
    lookup_s: float = option(
        0.0001, "--pool-lookup", "Seconds of every pool query, hit or miss (one metadata "
        "round trip, as Mooncake Store's query to its master before a get)", ge=0,
        allow_inf_nan=False)
    write: Literal["through", "back"] = option(
        "through", "--pool-write", "through: store every prefilled page (LMCache and "
        "Mooncake store after prefill); back: only pages HBM evicts")
    replicas: int = option(1, "--pool-replicas", "Holders of each pool page (Mooncake "
                           "Store's replica count: hot pages read from several hosts)", ge=1,
                           le=64)

    _known_policy = registered(POLICIES, "policy")

    @field_validator("capacity_tokens", mode="before")
    @classmethod
    def _unbounded_word(cls, value: object) -> object:
        return None if value == "unbounded" else value


class CacheConfig(Section):
    """The prefix cache: eviction policy, capacity in tokens, TTL rule."""

    policy: str = option("lru", "--policy", f"Eviction policy: {', '.join(POLICIES.names())}")
    policy_params: dict[str, StrictFloat | StrictInt | StrictBool | str] = Field(
        default_factory=dict, description="the policy's own parameters, e.g. s3fifo's "
        "small_fraction (docs/cache-semantics.md, policies); none by default",
    )
    capacity_tokens: int | None = option(
        None, "--cache-tokens", "Cache capacity in tokens; unbounded by default", ge=0)
    ttl_s: float | None = option(None, "--ttl", "Seconds an unused page stays cached; no TTL by "
                                 "default", gt=0, allow_inf_nan=False)
    ttl_mode: TTLMode = option(TTLMode.SLIDING, "--ttl-mode",
                               "sliding: a hit refreshes the TTL; fixed: from creation")
    mode: CacheMode = option(CacheMode.RADIX, "--cache-mode",
                             "radix: evict leaves only; block: any unlocked page, as vLLM")
    host_capacity_tokens: int | None = option(
        None, "--host-cache-tokens", "Host DRAM tier below HBM, in tokens; none by default",
        ge=0)
    host_bandwidth_gb_s: float = option(50.0, "--host-bandwidth", "HBM<->host link in GB/s per "
                                        "direction", gt=0, allow_inf_nan=False)
    disk_capacity_tokens: int | None = option(
        None, "--disk-cache-tokens", "Disk tier below host DRAM, in tokens; none by default",
        ge=0)
    disk_bandwidth_gb_s: float = option(5.0, "--disk-bandwidth", "Disk load bandwidth in GB/s",
                                        gt=0, allow_inf_nan=False)
    classes: list[RequestClassConfig] = Field(
        default_factory=list, description="request classes with their own TTL and priority"
    )
    min_cacheable_tokens: int = option(0, "--min-cacheable-tokens", "Prompts shorter than this "
                                       "bypass the cache, as under an API's minimum", ge=0)
    prefix_caching: bool = Field(
        True, description="false: every request bypasses the cache, no hits (vLLM "
                          "--no-enable-prefix-caching)"
    )
    tier_min_load_tokens: int = option(0, "--tier-min-load-tokens", "Lower-tier runs shorter "
                                       "than this are recomputed, not loaded", ge=0)
    tier_load: Literal["async", "blocking"] = option(
        "async", "--tier-load", "Timed: async: a request whose prefix loads from a lower tier "
        "or the pool waits for its copy while the others keep stepping (vLLM v1's KV "
        "connectors); blocking: the copy is added to its first chunk's step, stalling the "
        "batch; docs/cache-semantics.md R15")
    bounds: bool = option(False, "--bounds", "Cache-only: also report belady's (offline "
                          "optimum) hit rate at the same capacity")
    pricing: str | None = option(None, "--pricing", "Price the run: anthropic, anthropic-haiku, "
                                 "openai, FILE.yaml")
    pool: PoolConfig | None = Field(
        None, description="a KV pool shared by every replica, below HBM (null: none)")

    _known_policy = registered(POLICIES, "policy")

    @model_validator(mode="after")
    def _pool_alone(self) -> CacheConfig:
        if self.pool is not None and (self.host_capacity_tokens is not None
                                      or self.disk_capacity_tokens is not None):
            raise ValueError("a shared pool and per-replica host/disk tiers together are not "
                             "supported: use one of them")
        return self

    @field_validator("policy_params")
    @classmethod
    def _declared_params(cls, value: dict[str, object], info: ValidationInfo
                         ) -> dict[str, object]:
        if "policy" in info.data:  # else the policy itself failed and is reported
            check_policy_params(info.data["policy"], value)
        return value


class RunConfig(Section):
    """Everything one run needs; written as config.yaml beside the results."""

    trace: TraceConfig = TraceConfig()
    cache: CacheConfig = CacheConfig()
    cache_only: bool = option(False, "--cache-only", "Replay the cache alone "
                              "(docs/cache-semantics.md Part A), no timing model", section="run")
    model: ModelConfig = ModelConfig()
    hardware: HardwareConfig = HardwareConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    router: RouterConfig = RouterConfig()
    cost_model: CostModelConfig = CostModelConfig()
    serving: ServingConfig = ServingConfig()
    engine: EngineConfig = EngineConfig()
    load: LoadConfig = LoadConfig()


def set_dotted(tree: dict[str, Any], dotted: str, value: Any, source: str | None = None
               ) -> None:
    """Set `tree`'s value at the dotted key, making the sections on the way; a section that
    `source` (the config file) gave as something other than a mapping is an InputError
    naming the file and that section's key."""
    *parents, leaf = dotted.split(".")
    node = tree
    for depth, key in enumerate(parents):
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise InputError(f"expected a mapping of keys, got {child!r:.60}", file=source,
                             field=".".join(parents[:depth + 1]))
        node = child
    node[leaf] = value


def _dotted_location(error: dict) -> str:
    return ".".join(str(part) for part in error["loc"])


def build_config(data: dict[str, Any], source: str | None = None) -> RunConfig:
    """Validate a nested mapping into a RunConfig; errors name the dotted key."""
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = _dotted_location(first)
        if first["type"] == "extra_forbidden":
            guess = difflib.get_close_matches(str(first["loc"][-1]).lower(),
                                              _section_keys(first["loc"][:-1]), n=1, cutoff=0.6)
            meant = f" (did you mean {'.'.join(map(str, (*first['loc'][:-1], guess[0])))!r}?)" \
                if guess else ""
            message = "unknown key" + (_NO_SEED if key == "seed" else meant)
        else:
            message = validation_message(first)
            key = field_of(first, key)  # a section's check names its field
        raise InputError(message, file=source, field=key) from None
    _check_across_sections(config, source)
    return config


def _section_keys(location: tuple[Any, ...]) -> list[str]:
    """The keys of the config section at `location` (() is the top), [] where it is not a
    section (a key under a plug-in's free parameters)."""
    model: Any = RunConfig
    for part in location:
        field = model.model_fields.get(str(part))
        if field is None:
            return []
        model = next((kind for kind in (typing.get_args(field.annotation) or
                                        (field.annotation,))
                      if isinstance(kind, type) and issubclass(kind, BaseModel)), None)
        if model is None:
            return []
    return list(model.model_fields)


# A run has no randomness of its own: `seed` was read by nothing (docs/input-rules.md I8).
_NO_SEED = (" (a run has no randomness of its own; the workload's modelled randomness is "
            "trace.seed)")


def _check_across_sections(config: RunConfig, source: str | None) -> None:
    """What one section cannot check alone: tensor parallelism against a preset model's
    heads (a custom model is checked when built), plug-in parameters against the plug-in."""
    if (config.model.presets_file is None and config.model.config_path is None
            and config.model.name in MODELS):
        try:
            check_tensor_parallel(MODELS[config.model.name], config.hardware.tp)
        except InputError as exc:
            raise InputError(exc.message, file=source, field=exc.field) from None
    _check_params(ROUTERS, config.router.name, config.router.params, "router.params", (),
                  source)
    _check_params(COST_MODELS, config.cost_model.name, config.cost_model.params,
                  "cost_model.params", ("model", "gpu", "tp"), source)
    try:  # a router is a small pure object: building one checks its values now
        ROUTERS.build(config.router.name, **config.router.params)
    except (TypeError, ValueError) as exc:
        raise InputError(str(exc), file=source, field="router.params") from None
    if config.cache_only and config.load.closed_loop:  # docs/load.md: closed loops
        raise InputError(f"a {config.load.type} load reacts to finished requests, so it needs "
                         "a timed run (not cache_only)", file=source, field="load.type")


def _check_params(registry: Registry, name: str, params: dict[str, Any], field: str,
                  supplied: tuple[str, ...], source: str | None) -> None:
    try:
        registry.check_params(name, params, field, supplied)
    except InputError as exc:
        raise InputError(exc.message, file=source, field=exc.field) from None


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML run config into a plain mapping (validated later)."""
    return read_config_lines(path)[0]


def read_config_lines(path: str | Path) -> tuple[dict[str, Any], Mapping[str, int]]:
    """`read_config_file(path)` and the line of each of its dotted keys (errors.key_lines)."""
    path = Path(path)
    data, lines = read_yaml_lines(path)
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise InputError("expected a mapping of config sections", file=str(path))
    return data, lines


def load_config(
    path: str | Path | None = None, overrides: dict[str, Any] | None = None,
    unset: tuple[str, ...] = (),
) -> RunConfig:
    """The effective config: the YAML file (if any) with dotted-key `overrides` on top. An
    override of None is one not given (a command-line flag left out); the dotted keys in
    `unset` are set to None, as `null` in a file sets them (e.g. no timeseries:
    `unset=("engine.sample_interval_s",)`)."""
    data, lines = read_config_lines(path) if path is not None else ({}, {})
    source = None if path is None else str(path)
    overrides = overrides or {}
    given = [dotted for dotted, value in overrides.items() if value is not None]
    for dotted in given:
        set_dotted(data, dotted, overrides[dotted], source)
    for dotted in unset:
        set_dotted(data, dotted, None, source)
    try:
        config = build_config(data, source=source)
        if path is not None:
            for key in FILE_KEYS:
                if overrides.get(key) is None:
                    _file_beside_the_config(config, key, Path(path))
    except InputError as exc:
        flagged = [*given, *unset]
        if exc.file == source and exc.field is not None \
                and any(within(exc.field, key) for key in flagged):
            # a value set over the file (a command-line flag): not the file's
            raise InputError(exc.message, field=exc.field) from None
        raise located(exc, source, lines, flagged) from None  # the file's: with its line
    return config


FILE_KEYS = ("trace.path", "model.config_path", "model.presets_file")  # files a config names


def _file_beside_the_config(config: RunConfig, key: str, config_file: Path) -> None:
    """A relative path in a run config is read from the current folder (so the config.yaml
    a run writes repeats it from where it ran); where no such file is there but one is
    beside the config file, say so instead of only 'no such file'."""
    section, name = key.split(".")
    given = getattr(getattr(config, section), name)
    if given is None or Path(given).is_absolute() or Path(given).exists():
        return
    beside = config_file.parent / given
    if beside.exists():
        raise InputError(f"{given} is not in the current folder ({Path.cwd()}), where a run "
                         f"config's relative paths are read from; {beside} is beside the "
                         "config: give that path", file=str(config_file), field=key)


def config_to_yaml(config: RunConfig) -> str:
    """The effective config as YAML (paths as strings, enums as values)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
