"""Config sections of the timed simulation: model, hardware, scheduler, router, cost model,
engine. Frozen and validated like run_config.py's sections (which nests them in RunConfig);
registry and preset names are checked here, at load time, listing the valid names.
Building plug-ins from these sections is pipeline/build.py's job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from prefixsim.config.flags import option
from prefixsim.config.section import Section, registered
from prefixsim.costmodel import COST_MODELS
from prefixsim.costmodel.engines import BatchLimits, get_engine
from prefixsim.errors import FieldError, InputError
from prefixsim.presets import GPUS, MODELS, GPUSpec
from prefixsim.registry import unknown_name
from prefixsim.router import ROUTERS


def _preset(value: str, names: dict, kind: str, presets_file: Path | None, field: str) -> str:
    """`value` if a preset's name or a `presets_file` can define it; else the error names
    `field` and lists the presets."""
    if presets_file is None and value not in names:
        raise FieldError(field, unknown_name(kind, value, names))
    return value


class ModelConfig(Section):
    """Which model a replica serves: a preset name, a name from `presets_file`, or the
    geometry of a Hugging Face config.json (`config_path`, docs/cost-models.md "Models from
    a config.json"), which replaces the preset: `name` then only labels the model (default:
    the config.json's folder name)."""

    name: str = option("llama-3.1-8b", "--model",
                       f"Model preset (or custom): {', '.join(sorted(MODELS))}")
    presets_file: Path | None = option(None, "--presets", "YAML with custom `models:` / `gpus:`",
                                       kind="path", also=["hardware.presets_file"])
    config_path: Path | None = option(
        None, "--model-config", "A Hugging Face config.json on disk: the model's geometry "
        "from it instead of a preset; --model then only names it", kind="path")
    kv_dtype: Literal["bf16", "fp8"] = option("bf16", "--kv-dtype", "KV cache element type")
    weight_dtype: Literal["bf16", "fp8"] = option(
        "bf16", "--weight-dtype", "Weight element type; fp8 halves weight bytes and uses the "
        "GPU's FP8 peak")

    @model_validator(mode="before")
    @classmethod
    def _name_from_config_path(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("config_path") and "name" not in data:
            return {**data, "name": Path(data["config_path"]).resolve().parent.name}
        return data

    @model_validator(mode="after")
    def _known(self) -> ModelConfig:
        if self.config_path is None:
            _preset(self.name, MODELS, "model", self.presets_file, "name")
        return self


class HardwareConfig(Section):
    """The GPUs of one replica and how much of their memory the KV pool gets."""

    gpu: str = option("h100-sxm", "--gpu", f"GPU preset (or custom): {', '.join(sorted(GPUS))}")
    presets_file: Path | None = Field(None, description="YAML with custom `gpus:`")
    tp: int = option(1, "--tp", "Tensor-parallel GPUs per replica", ge=1, le=64)
    memory_utilization: float = option(0.9, "--memory-utilization",
                                       "Share of HBM for weights + KV", gt=0, le=1)
    activation_reserve_gib: float = Field(2.0, ge=0, allow_inf_nan=False,
                                          description="HBM per GPU kept for activations, GiB")
    expert_parallel: bool = option(
        False, "--expert-parallel", "MoE models: split the experts over the tp GPUs (whole "
        "experts per GPU, as vLLM's --enable-expert-parallel) instead of each expert's "
        "intermediate; roofline cost model only")

    @model_validator(mode="after")
    def _known(self) -> HardwareConfig:
        _preset(self.gpu, GPUS, "gpu", self.presets_file, "gpu")
        return self


class SchedulerConfig(Section):
    """Continuous batching with chunked prefill (vLLM V1 names). The limits left unset are
    the serving engine's defaults on the replica's GPU (`limits`; docs/cost-models.md
    "Serving engines")."""

    max_batched_tokens: int | None = option(
        None, "--max-batched-tokens", "Token budget per step; default: the serving engine's "
        "on the GPU (vllm-v1: 8192 on GPUs of 70 GiB or more but the A100, else 2048)", ge=1,
        shown_default="the engine's")
    max_num_seqs: int | None = option(
        None, "--max-num-seqs", "Running requests per replica; default: the serving "
        "engine's on the GPU (vllm-v1: 1024 on GPUs of 70 GiB or more but the A100, else "
        "256)", ge=1, shown_default="the engine's")
    chunked_prefill: bool = Field(
        True, description="split prompts into chunks under the token budget (vLLM "
                          "--enable-chunked-prefill); false: whole prompts only")
    max_model_len: int | None = option(
        None, "--max-model-len", "Longest prompt plus output a replica accepts, as vLLM's "
        "--max-model-len (longer requests are rejected); default: the model's context length "
        "(its config.json's max_position_embeddings)", ge=1, shown_default="the model's")

    @model_validator(mode="after")
    def _consistent(self) -> SchedulerConfig:
        if (self.max_num_seqs is not None and self.max_batched_tokens is not None
                and self.max_num_seqs > self.max_batched_tokens):
            raise FieldError("max_num_seqs", "must not exceed max_batched_tokens "
                             f"({self.max_num_seqs} > {self.max_batched_tokens})")
        return self

    def limits(self, engine: str, gpu: GPUSpec,
               model_max_len: int | None = None) -> BatchLimits:
        """The limits a replica runs with: those set, else serving engine `engine`'s
        defaults on `gpu`, which may depend on chunked prefill and the context length
        (`max_model_len`, else the model's `model_max_len`); a running-request limit above
        the token budget (one set, one the engine's) is an error naming both."""
        default = get_engine(engine).batch_limits(
            gpu, self.max_num_seqs, self.chunked_prefill, self.max_model_len or model_max_len)
        seqs = default.max_num_seqs
        tokens = (default.max_batched_tokens if self.max_batched_tokens is None
                  else self.max_batched_tokens)
        if seqs > tokens:
            unset = [name for name, value in (("max_num_seqs", self.max_num_seqs),
                                              ("max_batched_tokens", self.max_batched_tokens))
                     if value is None]
            raise InputError(f"must not exceed max_batched_tokens ({seqs} > {tokens}; "
                             f"{' and '.join(unset)} from {engine}'s defaults on {gpu.name})",
                             field="scheduler.max_num_seqs")
        return BatchLimits(seqs, tokens)


class RouterConfig(Section):
    """Which router spreads requests over replicas (registry name) and its parameters."""

    name: str = option("prefix_aware", "--router", f"Router: {', '.join(ROUTERS.names())}")
    params: dict[str, Any] = option(
        {}, "--router-param", "Router parameter, e.g. staleness_s=5; repeatable", kind="text",
        multiple=True, metavar="KEY=VALUE", parse="params")
    decode_router: str = option(
        "least_loaded", "--decode-router", "Disaggregated serving: the router that picks "
        "each request's decode replica (least_loaded: fewest outstanding tokens; "
        "prefix_aware: the decode caches' prefix against load, as Dynamo's and llm-d's "
        "decode scheduling)")

    _known = registered(ROUTERS, "name")
    _known_decode = registered(ROUTERS, "decode_router")


class CostModelConfig(Section):
    """Which cost model times the steps (registry name) and its parameters."""

    name: str = option("roofline", "--cost-model",
                       f"Cost model: {', '.join(COST_MODELS.names())}")
    params: dict[str, Any] = Field(default_factory=dict, description="cost model parameters")
    profile: str | None = option(
        None, "--profile", "Calibration profile: a JSON file from `prefixsim calibrate` or a "
        "shipped name such as cpu-llama-3.1-8b; selects the fitted cost model")

    @model_validator(mode="before")
    @classmethod
    def _profile_selects_fitted(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("profile") is not None and "name" not in data:
            return {**data, "name": "fitted"}
        return data

    _known = registered(COST_MODELS, "name")

    @model_validator(mode="after")
    def _profile_matches_name(self) -> CostModelConfig:
        if (self.name == "fitted") != (self.profile is not None):
            raise ValueError("the fitted cost model and cost_model.profile go together "
                             "(pass --profile PROFILE.json)")
        return self


class ServingConfig(Section):
    """Which serving engine's overheads the cost model takes (docs/cost-models.md "Serving
    engines"): its CPU time per step, frontend and emission times, and whether it overlaps
    CPU and GPU work."""

    engine: Literal["vllm-v1", "vllm-v1-async", "vllm-v0", "sglang"] = option(
        "vllm-v1", "--serving-engine", "Serving engine whose overheads the steps pay: vllm-v1 "
        "(CPU after GPU), vllm-v1-async and sglang (CPU under GPU), vllm-v0 (2024's CPU "
        "times)")


class DisaggregationConfig(Section):
    """Choices of disaggregated serving beyond its replica counts (engine/disaggregation.py,
    docs/architecture.md "Disaggregated serving")."""

    local_prefill_max_tokens: int | None = option(
        None, "--local-prefill-max-tokens", "Selective disaggregation: a prompt whose "
        "uncached part on its decode replica is at most this many tokens prefills there, as "
        "Dynamo's conditional disaggregation does; none by default (every prompt prefills "
        "on a prefill replica)", ge=0)


class EngineConfig(Section):
    """The timed run: replicas, arrival time scale, sampling, SLOs for goodput."""

    replicas: int = option(1, "--replicas", "Model replicas behind the router", ge=1, le=4096)
    time_scale: float = option(1.0, "--time-scale", "Multiply arrival times; 0.5 = twice the "
                               "rate", ge=1e-6, le=1e6)
    sample_interval_s: float | None = option(
        1.0, "--sample-interval", "Seconds between timeseries rows; null in a config file: none",
        ge=1e-6, le=1e9, section="output")
    goodput_ttft_ms: float | None = option(
        None, "--goodput", "SLO for request_goodput: ttft:MS and/or tpot:MS; repeat the flag, "
        "or quote both: --goodput 'ttft:500 tpot:50'", gt=0, allow_inf_nan=False, kind="text",
        multiple=True, metavar="METRIC:MS", parse="goodput", also=["engine.goodput_tpot_ms"])
    goodput_tpot_ms: float | None = Field(None, gt=0, allow_inf_nan=False,
                                          description="TPOT SLO of request_goodput")
    check_invariants: bool = option(
        False, "--check-invariants", "Check memory accounting (free + evictable + locked + "
        "private = pool, docs/cache-semantics.md R13) after every engine step; slow, for "
        "debugging")
    prefill_replicas: int | None = option(
        None, "--prefill-replicas", "Disaggregated serving: replicas that only prefill; with "
        "--decode-replicas, instead of --replicas", ge=1, le=4096)
    decode_replicas: int | None = option(
        None, "--decode-replicas", "Disaggregated serving: replicas that only decode", ge=1,
        le=4096)
    kv_transfer_gb_s: float = option(
        50.0, "--kv-transfer-bandwidth", "Prefill -> decode KV link (RDMA 400 Gb/s) per GPU in "
        "GB/s", gt=0, allow_inf_nan=False)
    kv_transfer_latency_s: float = Field(
        0.0002, ge=0, allow_inf_nan=False, description="setup time of one KV transfer")
    disaggregation: DisaggregationConfig = Field(
        default_factory=DisaggregationConfig,
        description="disaggregated serving's choices: selective prefill on decode replicas")

    @model_validator(mode="after")
    def _disaggregated(self) -> EngineConfig:
        if (self.prefill_replicas is None) != (self.decode_replicas is None):
            raise ValueError("prefill_replicas and decode_replicas go together")
        if self.prefill_replicas is not None and self.replicas not in (
                1, self.prefill_replicas + self.decode_replicas):
            raise ValueError("with prefill_replicas and decode_replicas, replicas is their "
                             "sum (leave it out)")
        if self.prefill_replicas is None and self.disaggregation != DisaggregationConfig():
            raise ValueError("engine.disaggregation needs prefill_replicas and "
                             "decode_replicas")
        return self

    @property
    def num_replicas(self) -> int:
        """Every replica of the run (prefill + decode when disaggregated)."""
        if self.prefill_replicas is not None:
            return self.prefill_replicas + self.decode_replicas
        return self.replicas
