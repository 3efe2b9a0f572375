"""Calibration profiles: the JSON a `prefixsim calibrate` run writes and `run --profile` reads.

A profile holds where it was measured (`provenance`: device, torch version, attention
backend, dtype, date, the model's layer shapes, every measured shape and its time), the fitted
`coefficients` per operator class (seconds per feature unit, see operators.py), the feature
`rules` the coefficients belong to, `gemm_tables` (per weight matrix, measured time over token
counts: GEMMs of the model's own matrices are interpolated, which measured better than the
linear form; `heldout_linear` keeps the linear form's errors), measured copy `bandwidth` (CUDA
only) and the `heldout` errors per class (`gemm`, `prefill_attention`, `decode_attention`,
`layer`).
Imported profiles (profiles/vidur_import.py) add measured blocks (profile_parts.py):
element-wise tables, attention grids, collective and CPU-overhead tables, the TP degrees
whose per-GPU shapes they hold (`covers_tp`), their `source`, and `heldout_borrow_rule` (the
leave-one-model-out error of any rule that borrowed a part from another GPU). A calibration
profile has no `source` and must then give the calibration fields of its provenance.
Profiles shipped with the package live in prefixsim/data/profiles and are found by name.
This module validates and (de)serialises; it measures and fits nothing.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from prefixsim.costmodel.operators import FEATURES, FeatureRules, LayerDims
from prefixsim.costmodel.profile_parts import (
    ELEMENTWISE_OPS,
    Attention,
    Collectives,
    CpuOverhead,
    ElementwiseTable,
    Source,
)
from prefixsim.errors import InputError, validation_message

SCHEMA = "prefixsim-profile/1"
HELDOUT_CLASSES = ("gemm", "prefill_attention", "decode_attention", "layer")


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelShape(_Strict):
    """The layer shapes the profile was measured with (a LayerDims)."""

    name: str
    num_layers: int = Field(ge=1)
    hidden_size: int = Field(ge=1)
    num_heads: int = Field(ge=1)
    num_kv_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)
    intermediate_size: int = Field(ge=1)
    vocab_size: int = Field(ge=1)
    num_experts: int | None = None
    experts_per_token: int | None = None

    def dims(self) -> LayerDims:
        return LayerDims(**self.model_dump())


class Provenance(_Strict):
    device: Literal["cpu", "cuda"]
    device_name: str
    hardware_preset: str | None = Field(
        None, description="GPU preset this device corresponds to; null for CPUs/unknown GPUs")
    backend: str = Field(description="attention and GEMM backends, in words")
    dtype: str = Field(description="dtype of the linear layers")
    attention_dtype: str
    date: str
    prefixsim_version: str
    model: ModelShape
    seed: int
    # calibration runs only (an imported profile's `source` says where its data came from)
    torch_version: str | None = None
    quick: bool | None = None
    passes: int | None = Field(None, ge=1)
    repeats: int | None = Field(None, ge=1)
    num_threads: int | None = Field(None, ge=1)
    wall_time_s: float | None = Field(None, ge=0)
    cpu_time_s: float | None = Field(None, ge=0, description="CPU time of the process (wall "
                                     "time includes what other processes took)")
    shapes: dict[str, list[dict[str, Any]]] = Field(
        default_factory=dict, description="every measured shape per class, with time_s and "
                                          "heldout (calibration)")

CALIBRATION_FIELDS = ("torch_version", "quick", "passes", "repeats", "num_threads",
                      "wall_time_s", "cpu_time_s")


class Rules(_Strict):
    gemm_dtype_bytes: float = Field(gt=0)
    attention_dtype_bytes: float = Field(gt=0)
    prefill_skips_masked: bool

    def feature_rules(self) -> FeatureRules:
        return FeatureRules(**self.model_dump())


class Bandwidth(_Strict):
    hbm_copy_bytes_s: float = Field(gt=0)
    host_to_device_bytes_s: float = Field(gt=0)
    device_to_host_bytes_s: float = Field(gt=0)


class GemmTable(_Strict):
    """Measured times of one weight matrix over token counts (training shapes only)."""

    in_features: int = Field(ge=1)
    out_features: int = Field(ge=1)
    tokens: list[int]
    time_s: list[float]

    @model_validator(mode="after")
    def _paired(self) -> GemmTable:
        if len(self.tokens) != len(self.time_s) or len(self.tokens) < 2:
            raise ValueError("tokens and time_s need the same length, at least 2")
        if any(b <= a for a, b in zip(self.tokens, self.tokens[1:], strict=False)):
            raise ValueError("tokens must increase")
        if any(not t > 0 for t in self.time_s) or min(self.tokens) < 1:
            raise ValueError("tokens must be >= 1 and times > 0")
        return self


class Heldout(_Strict):
    median_rel_error: float = Field(ge=0)
    p90_rel_error: float = Field(ge=0)
    n: int = Field(ge=1)


class Profile(_Strict):
    schema_: Literal["prefixsim-profile/1"] = Field(SCHEMA, alias="schema")
    provenance: Provenance
    rules: Rules
    coefficients: dict[str, dict[str, float]]
    gemm_tables: list[GemmTable] = Field(default_factory=list)
    bandwidth: Bandwidth | None = None
    heldout: dict[str, Heldout]
    heldout_linear: dict[str, Heldout] = Field(
        default_factory=dict, description="gemm errors of the plain linear form, for contrast")
    heldout_borrow_rule: dict[str, Heldout] = Field(
        default_factory=dict, description="leave-one-model-out errors of the borrow rule")
    heldout_blocks: dict[str, dict[str, Heldout]] = Field(
        default_factory=dict, description="errors per class on whole held-out blocks "
        "(a contiguous top range, whole grid rows, a whole model), fitted on the rest")
    covers_tp: list[int] = Field(default_factory=lambda: [1], min_length=1,
                                 description="TP degrees whose per-GPU shapes the tables hold")
    elementwise: dict[str, ElementwiseTable] = Field(default_factory=dict)
    attention: Attention | None = None
    collectives: Collectives | None = None
    cpu_overhead: CpuOverhead | None = None
    source: Source | None = None

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _complete(self) -> Profile:
        for cls, names in FEATURES.items():
            got = self.coefficients.get(cls)
            want = {f"s_per_{name}" for name in names}
            if got is None or set(got) != want:
                raise ValueError(f"coefficients.{cls} needs exactly {sorted(want)}")
            if any(not value >= 0 for value in got.values()):
                raise ValueError(f"coefficients.{cls} must be >= 0")
        missing = [c for c in HELDOUT_CLASSES if c not in self.heldout]
        if missing:
            raise ValueError(f"heldout lacks {', '.join(missing)}")
        if self.elementwise and set(self.elementwise) != set(ELEMENTWISE_OPS):
            raise ValueError(f"elementwise needs exactly {', '.join(ELEMENTWISE_OPS)}")
        if self.source is None:
            unset = [f for f in CALIBRATION_FIELDS if getattr(self.provenance, f) is None]
            if unset:
                raise ValueError(f"provenance needs {', '.join(unset)} (or the profile a "
                                 "source)")
        return self

    def coefficient_vector(self, cls: str) -> list[float]:
        """Coefficients of `cls` in FEATURES order."""
        return [self.coefficients[cls][f"s_per_{name}"] for name in FEATURES[cls]]

    def to_json(self) -> str:
        """Indented JSON with every list of numbers on one line (tables stay compact)."""
        text = json.dumps(self.model_dump(mode="json", by_alias=True, exclude_none=True),
                          indent=1)
        return _NUMBER_LIST.sub(lambda m: "[" + " ".join(m.group(1).split()) + "]",
                                text) + "\n"


_NUMBER_LIST = re.compile(r"\[\s*((?:-?[0-9][0-9.eE+-]*,?\s*)+)\]")


def profile_from_mapping(data: Any, source: str | None = None) -> Profile:
    """Validate a parsed profile; errors name the dotted key."""
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or None
        raise InputError(validation_message(first), file=source, field=key) from None


def shipped_profiles() -> dict[str, Path]:
    """Profiles in the package (prefixsim/data/profiles/NAME.json) by NAME."""
    folder = resources.files("prefixsim") / "data" / "profiles"
    if not folder.is_dir():
        return {}
    return {Path(item.name).stem: Path(str(item)) for item in folder.iterdir()
            if item.name.endswith(".json")}


def load_profile(path_or_name: str | Path) -> Profile:
    """A profile from a JSON file, or a shipped profile by name (e.g. `cpu-llama-3.1-8b`)."""
    path = Path(path_or_name)
    if not path.is_file():
        shipped = shipped_profiles()
        if str(path_or_name) not in shipped:
            names = ", ".join(sorted(shipped)) or "none"
            raise InputError(f"no such file or shipped profile (shipped: {names})",
                             file=str(path_or_name))
        path = shipped[str(path_or_name)]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"not valid JSON ({exc})", file=str(path)) from None
    return profile_from_mapping(data, source=str(path))
