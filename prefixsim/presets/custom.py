"""Custom model and GPU specs from YAML mappings with the spec records' field names.

Leaves out the preset tables (tables.py) and Hugging Face config.json files (hf_config.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from prefixsim.errors import InputError, located, read_yaml_lines
from prefixsim.presets.specs import GPUSpec, ModelSpec


def _number(value: Any) -> Any:
    """YAML 1.1 reads `1.0e11` (no exponent sign) as a string: accept it as a number."""
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        return int(number) if number.is_integer() else number
    return value


def _from_mapping(cls: type, data: Any, source: str | None, prefix: str):
    if not isinstance(data, dict):
        raise InputError("expected a mapping", file=source, field=prefix or None)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in names:
            raise InputError("unknown key", file=source, field=f"{prefix}.{key}".strip("."))
    missing = [f.name for f in dataclasses.fields(cls)
               if f.name not in data and f.default is dataclasses.MISSING]
    if missing:
        raise InputError("missing key", file=source, field=f"{prefix}.{missing[0]}".strip("."))
    values = {key: _number(value) if key not in ("name", "notes") else value
              for key, value in data.items()}
    try:
        return cls(**values)
    except InputError as exc:
        raise InputError(exc.message, file=source,
                         field=f"{prefix}.{exc.field}".strip(".")) from None
    except TypeError as exc:
        raise InputError(str(exc), file=source, field=prefix or None) from None


def model_from_mapping(data: Any, source: str | None = None, prefix: str = "") -> ModelSpec:
    """A custom ModelSpec from a mapping with ModelSpec's field names."""
    return _from_mapping(ModelSpec, data, source, prefix)


def gpu_from_mapping(data: Any, source: str | None = None, prefix: str = "") -> GPUSpec:
    """A custom GPUSpec from a mapping with GPUSpec's field names (bytes, bytes/s, FLOP/s)."""
    return _from_mapping(GPUSpec, data, source, prefix)


def load_custom_presets(path: str | Path) -> tuple[dict[str, ModelSpec], dict[str, GPUSpec]]:
    """Read `models:` and `gpus:` lists of custom specs from a YAML file (not registered)."""
    path = Path(path)
    data, lines = read_yaml_lines(path)
    data = data or {}
    if not isinstance(data, dict) or set(data) - {"models", "gpus"}:
        raise InputError("expected a mapping with keys models and/or gpus", file=str(path))
    models, gpus = {}, {}
    try:
        for i, item in enumerate(data.get("models") or []):
            spec = model_from_mapping(item, str(path), f"models.{i}")
            models[spec.name] = spec
        for i, item in enumerate(data.get("gpus") or []):
            gpu = gpu_from_mapping(item, str(path), f"gpus.{i}")
            gpus[gpu.name] = gpu
    except InputError as exc:  # named with its line
        raise located(exc, str(path), lines) from None
    return models, gpus
