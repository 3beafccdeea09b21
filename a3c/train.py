"""`python -m a3c.train`: command-line flags -> the resolved run (a3c/run/resolve.py: preset or resume checkpoint,
validation, the input checks, the fork server, --workers auto; before any process starts) -> Trainer.run()."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
import types
import typing
from collections.abc import Sequence
from typing import Any

from a3c.run.resolve import check_settings, resolve_run, resolve_settings
from a3c.spec.config import Config
from a3c.spec.config_text import format_config
from a3c.spec.errors import EXIT_INTERRUPTED, OneLineParser, run_cli
from a3c.spec.flags import FLAG_GROUPS, OTHER_GROUP, ExtendPairs, optional, parse_env_kwargs

EXAMPLES = """examples:
  # CartPole-v1 until solved, as many workers as keep the cores busy (measured)
  python -m a3c.train --env CartPole-v1 --stop-when-solved
  # 4 workers, with TensorBoard served while it trains
  python -m a3c.train --env CartPole-v1 --workers 4 --tensorboard
  # a slow I/O-bound env: 10 ms a step (auto then runs many workers per core)
  python -m a3c.train --env envs/SlowCartPole-v1 --env-kwargs latency=0.01
  # your own env, registered when my_envs is imported
  python -m a3c.train --env my_envs:MyEnv-v0
  # continue a run to 1,000,000 steps in total
  python -m a3c.train --resume runs/RUN_DIR --total-steps 1000000
"""


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows "(default: X)" where there is a default worth showing (not for unset options, switches, or a help
    text that explains its default itself); keeps the epilog's line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, []) or "(default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m a3c.train",
        usage="%(prog)s [--env ID] [--workers N|auto] [--total-steps N] [--resume RUN_DIR] [FLAG ...]",
        description="Train an agent on a gymnasium environment with A3C's or PPO's objective (flags come in groups).",
        formatter_class=_HelpFormatter,
        epilog=EXAMPLES,
    )
    hints = typing.get_type_hints(Config)
    defaults = Config()
    groups = {name: parser.add_argument_group(title, about or None) for name, title, about in FLAG_GROUPS}
    for f in dataclasses.fields(Config):
        if f.metadata["internal"]:
            continue
        group = f.metadata.get("group")
        if group not in groups:  # a flag without a (known) group: still shown, under "other options", last
            group = OTHER_GROUP[0]
            if group not in groups:
                groups[group] = parser.add_argument_group(OTHER_GROUP[1])
        _add_flag(groups[group], f, hints[f.name], getattr(defaults, f.name))
    groups["run"].add_argument(
        "--show-config",
        action="store_true",
        help="print the resolved settings as flags that type back, each with where it comes from (default, preset, "
        "flag; cpu: a preset's --bf16 off on a CPU without bfloat16 instructions), then exit",
    )
    return parser


def _add_flag(parser: argparse._ArgumentGroup, f: dataclasses.Field[Any], hint: Any, default: Any) -> None:
    """Config field ``f`` (type ``hint``, default ``default``) as a flag of ``parser``, a group of the command line's
    parser."""
    name, help_text = "--" + f.name.replace("_", "-"), f.metadata["help"]
    extra = dict(f.metadata["cli"])
    if hint is bool:  # --flag / --no-flag: a flag given must be able to turn off what a preset turned on
        parser.add_argument(name, action=argparse.BooleanOptionalAction, default=default, help=help_text)
        return
    if f.name == "tensorboard":  # an optional value: --tensorboard alone means port 0 (a free port); none: not served
        parser.add_argument(name, nargs="?", const=0, type=optional(int), default=None, metavar="PORT", help=help_text)
        return
    if f.name == "env_kwargs":
        # nargs="*": a bare --env-kwargs (first or later) reaches ExtendPairs, whose mark parse_env_kwargs refuses in
        # one line, where argparse's own words would not name the fix; given twice, both sets count
        parser.add_argument(name, nargs="*", action=ExtendPairs, default=None, metavar="KEY=VALUE", help=help_text)
        return
    origin = typing.get_origin(hint)
    if origin is tuple:
        parser.add_argument(name, nargs="+", type=int, default=list(default), help=help_text)
        return
    if origin in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
        if hint in (int, float):  # an optional number: ``none`` unsets it (a resumed run inherits its checkpoint's)
            hint = optional(hint)
    parser.add_argument(name, type=extra.pop("type", hint), default=default, help=help_text, **extra)


def parse_flags(argv: Sequence[str] | None = None) -> tuple[dict[str, Any], set[str], bool]:
    """The command line -> (every setting's value, defaults where no flag was typed; the Config fields a flag was
    typed for; whether --show-config was given)."""
    args = vars(build_parser().parse_args(argv))
    show = args.pop("show_config")
    args["env_kwargs"] = parse_env_kwargs(args["env_kwargs"] or [])
    args["hidden_sizes"] = tuple(args["hidden_sizes"])
    return args, _given_flags(argv), show


def parse_cli(argv: Sequence[str] | None = None) -> tuple[Config, dict[str, str], bool]:
    """The command line -> (validated Config, {field: where its value came from}, whether --show-config was given).
    A new run: defaults < the env's preset (a3c/spec/presets.toml) < flags given. --resume: the checkpoint's config <
    flags given (presets are not applied again over a resumed run). See a3c.run.resolve.resolve_settings."""
    values, given, show = parse_flags(argv)
    settings = resolve_settings(values, given)
    return settings.config, settings.sources, show


def parse_config(argv: Sequence[str] | None = None) -> Config:
    return parse_cli(argv)[0]


def _given_flags(argv: Sequence[str] | None) -> set[str]:
    """The Config fields the user typed a flag for: parse again with no defaults, and what is left was typed."""
    parser = build_parser()
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    return set(vars(parser.parse_args(argv))) - {"show_config"}


def process_started_at() -> float:
    """When this process started, as time.time() would have said then: the origin of summary.json's startup_s for
    ``python -m a3c.train``, so that it counts what a user waits for: the interpreter's own start and the imports
    before ``main`` (about 0.25 s) as well. Linux: the process's start in clock ticks since boot (/proc/self/stat, field
    22) against the boot-time clock, to 1/CLK_TCK (10 ms); elsewhere, or if /proc cannot be read: now."""
    now = time.time()
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # (the command name, in parentheses, may hold spaces)
        started_since_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started_since_boot
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    return now - age if 0 <= age < 3600 else now


def main(argv: Sequence[str] | None = None, started_at: float | None = None) -> int:
    """The command: ``argv`` (default sys.argv[1:]) -> exit code. ``started_at``: the origin of summary.json's
    startup_s; ``python -m a3c.train`` passes the process's start (``process_started_at``: the interpreter's own start
    counts too), a call from Python leaves it to now."""
    started_at = time.time() if started_at is None else started_at
    values, given, show = parse_flags(argv)
    if show:
        settings = resolve_settings(values, given)
        check_settings(settings)  # what the run would refuse is refused here too
        # (piped into head, which has read what it wanted: run_cli ends quietly with 141, as every command does)
        print(format_config(settings.config, settings.sources), flush=True)
        return 0
    try:
        run = resolve_run(values, given)  # every check of the input, the fork server, --workers auto: one step
        from a3c.run.trainer import Trainer  # imported here, so that --help and input errors answer fast
    except KeyboardInterrupt:
        # Ctrl-C before the Trainer's own handling is in place (it makes the run directory): nothing was made yet
        print("a3c.train: interrupted (Ctrl-C) before the run started; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED

    return Trainer(run, started_at=started_at).run()


class _CallableModule(types.ModuleType):
    """``a3c.train`` names both this module (``python -m a3c.train``) and the function ``a3c.api.train`` (exported by
    the package). Once this module is imported, Python binds the package attribute ``a3c.train`` to the module, so
    the module itself is made callable: ``a3c.train(...)`` then still trains."""

    def __call__(self, *args: typing.Any, **kwargs: typing.Any) -> typing.Any:
        from a3c.api import train

        return train(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    _started_at = process_started_at()
    sys.exit(run_cli(lambda argv: main(argv, _started_at), prog="a3c.train"))
