"""The presets reference, rendered from a3c/spec/presets.toml when the site is built: every table of the file, in the
file's order (dotted names such as ``[a.b]`` too), with its objective (its ``algo`` key, through ``extends``; a3c
where no table of the chain sets one), the table it ``extends``, its own settings as the file writes them (a TOML
block) and the comment lines around it as the reason for them. docs/reference/presets.md holds the marker ``<!--
presets-reference -->``; hooks.py puts the tables there, so the page says what the file says, whatever its tables.
``<!-- presets-reference: summary -->`` on another page is the summary table alone (which table has which objective).

A table's comments are the comment lines directly above its header (no blank line between them and it) and those
inside it (after its header, before the next table's). Comments above the first table that do not touch its header
are the file's preamble and are not rendered (the page has its own introduction)."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (a dependency of a3c on 3.10)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PRESETS_FILE = ROOT / "a3c" / "spec" / "presets.toml"
DOCS = ROOT / "docs"
DEFAULT_ALGO = "a3c"  # the objective of a table whose chain sets no `algo` (Config's default)
ALGO, EXTENDS = "algo", "extends"

HEADER = re.compile(r"^\s*\[(?!\[)[^\]]")  # a table's header line; `[[...]]` (arrays of tables) is not one
DOC_PATH = re.compile(r"\bdocs/([\w./-]*\w\.md)")  # a docs page named in a comment (a link where the page exists)


@dataclass
class Table:
    """One ``[name]`` of the file: its key path, its own keys (as TOML gives them), its comment lines in order."""

    path: tuple[str, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    comments: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The name a user writes (``--preset NAME``, ``extends = "NAME"``): the keys joined by dots."""
        return ".".join(self.path)


def header_path(line: str) -> tuple[str, ...]:
    """The key path of a header line, as TOML reads it (quotes, dots, spaces and a trailing comment handled by the
    TOML parser itself)."""
    data: Any = tomllib.loads(line)
    path: list[str] = []
    while isinstance(data, dict) and len(data) == 1:
        key, data = next(iter(data.items()))
        path.append(key)
    return tuple(path)


def read_tables(text: str) -> list[Table]:
    """The tables of a presets file's ``text`` in the order of their headers, each with its settings and comments."""
    data = tomllib.loads(text)
    tables: list[Table] = []
    block: list[str] = []  # the comment lines since the last line of anything else
    current: Table | None = None

    def flush() -> None:
        if current is not None:
            current.comments.extend(block)
        block.clear()  # (a block before the first table that does not touch its header: the preamble, dropped)

    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            block.append(stripped[1:])
        elif HEADER.match(line):
            current = Table(header_path(stripped))
            tables.append(current)
            current.comments.extend(block)  # the block directly above a header is that table's
            block.clear()
        else:  # a blank line or a key: comments before it belong to the table they are in
            flush()
    flush()
    declared = {t.path for t in tables}
    for table in tables:
        value: Any = data
        for key in table.path:
            value = value[key]
        # a sub-table declared by a header of its own is a table, not a setting; an inline table is a setting
        table.settings = {k: v for k, v in value.items() if (*table.path, k) not in declared}
    return tables


def objective(table: Table, by_name: dict[str, Table]) -> tuple[str, str | None]:
    """The table's objective and the table it comes from (None: its own key or the default), through ``extends``."""
    seen = [table.name]
    while True:
        if ALGO in table.settings:
            return str(table.settings[ALGO]), None if table.name == seen[0] else table.name
        base = table.settings.get(EXTENDS)
        if base is None:
            return DEFAULT_ALGO, None
        if base not in by_name or base in seen:
            raise ValueError(f"presets.toml [{seen[-1]}] extends {base!r}: not a table of the file, or a loop")
        seen.append(base)
        table = by_name[base]


def toml_value(value: Any) -> str:
    """A setting's value as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def toml_key(path: tuple[str, ...]) -> str:
    """A table's header as TOML writes it: bare keys where they may be bare, quoted ones elsewhere."""
    return ".".join(k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k) for k in path)


def anchor(name: str) -> str:
    """A heading id for table ``name``: lower case, anything but letters and digits a hyphen."""
    return "preset-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _prose(text: str, page_dir: Path) -> str:
    """Comment text as markdown prose: code spans kept; a docs page it names (docs/NAME.md) linked where the page
    exists; elsewhere no "<x>" read as a tag and no "*" or "_" as emphasis."""

    def part(p: str) -> str:
        if len(p) > 1 and p.startswith("`") and p.endswith("`"):
            return p
        page = DOC_PATH.fullmatch(p)
        if page is not None and (DOCS / page[1]).is_file():
            up = [".."] * len(page_dir.resolve().relative_to(DOCS.resolve()).parts)
            return f"[`{p}`]({Path(*up, page[1]).as_posix()})"
        return p.replace("<", "&lt;").replace("*", "\\*").replace("_", "\\_")

    return "".join(part(p) for p in re.split(r"(`[^`]*`|\bdocs/[\w./-]*\w\.md)", text) if p)


def _comment_markdown(lines: list[str], page_dir: Path) -> list[str]:
    """A table's comment lines as paragraphs (an empty comment line between two) and code blocks (indented ones)."""
    out: list[str] = []
    paragraph: list[str] = []
    for line in [*lines, ""]:
        if line.startswith("     "):  # "#     python -m ...": an example command
            if paragraph:
                out += [_prose(" ".join(paragraph), page_dir), ""]
                paragraph = []
            out += ["```", line.strip(), "```", ""]
        elif line.strip():
            paragraph.append(line.strip())
        elif paragraph:
            out += [_prose(" ".join(paragraph), page_dir), ""]
            paragraph = []
    return out


PAGE = DOCS / "reference" / "presets.md"  # the page the sections are on (the summary links there from elsewhere)


def summary(page_dir: Path, path: Path = PRESETS_FILE) -> str:
    """One row per table of the presets file: its name (a link to its section of the presets page, from a page in
    ``page_dir``), its objective, the table it extends and how many settings it has of its own."""
    tables = read_tables(path.read_text())
    by_name = {t.name: t for t in tables}
    if page_dir.resolve() == PAGE.parent.resolve():
        page = ""
    else:
        up = [".."] * len(page_dir.resolve().relative_to(DOCS.resolve()).parts)
        page = Path(*up, PAGE.relative_to(DOCS)).as_posix()
    out = ["| table | objective | extends | settings of its own |", "| --- | --- | --- | --- |"]
    for t in tables:
        algo, source = objective(t, by_name)
        base = t.settings.get(EXTENDS)
        out.append(
            f"| [`{t.name}`]({page}#{anchor(t.name)}) | {algo}{f' (from `{source}`)' if source else ''} "
            f"| {f'`{base}`' if base else ''} | {len([k for k in t.settings if k != EXTENDS])} |"
        )
    return "\n".join(out)


def render(page_dir: Path, path: Path = PRESETS_FILE) -> str:
    """The reference of every table of the presets file at ``path``: the summary, then one section per table."""
    tables = read_tables(path.read_text())
    by_name = {t.name: t for t in tables}
    out = [summary(page_dir, path), ""]
    for t in tables:
        algo, source = objective(t, by_name)
        out += [f"### {t.name} {{#{anchor(t.name)}}}", ""]
        if ALGO in t.settings:
            where = f"its `{ALGO}` key"
        elif source:
            where = f"the `{ALGO}` of `{source}`, through `{EXTENDS}`"
        else:
            where = f"no `{ALGO}` key: the default"
        line = f"**Objective: {algo}** ({where})."
        base = t.settings.get(EXTENDS)
        if base:
            line += f" Extends [`{base}`](#{anchor(str(base))}): that table's settings first, its own over them."
        out += [line, ""]
        out += _comment_markdown(t.comments, page_dir)
        if t.settings:  # as the file writes them: a block to copy into a --preset-file of one's own
            out += ["```toml", f"[{toml_key(t.path)}]", *(f"{k} = {toml_value(v)}" for k, v in t.settings.items())]
            out.append("```")
        else:
            out.append("No settings of its own.")
        out.append("")
    return "\n".join(out)
