"""User-facing errors: the one exception type that means "the user can fix this", and the CLI wrapper that turns
it into one line on stderr and exit code 2 (no traceback). Anything else is a bug and still raises."""

from __future__ import annotations

import argparse
import difflib
import importlib.metadata
import os
import re
import select
import sys
import typing
from collections.abc import Callable, Sequence
from pathlib import Path

EXIT_USAGE = 2
EXIT_INTERRUPTED = 128 + 2  # 128 + SIGINT: how a command stopped by Ctrl-C exits
EXIT_READER_GONE = 128 + 13  # 128 + SIGPIPE: how a shell shows a writer whose reader stopped (``| head``)


def installed_from_clone() -> bool:
    """Whether this a3c runs from a clone of its repository (an editable install, or the source tree on the path):
    its pyproject.toml beside the package. False for an installed wheel (site-packages holds no pyproject.toml)."""
    root = Path(__file__).resolve().parents[2]
    try:
        return 'name = "a3c"' in (root / "pyproject.toml").read_text()
    except OSError:
        return False


def install_extra(extra: str) -> str:
    """How to install one of the project's extras (pyproject.toml), in the form that fits how a3c was installed:
    from a clone, the extra itself (``pip install -e ".[box2d]"``); from a wheel, what the extra holds, read from
    the installed a3c's metadata (``pip install "gymnasium[box2d]"``: a3c is not on PyPI, so ``a3c[box2d]`` would not
    resolve), or ``a3c[extra]`` where the metadata cannot be read."""
    if installed_from_clone():
        return f'pip install -e ".[{extra}]" in the a3c clone'
    needs = _extra_requirements(extra)
    if not needs:
        return f'pip install "a3c[{extra}]"'
    return "pip install " + " ".join(f'"{need}"' for need in needs) + f" (a3c's extra {extra})"


def _extra_requirements(extra: str) -> list[str]:
    """The requirements a3c's extra ``extra`` names in the installed distribution's metadata, e.g.
    ['gymnasium[box2d]']; [] where a3c's metadata cannot be read."""
    try:
        requires = importlib.metadata.requires("a3c") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    needs = []
    for line in requires:
        requirement, _, marker = line.partition(";")
        if re.search(rf"""extra\s*==\s*["']{re.escape(extra)}["']""", marker):
            needs.append(requirement.strip().replace(" ", ""))
    return needs


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
    """Run ``main(argv)``; a UserError becomes ``prog: error: message`` on stderr and exit code 2, a Ctrl-C that the
    command does not handle itself ``prog: interrupted (Ctrl-C)`` and exit code 130 (not Python's traceback), and
    stdout's reader stopping early (``| head``) a quiet exit code 141."""
    try:
        code = main(argv)
        if sys.stdout is not None:
            try:
                sys.stdout.flush()  # here, not at exit: a reader that stopped shows now, where it is caught
            except BrokenPipeError:  # stdout's by where it came from: what the command printed into a pipe waits
                stdout_to_devnull()  # in this buffer, so this tells where poll cannot (Windows)
                return EXIT_READER_GONE
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise  # some other pipe (a child process's): a bug to see
        stdout_to_devnull()
        return EXIT_READER_GONE
    except UserError as err:
        message = " ".join(str(err).split())  # exactly one line, whatever the message held
        print(f"{prog}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted (Ctrl-C)", file=sys.stderr)
        code = EXIT_INTERRUPTED
    if code == EXIT_INTERRUPTED:
        _forget_caught_keyboard_interrupts()
    return code


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it: poll reports an error on such a pipe's write end (Linux,
    macOS). False where that cannot be told (no poll on Windows, stdout not a file)."""
    if not hasattr(select, "poll"):
        return False
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def stdout_to_devnull() -> None:
    """Point stdout's file descriptor at /dev/null, so that the interpreter's last flush at exit (of what is still
    buffered) does not meet the closed pipe again and print "Exception ignored ... BrokenPipeError"."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _forget_caught_keyboard_interrupts() -> None:
    """CPython marks a KeyboardInterrupt that left code run by exec() of a string (dataclasses' and namedtuple's
    generated methods, while modules import) as unhandled, even when it was caught later; under ``python -m`` the
    interpreter then kills itself with SIGINT at exit, so a parent saw -2 where the command returned 130. Each exec()
    of a string clears that mark as it begins (CPython's run_eval_code_obj); an empty one clears it and does nothing
    else. (tests/run/test_signals.py holds the exit code to 130.)"""
    exec("")  # noqa: S102
