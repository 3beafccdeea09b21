"""The presets reference (docsgen/presets_reference.py) says what a3c/spec/presets.toml says: every table the loader
knows, with the objective a run with that preset trains (an env whose preset is PPO's is not shown as A3C's), its
own settings and its comments; a file with other tables (dotted names, extends chains) renders them too, so the page
follows the file when tables are added."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT))

from a3c.spec.config import Config  # noqa: E402
from a3c.spec.presets import PRESETS_FILE, load_presets  # noqa: E402
from docsgen import hooks, presets_reference  # noqa: E402

PAGE = DOCS / "reference" / "presets.md"


def _sections(text: str) -> dict[str, str]:
    """The rendered page's sections by table name (the text under each "### NAME {#id}")."""
    parts = re.split(r"(?m)^### (.+?) \{#[\w-]+\}$", text)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_page_is_generated_from_the_shipped_file_at_build_time():
    source = PAGE.read_text()
    assert "<!-- presets-reference -->" in source and "| LunarLander-v3 |" not in source  # no table typed by hand
    page = hooks.expand(source, PAGE)
    assert "<!-- presets-reference" not in page
    assert presets_reference.PRESETS_FILE == PRESETS_FILE


def test_every_preset_is_shown_with_the_objective_a_run_with_it_trains():
    sections = _sections(presets_reference.render(PAGE.parent))
    presets = load_presets()
    assert set(sections) == set(presets)
    for name, settings in presets.items():
        algo = settings.get("algo", Config().algo)
        assert f"**Objective: {algo}**" in sections[name], name
        summary_row = next(r for r in presets_reference.summary(PAGE.parent).splitlines() if f"[`{name}`]" in r)
        assert f"| {algo}" in summary_row, (name, summary_row)
    assert "**Objective: ppo**" in sections["LunarLander-v3"]  # the preset the old hand-written page showed as A3C's


def test_each_table_shows_its_own_settings_as_toml_and_its_comments():
    sections = _sections(presets_reference.render(PAGE.parent))
    lunar = sections["LunarLander-v3"]
    assert '```toml\n[LunarLander-v3]\ntotal-steps = 1000000\nalgo = "ppo"\n' in lunar
    assert "rl-zoo3's PPO settings for LunarLander-v2" in lunar  # its comment, the why
    assert "rl-zoo3's PPO settings" not in sections["CartPole-v1"]
    cheetah = sections["HalfCheetah-v5@a3c"]
    assert 'extends = "mujoco"' in cheetah and "Extends [`mujoco`](#preset-mujoco)" in cheetah
    assert "rl-zoo3's tuned PPO settings for HalfCheetah-v3" in sections["HalfCheetah-v5"]
    assert "tuned A2C for the PyBullet versions" in sections["mujoco"]  # the block above its header is its own
    assert "tuned A2C for the PyBullet versions" not in sections["LunarLanderContinuous-v3"]


def test_any_table_of_the_file_is_rendered_dotted_names_and_extends_chains_too(tmp_path):
    file = tmp_path / "presets.toml"
    file.write_text(
        "# the preamble, not shown\n#\n# more preamble\n\n"
        '[Base-v0]\n# base\'s reason\nalgo = "ppo"\nn-steps = 64\n\n'
        "# above the dotted table: its reason\n"
        '[defaults.ppo.discrete]\nextends = "Base-v0"\n# inside: a second reason\n#\n#     python -m a3c.train --x\n'
        'n-epochs = 10\nenv-kwargs = {a = 1, b = "x_y"}\n\n'
        '["envs/Plain-v0"]\n'
        '[Chain-v0]\nextends = "defaults.ppo.discrete"\n'
    )
    text = presets_reference.render(PAGE.parent, file)
    sections = _sections(text)
    assert list(sections) == ["Base-v0", "defaults.ppo.discrete", "envs/Plain-v0", "Chain-v0"]
    assert "preamble" not in text
    dotted = sections["defaults.ppo.discrete"]
    assert "**Objective: ppo** (the `algo` of `Base-v0`, through `extends`)" in dotted
    assert "above the dotted table: its reason" in dotted and "inside: a second reason" in dotted
    assert "```\npython -m a3c.train --x\n```" in dotted  # an indented comment line is an example command
    assert '[defaults.ppo.discrete]\nextends = "Base-v0"\nn-epochs = 10\nenv-kwargs = {a = 1, b = "x_y"}' in dotted
    assert "base's reason" in sections["Base-v0"] and "base's reason" not in dotted
    assert "**Objective: a3c** (no `algo` key: the default)" in sections["envs/Plain-v0"]
    assert "No settings of its own." in sections["envs/Plain-v0"]
    assert "**Objective: ppo** (the `algo` of `Base-v0`" in sections["Chain-v0"]  # two links up the chain
    assert "| [`Chain-v0`](#preset-chain-v0) | ppo (from `Base-v0`) | `defaults.ppo.discrete` | 0 |" in text


def test_an_extends_that_names_no_table_fails_the_build(tmp_path):
    file = tmp_path / "presets.toml"
    file.write_text('[A-v0]\nextends = "Nope"\n')
    with pytest.raises(ValueError, match="extends 'Nope'"):
        presets_reference.render(PAGE.parent, file)


def test_the_pages_a_comment_names_exist_and_are_linked():
    """A comment's docs/NAME.md becomes a link (mkdocs build --strict then checks it); one that names a page that is
    not there would be left as text, so it is held here instead."""
    named = set(re.findall(r"\bdocs/([\w./-]*\w\.md)", PRESETS_FILE.read_text()))
    assert named and all((DOCS / name).is_file() for name in named), named
    text = presets_reference.render(PAGE.parent)
    for name in named:
        assert f"[`docs/{name}`](../{name})" in text


def test_comment_prose_is_escaped_outside_code_spans():
    text = presets_reference._prose("a <b> and ent_coef *x* but `--ent_coef <n>` and docs/ppo.md", DOCS / "guides")
    assert text == "a &lt;b> and ent\\_coef \\*x\\* but `--ent_coef <n>` and [`docs/ppo.md`](../ppo.md)"
