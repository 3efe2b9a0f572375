"""Cache capacity in the units people buy: GiB of KV, share of a GPU's HBM, share of the
trace's working set.

A capacity in tokens holds `capacity x KV bytes per token` of KV for the run's model and KV
element type (`model.kv_dtype`), split over the replica's `hardware.tp` GPUs as the KV pool
splits it (docs/cache-semantics.md R13: KV heads sharded, MLA's latent on every GPU). The
share of HBM is one GPU's part of that over the GPU's memory; the share of the working set
is the capacity over the trace's distinct prefix tokens (`trace_distinct_prefix_tokens`,
what an unbounded cache ends up holding). Values come from each run's config.yaml and
summary; a run whose model or GPU is not a preset (a custom spec) gets no GiB figure. A
timed run's capacity is per replica, and so are these figures. Nothing is drawn here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefixsim.errors import InputError
from prefixsim.presets import GIB, get_gpu, get_model
from prefixsim.report.data import ReportData

CAPACITY = "cache_capacity_tokens"
WORKING_SET = "trace_distinct_prefix_tokens"
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}
KV_GIB = "capacity_kv_gib"
HBM_SHARE = "capacity_hbm_share"
WORKING_SET_SHARE = "capacity_working_set_share"


@dataclass(frozen=True)
class KVGeometry:
    """What converts tokens to bytes for a run: model, KV element type, tensor parallelism,
    GPU; `describe` names them for a label."""

    model: str
    kv_dtype: str
    tp: int
    gpu: str
    bytes_per_token: int  # the whole replica's (all tp GPUs together)
    bytes_per_token_per_gpu: int
    gpu_memory_bytes: float

    def describe(self) -> str:
        return f"{self.model}, {self.kv_dtype} KV, TP {self.tp}"

    def gib(self, tokens: float) -> float:
        return tokens * self.bytes_per_token / GIB

    def tokens(self, gib: float) -> float:
        return gib * GIB / self.bytes_per_token

    def hbm_share(self, tokens: float) -> float:
        return tokens * self.bytes_per_token_per_gpu / self.gpu_memory_bytes


def kv_geometry(config: dict | None) -> KVGeometry | None:
    """The geometry of one run's config.yaml mapping, or None when it names no preset."""
    if not config:
        return None
    model_section = config.get("model") or {}
    hardware = config.get("hardware") or {}
    serving = config.get("serving") or {}
    dtype = str(model_section.get("kv_dtype") or serving.get("kv_dtype") or "bf16")
    try:
        model = get_model(str(model_section.get("name")))
        gpu = get_gpu(str(hardware.get("gpu")))
        tp = int(hardware.get("tp") or 1)
        dtype_bytes = DTYPE_BYTES.get(dtype, 2)
        return KVGeometry(str(model_section.get("name")), dtype, tp, str(hardware.get("gpu")),
                          model.kv_bytes_per_token(dtype_bytes),
                          model.kv_bytes_per_token_per_gpu(tp, dtype_bytes),
                          float(gpu.memory_bytes))
    except (InputError, KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


def shared_geometry(data: ReportData) -> KVGeometry | None:
    """The geometry every successful run shares, or None when they differ or have none
    (then a second axis in GiB would be wrong for some)."""
    found = {kv_geometry(data.config(run_id)) for run_id in data.ok["run_id"]}
    return found.pop() if len(found) == 1 else None


def capacity_units(data: ReportData) -> pd.DataFrame:
    """Per successful run (index run_id): KV_GIB, HBM_SHARE and WORKING_SET_SHARE of its
    capacity (NaN where unbounded, or where the geometry or working set is unknown)."""
    table = data.ok.set_index("run_id")
    out = pd.DataFrame(np.nan, index=table.index, columns=[KV_GIB, HBM_SHARE, WORKING_SET_SHARE])
    if CAPACITY not in table:
        return out
    for run_id, capacity in table[CAPACITY].items():
        if pd.isna(capacity):
            continue
        known = str(run_id) in data.run_dirs
        geometry = kv_geometry(data.config(str(run_id))) if known else None
        if geometry is not None:
            out.loc[run_id, KV_GIB] = geometry.gib(float(capacity))
            out.loc[run_id, HBM_SHARE] = geometry.hbm_share(float(capacity))
        if WORKING_SET in table and table.loc[run_id, WORKING_SET] > 0:
            out.loc[run_id, WORKING_SET_SHARE] = float(capacity) / table.loc[run_id, WORKING_SET]
    return out
