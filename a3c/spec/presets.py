"""Per-environment hyperparameter presets: the data is a3c/spec/presets.toml (one table per env id, keys spelled like
the CLI flags), or a user's file of the same format (--preset-file FILE, e.g. python -m a3c.tune's best.toml, which
replaces presets.toml for that run); this module loads and checks it, and resolves a run's settings as defaults <
preset < flags given, remembering where each value came from (``--show-config`` prints that). A resumed run never
re-applies a preset: it keeps its checkpoint's config (a3c/train.py)."""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
from pathlib import Path
from typing import Any

from a3c.spec.config import Config
from a3c.spec.cpu import native_bf16
from a3c.spec.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (a dependency on 3.10 only)
    import tomli as tomllib

PRESETS_FILE = Path(__file__).with_name("presets.toml")
NO_PRESET = "none"  # --preset none: the plain defaults, even for an env that has a preset

# Settings that say which run this is or where it goes, not how it learns: a preset may not set them.
NOT_PRESETTABLE: frozenset[str] = frozenset(
    {"env", "preset", "run_dir", "resume", "exp_name", "seed", "tensorboard"}
    | {"preset_file", "track", "wandb_project", "wandb_entity", "wandb_group"}  # (where a run's record goes)
)

DEFAULT, PRESET, FLAG, CHECKPOINT = "default", "preset", "flag", "checkpoint"  # the sources --show-config names
CPU = "preset, off: this CPU has no bfloat16 instructions"  # a preset's --bf16 dropped (see resolve_config)


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


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
    presets: dict[str, dict[str, Any]] = {}
    for name in data:
        presets[name] = {
            key.replace("-", "_"): checked_setting(path, name, key, value)
            for key, value in inherited_settings(path, data, name).items()
        }
        try:
            Config(**presets[name]).validate()
        except UserError as err:
            raise UserError(f"{path} [{name}]: {err}") from None
    return presets


EXTENDS = "extends"  # a table's `extends = "NAME"`: table NAME's settings first, its own keys over them


def inherited_settings(path: Path, data: dict[str, Any], name: str) -> dict[str, Any]:
    """Table ``name``'s settings as TOML gives them, with those of the table it ``extends`` (and so on up) beneath
    its own: a family of envs tuned alike (the MuJoCo robots) is written once. UserError for a name that is not a
    table of the file, or a loop."""
    chain = [name]
    while EXTENDS in data[chain[-1]]:
        base = data[chain[-1]][EXTENDS]
        where = f"{path} [{chain[-1]}] {EXTENDS}"
        if not isinstance(base, str) or base not in data:
            raise UserError(f"{where} = {base!r}: expected the name of a table of this file ({', '.join(data)})")
        if base in chain:
            raise UserError(f"{where} = {base!r}: a loop ({' -> '.join([*chain, base])}); break it")
        chain.append(base)
    settings: dict[str, Any] = {}
    for table in reversed(chain):  # the farthest base first, the table itself last (its keys win)
        settings.update({key: value for key, value in data[table].items() if key != EXTENDS})
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
    hint = typing.get_type_hints(Config)[field_name]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if value is None:
            return None
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    origin = typing.get_origin(hint)
    if origin is tuple and isinstance(value, list) and all(type(v) is int for v in value):
        return tuple(value)
    if origin is dict and isinstance(value, dict):
        return dict(value)
    if hint is float and type(value) in (int, float):
        return float(value)
    if origin is None and type(value) is hint:  # type(), not isinstance: a bool is not an int here
        return value
    raise UserError(f"{where} = {value!r}: expected {getattr(hint, '__name__', hint)}")


ATARI_PRESET = "atari"  # the preset of every ALE/* id that has none of its own


def preset_name(env: str, requested: str | None, file: str | None = None) -> str | None:
    """The preset a new run uses: ``requested`` (--preset) if given, else the one named like ``env``, else for an
    Atari game (ALE/...) the ``atari`` preset, if any. ``file`` (--preset-file): the presets come from that file
    instead of a3c/spec/presets.toml, and one must apply (a file given is meant to be used: UserError otherwise)."""
    presets = preset_table(file)
    where = PRESETS_FILE if file is None else file
    if requested is None:
        if env in presets:
            return env
        if env.startswith("ALE/") and ATARI_PRESET in presets:
            return ATARI_PRESET
        if file is not None:
            raise UserError(
                f"--preset-file {file} has no preset for --env {env} (its presets: {', '.join(sorted(presets))}); "
                "name one with --preset NAME, or add a table [" + toml_key(env) + "] to the file"
            )
        return None
    if requested.lower() == NO_PRESET:
        if file is not None:
            raise UserError(f"--preset {NO_PRESET} and --preset-file {file} contradict each other; drop one")
        return None
    if requested not in presets:
        raise UserError(
            f"--preset {requested}: no such preset; use one of {', '.join(sorted(presets))}, or {NO_PRESET} "
            f"(defined in {where})"
        )
    return requested


def preset_table(file: str | None) -> dict[str, dict[str, Any]]:
    """The presets a new run chooses from: a3c/spec/presets.toml's, or those of --preset-file ``file``."""
    if file is None:
        return load_presets()
    return read_presets(Path(file), fix="fix it, or give another --preset-file")


def toml_key(name: str) -> str:
    """A table name as TOML writes it: bare when it can be, else quoted (envs/Memory-v0, ALE/Pong-v5)."""
    return (
        name
        if name and all(c.isascii() and (c.isalnum() or c in "-_") for c in name)
        else '"' + name.replace('"', '\\"') + '"'
    )


def resolve_config(values: dict[str, Any], given: set[str]) -> tuple[Config, dict[str, str]]:
    """A new run's Config from the parsed flags ``values`` (every field; defaults where not given) and the names of
    the flags the user typed: defaults < the preset < flags given. Returns the validated Config (its ``preset`` the
    name of the preset applied, or None) and {field: source} with source default, preset or flag."""
    file = values.get("preset_file")
    name = preset_name(values["env"], values.get("preset"), file)
    preset = preset_table(file)[name] if name is not None else {}
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
    resolved["preset"] = name
    if name is not None and "preset" not in given:
        sources["preset"] = PRESET  # chosen by --env
    if resolved.get("bf16") and sources.get("bf16") == PRESET and not native_bf16():
        # a preset's --bf16 was measured where the CPU computes bfloat16 natively (1.3x float32's frames/s on Atari);
        # elsewhere oneDNN emulates it, slower than float32, so the run takes float32 (a typed --bf16 stays)
        resolved["bf16"], sources["bf16"] = False, CPU
    return Config(**resolved).validate(), sources


# what each --algo trains with, in the words of --show-config's header
OBJECTIVES = {
    "a3c": "A3C's actor-critic loss, one gradient a rollout",
    "ppo": "PPO's clipped surrogate, --n-epochs x minibatches of each rollout, each pushed between pulls",
}
SHORT_RUN_RATIO = 0.5  # a --total-steps below this fraction of the preset's moves its linear lr schedule's end


def preset_line(config: Config, sources: dict[str, str]) -> str | None:
    """The line a new run prints about its preset: its name, what it set, and the flags given that beat it (flags
    win); None when no preset applies."""
    if config.preset is None:
        return None
    preset = preset_table(config.preset_file)[config.preset]
    where = config.preset_file or "a3c/spec/presets.toml"
    applied = [_as_flag(name, value) for name, value in preset.items() if sources.get(name) == PRESET]
    beaten = [_as_flag(name, getattr(config, name)) for name in preset if sources.get(name) == FLAG]
    line = f"a3c: preset {config.preset} ({where}), objective {config.algo}, sets {' '.join(applied) or 'nothing here'}"
    if sources.get("bf16") == CPU:
        line += "; not its --bf16: this CPU has no bfloat16 instructions (float32 is faster here)"
    if beaten:
        return line + f"; the flags given win: {' '.join(beaten)}"
    return line + " (a flag given wins over it; --preset none: the plain defaults)"


def short_run_warning(config: Config, sources: dict[str, str]) -> str | None:
    """A warning when the run's --total-steps (given) is much shorter than the budget the preset was measured at
    while the preset's linear lr schedule stays: the lr then decays to 0 at the new end, far faster than tuned."""
    if config.preset is None or config.lr_schedule != "linear" or sources.get("lr_schedule") != PRESET:
        return None
    planned = preset_table(config.preset_file)[config.preset].get("total_steps")
    if sources.get("total_steps") != FLAG or not isinstance(planned, int):
        return None
    if config.total_steps >= SHORT_RUN_RATIO * planned:
        return None
    return (
        f"a3c: warning: --total-steps {config.total_steps:,} is {planned / config.total_steps:.3g}x shorter than the "
        f"{planned:,} steps preset {config.preset} was measured at, and its --lr-schedule linear takes the lr to 0 at "
        f"--total-steps: the run learns at a fraction of the tuned lr; give --lr-schedule constant, or more steps"
    )


def _as_flag(name: str, value: Any) -> str:
    """A setting as the flag that gives it: --gsde / --no-gsde for a switch, else --name value."""
    if isinstance(value, bool):
        return flag_name(name) if value else "--no-" + flag_name(name)[2:]
    return f"{flag_name(name)} {_show(value)}"


def format_config(config: Config, sources: dict[str, str]) -> str:
    """The resolved settings as flags a user could type, one per line, each with where its value came from."""
    lines = [f"# python -m a3c.train: resolved config for --env {config.env}"]
    if config.preset is not None:
        lines.append(f"# preset {config.preset} from {config.preset_file or PRESETS_FILE}")
    elif config.resume is None:
        lines.append(f"# no preset (presets: {', '.join(sorted(load_presets()))})")
    else:
        lines.append("# resumed run: its checkpoint's config, with the flags given on top")
    lines.append(f"# objective: {OBJECTIVES[config.algo]} (--algo {config.algo}, {sources.get('algo', DEFAULT)})")
    rows = [
        (*_typed(f.name, getattr(config, f.name)), sources.get(f.name, DEFAULT)) for f in dataclasses.fields(Config)
    ]
    rows = [row for row, f in zip(rows, dataclasses.fields(Config), strict=True) if not f.metadata.get("internal")]
    width = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
    lines += [f"{a:<{width[0]}}  {b:<{width[1]}}  {c}" for a, b, c in rows]
    return "\n".join(lines)


def _typed(name: str, value: Any) -> tuple[str, str]:
    """A setting as a line of the command line that gives it (flag, value): a switch as --name / --no-name alone, a
    setting without a value (unset) commented out, so that the lines together are flags a user could type."""
    if isinstance(value, bool):
        return _as_flag(name, value), ""
    if value is None or value == {}:
        return f"# {flag_name(name)}", "(not set)"
    return flag_name(name), _show(value)


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items()) or "-"
    return str(value)
