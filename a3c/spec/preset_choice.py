"""Which table of the presets file a new run takes, and the run's settings from it: defaults < the table < the flags
given, with where each value came from (``--show-config`` prints that). A resumed run never re-applies a table: it
keeps its checkpoint's config (a3c/run/resolve.py).

A table belongs to one objective (a3c/spec/presets.py). The run's objective is --algo where given; where not, the
objective of the table named like --env (an ALE/ game: ``atari``), else that of the plain defaults of the env's
action-space family (the table named ``discrete`` or ``continuous``: each family's default objective is data, chosen by
measurement, presets.toml says on what). The table taken:

- ``--preset NAME``: NAME, or NAME@OBJ for --algo OBJ; a NAME for another objective only is a UserError, and so is
  ``--preset NAME@OBJ`` with another --algo;
- else the table named like --env for the run's objective (``ID`` or ``ID@OBJ``);
- else, and for ``--preset none``: the plain defaults of the objective for the env's action-space family (tables
  ``discrete`` and ``continuous``, each for its family's default objective, and ``FAMILY@OBJ`` for the other). An env
  whose table is for another objective gets these, and the start line says the table was passed over.

A --preset-file is meant to be used: a run that takes none of its tables is a UserError.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a3c.spec import cpu
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec, action_family, describe_env
from a3c.spec.errors import UserError
from a3c.spec.flags import PPO_ONLY_SETTINGS, VTRACE_SETTINGS
from a3c.spec.presets import (
    ATARI_PRESET,
    DEFAULT_OBJECTIVE,
    FAMILIES,
    NO_PRESET,
    OBJECTIVE_SEP,
    PRESETS_FILE,
    family_table,
    for_objective,
    preset_table,
    table_base,
    table_objective,
    toml_key,
)
from a3c.spec.validation import ppo_only, vtrace_only

DEFAULT, PRESET, FLAG, CHECKPOINT = "default", "preset", "flag", "checkpoint"  # the sources --show-config names
# a preset's --bf16 turned off on a CPU without bfloat16 instructions (one word: --show-config's lines type back)
CPU = "cpu"


@dataclass(frozen=True)
class Choice:
    """The table a new run takes (``name``, a key of ``tables``) and why: ``family`` names the action-space family
    where the plain defaults were taken (else None), ``passed_over`` the env's own table where it was for another
    objective, ``asked_none`` whether --preset none asked for the plain defaults; ``spec``: the env's, where it was
    made to read its action-space family (the preflight checks take it, rather than make the env again)."""

    name: str
    tables: dict[str, dict[str, Any]]
    family: str | None = None
    passed_over: str | None = None
    asked_none: bool = False
    spec: EnvSpec | None = None

    @property
    def settings(self) -> dict[str, Any]:
        return self.tables[self.name]


def env_table_base(env: str, tables: dict[str, dict[str, Any]]) -> str | None:
    """The name the tables of ``env`` go by: the id itself where a table is named for it (for any objective), else
    ``atari`` for an ALE/ game where there is such a table, else None."""
    if any(table_base(name) == env for name in tables):
        return env
    if env.startswith("ALE/") and any(table_base(name) == ATARI_PRESET for name in tables):
        return ATARI_PRESET
    return None


def choose_table(
    env: str,
    requested: str | None,
    objective: str | None,
    file: str | None,
    family: Callable[[], str],
) -> Choice:
    """The table a new run takes (the module docstring): ``requested`` is --preset (None: not given), ``objective``
    --algo where given, ``file`` --preset-file, ``family()`` the env's action-space family (called only where the
    plain defaults are taken: it makes the env)."""
    tables = preset_table(file)
    where = PRESETS_FILE if file is None else file
    if requested is not None and requested.lower() == NO_PRESET:
        if file is not None:
            raise UserError(f"--preset {NO_PRESET} and --preset-file {file} contradict each other; drop one")
        return _plain_defaults(objective, family, asked_none=True)
    if requested is not None:
        base = table_base(requested)
        objectives = sorted({table_objective(name, tables) for name in tables if table_base(name) == base})
        if not objectives:
            known = sorted({table_base(name) for name in tables})
            raise UserError(
                f"--preset {requested}: no such preset; use one of {', '.join(known)}, or {NO_PRESET} (defined in "
                f"{where})"
            )
        if requested in tables and objective in (None, table_objective(requested, tables)):
            return Choice(requested, tables)
        if requested in tables and OBJECTIVE_SEP in requested and objective is not None:
            # NAME@OBJ says which objective's table as plainly as --algo does: another --algo contradicts it
            raise UserError(
                f"--preset {requested} is the table of --algo {table_objective(requested, tables)}, and --algo "
                f"{objective} asks for another; drop --algo {objective}, or give --preset {base} (its table for the "
                "--algo given)"
            )
        named = for_objective(base, objective, tables)
        if named is None:
            raise UserError(
                f"--preset {requested} is for objective {' and '.join(objectives)}, not --algo "
                f"{objective or DEFAULT_OBJECTIVE} (no table {base}{OBJECTIVE_SEP}{objective or DEFAULT_OBJECTIVE} in "
                f"{where}); drop --preset or --algo"
            )
        return Choice(named, tables)
    env_base = env_table_base(env, tables)
    own = None if env_base is None else for_objective(env_base, objective, tables)
    if own is not None:
        return Choice(own, tables)
    if file is not None:
        algo = objective or DEFAULT_OBJECTIVE
        what = "no preset" if env_base is None else f"no table for --algo {algo} of those"
        wanted = toml_key(env if env_base is None else f"{env_base}{OBJECTIVE_SEP}{algo}")
        raise UserError(
            f"--preset-file {file} has {what} for --env {env} (its presets: {', '.join(sorted(tables))}); name one "
            f"with --preset NAME, or add a table [{wanted}] to it"
        )
    return _plain_defaults(objective, family, passed_over=env_base)


def _plain_defaults(
    objective: str | None, family: Callable[[], str], passed_over: str | None = None, asked_none: bool = False
) -> Choice:
    """The plain defaults of ``objective`` for the env's action-space family: presets.toml's table (``objective`` None:
    the family's own table, whose objective is the family's default)."""
    kind = family()
    assert kind in FAMILIES, kind
    tables = preset_table(None)
    return Choice(
        family_table(kind, objective, tables),
        tables,
        family=kind,
        passed_over=passed_over,
        asked_none=asked_none,
    )


def resolve_new_run(values: dict[str, Any], given: set[str]) -> tuple[Config, dict[str, str], Choice]:
    """A new run's Config from the parsed flags ``values`` (every field; defaults where not given) and the names of
    the flags the user typed: defaults < the table chosen (``choose_table``) < flags given. Returns the validated
    Config (its ``preset`` the name of the table applied), {field: source} with source default, preset, flag or cpu,
    and the choice."""
    made: list[EnvSpec] = []

    def family() -> str:
        # (a new run: its kwargs stepped here, in the one make, so preflight does not make the env again)
        made.append(describe_env(values["env"], values.get("env_kwargs"), first_step=True))
        return action_family(made[-1].action_space)

    algo = values.get("algo") if "algo" in given else None
    choice = choose_table(values["env"], values.get("preset"), algo, values.get("preset_file"), family)
    if made:
        choice = dataclasses.replace(choice, spec=made[-1])
    preset = choice.settings
    resolved: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for f in dataclasses.fields(Config):
        if f.metadata.get("internal"):  # resolved by the program later (e.g. workers_auto), never by a flag
            continue
        if f.name in given:
            resolved[f.name], sources[f.name] = values[f.name], FLAG
        elif f.name in preset:
            resolved[f.name], sources[f.name] = preset[f.name], PRESET
        else:
            resolved[f.name], sources[f.name] = values[f.name], DEFAULT
    resolved["preset"] = choice.name
    sources["preset"] = FLAG if "preset" in given else PRESET
    if resolved.get("bf16") and sources.get("bf16") == PRESET and not cpu.native_bf16():
        # a preset's --bf16 was measured where the CPU computes bfloat16 natively (1.3x float32's frames/s on Atari);
        # elsewhere oneDNN emulates it, slower than float32, so the run takes float32 (a typed --bf16 stays)
        resolved["bf16"], sources["bf16"] = False, CPU
    check_given_for_objective(resolved, given)
    return Config(**resolved).validate(), sources, choice


def check_given_for_objective(resolved: dict[str, Any], given: set[str]) -> None:
    """A flag typed for a setting the run does not use is a UserError, even at its default value (Config.validate
    catches values away from the default): PPO's flags under --algo a3c, V-trace's under --targets gae."""
    for name in PPO_ONLY_SETTINGS:
        if name in given and resolved.get("algo") != "ppo":
            raise UserError(ppo_only(name, resolved[name]))
    for name in VTRACE_SETTINGS:
        if name in given and resolved.get("targets") != "vtrace":
            raise UserError(vtrace_only(name, resolved[name]))


def resolve_config(values: dict[str, Any], given: set[str]) -> tuple[Config, dict[str, str]]:
    """``resolve_new_run`` without the choice: (the validated Config, {field: source})."""
    config, sources, _ = resolve_new_run(values, given)
    return config, sources
