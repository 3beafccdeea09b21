"""User-facing errors: the one exception type that means "the user can fix this", and the CLI wrapper that turns
it into one line on stderr and exit code 2 (no traceback). Anything else is a bug and still raises."""

from __future__ import annotations

import argparse
import difflib
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

    def __init__(self, *args: typing.Any, **kwargs: typing.Any) -> None:
        # no prefix matching: ``--total-step 1000`` is a typo to report, not ``--total-steps`` (argparse's default)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> typing.NoReturn:
        raise UserError(f"{message}{self._did_you_mean(message)}; see {self.prog} --help")

    def _did_you_mean(self, message: str) -> str:
        """``: did you mean --workers?`` for the unknown flags of an "unrecognized arguments" message."""
        if not message.startswith("unrecognized arguments:"):
            return ""
        known = [option for option in self._option_string_actions if option.startswith("--")]
        guesses = []
        for word in message.removeprefix("unrecognized arguments:").split():
            flag = word.split("=", 1)[0]
            close = difflib.get_close_matches(flag, known, n=1, cutoff=0.75) if flag.startswith("--") else []
            if close:
                guesses.append(f"{close[0]} for {flag}")
        return f" (did you mean {', '.join(guesses)}?)" if guesses else ""


def run_cli(main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None, prog: str = "a3c") -> int:
    """Run ``main(argv)``; a UserError becomes ``prog: error: message`` on stderr and exit code 2."""
    try:
        return main(argv)
    except UserError as err:
        message = " ".join(str(err).split())  # exactly one line, whatever the message held
        print(f"{prog}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
