"""User-facing errors: the one exception type that means "the user can fix this", and the CLI wrapper that turns
it into one line on stderr and exit code 2 (no traceback). Anything else is a bug and still raises."""

from __future__ import annotations

import argparse
import sys
import typing
from collections.abc import Callable, Sequence

EXIT_USAGE = 2


def install_extra(extra: str) -> str:
    """How to install one of the project's extras (pyproject.toml), spelled one way everywhere: from the clone
    (a3c is not on PyPI)."""
    return f'pip install -e ".[{extra}]" in the a3c clone'


class UserError(ValueError):
    """A problem the user caused (bad flag, unknown env, bad checkpoint...); the message names it and the fix.

    A ValueError, so that Python callers (``a3c.train``, ``a3c.load``) get an ordinary exception carrying the very
    message the command line prints."""


class OneLineParser(argparse.ArgumentParser):
    """The commands' argument parser: a usage error is a UserError (one line, exit 2, through run_cli) that points to
    ``PROG --help``, not argparse's usage block."""

    def error(self, message: str) -> typing.NoReturn:
        raise UserError(f"{message}; see {self.prog} --help")


def run_cli(main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None, prog: str = "a3c") -> int:
    """Run ``main(argv)``; a UserError becomes ``prog: error: message`` on stderr and exit code 2."""
    try:
        return main(argv)
    except UserError as err:
        message = " ".join(str(err).split())  # exactly one line, whatever the message held
        print(f"{prog}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
