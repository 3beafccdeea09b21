"""User-facing errors: the one exception type that means "the user can fix this", and the CLI wrapper that turns
it into one line on stderr and exit code 2 (no traceback). Anything else is a bug and still raises."""

from __future__ import annotations

import sys
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


def run_cli(main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None, prog: str = "a3c") -> int:
    """Run ``main(argv)``; a UserError becomes ``prog: error: message`` on stderr and exit code 2."""
    try:
        return main(argv)
    except UserError as err:
        message = " ".join(str(err).split())  # exactly one line, whatever the message held
        print(f"{prog}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
