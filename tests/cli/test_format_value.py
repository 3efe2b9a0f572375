"""The CLI's printed values (cli/app.py `format_value`), worked by hand: a tiny float keeps
four significant digits instead of printing as 0.0000 (a capacity search's rate multiplier
of 2^-20 read `load.rate_scale=0.0000`)."""

import math

import pytest

from prefixsim.cli.app import format_value


@pytest.mark.parametrize(("value", "shown"), [
    (2.0 ** -20, "0.0000009537"),
    (0.000999, "0.000999"),
    (-0.00002, "-0.00002"),
    (0.001, "0.0010"),
    (0.0, "0.0000"),
    (0.5, "0.5000"),
    (9.99999, "10.0000"),
    (12345.678, "12,345.68"),
    (math.nan, "nan"),
    (1024, "1,024"),
    (True, "True"),
    (None, "-"),
    ("lru", "lru"),
])
def test_values_as_printed(value, shown):
    assert format_value(value) == shown
