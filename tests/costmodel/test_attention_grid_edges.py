"""Reading attention grids at their edges (costmodel/attention_grid.py, docs/cost-models.md
"Reading the tables"), known answers worked by hand, written to kill the mutants
bench/mutation.sh left alive there: which prefill rows measure their own tail slope (at
least 4 points AND reaching 256 cached tokens, the boundary included), what the others
borrow (the largest measured row's slope scaled by the chunk, or none), and an odd chunk
beyond the largest row split in whole-token halves."""

import pytest

from prefixsim.costmodel.attention_grid import PrefillTimes
from prefixsim.costmodel.profile_parts import AttentionGrid

US = 1e-6


def times(*rows):
    grid = AttentionGrid(num_heads=2, num_kv_heads=1, head_dim=4, floor_s=5 * US,
                         rows=[{"key": k, "x": x, "time_s": [t * US for t in ts]}
                               for k, x, ts in rows])
    return PrefillTimes(grid, num_heads=2, head_dim=4)


def test_a_row_of_four_points_ending_at_256_measures_its_own_slope():
    """Row 8 over 0, 64, 128, 256: slope from 128 (the largest x at or below 128) to 256,
    (72 - 40) / 128 = 0.25 us a token; 100 tokens beyond: 72 + 25 = 97 us."""
    grid = times((8, [0, 64, 128, 256], [20, 30, 40, 72]))
    assert grid.chunk_s(8, 356) == pytest.approx(97 * US)


def test_short_rows_borrow_the_largest_measured_rows_slope():
    """Row 8 over 0..512 measures (100 - 60) / 256 = 0.15625 us a token; row 4 has 4 points
    but ends at 32 (< 256), so it borrows 0.15625 x 4 / 8 = 0.078125 (not its own 0.125):
    64 tokens beyond its end, 16 + 5 = 21 us. Row 2 ends at 512 with 2 points: borrows
    0.0390625, 12 + 0.0390625 x 488 = 31.0625 us at 1000."""
    grid = times((2, [0, 512], [6, 12]), (4, [0, 8, 16, 32], [10, 12, 14, 16]),
                 (8, [0, 128, 256, 512], [20, 40, 60, 100]))
    assert grid.chunk_s(4, 96) == pytest.approx(21 * US)
    assert grid.chunk_s(2, 1000) == pytest.approx(31.0625 * US)
    assert grid.chunk_s(8, 1024) == pytest.approx((100 + 80) * US)


def test_without_a_measured_row_the_tails_are_flat():
    grid = times((4, [0, 8], [10, 18]), (8, [0, 8], [20, 36]))
    assert grid.chunk_s(4, 108) == pytest.approx(18 * US)
    assert grid.chunk_s(8, 1000) == pytest.approx(36 * US)


def test_an_odd_chunk_beyond_the_largest_row_splits_in_whole_tokens():
    """Rows 4 and 8 over 0, 8 (10, 18 and 20, 36 us). 9 new after 0: 4 after 0 (10 us) + 5
    after 4 (row 4 at 4: 14, row 8 at 4: 28, a quarter of the way: 17.5) - the 5 us floor =
    22.5 us (halves of 4.5 tokens would give 22.5625)."""
    grid = times((4, [0, 8], [10, 18]), (8, [0, 8], [20, 36]))
    assert grid.chunk_s(9, 0) == pytest.approx(22.5 * US, rel=1e-9)
