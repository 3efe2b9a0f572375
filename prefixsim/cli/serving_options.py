"""The timed-simulation options of `prefixsim run` and their config keys.

`serving_options` adds the flags to a click command; `serving_overrides` maps the parsed
values onto dotted config keys (None = not given, so the config file's value stands).
`HARDWARE_OPTIONS` and `SERVING_OPTIONS` name them for the --help sections of `run`
(cli/help_sections.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import click
import yaml

from prefixsim.costmodel import COST_MODELS
from prefixsim.errors import InputError
from prefixsim.presets import GPUS, MODELS
from prefixsim.router import ROUTERS

_OPTIONS = [
    click.option("--model", "serving_model",
                 help=f"Model preset (model.name): {', '.join(sorted(MODELS))}."),
    click.option("--gpu", "serving_gpu",
                 help=f"GPU preset (hardware.gpu): {', '.join(sorted(GPUS))}."),
    click.option("--presets", "serving_presets", type=click.Path(dir_okay=False),
                 help="YAML with custom `models:` / `gpus:` (model/hardware.presets_file)."),
    click.option("--tp", "serving_tp", type=int,
                 help="Tensor-parallel GPUs per replica (hardware.tp); 1."),
    click.option("--memory-utilization", "serving_memory_utilization", type=float,
                 help="Share of HBM for weights + KV (hardware.memory_utilization); 0.9."),
    click.option("--kv-dtype", "serving_kv_dtype", type=click.Choice(["bf16", "fp8"]),
                 help="KV cache element type (model.kv_dtype); bf16."),
    click.option("--weight-dtype", "serving_weight_dtype", type=click.Choice(["bf16", "fp8"]),
                 help="Weight element type (model.weight_dtype); bf16. fp8 halves weight "
                      "bytes and uses the GPU's FP8 peak."),
    click.option("--replicas", "serving_replicas", type=int,
                 help="Model replicas behind the router (engine.replicas); 1."),
    click.option("--prefill-replicas", "serving_prefill_replicas", type=int,
                 help="Disaggregated serving: replicas that only prefill "
                      "(engine.prefill_replicas; with --decode-replicas, instead of --replicas)."),
    click.option("--decode-replicas", "serving_decode_replicas", type=int,
                 help="Disaggregated serving: replicas that only decode "
                      "(engine.decode_replicas)."),
    click.option("--kv-transfer-bandwidth", "serving_kv_transfer_gb_s", type=float,
                 help="Prefill -> decode KV link per GPU in GB/s (engine.kv_transfer_gb_s; 50)."),
    click.option("--router", "serving_router",
                 help=f"Router (router.name): {', '.join(ROUTERS.names())}; prefix_aware."),
    click.option("--router-param", "serving_router_params", multiple=True,
                 metavar="KEY=VALUE",
                 help="Router parameter (router.params), e.g. staleness_s=5; repeatable."),
    click.option("--cost-model", "serving_cost_model",
                 help=f"Cost model (cost_model.name): {', '.join(COST_MODELS.names())}."),
    click.option("--profile", "serving_profile",
                 help="Calibration profile (cost_model.profile): a JSON file from `prefixsim "
                      "calibrate` or a shipped name such as cpu-llama-3.1-8b; selects the "
                      "fitted cost model."),
    click.option("--max-batched-tokens", "serving_max_batched_tokens", type=int,
                 help="Token budget per step (scheduler.max_batched_tokens); 8192."),
    click.option("--max-num-seqs", "serving_max_num_seqs", type=int,
                 help="Running requests per replica (scheduler.max_num_seqs); 256."),
    click.option("--time-scale", "serving_time_scale", type=float,
                 help="Multiply arrival times (engine.time_scale); 0.5 = twice the rate."),
    click.option("--sample-interval", "serving_sample_interval", type=float,
                 help="Seconds between timeseries rows (engine.sample_interval_s); 1."),
    click.option("--goodput", "serving_goodput", multiple=True, metavar="METRIC:MS",
                 help="SLO for request_goodput: ttft:MS and/or tpot:MS (repeat the flag, or "
                      "quote both: --goodput 'ttft:500 tpot:50')."),
    click.option("--check-invariants", "serving_check", is_flag=True, default=None,
                 help="Check memory accounting (free + evictable + locked + private = pool) "
                      "after every engine step (slow; for debugging)."),
]

_KEYS = {
    "serving_model": "model.name", "serving_gpu": "hardware.gpu", "serving_tp": "hardware.tp",
    "serving_memory_utilization": "hardware.memory_utilization",
    "serving_kv_dtype": "model.kv_dtype", "serving_weight_dtype": "model.weight_dtype",
    "serving_replicas": "engine.replicas",
    "serving_prefill_replicas": "engine.prefill_replicas",
    "serving_decode_replicas": "engine.decode_replicas",
    "serving_kv_transfer_gb_s": "engine.kv_transfer_gb_s",
    "serving_router": "router.name", "serving_cost_model": "cost_model.name",
    "serving_profile": "cost_model.profile",
    "serving_max_batched_tokens": "scheduler.max_batched_tokens",
    "serving_max_num_seqs": "scheduler.max_num_seqs", "serving_time_scale": "engine.time_scale",
    "serving_sample_interval": "engine.sample_interval_s",
    "serving_check": "engine.check_invariants",
}


HARDWARE_OPTIONS = ("serving_model", "serving_gpu", "serving_presets", "serving_tp",
                    "serving_memory_utilization", "serving_kv_dtype", "serving_weight_dtype",
                    "serving_cost_model", "serving_profile")
"""Model, GPU and cost model: the timed engine's, and in cache-only runs what prices the
prefill GPU-seconds (prefill_gpu_s)."""
SERVING_OPTIONS = ("serving_replicas", "serving_prefill_replicas", "serving_decode_replicas",
                   "serving_kv_transfer_gb_s", "serving_router", "serving_router_params",
                   "serving_max_batched_tokens", "serving_max_num_seqs", "serving_time_scale",
                   "serving_goodput", "serving_check")
"""Replicas, router, scheduler and the timed engine's knobs: timed runs only."""


def serving_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the timed-simulation flags (all named `serving_*`) to a click command."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def parse_goodput(values: tuple[str, ...]) -> dict[str, float]:
    """`ttft:500 tpot:50` -> {"engine.goodput_ttft_ms": 500, "engine.goodput_tpot_ms": 50}."""
    out: dict[str, float] = {}
    for item in (part for value in values for part in re.split(r"[\s,]+", value) if part):
        name, _, number = item.partition(":")
        if name not in ("ttft", "tpot"):
            raise InputError(f"expected ttft:MS or tpot:MS, got {item!r}", field="--goodput")
        try:
            out[f"engine.goodput_{name}_ms"] = float(number)
        except ValueError:
            raise InputError(f"not a number of milliseconds: {item!r}",
                             field="--goodput") from None
    return out


def parse_params(values: tuple[str, ...], flag: str) -> dict[str, Any] | None:
    """`KEY=VALUE` pairs (values read as YAML scalars) into a mapping; None when empty."""
    if not values:
        return None
    params: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise InputError(f"expected KEY=VALUE, got {item!r}", field=flag)
        params[key] = yaml.safe_load(raw)
    return params


def serving_overrides(values: dict[str, Any]) -> dict[str, Any]:
    """Dotted config overrides from the parsed `serving_*` flag values."""
    overrides: dict[str, Any] = {key: values.get(name) for name, key in _KEYS.items()}
    presets = values.get("serving_presets")
    overrides["model.presets_file"] = presets
    overrides["hardware.presets_file"] = presets
    overrides["router.params"] = parse_params(values.get("serving_router_params", ()),
                                              "--router-param")
    overrides.update(parse_goodput(values.get("serving_goodput", ())))
    return overrides
