"""Validation of a profile's measured blocks (costmodel/profile_parts.py, docs/cost-models.md
"Profile file"), each rule at its boundary, written to kill the mutants bench/mutation.sh
left alive there: the paired lengths and the least number of points, strictly increasing x
values and row keys, x from 0 and times above 0."""

import pydantic
import pytest

from prefixsim.costmodel.profile_parts import (
    AttentionGrid,
    CollectiveTable,
    CpuOverhead,
    ElementwiseTable,
    GridRow,
)


def refused(build, message: str) -> None:
    with pytest.raises(pydantic.ValidationError) as raised:
        build()
    errors = raised.value.errors()
    assert len(errors) == 1 and errors[0]["msg"] == "Value error, " + message


def test_a_grid_row_of_one_point_from_x_zero_is_valid():
    row = GridRow(key=1, x=[0], time_s=[1e-9])
    assert (row.x, row.time_s) == ([0], [1e-9])
    assert GridRow(key=1, x=[0, 1], time_s=[1.0, 2.0]).x == [0, 1]


@pytest.mark.parametrize(("x", "time_s", "message"), [
    ([], [], "x values and time_s need the same length, at least 1"),
    ([0, 1], [1.0], "x values and time_s need the same length, at least 1"),
    ([0], [1.0, 2.0], "x values and time_s need the same length, at least 1"),
    ([1, 1], [1.0, 2.0], "x values must increase"),
    ([0, 2, 1], [1.0, 2.0, 3.0], "x values must increase"),
    ([-1, 2], [1.0, 2.0], "x values must be >= 0 and times > 0"),
    ([0, 2], [1.0, 0.0], "x values must be >= 0 and times > 0"),
    ([0, 2], [0.0, 1.0], "x values must be >= 0 and times > 0"),
    ([0, 2], [1.0, float("nan")], "x values must be >= 0 and times > 0"),
])
def test_grid_rows_refuse_each_broken_rule(x, time_s, message):
    refused(lambda: GridRow(key=1, x=x, time_s=time_s), message)


@pytest.mark.parametrize("build", [
    lambda xs, ts: ElementwiseTable(width=4, tokens=xs, time_s=ts),
    lambda xs, ts: CollectiveTable(num_gpus=2, bytes=xs, time_s=ts),
    lambda xs, ts: CpuOverhead(batch_sizes=xs, time_s=ts, measured_tp=1, framework="f",
                               components="c"),
])
def test_tables_need_two_points(build):
    assert build([1, 2], [1.0, 2.0]) is not None
    refused(lambda: build([1], [1.0]),
            "x values and time_s need the same length, at least 2")
    refused(lambda: build([2, 1], [1.0, 2.0]), "x values must increase")


def test_grid_row_keys_must_increase():
    rows = [GridRow(key=k, x=[0], time_s=[1.0]) for k in (1, 2)]
    grid = dict(num_heads=1, num_kv_heads=1, head_dim=1, floor_s=1.0)
    assert [r.key for r in AttentionGrid(**grid, rows=rows).rows] == [1, 2]
    refused(lambda: AttentionGrid(**grid, rows=rows[::-1]), "row keys must increase")
    refused(lambda: AttentionGrid(**grid, rows=[rows[0], rows[0]]), "row keys must increase")
