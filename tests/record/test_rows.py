"""a3c/record/rows.py: the rule for a window's mean return, shared by the dashboard and the resume's check."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from a3c.record.rows import finite_mean

returns = st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), max_size=120)


@given(returns)
def test_finite_mean_is_the_mean_of_the_finite_returns(values: list[float]) -> None:
    finite = [v for v in values if math.isfinite(v)]
    mean = finite_mean(values)
    if not finite:
        assert mean is None
        return
    assert mean is not None and min(finite) <= mean <= max(finite)
    try:
        exact_sum = math.fsum(finite)
    except OverflowError:  # the sum leaves the floats; the mean does not
        return
    assert mean == exact_sum / len(finite)


def test_finite_mean_leaves_out_nan_and_both_infinities() -> None:
    assert finite_mean([1.0, math.nan, 3.0, math.inf, -math.inf]) == 2.0
    assert finite_mean([math.inf, -math.inf]) is None
    assert finite_mean([]) is None


def test_finite_mean_of_returns_whose_sum_overflows() -> None:
    # finite returns whose sum is not a float: math.fsum raises OverflowError there (the dashboard crashed on it)
    assert finite_mean([1e308, 1e308, -1e308]) == 1e308 / 3
    assert finite_mean([1.5e308, 1.5e308]) == 1.5e308
