"""The presets file: a3c/spec/presets.toml (tables of settings, keys spelled like the CLI flags: one per env id, per
family of envs, and the plain defaults of each objective per action-space family), or a user's file of the same
format (--preset-file FILE, e.g. python -m a3c.tune's best.toml, which replaces presets.toml for that run). This
module reads and checks a file, and names its tables: a table belongs to one objective, its ``algo`` (a3c unless it
says otherwise); ``NAME@OBJ`` is table NAME's version for --algo OBJ (``atari@a3c``: A3C's table of the Atari games,
whose ``atari`` is PPO's). Which table a new run takes is
a3c/spec/preset_choice.py's; what a run prints about it, a3c/spec/config_text.py's."""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
from pathlib import Path
from typing import Any

from a3c.spec.config import Config
from a3c.spec.errors import UserError
from a3c.spec.flags import ALGOS, OBJECTIVES
from a3c.spec.setting_types import STRING_CHOICES, describe, fits, setting_types
from a3c.spec.validation import flag_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (a dependency on 3.10 only)
    import tomli as tomllib

PRESETS_FILE = Path(__file__).with_name("presets.toml")
NO_PRESET = "none"  # --preset none: the plain defaults of the objective, even for an env that has a preset
DEFAULT_OBJECTIVE = "a3c"  # the objective of a table that names none
OBJECTIVE_SEP = "@"  # a table NAME@OBJ: table NAME's version for --algo OBJ
ATARI_PRESET = "atari"  # the tables of every ALE/* id that has none of its own (atari: PPO's, atari@a3c)
# the tables of the plain defaults, one per action-space family (a3c.spec.environment.action_family) and objective:
# FAMILY is the family's own objective's (the one a run without --algo takes), FAMILY@OBJ the other's
FAMILIES = ("discrete", "continuous")

# Settings that say which run this is or where it goes, not how it learns: a preset may not set them.
NOT_PRESETTABLE: frozenset[str] = frozenset(
    {"env", "preset", "run_dir", "resume", "exp_name", "seed", "tensorboard"}
    | {"preset_file", "track", "wandb_project", "wandb_entity", "wandb_group"}  # (where a run's record goes)
)

# (names other modules import from here: the file's, and OBJECTIVES, the objectives in words)
__all__ = ["NOT_PRESETTABLE", "OBJECTIVES", "checked_setting", "flag_name", "load_presets", "read_presets", "toml_key"]


def table_objective(name: str, tables: dict[str, dict[str, Any]] | None = None) -> str:
    """The objective table ``name`` of ``tables`` (default: presets.toml's) is for: ``NAME@OBJ`` is for OBJ; a plain
    name, for its ``algo`` (a3c where it sets none). A table's ``algo`` agrees with its name's (``read_presets``
    checks it)."""
    base, sep, objective = name.partition(OBJECTIVE_SEP)
    if sep:
        return objective
    table = (load_presets() if tables is None else tables).get(name, {})
    return str(table.get("algo", DEFAULT_OBJECTIVE))


def table_base(name: str) -> str:
    """``atari@a3c`` -> ``atari``: the env id or family a table is named for."""
    return name.partition(OBJECTIVE_SEP)[0]


def for_objective(base: str, objective: str | None, tables: dict[str, dict[str, Any]]) -> str | None:
    """The table named ``base`` for ``objective`` (None: the plain-named table's objective, else the objective of
    BASE's one table, else a3c's): BASE itself where it is that objective's, else BASE@OBJECTIVE; None where there is
    neither."""
    if objective is None:
        if base in tables:
            return base
        named = [name for name in tables if table_base(name) == base]
        if len(named) == 1:  # only BASE@OBJ: a table for that objective alone
            return named[0]
        objective = DEFAULT_OBJECTIVE
    if base in tables and table_objective(base, tables) == objective:
        return base
    name = f"{base}{OBJECTIVE_SEP}{objective}"
    return name if name in tables else None


def family_table(family: str, objective: str | None, tables: dict[str, dict[str, Any]]) -> str:
    """The table of the plain defaults for ``family`` (FAMILIES) under ``objective``: ``for_objective``'s table, or
    (``objective`` None) the family's default, the table named FAMILY itself. UserError where ``tables`` has none
    (a presets file without the family's tables)."""
    wanted = family if objective is None else f"{family}{OBJECTIVE_SEP}{objective}"
    name = (family if family in tables else None) if objective is None else for_objective(family, objective, tables)
    if name is None:
        raise UserError(f"the presets file has no table [{toml_key(wanted)}] (the plain defaults); restore it")
    return name


@functools.cache
def load_presets(path: Path = PRESETS_FILE) -> dict[str, dict[str, Any]]:
    """{preset name: {Config field: value}} from the TOML file, each value checked against the field's type and
    each preset checked by Config.validate(); UserError naming the file, the table and the key otherwise. Read once
    per process (the shipped file); a user's --preset-file is read afresh by ``read_presets``."""
    return read_presets(path)


def read_presets(path: Path, fix: str = "fix or restore it") -> dict[str, dict[str, Any]]:
    """``load_presets`` for any file, read now (--preset-file FILE: a user's file, which may change between runs)."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read the presets file {path} ({err}); {fix}") from None
    for name, table in data.items():
        if not isinstance(table, dict):
            raise UserError(f"{path}: {name!r} must be a table ([{name}]) of settings")
    # a user's file may extend a table of a3c's own (its tables first, then presets.toml's)
    shipped = {} if path == PRESETS_FILE else _shipped_tables()
    presets: dict[str, dict[str, Any]] = {}
    for name in data:
        presets[name] = {
            key.replace("-", "_"): checked_setting(path, name, key, value)
            for key, value in inherited_settings(path, data, name, shipped).items()
        }
        _check_objective(path, name, presets[name])
        try:
            Config(**presets[name]).validate()
        except UserError as err:
            hint = ""
            if shipped and presets[name].get("algo") == "ppo" and EXTENDS not in data[name]:
                # the settings a table leaves out keep the flags' defaults, which are A3C's rollout sizes
                hint = (
                    f'; or start the table from PPO\'s plain defaults: extends = "discrete{OBJECTIVE_SEP}ppo" (or '
                    '"continuous" for Box actions)'
                )
            raise UserError(f"{path} [{name}]: {err}{hint}") from None
    return presets


@functools.cache
def _shipped_tables() -> dict[str, Any]:
    """a3c's presets.toml as TOML gives it (what a user's table may extend)."""
    with open(PRESETS_FILE, "rb") as f:
        return tomllib.load(f)


def _check_objective(path: Path, name: str, settings: dict[str, Any]) -> None:
    """A table named NAME@OBJ is for objective OBJ (one of a3c.spec.flags.ALGOS): its ``algo`` is OBJ (set here
    where it names none), any other is a UserError naming the table."""
    base, sep, objective = name.partition(OBJECTIVE_SEP)
    if not sep:
        return
    if objective not in ALGOS or not base:
        raise UserError(f"{path} [{name}]: a table named NAME{OBJECTIVE_SEP}OBJECTIVE needs one of {', '.join(ALGOS)}")
    if settings.setdefault("algo", objective) != objective:
        raise UserError(
            f"{path} [{name}] algo = {settings['algo']!r}: a table named ...{OBJECTIVE_SEP}{objective} is for "
            f"objective {objective}; drop its algo, or rename the table"
        )


EXTENDS = "extends"  # a table's `extends = "NAME"`: table NAME's settings first, its own keys over them


def inherited_settings(
    path: Path, data: dict[str, Any], name: str, shipped: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Table ``name``'s settings as TOML gives them, with those of the table it ``extends`` (and so on up) beneath
    its own: a family of envs tuned alike (the MuJoCo robots) is written once. A name the file has no table of may
    be one of ``shipped`` (a3c's presets.toml, for a user's file: extends = "discrete@ppo" starts from PPO's plain
    defaults). UserError for a name that is neither, or a loop."""
    tables = {**(shipped or {}), **data}  # (the file's own table wins over a3c's of the same name)
    chain = [name]
    while EXTENDS in tables[chain[-1]]:
        base = tables[chain[-1]][EXTENDS]
        where = f"{path} [{chain[-1]}] {EXTENDS}"
        if not isinstance(base, str) or base not in tables:
            which = "of this file or of a3c's presets.toml" if shipped else "of this file"
            raise UserError(f"{where} = {base!r}: expected the name of a table {which} ({', '.join(data)})")
        if base in chain:
            raise UserError(f"{where} = {base!r}: a loop ({' -> '.join([*chain, base])}); break it")
        chain.append(base)
    settings: dict[str, Any] = {}
    for table in reversed(chain):  # the farthest base first, the table itself last (its keys win)
        settings.update({key: value for key, value in tables[table].items() if key != EXTENDS})
    return settings


def checked_setting(path: Path, name: str, key: str, value: Any) -> Any:
    """The TOML value of setting ``key`` converted to the Config field's type (int -> float, list -> tuple)."""
    fields = {f.name: f for f in dataclasses.fields(Config)}
    field_name = key.replace("-", "_")
    where = f"{path} [{name}] {key}"
    if field_name not in fields:
        raise UserError(f"{where}: no such setting; use the flags of python -m a3c.train --help, without '--'")
    if field_name in NOT_PRESETTABLE:
        raise UserError(f"{where}: a preset cannot set {flag_name(field_name)}; give it on the command line")
    hint = setting_types()[field_name]
    members = [hint]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if value is None:
            return None
        members = [a for a in typing.get_args(hint) if a is not type(None)]
    choices = STRING_CHOICES.get(field_name, ())  # (a string member takes only these: workers' "auto")
    fitting = [a for a in members if fits(value, a) and not (a is str and choices and value not in choices)]
    if not fitting:  # (a TOML value is a bool, int, float, str, list or table: no numpy scalars here)
        wanted = [" or ".join(map(repr, choices)) if a is str and choices else describe(a, toml=True) for a in members]
        raise UserError(f"{where} = {value!r}: expected {' or '.join(wanted)}")
    hint = fitting[0]
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, dict):
        return dict(value)
    return float(value) if hint is float else value


def toml_key(name: str) -> str:
    """A table name as TOML writes it: bare when it can be, else quoted (envs/Memory-v0, ALE/Pong-v5)."""
    return (
        name
        if name and all(c.isascii() and (c.isalnum() or c in "-_") for c in name)
        else '"' + name.replace('"', '\\"') + '"'
    )


def preset_table(file: str | None) -> dict[str, dict[str, Any]]:
    """The tables a new run chooses from: a3c/spec/presets.toml's, or those of --preset-file ``file``."""
    if file is None:
        return load_presets()
    return read_presets(Path(file), fix="fix it, or give another --preset-file")
