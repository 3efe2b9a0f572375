"""Optuna's samplers as plug-ins, and the one place Optuna is imported.

Optuna is an optional extra (`pip install 'prefixsim[tune]'`), imported only when a tune
starts or a tune report needs it, so the rest of the package (and `prefixsim --help`) works
without it. `SAMPLERS` maps the names a spec's `sampler:` accepts to seeded Optuna samplers:
`tpe` (the default; conditional knobs, constraints), `nsga2` (several objectives,
constraints), `cmaes` (numeric knobs; needs the `cmaes` package), `random` and `grid` (every
grid point, enqueued by the driver). This module builds samplers and nothing else.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from prefixsim.errors import InputError
from prefixsim.registry import Registry

SAMPLERS: Registry[Any] = Registry("sampler")


def optuna_module() -> Any:
    """The optuna module, or an InputError saying how to install it."""
    try:
        optuna = importlib.import_module("optuna")
    except ImportError:
        raise InputError("needs the optional dependency 'optuna': pip install "
                         "'prefixsim[tune]'", field="tune") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for category in (optuna.exceptions.ExperimentalWarning, FutureWarning):
        warnings.filterwarnings("ignore", category=category, module="optuna")
    return optuna


@SAMPLERS.register("tpe")
def _tpe(seed: int, **options: Any) -> Any:
    """Tree-structured Parzen estimator; handles conditional knobs and constraints."""
    return optuna_module().samplers.TPESampler(seed=seed, **options)


@SAMPLERS.register("nsga2")
def _nsga2(seed: int, **options: Any) -> Any:
    """NSGA-II: a genetic algorithm for several objectives; honours constraints."""
    return optuna_module().samplers.NSGAIISampler(seed=seed, **options)


@SAMPLERS.register("cmaes")
def _cmaes(seed: int, **options: Any) -> Any:
    """CMA-ES over the numeric knobs (categorical ones are sampled at random)."""
    try:
        importlib.import_module("cmaes")
    except ImportError:
        raise InputError("needs the optional dependency 'cmaes': pip install "
                         "'prefixsim[tune]'", field="sampler") from None
    optuna = optuna_module()
    options.setdefault("warn_independent_sampling", False)
    options.setdefault("independent_sampler", optuna.samplers.RandomSampler(seed=seed))
    return optuna.samplers.CmaEsSampler(seed=seed, **options)


@SAMPLERS.register("random")
def _random(seed: int, **options: Any) -> Any:
    return optuna_module().samplers.RandomSampler(seed=seed, **options)


@SAMPLERS.register("grid")
def _grid(seed: int, **options: Any) -> Any:
    """Every grid point, enqueued by the driver in a seeded order; this sampler only fills
    what an enqueued trial leaves unset (nothing, for a complete grid)."""
    return optuna_module().samplers.RandomSampler(seed=seed, **options)


def build_sampler(name: str, seed: int, options: dict[str, Any]) -> Any:
    """A seeded sampler; an option its constructor does not take is an InputError."""
    try:
        return SAMPLERS.build(name, seed=seed, **options)
    except TypeError as exc:
        raise InputError(f"bad option for the {name} sampler: {exc}", field="sampler") from None
