"""The docs site (mkdocs.yml, docs/, docsgen/): the command-line reference is generated from the parsers and shows
every flag of every entry point; every benchmark table marker renders from its JSON, and the rendered numbers are the
JSON's; no heading names a date or an issue; each benchmark page leads with its table, figure and command. (.ci/run
builds the site with ``mkdocs build --strict``, which fails on a broken link or a marker that does not render.)"""

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT))

from docsgen import bench_tables, cli_reference, hooks  # noqa: E402

PAGES = sorted(DOCS.rglob("*.md"))


def test_the_site_is_built_with_the_hook_and_every_page_is_in_the_nav():
    config = (ROOT / "mkdocs.yml").read_text()
    assert "hooks:\n  - docsgen/hooks.py" in config and "strict: true" in config
    nav = set(re.findall(r"(?m)^\s+- (?:[^:\n]+: )?([\w/.-]+\.md)$", config))
    assert nav == {str(p.relative_to(DOCS)) for p in PAGES}


def test_every_entry_point_with_a_parser_is_in_the_cli_reference():
    with_parser = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "a3c").rglob("*.py")
        if re.search(r"(?m)^def build_parser\(", p.read_text())
    }
    assert with_parser == {module for module, _ in cli_reference.ENTRY_POINTS.values()}
    page = (DOCS / "reference" / "cli.md").read_text()
    assert re.findall(r"<!-- cli-reference: (\S+) -->", page) == list(cli_reference.ENTRY_POINTS)


def _invoked(row: str) -> set[str]:
    """The option strings (or the positional's name) of a reference row's first cell, e.g. "`--lstm [SIZE]`"."""
    cell = row.split("` | ")[0].removeprefix("| `")
    return {part.split(" ")[0] for part in cell.split(", ")}


@pytest.mark.parametrize("entry_point", list(cli_reference.ENTRY_POINTS))
def test_the_cli_reference_shows_every_flag_with_its_default(entry_point):
    parser = cli_reference.parser_of(entry_point)
    text = cli_reference.render(entry_point)
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        names = action.option_strings or [action.metavar or action.dest]
        (row,) = [r for r in rows if set(names) <= _invoked(r)]
        default = row.split(" | ")[1]
        if isinstance(action.default, (int, float, str)) and not isinstance(action.default, bool):
            assert f"`{action.default}`" == default, (names, default)
    for group in parser._action_groups:
        if any(not isinstance(a, argparse._HelpAction) for a in group._group_actions):
            assert f"**{group.title[0].upper() + group.title[1:]}**" in text


def test_a_flag_added_to_a_parser_appears_in_the_reference(monkeypatch):
    """The reference is generated when the site is built: nothing to regenerate by hand."""
    import a3c.plot

    build = a3c.plot.build_parser

    def with_one_more() -> argparse.ArgumentParser:
        parser = build()
        parser.add_argument("--a-new-flag", type=int, default=7, help="a flag added to the parser")
        return parser

    monkeypatch.setattr(a3c.plot, "build_parser", with_one_more)
    page = hooks.expand((DOCS / "reference" / "cli.md").read_text(), DOCS / "reference" / "cli.md")
    assert "| `--a-new-flag A_NEW_FLAG` | `7` | a flag added to the parser |" in page


def _markers() -> list[tuple[Path, re.Match[str]]]:
    return [(page, m) for page in PAGES for m in bench_tables.MARKER.finditer(page.read_text())]


def test_every_marker_renders_and_every_kept_json_is_on_a_page():
    markers = _markers()
    assert len(markers) >= 10
    for page, m in markers:
        table = bench_tables.render(m["kind"], page.parent / m["file"], m["key"])
        assert table.startswith("| ") and "Made by `python " in table
    shown = {(page.parent / m["file"]).resolve() for page, m in markers}
    linked = {
        (page.parent / target).resolve()
        for page in PAGES
        for target in re.findall(r"\]\(([^)#]+\.json)\)", page.read_text())
    }
    assert set((DOCS / "data").glob("*.json")) <= {p for p in shown | linked}


def _number(text: str) -> float:
    return float(text.strip().replace(",", "").replace("*", "").rstrip("%x"))


def test_the_rendered_numbers_are_the_json_s():
    data = json.loads((DOCS / "data" / "throughput_kernel_9rounds_2026-12-04b.json").read_text())
    table = bench_tables.throughput(data).splitlines()
    for summary in data["summary"]:
        name = {"on": "C kernel", "off": "numpy"}[summary["update_kernel"]]
        (row,) = [r for r in table if r.startswith(f"| {name},")]
        cells = row.strip("|").split(" | ")
        assert _number(cells[4]) == round(100 * summary["median_ratio_to_raw"])
        assert _number(cells[5]) == round(100 * summary["min_ratio_to_raw"])
    data = json.loads((DOCS / "data" / "suite_mujoco.json").read_text())
    table = bench_tables.suite(data)
    for env, agg in data["aggregate"].items():
        for trainer in ("a3c", "sb3"):
            assert f"{agg[trainer]['final_mean_100']:,.1f} ± {agg[trainer]['final_std']:,.1f}" in table, (env, trainer)
    data = json.loads((DOCS / "data" / "vs_sb3_after_record.json").read_text())
    ratio = data["median_throughput"]["a3c"] / data["median_throughput"]["sb3"]
    assert f"**{ratio:.1f}x**" in bench_tables.vs_sb3(data)
    data = json.loads((DOCS / "data" / "atari_bench_background.json").read_text())
    frames = 4 * statistics.median(data["a3c_steps_per_s"]["preset"])
    assert f"| a3c, preset | {frames:,.0f} (" in bench_tables.atari(data)


def test_a_changed_json_changes_its_table(tmp_path):
    data = json.loads((DOCS / "data" / "vs_sb3_after_record.json").read_text())
    data["median_throughput"]["sb3"] = data["median_throughput"]["a3c"] / 3
    (tmp_path / "vs.json").write_text(json.dumps(data))
    page = bench_tables.expand("<!-- bench-table: vs-sb3 vs.json -->", tmp_path)
    assert "**3.0x**" in page


def test_no_heading_names_a_date_or_an_issue():
    for page in PAGES:
        for heading in re.findall(r"(?m)^#+ .*$", page.read_text()):
            assert not re.search(r"\b20\d\d-\d\d|\bissue\b|must-show|\d\d:\d\d", heading, re.I), (page, heading)


@pytest.mark.parametrize("page", sorted((DOCS / "benchmarks").glob("*.md")), ids=lambda p: p.name)
def test_a_benchmark_page_leads_with_its_table_figure_and_command(page):
    """Within its first 40 lines: a table (or a table's marker), then a figure and the command that made them; what
    was tried and not kept closes the page."""
    if page.name == "index.md":
        return
    text = page.read_text()
    lead = "\n".join(text.splitlines()[:40])
    table = re.search(r"(?m)^(\| |<!-- bench-table: )", lead)
    assert table is not None, page.name
    assert table.start() < lead.index("![") and table.start() < lead.index("```bash\n"), page.name
    assert text.rindex("\n## ") == text.index("\n## Tried and not kept\n"), page.name


def test_ci_builds_the_site_from_the_docs_extra_and_checks_the_wheel():
    import tomllib

    ci = [line.split("  #")[0].strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert 'pip install -q -e ".[docs]"' in ci
    assert any(line.startswith("mkdocs build --strict") for line in ci)
    assert ci.index(".ci/wheel_check") > ci.index("python -m pytest -q -x tests")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {"mkdocs", "mkdocs-material", "mkdocstrings[python]"} <= {re.split(r"[<>=]", d)[0] for d in extras["docs"]}


def test_a_marker_that_does_not_render_fails_the_build(tmp_path):
    page = tmp_path / "page.md"
    with pytest.raises(ValueError, match="unknown bench-table kind"):
        hooks.expand("<!-- bench-table: nope ../data/vs_sb3_after_record.json -->", page)
    with pytest.raises(FileNotFoundError):
        hooks.expand("<!-- bench-table: vs-sb3 missing.json -->", page)
    with pytest.raises(KeyError):
        hooks.expand("<!-- cli-reference: a3c.nope -->", page)
