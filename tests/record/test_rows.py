"""a3c/record/rows.py: the rule for a window's mean return, shared by the dashboard and the resume's check."""

from __future__ import annotations

import math

import pytest
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
    assert mean == pytest.approx(exact_sum / len(finite), rel=1e-15, abs=1e-300)


def test_the_mean_of_equal_returns_is_that_return() -> None:
    """Found by hypothesis in CI: three returns of 3002399751580331.0 averaged 3002399751580330.5 (the sum's rounding
    and the division's), a mean below every return it averages."""
    assert finite_mean([3002399751580331.0] * 3) == 3002399751580331.0


def test_finite_mean_leaves_out_nan_and_both_infinities() -> None:
    assert finite_mean([1.0, math.nan, 3.0, math.inf, -math.inf]) == 2.0
    assert finite_mean([math.inf, -math.inf]) is None
    assert finite_mean([]) is None


def test_finite_mean_of_returns_whose_sum_overflows() -> None:
    # finite returns whose sum is not a float: math.fsum raises OverflowError there (the dashboard crashed on it)
    assert finite_mean([1e308, 1e308, -1e308]) == 1e308 / 3
    assert finite_mean([1.5e308, 1.5e308]) == 1.5e308
    largest = 1.7976931348623157e308  # divided by 3 and summed, it overflowed again
    assert finite_mean([largest] * 3) == largest
