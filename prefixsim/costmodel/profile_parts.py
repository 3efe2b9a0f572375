"""The measured blocks a profile may carry besides its coefficients (docs/cost-models.md
"Profile file"): element-wise kernel tables, attention grids, collective tables, the per-step
CPU overhead table, and the `source` of imported measurements (repository, commit, files,
rows used, and every part borrowed from another GPU or model with the rule that scaled it).

All are optional, so calibration profiles written before them still load. Times are seconds;
each table's x values increase. This module validates; reading tables is tables.py's,
predicting is fitted.py's.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ELEMENTWISE_OPS = ("input_norm", "post_attention_norm", "rope", "activation", "residual_add",
                   "embedding")
"""Element-wise kernels of a step: per layer two norms, the rotary embedding, the MLP
activation and two residual adds; per step the embedding gather and the final norm (timed
with the `input_norm` table)."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _check_points(xs: list[float], times: list[float], min_points: int = 1) -> None:
    if len(xs) != len(times) or len(xs) < min_points:
        raise ValueError(f"x values and time_s need the same length, at least {min_points}")
    if any(b <= a for a, b in zip(xs, xs[1:], strict=False)):
        raise ValueError("x values must increase")
    if any(not t > 0 for t in times) or (xs and xs[0] < 0):
        raise ValueError("x values must be >= 0 and times > 0")


class ElementwiseTable(_Strict):
    """One element-wise kernel over token counts, measured at a per-GPU row of `width`
    elements (a run with another width reads it at tokens x width / this width)."""

    width: int = Field(ge=1)
    tokens: list[int]
    time_s: list[float]

    @model_validator(mode="after")
    def _paired(self) -> ElementwiseTable:
        _check_points(self.tokens, self.time_s, 2)
        return self


class GridRow(_Strict):
    """Times over one axis at a fixed `key` (a chunk size or a batch size)."""

    key: int = Field(ge=1)
    x: list[int]
    time_s: list[float]

    @model_validator(mode="after")
    def _paired(self) -> GridRow:
        _check_points(self.x, self.time_s)
        return self


class AttentionGrid(_Strict):
    """Attention kernel times in the per-GPU geometry `num_heads` x `num_kv_heads` x
    `head_dim`. Prefill: key = new tokens of the chunk, x = cached tokens before it. Decode:
    key = batch size, x = context tokens of every sequence (a batch reads its mean).
    `floor_s` is the smallest time measured: only time above it scales with other heads."""

    num_heads: int = Field(ge=1)
    num_kv_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)
    floor_s: float = Field(gt=0)
    rows: list[GridRow] = Field(min_length=1)

    @model_validator(mode="after")
    def _keys_increase(self) -> AttentionGrid:
        keys = [row.key for row in self.rows]
        if any(b <= a for a, b in zip(keys, keys[1:], strict=False)):
            raise ValueError("row keys must increase")
        return self


class Attention(_Strict):
    prefill: AttentionGrid
    decode: AttentionGrid
    rule: str = Field(description="how the grids were scaled to this geometry and GPU")


class CollectiveTable(_Strict):
    """One collective's time over message sizes on `num_gpus` GPUs of one node."""

    num_gpus: int = Field(ge=2)
    bytes: list[int]
    time_s: list[float]

    @model_validator(mode="after")
    def _paired(self) -> CollectiveTable:
        _check_points(self.bytes, self.time_s, 2)
        return self


class Collectives(_Strict):
    all_reduce: list[CollectiveTable] = Field(default_factory=list)
    send_recv: list[CollectiveTable] = Field(default_factory=list)


class CpuOverhead(_Strict):
    """Per-step CPU time of the serving framework by batch size (sequences in the step)."""

    batch_sizes: list[int]
    time_s: list[float]
    measured_tp: int = Field(ge=1)
    framework: str = Field(description="the serving stack and version it describes")
    components: str = Field(description="what the time adds up")

    @model_validator(mode="after")
    def _paired(self) -> CpuOverhead:
        _check_points(self.batch_sizes, self.time_s, 2)
        return self


class SourceFile(_Strict):
    path: str = Field(description="relative to the data folder")
    rows: int = Field(ge=0, description="data rows in the file")
    rows_used: int = Field(ge=0, description="rows that entered this profile")
    upstream_commit: str | None = Field(None, description="the source repository's commit "
                                        "the file was taken from")
    upstream_path: str | None = Field(None, description="the file's path at that commit")


class Borrowed(_Strict):
    part: str
    source: str = Field(description="what was measured instead")
    rule: str


class Source(_Strict):
    """Where imported measurements came from, and what this profile borrowed."""

    kind: Literal["vidur"]
    repo: str
    commit: str
    model: str = Field(description="the source's model name")
    gpu: str = Field(description="the source's GPU folder")
    tp: int = Field(ge=1)
    seed: int = Field(ge=0)
    holdout_fraction: float = Field(gt=0, lt=1)
    borrow: str | None = Field(None, description="GPU preset borrowed from (--borrow)")
    cpu_overhead: bool = True
    files: list[SourceFile]
    borrowed: list[Borrowed] = Field(default_factory=list)
