"""The Python type each setting (a field of Config) takes, checked where a Python caller gives settings (a3c.train's
keywords, a Config built by hand): the command line's flags parse their text into these types, a caller can pass
anything, and a string where a number belongs failed later in a comparison that named no setting."""

from __future__ import annotations

import math
import numbers
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any

from a3c.spec.config import Config

# the strings a setting typed "int | str" takes (its other values are numbers)
STRING_CHOICES = {"workers": ("auto",)}


@cache
def setting_types() -> dict[str, Any]:
    """Config's field name -> its type hint (resolved from the dataclass's string annotations)."""
    return typing.get_type_hints(Config)


def fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of ``hint``: an integer is a float's too (not a bool: True is no count), numpy's scalars
    count as the Python numbers they stand for, a list of integers is a tuple[int, ...]'s."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is Any:
        return True
    if hint is bool:
        return isinstance(value, bool) or _numpy_kind(value) == "b"
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if origin is tuple:
        (item, *_) = typing.get_args(hint)
        return isinstance(value, (list, tuple)) and all(fits(v, item) for v in value)
    if origin is dict:
        return isinstance(value, Mapping) and all(isinstance(key, str) for key in value)
    return isinstance(value, hint)


def _numpy_kind(value: Any) -> str | None:
    """numpy's kind letter of a numpy scalar ("b" for numpy.bool_, which no numbers ABC counts), else None."""
    dtype = getattr(value, "dtype", None)
    return getattr(dtype, "kind", None) if getattr(value, "shape", None) == () else None


def plain(value: Any, hint: Any) -> Any:
    """``value`` (which fits ``hint``) as the plain Python value the command line's flag would give: numpy's
    scalars as int, float or bool (config.json is JSON, and the range checks print them), a list as a tuple."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return plain(value, next(arg for arg in typing.get_args(hint) if fits(value, arg)))
    if hint is bool:
        return bool(value)
    if hint is int:
        return int(value)
    if hint is float:
        return float(value)
    if typing.get_origin(hint) is tuple:
        (item, *_) = typing.get_args(hint)
        return tuple(plain(v, item) for v in value)
    return value


def describe(hint: Any, *, toml: bool = False) -> str:
    """A type hint in words: "an integer or None"; ``toml``: as a preset file writes the value ("true or false", a
    list and a table with an example)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(describe(arg, toml=toml) for arg in typing.get_args(hint))
    words = {int: "an integer", float: "a number", str: "a string", bool: "True or False", type(None): "None"}
    if toml:
        words[bool] = "true or false"
    if hint in words:
        return words[hint]
    if typing.get_origin(hint) is tuple:
        items = f"a list of {describe(typing.get_args(hint)[0]).removeprefix('an ').removeprefix('a ')}s"
        return f"{items}, e.g. [64, 64]" if toml else items
    if typing.get_origin(hint) is dict:
        return "a table, e.g. { key = 1 }" if toml else "a dict with string keys"
    return getattr(hint, "__name__", str(hint))


def type_problem(name: str, value: Any) -> str | None:
    """What is wrong with the type of setting ``name``'s ``value``, in one line, or None where it fits."""
    hint = setting_types()[name]
    choices = STRING_CHOICES.get(name)
    if fits(value, hint) and not (choices and isinstance(value, str) and value not in choices):
        return None
    wanted = describe(hint)
    if choices:
        wanted = wanted.replace("a string", " or ".join(map(repr, choices)))
    kind = type(value)
    where = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
    return f"{name} must be {wanted} (got {where}{kind.__name__} {value!r})"


def same_setting(a: Any, b: Any) -> bool:
    """Whether two values of a setting are the same: lists and tuples alike, and NaN the same as NaN (--env-kwargs
    x=nan given again), inside dicts and lists too. Where a resumed run and a3c.evaluate compare what was given
    with what the run was made with."""
    a = list(a) if isinstance(a, tuple) else a
    b = list(b) if isinstance(b, tuple) else b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_setting(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_setting(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
