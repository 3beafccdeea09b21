"""a3c/spec/setting_types.py: every setting's default fits its own type, and the values of another type are named."""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a3c.spec.config import Config
from a3c.spec.setting_types import describe, fits, plain, setting_types, type_problem


def test_every_default_fits_its_settings_type():
    defaults = Config()
    for field in dataclasses.fields(Config):
        assert type_problem(field.name, getattr(defaults, field.name)) is None, field.name


def test_each_type_hint_of_config_is_one_the_checker_describes():
    """A new kind of type hint on Config (a Literal, a list) must be taught to fits() and describe()."""
    for name, hint in setting_types().items():
        assert not describe(hint).startswith(("typing.", "<")), (name, hint)


@given(st.integers())
def test_an_integer_is_a_float_settings_too_but_never_a_bool(n):
    assert fits(n, float) and fits(n, int) and not fits(n, bool)
    assert not fits(bool(n % 2), int) and not fits(bool(n % 2), float)


@given(st.text())
def test_a_string_is_no_number_and_workers_takes_only_auto(text):
    assert type_problem("total_steps", text) == f"total_steps must be an integer (got str {text!r})"
    assert (type_problem("workers", text) is None) == (text == "auto")


@pytest.mark.parametrize(("value", "ok"), [((64, 64), True), ([8], True), ([], True), ([1.5], False), ("64", False)])
def test_hidden_sizes_takes_a_list_or_tuple_of_integers(value, ok):
    assert (type_problem("hidden_sizes", value) is None) == ok


@given(st.integers(min_value=-(2**62), max_value=2**62), st.floats(allow_nan=False, width=32))
def test_numpy_scalars_fit_and_become_pythons_own(n, x):
    np = pytest.importorskip("numpy")
    for value, hint, kind in ((np.int64(n), int, int), (np.float32(x), float, float), (np.bool_(n % 2), bool, bool)):
        assert fits(value, hint)
        assert type(plain(value, hint)) is kind and plain(value, hint) == value
    assert plain([np.int64(n)], setting_types()["hidden_sizes"]) == (n,)
    assert plain(np.int64(n), setting_types()["workers"]) == n and type(plain(np.int64(n), int | str)) is int


def test_the_same_setting_holds_nan_the_same_and_lists_as_tuples():
    """A resumed run's flags and a3c.evaluate's --env-kwargs given again are compared so: NaN never equals itself,
    and a run's --env-kwargs x=nan given again "differed" from its own (found by a probing review)."""
    from a3c.spec.setting_types import same_setting

    nan = float("nan")
    assert same_setting(nan, nan) and same_setting({"x": nan, "y": [1.0, nan]}, {"x": nan, "y": (1.0, nan)})
    assert same_setting((64, 64), [64, 64]) and same_setting("a", "a")
    assert not same_setting({"x": nan}, {"x": 1.0}) and not same_setting({"x": 1}, {"x": 1, "y": 2})
    assert not same_setting([1.0, nan], [1.0]) and not same_setting(nan, "nan")
