"""The command-line reference, rendered from the entry points' own argparse parsers: every flag of python -m
a3c.train, a3c.evaluate, a3c.plot and a3c.tune, group by group, with its default and its help text as ``--help``
shows them. docs/reference/cli.md holds one marker per entry point; hooks.py puts the tables there at build time."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

# the entry points, by the name their marker uses: (module, its parser factory)
ENTRY_POINTS: dict[str, tuple[str, str]] = {
    "a3c.train": ("a3c.train", "build_parser"),
    "a3c.evaluate": ("a3c.evaluate", "build_parser"),
    "a3c.plot": ("a3c.plot", "build_parser"),
    "a3c.export": ("a3c.export", "build_parser"),
    "a3c.tune": ("a3c.tune.cli", "build_parser"),
}


def parser_of(entry_point: str) -> argparse.ArgumentParser:
    module, factory = ENTRY_POINTS[entry_point]
    build: Callable[[], argparse.ArgumentParser] = getattr(importlib.import_module(module), factory)
    return build()


def _cell(text: str) -> str:
    """``text`` fit for one cell of a markdown table: one line, pipes escaped (a code span's are not: the table
    reader leaves them, and an escape there would show)."""
    return " ".join(text.split()).replace("|", "\\|")


def _prose(text: str) -> str:
    """``text`` as a table cell of prose: no "<name>" read as an HTML tag, no "__" or "*" as emphasis."""
    return _cell(text).replace("<", "&lt;").replace("_", "\\_").replace("*", "\\*")


def _default(action: argparse.Action) -> str:
    default = action.default
    if default is None or default is argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
        return ""
    if isinstance(action, argparse._StoreTrueAction) and default is False:
        return "off"
    if isinstance(action, argparse.BooleanOptionalAction):
        return "on" if default else "off"
    if isinstance(default, list | tuple):
        return "`" + " ".join(str(v) for v in default) + "`" if default else ""
    return f"`{default}`"


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help is argparse.SUPPRESS:
        return ""
    text = action.help
    if "%" in text:  # argparse's own expansion: %(default)s, %(prog)s, ...
        text = text % {**vars(action), "prog": parser.prog}
    if action.choices is not None and "{" not in text:
        text += " (one of: " + ", ".join(str(c) for c in action.choices) + ")"
    return text


def _invocation(formatter: argparse.HelpFormatter, action: argparse.Action) -> str:
    """The flag cell: each spelling of the flag a code span of its own (``--normalize-obs`` ``--no-normalize-obs``),
    so that a line breaks between two spellings and never inside one (extra.css keeps a code span in a table cell
    on one line)."""
    invocation = " ".join(formatter._format_action_invocation(action).split())
    return " ".join(f"`{part}`" for part in invocation.split(", "))


def render(entry_point: str) -> str:
    """The reference of one entry point: its usage and description, then one table per group of flags."""
    parser = parser_of(entry_point)
    formatter = parser._get_formatter()
    usage = parser.format_usage().strip().removeprefix("usage: ")
    out = [f"```\n{usage}\n```", "", _prose(parser.description or ""), ""]
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if not isinstance(a, argparse._HelpAction)]
        if not actions:
            continue
        title = group.title or "options"
        out += [f"**{title[0].upper() + title[1:]}**", ""]
        if group.description:
            out += [_prose(group.description), ""]
        out += ["| flag | default | what it does |", "| --- | --- | --- |"]
        for action in actions:
            out.append(f"| {_invocation(formatter, action)} | {_default(action)} | {_prose(_help(parser, action))} |")
        out.append("")
    if parser.epilog:
        out += ["```", parser.epilog.strip("\n"), "```", ""]
    return "\n".join(out)
