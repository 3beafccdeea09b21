"""The MkDocs hook (mkdocs.yml: hooks) that fills the generated parts of the pages while the site is built:
``<!-- cli-reference: ENTRY_POINT -->`` becomes that entry point's flag tables (cli_reference.py),
``<!-- presets-reference -->`` every table of a3c/spec/presets.toml (``: summary``, one line each:
presets_reference.py), and
``<!-- bench-table: KIND data/FILE.json [KEY] -->`` the table of a benchmark's JSON (bench_tables.py). A marker that
names an unknown entry point, kind or file fails the build; ``<!-- bench-table: store data/FILE.jsonl [FILTER=...]
-->`` a table of the results store (results_store.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # mkdocs loads this file by its path: the repository's packages are importable
    sys.path.insert(0, str(ROOT))

from docsgen import bench_tables, cli_reference, presets_reference, results_store  # noqa: E402

CLI_MARKER = re.compile(r"^<!-- cli-reference: (?P<entry>[a-z0-9_.]+) -->$", re.M)
PRESETS_MARKER = re.compile(r"^<!-- presets-reference(?P<summary>: summary)? -->$", re.M)


def expand(markdown: str, page_path: Path) -> str:
    """``markdown`` (the page at ``page_path``) with its markers replaced by what they stand for."""
    markdown = CLI_MARKER.sub(lambda m: cli_reference.render(m["entry"]), markdown)
    markdown = PRESETS_MARKER.sub(
        lambda m: (presets_reference.summary if m["summary"] else presets_reference.render)(page_path.parent), markdown
    )
    markdown = results_store.expand(markdown, page_path.parent)
    return bench_tables.expand(markdown, page_path.parent)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return expand(markdown, Path(page.file.abs_src_path))
