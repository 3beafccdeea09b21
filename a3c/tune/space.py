"""The search space of a study: which settings a trial samples, and from what (by default the space of the trials'
objective: a3c/tune/space.toml for A3C, a3c/tune/space_ppo.toml for --algo ppo; or ``--space FILE`` in the same
format: one table per family of settings, each entry a flag of python -m a3c.train without "--" with a range ``{low,
high[, log]}`` or ``{choices = [...]}``). Loaded here, each value typed as its Config field takes it (as presets are:
a3c/spec/presets.py); whether the runs accept the values, with the flags given and with each other, is checked in
a3c/tune/check.py. Stored in study.json as plain data (a resumed study samples from the space it started with,
whatever became of the file), and sampled through an Optuna trial (or drawn at random, for the check).

Optuna's parameters are named like the flags (``lr``, ``n-steps``), so its figures and the study's database speak
the command line's language. A choice Optuna cannot hold (a list: ``hidden-sizes``) is stored as the text the command
line takes (``"64 64"``) and turned back into the value here.
"""

from __future__ import annotations

import dataclasses
import math
import random
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a3c.spec.config import Config
from a3c.spec.errors import UserError
from a3c.spec.presets import NOT_PRESETTABLE, checked_setting, flag_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (a dependency on 3.10 only)
    import tomli as tomllib

DEFAULT_SPACE = Path(__file__).with_name("space.toml")  # A3C's (rl-zoo3's A2C sampler, narrowed)
DEFAULT_SPACES = {"a3c": DEFAULT_SPACE, "ppo": Path(__file__).with_name("space_ppo.toml")}  # by --algo
RANGE_KEYS, CHOICE_KEYS = frozenset({"low", "high", "log"}), frozenset({"choices"})


@dataclass(frozen=True)
class Dimension:
    """One setting searched: ``name`` its flag without "--" (Optuna's parameter name), ``field`` its Config field,
    and either ``choices`` or a range ``low``..``high`` (``log``: log-uniform; ``integer``: an int setting)."""

    name: str
    field: str
    family: str
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False

    def sample(self, trial: Any) -> Any:
        """This setting's value for an Optuna trial (``trial.suggest_*``), as the Config field takes it."""
        if self.choices is not None:
            labels = [choice_label(c) for c in self.choices]
            picked = trial.suggest_categorical(self.name, labels)
            return self.choices[labels.index(picked)]
        assert self.low is not None and self.high is not None
        if self.integer:
            return trial.suggest_int(self.name, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(self.name, self.low, self.high, log=self.log)

    def draw(self, rng: random.Random) -> Any:
        """A value at random (uniform over the choices, or the range; log-uniform for a log range)."""
        if self.choices is not None:
            return self.choices[rng.randrange(len(self.choices))]
        assert self.low is not None and self.high is not None
        if self.integer:
            if self.log:
                return min(int(self.high), int(math.exp(rng.uniform(math.log(self.low), math.log(self.high + 1)))))
            return rng.randint(int(self.low), int(self.high))
        if self.log:
            return math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        return rng.uniform(self.low, self.high)

    def probes(self) -> tuple[Any, ...]:
        """The values a check tries: every choice, or a range's two ends."""
        if self.choices is not None:
            return self.choices
        assert self.low is not None and self.high is not None
        ends = (int(self.low), int(self.high)) if self.integer else (self.low, self.high)
        return ends

    def value(self, param: Any) -> Any:
        """The Config value of an Optuna parameter value of this dimension (a stored trial's ``params``)."""
        if self.choices is not None:
            return self.choices[[choice_label(c) for c in self.choices].index(param)]
        return int(param) if self.integer else float(param)

    def to_data(self) -> dict[str, Any]:
        if self.choices is not None:
            return {"choices": [list(c) if isinstance(c, tuple) else c for c in self.choices]}
        return {"low": self.low, "high": self.high, **({"log": True} if self.log else {})}


def choice_label(value: Any) -> Any:
    """What Optuna stores for a choice: the value itself, or for a list the text the command line takes."""
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return value


@dataclass(frozen=True)
class Space:
    """The settings a study searches, by family (in the file's order)."""

    dimensions: tuple[Dimension, ...]
    source: str  # where it came from (the file), for messages

    def without(self, fixed: set[str]) -> Space:
        """The space less the settings ``fixed`` (Config fields given on the command line: not searched)."""
        return Space(tuple(d for d in self.dimensions if d.field not in fixed), self.source)

    def sample(self, trial: Any) -> dict[str, Any]:
        """{Config field: value} for an Optuna trial."""
        return {d.field: d.sample(trial) for d in self.dimensions}

    def draw(self, rng: random.Random) -> dict[str, Any]:
        """{Config field: value} at random (Dimension.draw), without Optuna."""
        return {d.field: d.draw(rng) for d in self.dimensions}

    def settings(self, params: dict[str, Any]) -> dict[str, Any]:
        """{Config field: value} of a stored trial's Optuna ``params`` (those of this space)."""
        return {d.field: d.value(params[d.name]) for d in self.dimensions if d.name in params}

    def to_data(self) -> dict[str, dict[str, Any]]:
        """The space as the TOML file's data ({family: {setting: range or choices}}), for study.json."""
        data: dict[str, dict[str, Any]] = {}
        for d in self.dimensions:
            data.setdefault(d.family, {})[d.name] = d.to_data()
        return data


def load_space(path: Path | None = None, algo: str = "a3c") -> Space:
    """The space of the TOML file ``path`` (default: the objective ``algo``'s, DEFAULT_SPACES); UserError naming the
    file and entry."""
    path = DEFAULT_SPACES.get(algo, DEFAULT_SPACE) if path is None else Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise UserError(f"--space {path}: cannot read it ({err}); fix it, or leave --space out") from None
    return space_from_data(data, str(path))


def space_from_data(data: dict[str, Any], source: str) -> Space:
    """A space from the file's data (or study.json's copy of it): families of entries, or entries at the top."""
    dimensions: list[Dimension] = []
    settings = {f.name for f in dataclasses.fields(Config)}
    for key, value in data.items():
        # a table named like a setting is that setting's entry; any other table is a family of entries
        if isinstance(value, dict) and key.replace("-", "_") not in settings:
            dimensions += [_dimension(source, key, name, entry) for name, entry in value.items()]
        else:
            dimensions.append(_dimension(source, "", key, value))
    names = [d.field for d in dimensions]
    twice = sorted({d.name for d in dimensions if names.count(d.field) > 1})
    if twice:
        raise UserError(f"--space {source}: {', '.join(twice)} appear more than once; keep one entry each")
    if not dimensions:
        raise UserError(f"--space {source} holds no setting to search; see {DEFAULT_SPACE} for the format")
    return Space(tuple(dimensions), source)


def _dimension(source: str, family: str, name: str, entry: Any) -> Dimension:
    where = f"--space {source} [{family}] {name}" if family else f"--space {source} {name}"
    fields = {f.name: f for f in dataclasses.fields(Config)}
    field = name.replace("-", "_")
    if field not in fields or fields[field].metadata.get("internal"):
        raise UserError(f"{where}: no such setting; use the flags of python -m a3c.train --help, without '--'")
    if field in NOT_PRESETTABLE:
        raise UserError(f"{where}: {flag_name(field)} cannot be searched; give it on the command line")
    if not isinstance(entry, dict) or not (set(entry) <= RANGE_KEYS or set(entry) == CHOICE_KEYS):
        raise UserError(f"{where}: give {{ low = A, high = B }} (optionally log = true) or {{ choices = [...] }}")
    table = family or "space"
    if "choices" in entry:
        choices = entry["choices"]
        if not isinstance(choices, list) or not choices:
            raise UserError(f"{where}: choices must be a non-empty list")
        values = tuple(checked_setting(Path(source), table, name, c) for c in choices)
        labels = [choice_label(v) for v in values]
        if len(set(map(repr, labels))) != len(labels):
            raise UserError(f"{where}: a choice appears twice")
        return Dimension(name, field, family, choices=values)
    hint = typing.get_type_hints(Config)[field]
    if hint not in (int, float) or "low" not in entry or "high" not in entry:
        kind = getattr(hint, "__name__", str(hint))
        raise UserError(f"{where}: a range needs low and high, and a number setting (this one is {kind}); or choices")
    low, high = (checked_setting(Path(source), table, name, entry[k]) for k in ("low", "high"))
    log = entry.get("log", False)
    if not isinstance(log, bool) or not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise UserError(f"{where}: needs low < high (finite numbers) and log true or false")
    if log and low <= 0:
        raise UserError(f"{where}: a log range needs low > 0 (got {low})")
    return Dimension(name, field, family, low=low, high=high, log=log, integer=hint is int)
