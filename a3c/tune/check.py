"""The search space checked against the flags given, once, before the first trial: which values a run would accept.

Whether a run accepts a value of one setting can depend on the others: ``--push-every 4`` needs ``--backend ray``,
and ``--algo ppo`` a worker's rollout (``--n-steps`` x ``--envs-per-worker``) of at least ``--minibatch-size``
samples. The others are the flags given (fixed for every trial) and the other searched settings, so a value is judged
in combinations of the space with the flags, never against the defaults alone (which refused ``push-every = [1, 4]``
with ``--backend ray`` given). Every combination cannot be tried (the default space's choices alone make millions);
so the check samples, then searches near what it found:

1. DRAWS combinations drawn at random from the space (seeded by the trials' --seed: each process of a study judges
   alike), each with the flags given, resolved as a trial's run resolves its settings (``resolve_settings``: the
   env's preset, the flags and the trial's values over it, Config.validate). Those accepted are the bases.
2. Each value of each searched setting (each choice; a range's two ends) is accepted if a base holds it; else if a
   base with that value set is accepted; else if that, with one other setting moved to one of its values, is (for
   each of BASES_TRIED bases). A constraint between two settings is found so, from any accepted base; one among
   three or more at once is left to the draws.
3. A value that no combination tried accepts is refused (one line: the value, the reason its first try gave, the
   fix); so is a space none of whose combinations is accepted, and no bases at all after the same search from the
   draws (often the flags alone are wrong: the line is their own error).
4. The run's other checks, those that make the env (``preflight``: its spaces, ``--bf16`` on images...), on up to
   PREFLIGHT_TRIES bases: the space is refused only if every one fails.

What passes may still draw a combination that a run refuses (three settings at once; an env check on a value the
bases did not hold): that trial is refused when it starts (a3c/tune/trial.py: pruned, its reason recorded, not one of
--trials), the sampler learns to avoid such combinations, and the study goes on. The start line says how many of the
draws were accepted when some were not.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Any

from a3c.run.resolve import preflight, resolve_settings
from a3c.spec.errors import UserError
from a3c.tune.space import DEFAULT_SPACES, Space, choice_label

DRAWS = 64  # combinations drawn at random
BASES_TRIED = 8  # accepted combinations a value is set into, before it is refused
PREFLIGHT_TRIES = 4  # accepted combinations the env's checks are tried on


@dataclass(frozen=True)
class Checked:
    """What the check found: how many of the ``draws`` were ``accepted``, and the commonest reason for the others."""

    draws: int
    accepted: int
    commonest: str | None

    def line(self) -> str | None:
        """The start line when some draws were refused (None when all were accepted)."""
        if self.accepted == self.draws:
            return None
        return (
            f"a3c.tune: {self.accepted} of {self.draws} combinations of the space drawn at random are accepted with "
            f"the flags given (most refused ones: {self.commonest}); a trial that draws a refused one is pruned as "
            "refused, not counted, and the study goes on"
        )


class Judge:
    """Whether a run accepts a combination of searched values (``combo``, {Config field: value}) with the flags
    given: None, or the reason it refuses it (the UserError's message). Remembers what it judged."""

    def __init__(self, values: Mapping[str, Any], given: Set[str]) -> None:
        self.values, self.given = dict(values), set(given)
        self.seen: dict[str, str | None] = {}

    def settings(self, combo: Mapping[str, Any]) -> tuple[dict[str, Any], set[str]]:
        return {**self.values, **combo}, self.given | set(combo)

    def __call__(self, combo: Mapping[str, Any]) -> str | None:
        key = repr(sorted(combo.items()))
        if key not in self.seen:
            try:
                resolve_settings(*self.settings(combo))
                self.seen[key] = None
            except UserError as err:
                self.seen[key] = " ".join(str(err).split())
        return self.seen[key]


def check_space(space: Space, values: Mapping[str, Any], given: Set[str], seed: int = 0) -> Checked:
    """Check ``space`` (the settings searched: those given are out of it already) against the flags given
    (``values``, ``given``: as a3c.train parses them), as the module docstring says. UserError for a value, or a
    space, that no combination tried makes acceptable."""
    judge = Judge(values, given)
    rng = random.Random(seed)
    draws = [space.draw(rng) for _ in range(DRAWS)]
    verdicts = [judge(combo) for combo in draws]
    bases = [combo for combo, why in zip(draws, verdicts, strict=True) if why is None]
    refused = Counter(why for why in verdicts if why is not None)
    commonest = refused.most_common(1)[0][0] if refused else None
    if not bases:  # no draw accepted: one setting moved away from each of a few draws, before giving up
        bases = [c for combo in draws[:BASES_TRIED] if (c := _moved(space, judge, combo, None)) is not None][:1]
    if not bases:
        assert commonest is not None
        raise UserError(f"{commonest} (so in every combination of the search space {_where(space)} tried)")
    for dimension in space.dimensions:
        for value in dimension.probes():
            if any(_same(base[dimension.field], value) for base in bases):
                continue
            first_reason: str | None = None
            for base in bases[:BASES_TRIED]:
                combo = {**base, dimension.field: value}
                why = judge(combo)
                if why is None or _moved(space, judge, combo, dimension.field) is not None:
                    break
                first_reason = first_reason or why
            else:
                raise UserError(
                    f"{_where(space)} {dimension.name}: {choice_label(value)!r} is refused with the flags given in "
                    f"every combination tried ({first_reason}); {_fix(space)}"
                )
    _check_env(judge, bases, space)
    return Checked(DRAWS, sum(why is None for why in verdicts), commonest)


def _moved(space: Space, judge: Judge, combo: dict[str, Any], kept: str | None) -> dict[str, Any] | None:
    """``combo`` with one setting (not ``kept``) moved to one of its probe values, the first the judge accepts."""
    for other in space.dimensions:
        if other.field == kept:
            continue
        for value in other.probes():
            moved = {**combo, other.field: value}
            if judge(moved) is None:
                return moved
    return None


def _check_env(judge: Judge, bases: list[dict[str, Any]], space: Space) -> None:
    """The run's checks that make the env (preflight) on up to PREFLIGHT_TRIES accepted combinations: UserError
    when every one fails."""
    error: UserError | None = None
    for base in bases[:PREFLIGHT_TRIES]:
        try:
            settings = resolve_settings(*judge.settings(base))
            preflight(settings.config, sources=settings.sources)
            return
        except UserError as err:
            error = error or err
    assert error is not None
    reason = " ".join(str(error).split())
    raise UserError(
        f"{_where(space)}: the env refuses every combination tried ({reason}); where the setting is the space's, "
        f"{_fix(space)}"
    )


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _where(space: Space) -> str:
    return f"--space {space.source}"


def _fix(space: Space) -> str:
    if space.source in {str(path) for path in DEFAULT_SPACES.values()}:
        return "give --space FILE without it (this is the default space), or other flags"
    return "drop it from the space, or give other flags"
