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
    """The option strings (or the positional's name) of a reference row's first cell, e.g. "`--lstm [SIZE]`", or
    "`--normalize-obs` `--no-normalize-obs`" (each spelling a code span of its own)."""
    cell = row.split("` | ")[0] + "`"
    return {span.split(" ")[0] for span in re.findall(r"`([^`]+)`", cell)}


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
        table = bench_tables.render(m["kind"], bench_tables.marker_paths(m["file"], page.parent), m["key"])
        assert table.startswith("| ") and "Made by `python " in table
    shown = {(page.parent / f).resolve() for page, m in markers for f in m["file"].split(",")}
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
    # the peer is the one the data names (bench_atari's --sb3-algo; A2C where older data names none)
    assert "| SB3 A2C, " in bench_tables.atari(data)
    assert "| SB3 PPO, " in bench_tables.atari({**data, "sb3_algo": "ppo"})


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


def test_the_objective_tables_are_the_json_s():
    """bench_ppo's files: each run with its objective (the run's own ``algo``), and A3C beside PPO seed by seed."""
    data = json.loads((DOCS / "data" / "ppo_LunarLander-v3.json").read_text())
    runs = bench_tables.objective_runs(data).splitlines()[2:]
    assert len(runs) == len(data["runs"])
    for row, run in zip(runs, data["runs"], strict=True):
        cells = row.strip("| ").split(" | ")
        assert cells[0] == run["arm"] and cells[1] == {"a3c": "A3C", "ppo": "PPO"}.get(run.get("algo"), "SB3 PPO")
        assert _number(cells[3]) == round(run["final_mean_100"], 1)
    cost = bench_tables.objective_cost([data])
    (a3c, ppo) = [
        next(r for r in data["runs"] if r["seed"] == 201 and r.get("algo") == algo) for algo in ("a3c", "ppo")
    ]
    assert f"| `LunarLander-v3` (1M) | 201 | {a3c['final_mean_100']:,.1f} | {ppo['final_mean_100']:,.1f} |" in cost
    assert f"**{ppo['steps_per_s'] / a3c['steps_per_s']:.2f}x** |" in cost
    assert "| 203 |" not in cost  # seed 203 has no run of A3C's objective: no pair


def test_a_marker_may_name_several_files_for_a_kind_that_takes_them():
    page = DOCS / "guides" / "a-page.md"  # (its folder is what the paths are relative to)
    files = "../data/ppo_LunarLander-v3.json,../data/ppo_CartPole-v1.json"
    text = hooks.expand(f"<!-- bench-table: objective-cost {files} -->", page)
    assert "| `LunarLander-v3` (1M) | 201 |" in text and "| `CartPole-v1` (0.5M) | 301 |" in text
    assert text.count("`python -m scripts.bench_ppo") == 2 and "/tmp/" not in text
    with pytest.raises(ValueError, match="takes one file"):
        hooks.expand(f"<!-- bench-table: objective-runs {files} -->", page)


def test_a_flag_s_spellings_are_code_spans_of_their_own_that_never_break():
    """`--normalize-obs` `--no-normalize-obs`: a line may break between them, and extra.css keeps each on one line."""
    text = cli_reference.render("a3c.train")
    assert "| `--normalize-obs` `--no-normalize-obs` | off |" in text
    assert "| `--env ENV` | `CartPole-v1` |" in text
    css = (DOCS / "stylesheets" / "extra.css").read_text()
    assert re.search(r"td code \{\s*white-space: nowrap;", css)


def test_no_page_says_how_it_was_made():
    """Docs lead with the result: no page speaks of the issue it came from, the time it had, or whose runs shared the
    machine. (A run's "session", the steps since a resume, is a3c's own word and stays.)"""
    made = re.compile(r"\bthis issue\b|\bissue \d+\b|\bthe issue's\b|other engineers|hours this|/work/", re.I)
    for page in PAGES:
        found = made.search(hooks.expand(page.read_text(), page))  # as built: the generated parts too
        assert found is None, (page, found)


def test_the_objective_guide_is_near_the_top_of_the_guides_and_linked_from_home_and_get_started():
    config = (ROOT / "mkdocs.yml").read_text()
    guides = config.split("  - Guides:\n")[1].split("  - Reference:")[0].splitlines()
    assert "guides/objective.md" in "\n".join(guides[:2])
    for page in ("index.md", "get-started.md"):
        assert "guides/objective.md" in (DOCS / page).read_text(), page
