"""Optuna's samplers by hand (prefixsim/tune/samplers.py): each name builds its seeded
sampler (the same seed, the same draws), CMA-ES's defaults, and the refusals when Optuna or
cmaes is missing or an option does not fit."""

from __future__ import annotations

import importlib
import logging
import warnings

import pytest

from prefixsim.errors import InputError
from prefixsim.tune import samplers
from prefixsim.tune.samplers import SAMPLERS, build_sampler, optuna_module

optuna = pytest.importorskip("optuna")


def draws(sampler, n=5):
    """The first `n` values a sampler gives one float knob."""
    study = optuna.create_study(sampler=sampler)
    return [study.ask().suggest_float("x", 0.0, 1.0) for _ in range(n)]


@pytest.mark.parametrize("name, kind", [
    ("tpe", "TPESampler"), ("nsga2", "NSGAIISampler"), ("cmaes", "CmaEsSampler"),
    ("random", "RandomSampler"), ("grid", "RandomSampler"),
])
def test_each_name_builds_its_seeded_sampler(name, kind):
    assert type(build_sampler(name, 7, {})).__name__ == kind
    assert draws(build_sampler(name, 7, {})) == draws(build_sampler(name, 7, {}))
    assert draws(build_sampler(name, 7, {})) != draws(build_sampler(name, 8, {}))


def test_the_names_a_spec_accepts():
    assert sorted(SAMPLERS.names()) == ["cmaes", "grid", "nsga2", "random", "tpe"]


def test_cma_es_samples_categorical_knobs_at_random_quietly():
    sampler = build_sampler("cmaes", 3, {})
    assert sampler._warn_independent_sampling is False
    assert type(sampler._independent_sampler).__name__ == "RandomSampler"
    chosen = build_sampler("cmaes", 3, {"warn_independent_sampling": True})
    assert chosen._warn_independent_sampling is True  # an option given stands


def test_options_reach_the_sampler_and_a_wrong_one_is_refused():
    assert build_sampler("tpe", 0, {"n_startup_trials": 3})._n_startup_trials == 3
    with pytest.raises(InputError) as info:
        build_sampler("tpe", 0, {"no_such_option": 1})
    assert info.value.field == "sampler"
    assert info.value.message.startswith("bad option for the tpe sampler: ")
    assert "no_such_option" in info.value.message


def test_without_cmaes_the_cma_es_sampler_says_how_to_install_it(monkeypatch):
    real = importlib.import_module

    def without_cmaes(name, *args):
        if name == "cmaes":
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(samplers.importlib, "import_module", without_cmaes)
    with pytest.raises(InputError) as info:
        build_sampler("cmaes", 0, {})
    assert (info.value.field, info.value.message) == (
        "sampler", "needs the optional dependency 'cmaes': pip install 'prefixsim[tune]'")
    assert type(build_sampler("tpe", 0, {})).__name__ == "TPESampler"  # the others work


def test_without_optuna_a_tune_says_how_to_install_it(monkeypatch):
    def missing(name, *args):
        raise ImportError(name)

    monkeypatch.setattr(samplers.importlib, "import_module", missing)
    with pytest.raises(InputError) as info:
        optuna_module()
    assert (info.value.field, info.value.message) == (
        "tune", "needs the optional dependency 'optuna': pip install 'prefixsim[tune]'")


def test_optuna_is_quiet_but_for_warnings():
    optuna.logging.set_verbosity(optuna.logging.INFO)
    assert optuna_module() is optuna
    assert optuna.logging.get_verbosity() == logging.WARNING
    ignored = {(f[2], f[3].pattern) for f in warnings.filters
               if f[0] == "ignore" and f[3] is not None}
    assert {(optuna.exceptions.ExperimentalWarning, "optuna"),
            (FutureWarning, "optuna")} <= ignored
