"""`python -m a3c.train`: command-line flags -> Config (validated before any process starts) -> Trainer.run()."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import types
import typing
from collections.abc import Sequence

from a3c.config import Config, parse_env_kwargs
from a3c.errors import UserError, run_cli
from a3c.preflight import preflight, start_fork_server


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> typing.NoReturn:  # one line, exit 2, via UserError
        raise UserError(f"{message}; see python -m a3c.train --help")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m a3c.train",
        description="Train an A3C agent on a gymnasium environment.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    hints = typing.get_type_hints(Config)
    defaults = Config()
    for f in dataclasses.fields(Config):
        name = "--" + f.name.replace("_", "-")
        hint = hints[f.name]
        extra = dict(f.metadata["cli"])
        default = getattr(defaults, f.name)
        if hint is bool:
            parser.add_argument(name, action="store_true", help=f.metadata["help"])
            continue
        if f.name == "tensorboard":  # an optional value: --tensorboard alone means port 0 (a free port)
            parser.add_argument(
                name, nargs="?", const=0, type=int, default=None, metavar="PORT", help=f.metadata["help"]
            )
            continue
        if f.name == "env_kwargs":
            parser.add_argument(name, nargs="*", default=[], metavar="KEY=VALUE", help=f.metadata["help"])
            continue
        origin = typing.get_origin(hint)
        if origin is tuple:
            parser.add_argument(name, nargs="+", type=int, default=list(default), help=f.metadata["help"])
            continue
        if origin in (typing.Union, types.UnionType):
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        parser.add_argument(name, type=hint, default=default, help=f.metadata["help"], **extra)
    return parser


def parse_config(argv: Sequence[str] | None = None) -> Config:
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    args["env_kwargs"] = parse_env_kwargs(args["env_kwargs"])
    args["hidden_sizes"] = tuple(args["hidden_sizes"])
    if args["resume"] is not None:
        return _resume_config(parser, argv, args)
    return Config(**args).validate()


def _resume_config(parser: argparse.ArgumentParser, argv: Sequence[str] | None, args: dict) -> Config:
    """--resume RUN_DIR: the run's checkpointed config, with the flags given on this command line on top."""
    from a3c.checkpoint import load_resume, resume_config  # imports torch: only when resuming

    for action in parser._actions:  # parse again with no defaults: what is left is what the user typed
        action.default = argparse.SUPPRESS
    given = set(vars(parser.parse_args(argv))) - {"resume"}
    return resume_config(load_resume(args["resume"]), args["resume"], {k: args[k] for k in given})


def main(argv: Sequence[str] | None = None) -> int:
    started_at = time.time()  # the origin of summary.json's startup_s: imports and validation count too
    config = parse_config(argv)
    spec = preflight(config)  # the user's input, checked without torch ...
    if config.resume is None:  # (a resume is checked against its checkpoint by the Trainer, with torch)
        start_fork_server(config)  # ... so that the fork server imports torch while we do, not after us
    from a3c.trainer import Trainer  # imported here, so that --help and input errors answer fast

    return Trainer(config, started_at=started_at, spec=spec).run()


class _CallableModule(types.ModuleType):
    """``a3c.train`` names both this module (``python -m a3c.train``) and the function ``a3c.api.train`` (exported by
    the package). Once this module is imported, Python binds the package attribute ``a3c.train`` to the module, so
    the module itself is made callable: ``a3c.train(...)`` then still trains."""

    def __call__(self, *args: typing.Any, **kwargs: typing.Any) -> typing.Any:
        from a3c.api import train

        return train(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(run_cli(main, prog="a3c.train"))
