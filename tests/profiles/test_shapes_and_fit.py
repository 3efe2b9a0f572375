"""What a calibration draws and how its measurements are fitted, torch-free: the shape ranges
as docs/cost-models.md tables them, the drawn shapes' bounds and mix, the exact NNLS, the
relative fit's refusals and the hold-out split's edges, all worked by hand."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from prefixsim.costmodel.operators import LayerDims
from prefixsim.presets import model_from_mapping
from prefixsim.profiles.fit import error_summary, fit_relative, holdout_split, nnls
from prefixsim.profiles.shapes import ShapeRanges, plan_shapes, shape_ranges

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cost-models.md"
TINY = LayerDims.from_spec(model_from_mapping({
    "name": "tiny", "num_layers": 2, "hidden_size": 32, "num_heads": 4, "num_kv_heads": 2,
    "head_dim": 8, "intermediate_size": 64, "vocab_size": 100, "num_params": 100_000,
    "num_active_params": 100_000}))


def _documented_ranges() -> dict[tuple[str, bool], ShapeRanges]:
    rows = {}
    for line in DOCS.read_text().splitlines():
        match = re.match(r"\| (cpu|cuda)(, `--quick`)? \|(.*)\|$", line)
        if match:
            cells = [c.strip() for c in match.group(3).split("|")]
            values = [2 ** int(c[2:]) if c.startswith("2^") else int(c) for c in cells]
            rows[(match.group(1), bool(match.group(2)))] = ShapeRanges(*values)
    return rows


def test_shape_ranges_are_the_documented_ones():
    documented = _documented_ranges()
    assert len(documented) == 4
    for (device, quick), ranges in documented.items():
        assert shape_ranges(device, quick) == ranges, (device, quick)
    # a device other than cuda gets the CPU's
    assert shape_ranges("mps", True) == documented[("cpu", True)]


WIDE = ShapeRanges(max_tokens=64, gemms_per_weight=5, max_new=256, max_context=2048,
                   max_pairs=2**40, num_prefill=1000, max_batch=16, max_kv_tokens=2**40,
                   num_decode=300, num_layer=60, passes=1, repeats=1)


@pytest.fixture(scope="module")
def wide():
    return plan_shapes(TINY, WIDE, np.random.default_rng(0))


def test_every_weight_gets_its_two_ends_and_its_random_counts(wide):
    by_weight: dict[tuple[int, int], list[int]] = {}
    for op in wide.ops["gemm"]:
        by_weight.setdefault((op.in_features, op.out_features), []).append(op.tokens)
    assert list(by_weight) == list(TINY.weights().values())
    for counts in by_weight.values():
        assert counts == sorted(set(counts)) and len(counts) == WIDE.gemms_per_weight + 2
        assert counts[0] == 1 and counts[-1] == WIDE.max_tokens


def test_prefill_shapes_span_their_ranges(wide):
    """A fifth have no cached tokens; the rest draw log-uniformly from 16 to the context
    limit, new tokens from 8 to the new-token limit (1,000 draws reach both ends)."""
    prefills = wide.ops["prefill_attention"]
    assert len(prefills) == WIDE.num_prefill
    new = [op.new_tokens for op in prefills]
    cached = [op.cached_tokens for op in prefills if op.cached_tokens]
    assert min(new) == 8 and max(new) <= WIDE.max_new
    assert min(cached) == 16 and max(cached) <= WIDE.max_context
    assert 0.15 < 1 - len(cached) / len(prefills) < 0.25
    assert {op.num_heads for op in prefills} == {TINY.num_heads}


def test_prefill_pairs_respect_the_cap():
    """New tokens 8..8 and cached 0 or 16: 8 x 8 = 64 fits the cap of 64, 8 x 24 does not,
    so every shape is (8, 0), however many draws that takes."""
    tight = ShapeRanges(max_tokens=16, gemms_per_weight=1, max_new=8, max_context=16,
                        max_pairs=64, num_prefill=5, max_batch=1, max_kv_tokens=1,
                        num_decode=3, num_layer=6, passes=1, repeats=1)
    plan = plan_shapes(TINY, tight, np.random.default_rng(1))
    assert {(op.new_tokens, op.cached_tokens) for op in plan.ops["prefill_attention"]} == {
        (8, 0)}
    # every context scaled to a cap of 1 token stays at least 1
    assert all(set(op.contexts) == {1} for op in plan.ops["decode_attention"])
    for step in plan.layers:
        # a chunk of 8 (half of min(8, 16) is 4, raised to 8) with no room for cached tokens
        assert all((c.new_tokens, c.cached_tokens) == (8, 0) for c in step.prefills)
        assert len(step.decode_contexts) <= 1  # half of one sequence is still one


def test_layer_chunks_cache_what_the_cap_leaves():
    """A cap of 100 with 8 new tokens leaves 100 // 8 - 8 = 4 cached tokens."""
    ranges = ShapeRanges(max_tokens=16, gemms_per_weight=1, max_new=8, max_context=64,
                         max_pairs=100, num_prefill=1, max_batch=4, max_kv_tokens=64,
                         num_decode=1, num_layer=3, passes=1, repeats=1)
    plan = plan_shapes(TINY, ranges, np.random.default_rng(2))
    chunks = [c for step in plan.layers for c in step.prefills]
    assert chunks and all((c.new_tokens, c.cached_tokens) == (8, 4) for c in chunks)
    assert all(type(c.cached_tokens) is int for c in chunks)


def test_decode_batches_span_their_ranges(wide):
    decodes = wide.ops["decode_attention"]
    assert len(decodes) == WIDE.num_decode
    sizes = Counter(len(op.contexts) for op in decodes)
    assert min(sizes) == 1 and max(sizes) <= WIDE.max_batch and len(sizes) > 5
    contexts = [c for op in decodes for c in op.contexts]
    # no cap reached: contexts are the draws themselves, 16 .. the context limit
    assert min(contexts) == 16 and max(contexts) <= WIDE.max_context
    assert max(contexts) > WIDE.max_context / 2


def test_capped_decode_batches_scale_down_together():
    ranges = ShapeRanges(max_tokens=16, gemms_per_weight=1, max_new=8, max_context=4096,
                         max_pairs=64, num_prefill=1, max_batch=8, max_kv_tokens=1000,
                         num_decode=50, num_layer=1, passes=1, repeats=1)
    plan = plan_shapes(TINY, ranges, np.random.default_rng(3))
    sums = [sum(op.contexts) for op in plan.ops["decode_attention"]]
    assert max(sums) <= 1000 and max(sums) > 900  # some batch was scaled to the cap


def test_layer_steps_cycle_chunk_decodes_both(wide):
    """Step i is kind i % 3: a prefill chunk alone, decodes alone, or both; chunks take up
    to half of min(new limit, token limit) = 32 new tokens, decodes half the batch limit."""
    assert len(wide.layers) == WIDE.num_layer
    for i, step in enumerate(wide.layers):
        kind = i % 3
        assert (len(step.prefills) == 1) == (kind != 1), i
        assert bool(step.decode_contexts) == (kind != 0), i
    chunks = [c.new_tokens for s in wide.layers for c in s.prefills]
    batches = [len(s.decode_contexts) for s in wide.layers if s.decode_contexts]
    assert min(chunks) >= 8 and max(chunks) <= 32 and max(chunks) > 21
    assert max(batches) <= WIDE.max_batch // 2 and max(batches) > 5


# ------------------------------------------------------------------------------ fitting


def test_nnls_known_answers():
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert nnls(a, np.array([1.0, 2.0, 3.0])) == pytest.approx([1.0, 2.0])
    # unconstrained: intercept 4, slope -1; constrained: the slope is 0, the mean is 2
    a = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    assert nnls(a, np.array([3.0, 2.0, 1.0])) == pytest.approx([2.0, 0.0])
    # a column of zeros gets 0; integer input is fine
    assert nnls([[1, 0], [2, 0]], [1, 2]) == pytest.approx([1.0, 0.0])
    # all negative: nothing beats x = 0
    assert nnls(np.array([[1.0], [1.0]]), np.array([-1.0, -2.0])) == pytest.approx([0.0])
    assert nnls(np.eye(8), np.arange(8.0)) == pytest.approx(np.arange(8.0))
    with pytest.raises(ValueError, match="^nnls by enumeration handles at most 8 columns, "
                                         "got 9$"):
        nnls(np.eye(9), np.ones(9))


def test_fit_relative_known_answer_and_refusals():
    # one point: the coefficient is time / feature
    assert fit_relative([[4.0]], [2.0]) == pytest.approx([0.5])
    # t = 2 + 3 x exactly
    x = np.array([1.0, 2.0, 4.0, 8.0])
    assert fit_relative(np.c_[np.ones(4), x], 2 + 3 * x) == pytest.approx([2.0, 3.0])
    message = "^need one feature row per measured time$"
    for features, times in (([1.0, 2.0], [1.0, 2.0]), ([[1.0], [2.0]], [1.0]),
                            (np.zeros((0, 1)), [])):
        with pytest.raises(ValueError, match=message):
            fit_relative(features, times)
    for times in ([1.0, 0.0], [1.0, -1.0]):
        with pytest.raises(ValueError, match="^measured times must be > 0$"):
            fit_relative([[1.0], [1.0]], times)


def test_error_summary_of_one_and_none():
    assert error_summary([0.25]) == {"median_rel_error": 0.25, "p90_rel_error": 0.25, "n": 1}
    summary = error_summary(np.arange(11) / 10)
    assert summary["median_rel_error"] == 0.5 and summary["p90_rel_error"] == pytest.approx(0.9)
    with pytest.raises(ValueError, match="^no errors to summarise$"):
        error_summary([])


def test_holdout_split_edges():
    rng = np.random.default_rng(0)
    train, test = holdout_split(2, 0.2, rng, keep=[0])
    assert list(train) == [0] and list(test) == [1]
    # a fraction that rounds to nothing still holds out one; one that asks for all keeps one
    assert len(holdout_split(10, 0.01, rng)[1]) == 1
    assert [len(part) for part in holdout_split(3, 1.0, rng)] == [1, 2]
    # only the candidates can be held out, however many the fraction asks for
    train, test = holdout_split(10, 0.5, rng, keep=range(8))
    assert list(test) == [8, 9] and list(train) == list(range(8))
    assert test.dtype.kind == "i" and train.dtype.kind == "i"
    for n, keep in ((1, ()), (0, ()), (3, (0, 1, 2))):
        with pytest.raises(ValueError, match="^a hold-out split needs at least two items, "
                                             "one of them not kept$"):
            holdout_split(n, 0.5, rng, keep=keep)
    # 20% of 11 is 2, never the kept ends
    for seed in range(20):
        train, test = holdout_split(11, 0.2, np.random.default_rng(seed), keep=[0, 10])
        assert len(test) == 2 and not {0, 10} & set(test)
        assert sorted([*train, *test]) == list(range(11))
    assert math.isclose(len(holdout_split(100, 0.2, rng)[1]), 20)
