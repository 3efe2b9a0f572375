"""The generator's preset pieces (trace/generate/preset.py) by known answers: each
distribution draws what numpy draws from the same seed, clipped; token counts are at least
one; a session's expected turns; the page bound of a prompt; how a preset is found."""

from __future__ import annotations

import math

import numpy as np
import pytest

from prefixsim.errors import FieldError, InputError
from prefixsim.trace.fields import MAX_PAGES_PER_REQUEST
from prefixsim.trace.generate.preset import (
    PRESET_DIR,
    PRESETS,
    Dist,
    Turns,
    _check_pages,
    load_preset,
    preset_path,
)


def draws(dist: Dist, seed: int = 4, n: int = 50) -> list[float]:
    rng = np.random.default_rng(seed)
    return [dist.sample(rng) for _ in range(n)]


@pytest.mark.parametrize(("dist", "numpy_draw"), [
    (Dist(dist="lognormal", median=300, sigma=0.5),
     lambda rng: rng.lognormal(math.log(300), 0.5)),
    (Dist(dist="exponential", mean=7.0), lambda rng: rng.exponential(7.0)),
    (Dist(dist="uniform", low=2.0, high=9.0), lambda rng: rng.uniform(2.0, 9.0)),
    (Dist(dist="choice", values=[10, 20, 30], weights=[1, 1, 2]),
     lambda rng: [10, 20, 30][int(rng.choice(3, p=[0.25, 0.25, 0.5]))]),
    (Dist(dist="fixed", value=5.5), lambda rng: 5.5),
])
def test_each_distribution_draws_what_numpy_draws(dist, numpy_draw):
    rng = np.random.default_rng(4)
    assert draws(dist) == [float(numpy_draw(rng)) for _ in range(50)]


def test_draws_are_clipped_to_min_and_max():
    wide = Dist(dist="uniform", low=0.0, high=100.0, min=20.0, max=70.0)
    rng = np.random.default_rng(4)
    expected = [min(max(float(rng.uniform(0.0, 100.0)), 20.0), 70.0) for _ in range(50)]
    assert draws(wide) == expected
    assert min(expected) == 20.0 and max(expected) == 70.0


def test_choice_weights_need_not_sum_to_one():
    """Weights 1, 3 are odds 1 : 3 (normalised), not probabilities."""
    values = draws(Dist(dist="choice", values=[1, 2], weights=[1, 3]), n=4000)
    assert values.count(2.0) / len(values) == pytest.approx(0.75, abs=0.03)


@pytest.mark.parametrize(("value", "tokens"), [(0.2, 1), (1.0, 1), (1.4, 1), (1.6, 2),
                                               (2.5, 2), (41.0, 41)])
def test_token_counts_are_rounded_and_at_least_one(value, tokens):
    assert Dist(dist="fixed", value=value).tokens(np.random.default_rng(0)) == tokens


def test_expected_turns_by_hand():
    """min 1, mean 3, max 5: p = 1/3 and E = (1 - (2/3)^5) / (1/3) = 633/243; a session of
    exactly `min` turns (mean = min: p = 1) expects min; min 2 adds one to the first."""
    assert Turns(mean=3.0, min=1, max=5).expected() == pytest.approx(633 / 243)
    assert Turns(mean=1.0, min=1, max=5).expected() == 1.0
    assert Turns(mean=4.0, min=4, max=9).expected() == 4.0
    assert Turns(mean=4.0, min=2, max=6).expected() == pytest.approx(1 + 633 / 243)


def test_a_prompt_may_have_exactly_the_pages_a_request_may():
    _check_pages(MAX_PAGES_PER_REQUEST * 16, 16, "k")
    with pytest.raises(FieldError) as refused:
        _check_pages(MAX_PAGES_PER_REQUEST * 16 + 1, 16, "workloads.0.max_context_tokens")
    assert refused.value.field == "workloads.0.max_context_tokens"
    assert f"{MAX_PAGES_PER_REQUEST + 1:,} pages" in str(refused.value)


def test_a_preset_is_a_name_or_a_yaml_file(tmp_path):
    assert preset_path("chat") == PRESET_DIR / "chat.yaml"
    assert preset_path(str(tmp_path / "mine.yml")) == tmp_path / "mine.yml"
    assert preset_path(str(tmp_path / "mine.yaml")) == tmp_path / "mine.yaml"
    (tmp_path / "mine.yml").write_text((PRESET_DIR / "chat.yaml").read_text())
    assert load_preset(str(tmp_path / "mine.yml")) == load_preset("chat")


def test_an_unknown_preset_names_the_built_in_ones():
    with pytest.raises(InputError) as refused:
        load_preset("chatty")
    error = refused.value
    assert error.field == "preset" and error.file == str(PRESET_DIR / "chatty.yaml")
    assert error.message == f"no preset 'chatty' (built in: {', '.join(PRESETS)})"
