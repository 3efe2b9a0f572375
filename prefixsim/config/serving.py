"""Config sections of the timed simulation: model, hardware, scheduler, router, cost model,
engine. Frozen and validated like run_config.py's sections (which nests them in RunConfig);
registry and preset names are checked here, at load time, listing the valid names.
Building plug-ins from these sections is pipeline/build.py's job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from prefixsim.config.flags import flag
from prefixsim.config.section import Section
from prefixsim.costmodel import COST_MODELS
from prefixsim.presets import GPUS, MODELS
from prefixsim.router import ROUTERS


def _preset(value: str, names: dict, kind: str, presets_file: Path | None) -> str:
    if presets_file is None and value not in names:
        raise ValueError(f"unknown {kind} {value!r} (valid: {', '.join(sorted(names))})")
    return value


class ModelConfig(Section):
    """Which model a replica serves: a preset name, or a name from `presets_file`."""

    name: str = Field(
        "llama-3.1-8b", description="model preset (presets.MODELS) or custom",
        json_schema_extra=flag("--model", "Model preset (model.name): "
                               f"{', '.join(sorted(MODELS))}."))
    presets_file: Path | None = Field(
        None, description="YAML with custom `models:`/`gpus:`",
        json_schema_extra=flag("--presets", "YAML with custom `models:` / `gpus:` "
                               "(model/hardware.presets_file).", kind="path",
                               also=["hardware.presets_file"]))
    kv_dtype: Literal["bf16", "fp8"] = Field(
        "bf16", description="KV cache element type",
        json_schema_extra=flag("--kv-dtype", "KV cache element type (model.kv_dtype); bf16."))
    weight_dtype: Literal["bf16", "fp8"] = Field(
        "bf16", description="weight element type",
        json_schema_extra=flag("--weight-dtype", "Weight element type (model.weight_dtype); "
                               "bf16. fp8 halves weight bytes and uses the GPU's FP8 peak."))

    @model_validator(mode="after")
    def _known(self) -> ModelConfig:
        _preset(self.name, MODELS, "model", self.presets_file)
        return self


class HardwareConfig(Section):
    """The GPUs of one replica and how much of their memory the KV pool gets."""

    gpu: str = Field(
        "h100-sxm", description="GPU preset (presets.GPUS) or custom",
        json_schema_extra=flag("--gpu", f"GPU preset (hardware.gpu): {', '.join(sorted(GPUS))}."))
    presets_file: Path | None = Field(None, description="YAML with custom `gpus:`")
    tp: int = Field(
        1, ge=1, le=64, description="tensor-parallel GPUs per replica",
        json_schema_extra=flag("--tp", "Tensor-parallel GPUs per replica (hardware.tp); 1."))
    memory_utilization: float = Field(
        0.9, gt=0, le=1, description="share of HBM used",
        json_schema_extra=flag("--memory-utilization", "Share of HBM for weights + KV "
                               "(hardware.memory_utilization); 0.9."))
    activation_reserve_gib: float = Field(2.0, ge=0, allow_inf_nan=False,
                                          description="HBM per GPU kept for activations, GiB")

    @model_validator(mode="after")
    def _known(self) -> HardwareConfig:
        _preset(self.gpu, GPUS, "gpu", self.presets_file)
        return self


class SchedulerConfig(Section):
    """Continuous batching with chunked prefill (vLLM V1 names)."""

    max_batched_tokens: int = Field(
        8192, ge=1, description="token budget of one step",
        json_schema_extra=flag("--max-batched-tokens", "Token budget per step "
                               "(scheduler.max_batched_tokens); 8192."))
    max_num_seqs: int = Field(
        256, ge=1, description="running requests per replica",
        json_schema_extra=flag("--max-num-seqs", "Running requests per replica "
                               "(scheduler.max_num_seqs); 256."))
    chunked_prefill: bool = Field(
        True, description="split prompts into chunks under the token budget (vLLM "
                          "--enable-chunked-prefill); false: whole prompts only")

    @model_validator(mode="after")
    def _consistent(self) -> SchedulerConfig:
        if self.max_num_seqs > self.max_batched_tokens:
            raise ValueError("max_num_seqs must not exceed max_batched_tokens")
        return self


class RouterConfig(Section):
    """Which router spreads requests over replicas (registry name) and its parameters."""

    name: str = Field(
        "prefix_aware", description="router (registry name)",
        json_schema_extra=flag("--router", f"Router (router.name): {', '.join(ROUTERS.names())}; "
                               "prefix_aware."))
    params: dict[str, Any] = Field(
        default_factory=dict, description="router parameters",
        json_schema_extra=flag("--router-param", "Router parameter (router.params), e.g. "
                               "staleness_s=5; repeatable.", kind="text", multiple=True,
                               metavar="KEY=VALUE", parse="params"))

    @field_validator("name")
    @classmethod
    def _known(cls, value: str) -> str:
        return ROUTERS.check(value)


class CostModelConfig(Section):
    """Which cost model times the steps (registry name) and its parameters."""

    name: str = Field(
        "roofline", description="cost model (registry name)",
        json_schema_extra=flag("--cost-model", "Cost model (cost_model.name): "
                               f"{', '.join(COST_MODELS.names())}."))
    params: dict[str, Any] = Field(default_factory=dict, description="cost model parameters")
    profile: str | None = Field(
        None, description="calibration profile of the fitted model: a JSON path or a shipped "
                          "profile's name (`prefixsim calibrate`); selects name: fitted",
        json_schema_extra=flag("--profile", "Calibration profile (cost_model.profile): a JSON "
                               "file from `prefixsim calibrate` or a shipped name such as "
                               "cpu-llama-3.1-8b; selects the fitted cost model."))

    @model_validator(mode="before")
    @classmethod
    def _profile_selects_fitted(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("profile") is not None and "name" not in data:
            return {**data, "name": "fitted"}
        return data

    @field_validator("name")
    @classmethod
    def _known(cls, value: str) -> str:
        return COST_MODELS.check(value)

    @model_validator(mode="after")
    def _profile_matches_name(self) -> CostModelConfig:
        if (self.name == "fitted") != (self.profile is not None):
            raise ValueError("the fitted cost model and cost_model.profile go together "
                             "(pass --profile PROFILE.json)")
        return self


class EngineConfig(Section):
    """The timed run: replicas, arrival time scale, sampling, SLOs for goodput."""

    replicas: int = Field(
        1, ge=1, le=4096, description="model replicas behind the router",
        json_schema_extra=flag("--replicas", "Model replicas behind the router "
                               "(engine.replicas); 1."))
    time_scale: float = Field(
        1.0, ge=1e-6, le=1e6, description="arrival times are multiplied by this (0.5 = 2x rate)",
        json_schema_extra=flag("--time-scale", "Multiply arrival times (engine.time_scale); "
                               "0.5 = twice the rate."))
    sample_interval_s: float | None = Field(
        1.0, ge=1e-6, le=1e9, description="timeseries period; null = no timeseries",
        json_schema_extra=flag("--sample-interval", "Seconds between timeseries rows "
                               "(engine.sample_interval_s); 1.", section="output"))
    goodput_ttft_ms: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="TTFT SLO of request_goodput",
        json_schema_extra=flag("--goodput", "SLO for request_goodput: ttft:MS and/or tpot:MS "
                               "(repeat the flag, or quote both: --goodput 'ttft:500 tpot:50').",
                               kind="text", multiple=True, metavar="METRIC:MS", parse="goodput"))
    goodput_tpot_ms: float | None = Field(None, gt=0, allow_inf_nan=False,
                                          description="TPOT SLO of request_goodput")
    check_invariants: bool = Field(
        False, description="check R13 after every step (slow)",
        json_schema_extra=flag("--check-invariants", "Check memory accounting (free + "
                               "evictable + locked + private = pool) after every engine step "
                               "(slow; for debugging)."))
    prefill_replicas: int | None = Field(
        None, ge=1, le=4096, description="disaggregated serving: replicas that only prefill",
        json_schema_extra=flag("--prefill-replicas", "Disaggregated serving: replicas that "
                               "only prefill (engine.prefill_replicas; with --decode-replicas, "
                               "instead of --replicas)."))
    decode_replicas: int | None = Field(
        None, ge=1, le=4096, description="disaggregated serving: replicas that only decode",
        json_schema_extra=flag("--decode-replicas", "Disaggregated serving: replicas that "
                               "only decode (engine.decode_replicas)."))
    kv_transfer_gb_s: float = Field(
        50.0, gt=0, allow_inf_nan=False,
        description="prefill -> decode KV link per GPU, GB/s (RDMA 400 Gb/s)",
        json_schema_extra=flag("--kv-transfer-bandwidth", "Prefill -> decode KV link per GPU "
                               "in GB/s (engine.kv_transfer_gb_s; 50)."))
    kv_transfer_latency_s: float = Field(
        0.0002, ge=0, allow_inf_nan=False, description="setup time of one KV transfer")

    @model_validator(mode="after")
    def _disaggregated(self) -> EngineConfig:
        if (self.prefill_replicas is None) != (self.decode_replicas is None):
            raise ValueError("prefill_replicas and decode_replicas go together")
        if self.prefill_replicas is not None and self.replicas not in (
                1, self.prefill_replicas + self.decode_replicas):
            raise ValueError("with prefill_replicas and decode_replicas, replicas is their "
                             "sum (leave it out)")
        return self

    @property
    def num_replicas(self) -> int:
        """Every replica of the run (prefill + decode when disaggregated)."""
        if self.prefill_replicas is not None:
            return self.prefill_replicas + self.decode_replicas
        return self.replicas
