"""What the two roofline models share (costmodel/roofline_base.py, docs/cost-models.md
"Per-operator roofline"), written to kill the mutants bench/mutation.sh left alive there:
the replica a model records, and the error naming a tp below 1."""

import pytest

from prefixsim.costmodel import Roofline, StepRoofline
from prefixsim.presets import get_gpu, get_model

MODEL, GPU = get_model("llama-3.1-8b"), get_gpu("h100-sxm")


@pytest.mark.parametrize("kind", [Roofline, StepRoofline])
def test_a_roofline_records_the_replica_it_times(kind):
    model = kind(MODEL, GPU, 2)
    assert (model.model, model.gpu, model.tp) == (MODEL, GPU, 2)


@pytest.mark.parametrize("kind", [Roofline, StepRoofline])
def test_a_tp_below_one_is_named(kind):
    with pytest.raises(ValueError, match=r"^tp must be >= 1, got 0$"):
        kind(MODEL, GPU, 0)
