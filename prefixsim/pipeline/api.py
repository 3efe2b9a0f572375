"""The notebook entry point: `prefixsim.run(...)` -> RunResult.

Takes a config in any form a user has at hand (a RunConfig, a YAML path, a nested mapping,
or nothing) plus keyword sections and dotted overrides, fills in the trace's format and
block size as `prefixsim run` does, and runs it. Returns DataFrames and a dict; writes
nothing (the CLI writes results folders).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from prefixsim.config import RunConfig, build_config, load_config
from prefixsim.config.run_config import set_dotted
from prefixsim.pipeline.result import RunResult
from prefixsim.pipeline.road import simulate
from prefixsim.trace import Request


def run(
    config: RunConfig | Mapping[str, Any] | str | Path | None = None,
    *,
    requests: Sequence[Request] | None = None,
    overrides: Mapping[str, Any] | None = None,
    progress: bool = False,
    **sections: Any,
) -> RunResult:
    """Run one simulation and return its requests, timeseries and summary.

    `config`: a RunConfig, a YAML file, or a mapping shaped like one. Keyword arguments set
    whole sections or top-level keys on top of it (`cache={"policy": "lru"}`,
    `cache_only=True`, `trace={"path": "traces/demo_chat.jsonl"}`: a section given as a
    mapping is merged key by key), then `overrides` sets dotted keys
    (`{"cache.capacity_tokens": 20000}`). `requests`: replay these instead of reading the
    trace. `progress`: show a progress bar. Bad values raise InputError naming the key.

    >>> result = prefixsim.run(trace={"path": "traces/demo_chat.jsonl"}, cache_only=True)
    >>> result.summary["cache_token_hit_rate"]
    """
    data = _as_mapping(config)
    for key, value in sections.items():
        if isinstance(value, Mapping) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = dict(value) if isinstance(value, Mapping) else value
    for dotted, value in (overrides or {}).items():
        set_dotted(data, dotted, value)
    return simulate(build_config(data), requests,
                    progress=lambda desc, total: tqdm(unit="req", disable=not progress,
                                                      leave=False, desc=desc, total=total))


def _as_mapping(config: RunConfig | Mapping[str, Any] | str | Path | None) -> dict[str, Any]:
    """A fresh nested dict of `config`'s keys (only those set, for a RunConfig)."""
    if config is None:
        return {}
    if isinstance(config, RunConfig):
        return config.model_dump(mode="json", exclude_unset=True)
    if isinstance(config, str | Path):
        return load_config(config).model_dump(mode="json", exclude_unset=True)
    return {key: dict(value) if isinstance(value, Mapping) else value
            for key, value in config.items()}
