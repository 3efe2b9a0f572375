"""Tunes: Optuna studies over the run config, on the sweep machinery, with held-out parts.

`load_tune_spec` reads a spec (base config, search space, objectives, constraints, trials,
sampler; spec.py), `run_tune` runs the study (driver.py) on a sweep executor and writes the
tune folder (store.py: trials.parquet, best.yaml, tune.json, the sweep layout so `prefixsim
report` reads it), re-running the best on a held-out part of the trace (heldout.py).
Optuna is an optional extra, imported only when a tune runs (samplers.py). See
docs/results.md ("A tune spec", "A tune folder").
"""

from prefixsim.tune.constraints import Constraint, parse_constraint
from prefixsim.tune.driver import TrialReport, TuneResult, best_so_far, run_tune
from prefixsim.tune.heldout import PartOptions, Parts, parts_for
from prefixsim.tune.samplers import SAMPLERS, optuna_module
from prefixsim.tune.space import Knob, grid_points, suggest
from prefixsim.tune.spec import Objective, SamplerSpec, TuneSpec, load_tune_spec, parse_tune_spec
from prefixsim.tune.store import best_trials, read_tune_meta, trials_frame

__all__ = [
    "SAMPLERS", "Constraint", "Knob", "Objective", "PartOptions", "Parts",
    "SamplerSpec", "TrialReport",
    "TuneResult", "TuneSpec", "best_so_far", "best_trials", "grid_points", "load_tune_spec",
    "optuna_module", "parse_constraint", "parse_tune_spec", "parts_for", "read_tune_meta",
    "run_tune", "suggest", "trials_frame",
]
