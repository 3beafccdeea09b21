"""The results store's tables and figure (docsgen/results_store.py): the numbers are the store's, a rerun replaces
the older row, the marker renders with its filters, and a marker that selects nothing fails the build."""

import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "scripts" / "benchmark"))

from test_store import row  # noqa: E402

from docsgen import hooks, results_store  # noqa: E402
from scripts.benchmark.store import Store  # noqa: E402


def a_store(tmp_path):
    store = Store(tmp_path / "results.jsonl")
    finals = {1: 100.0, 2: 200.0, 3: 300.0}
    for seed, final in finals.items():
        reached = {"reached_at_step": 5000, "reached_at_s": 10.0 * seed} if final >= 150 else {}
        curve = [[0, 0.0, 0.0], [10_000, 5.0 * seed, final]]
        store.append(
            row(
                seed=seed,
                budget=10_000,
                final_mean_100=final,
                threshold=150.0,
                wall_s=10.0 * seed,
                steps_per_s=1000.0 * seed,
                curve=curve,
                bench_command="python -m scripts.bench run X",
                **reached,
            )
        )
    store.append(
        row(
            arm="sb3-a2c",
            seed=1,
            budget=10_000,
            final_mean_100=50.0,
            threshold=150.0,
            wall_s=99.0,
            steps_per_s=10.0,
            curve=[[0, 0.0, 0.0], [10_000, 99.0, 50.0]],
            bench_command="python -m scripts.bench run Y",
        )
    )
    store.append(
        row(
            env="Acrobot-v1", budget=500_000, final_mean_100=-80.0, wall_s=1.0, steps_per_s=1.0, curve=[[1, 1.0, -80.0]]
        )
    )
    return store


def test_the_arm_table_is_the_store_s_numbers(tmp_path):
    store = a_store(tmp_path)
    table = results_store.by_arm(results_store.select(store.rows(), env=["CartPole-v1"]))
    lines = table.splitlines()
    assert len(lines) == 4 and "Acrobot" not in table
    mean, std = statistics.fmean([100, 200, 300]), statistics.stdev([100, 200, 300])
    assert (
        lines[2]
        == f"| CartPole-v1 (10k) | a3c | **{mean:,.1f}** ± {std:,.1f} | 3 | 2/3 (>= 150), 25.0 s | 20 | 2,000 |"
    )
    assert lines[3] == "| CartPole-v1 (10k) | sb3-a2c | **50.0** ± 0.0 | 1 | 0/1 (>= 150) | 99 | 10 |"


def test_the_ratio_view_pairs_two_arms_seed_by_seed(tmp_path):
    """A speed target's table: each seed the two arms share, the first's steps/s over the second's, and the median of
    each commit's pairs (a change measured before and after in one table); a pair of arms is required."""
    store = a_store(tmp_path)
    store.append(row(arm="sb3-a2c", seed=2, budget=10_000, steps_per_s=40.0, curve=[[0, 0.0, 0.0]]))
    store.append(row(arm="a3c", seed=4, budget=10_000, steps_per_s=900.0, curve=[[0, 0.0, 0.0]], commit="bbb"))
    store.append(row(arm="sb3-a2c", seed=4, budget=10_000, steps_per_s=30.0, curve=[[0, 0.0, 0.0]]))
    table = results_store.by_ratio(results_store.select(store.rows(), env=["CartPole-v1"]))
    lines = table.splitlines()
    commit = store.rows()[0]["commit"]
    assert lines[2] == f"| CartPole-v1 (10k) | 1 | {commit} | a3c: 1,000 | sb3-a2c: 10 | 100.00x |"
    assert lines[3] == f"| CartPole-v1 (10k) | 2 | {commit} | a3c: 2,000 | sb3-a2c: 40 | 50.00x |"
    assert lines[4] == "| CartPole-v1 (10k) | 4 | bbb | a3c: 900 | sb3-a2c: 30 | 30.00x |"  # seed 3: no pair
    assert lines[5] == f"| CartPole-v1 (10k) | median | {commit} |  |  | **75.00x** |"  # the pairs of each commit
    assert lines[6] == "| CartPole-v1 (10k) | median | bbb |  |  | **30.00x** |" and len(lines) == 7
    flipped = results_store.by_ratio(results_store.select(store.rows(), env=["CartPole-v1"]), ["sb3-a2c", "a3c"])
    assert flipped.splitlines()[2] == f"| CartPole-v1 (10k) | 1 | {commit} | sb3-a2c: 10 | a3c: 1,000 | 0.01x |"
    with pytest.raises(ValueError, match="view=ratio needs two arms of CartPole-v1, not 1"):
        results_store.by_ratio(results_store.select(store.rows(), env=["CartPole-v1"], arm=["a3c"]))
    assert "ratio" in results_store.parse_filters("view=ratio")["view"]


def test_a_rerun_replaces_the_older_row(tmp_path):
    store = a_store(tmp_path)
    store.append(
        row(
            seed=1,
            budget=10_000,
            commit="newer",
            final_mean_100=400.0,
            threshold=150.0,
            wall_s=1.0,
            steps_per_s=1.0,
            curve=[[1, 1.0, 400.0]],
        )
    )
    table = results_store.by_seed(results_store.select(store.rows(), arm=["a3c"], budget=[10_000]))
    assert "| CartPole-v1 (10k) | a3c | 1 | 400.0 |" in table and "| CartPole-v1 (10k) | a3c | 1 | 100.0 |" not in table
    assert "| newer |" in table


def test_the_marker_renders_through_the_site_s_hook(tmp_path):
    a_store(tmp_path)
    page = tmp_path / "page.md"
    text = "# T\n\n<!-- bench-table: store results.jsonl env=CartPole-v1 arm=sb3-a2c view=seeds -->\n\nafter\n"
    out = hooks.expand(text, page)
    assert "| CartPole-v1 (10k) | sb3-a2c | 1 | 50.0 |" in out and "| a3c |" not in out
    assert "Made by `python -m scripts.bench run Y`." in out and out.endswith("\n\nafter\n")
    both = hooks.expand("<!-- bench-table: store results.jsonl env=CartPole-v1 -->", page)
    assert "Made by `python -m scripts.bench run X`; `python -m scripts.bench run Y`." in both
    # seed=: the arms compared on the same seeds (an arm run on more seeds than its peer)
    same = hooks.expand("<!-- bench-table: store results.jsonl env=CartPole-v1 seed=1 -->", page)
    assert "| CartPole-v1 (10k) | a3c | **100.0** ± 0.0 | 1 |" in same, same


@pytest.mark.parametrize(
    ("marker", "error"),
    [
        ("<!-- bench-table: store results.jsonl env=Nope-v0 -->", ValueError),
        ("<!-- bench-table: store results.jsonl colour=red -->", ValueError),
        ("<!-- bench-table: store results.jsonl view=nope -->", ValueError),
        ("<!-- bench-table: store results.jsonl seed=one -->", ValueError),
        ("<!-- bench-table: store missing.jsonl -->", FileNotFoundError),
    ],
)
def test_a_marker_that_selects_nothing_fails_the_build(tmp_path, marker, error):
    a_store(tmp_path)
    with pytest.raises(error):
        hooks.expand(marker, tmp_path / "page.md")


def test_the_figure_has_steps_and_wall_time_per_env_and_a_line_per_arm(tmp_path):
    fig = results_store.figure(results_store.select(a_store(tmp_path).rows()))
    axes = fig.get_axes()
    assert len(axes) == 4  # CartPole and Acrobot, each against steps and wall time
    labels = [line.get_label() for line in axes[0].get_lines()]
    assert labels[:2] == ["a3c (3 seeds)", "sb3-a2c (1 seed)"]
    assert axes[0].get_xlabel() == "env steps" and axes[1].get_xlabel() == "wall time (s)"
    x, mean, low, high = results_store._band([[(0.0, 0.0), (10.0, 10.0)], [(0.0, 0.0), (5.0, 20.0)]], points=3)
    assert list(x) == [0.0, 5.0, 10.0] and list(mean) == [0.0, 12.5, 15.0]  # a run that ended holds its last value
    assert list(low) == [0.0, 5.0, 10.0] and list(high) == [0.0, 20.0, 20.0]


def test_the_figure_titles_a_module_s_env_by_its_id_alone():
    """A ``module:Name-v0`` env is titled ``Name-v0`` (the module's path would not fit two axes' width)."""
    rows = [row(env="scripts.benchmark.heldout_envs:TaxiOneHot-v4", curve=[[0, 0.0, -200.0], [100, 1.0, -200.0]])]
    (left, right) = results_store.figure(results_store.select(rows)).get_axes()
    assert left.get_title() == right.get_title() == "TaxiOneHot-v4, 1k steps"


def test_the_made_by_line_is_a_command_for_a_clone():
    """A row stored from a machine's own paths: the page shows the store as its repository path and no --work-dir."""
    rows = [
        row(bench_command="python -m scripts.bench run --env X --store /home/u/a3c/docs/data/t.jsonl --work-dir /tmp/r")
    ]
    assert results_store.made_by(rows) == "Made by `python -m scripts.bench run --env X --store docs/data/t.jsonl`."


def test_an_adopted_runs_command_shows_no_machine_paths():
    """adopt names a run directory, its log and the code's tree by their paths on the machine that ran them: a page
    shows each by its last component (the run's name), not a machine's folders."""
    command = (
        "python -m scripts.bench adopt /srv/runs/breakout-1 --arm 'n=--seed 1' --log /srv/runs/breakout-1.log "
        "--code /srv/src --evaluate 10 --work-dir /srv/driver"
    )
    arm = "python -m scripts.bench run --arm 'n=--preset-file /srv/t/best.toml' --store docs/data/r.jsonl"
    assert results_store.made_by([row(bench_command=arm)]) == f"Made by `{arm}`."  # an arm's flags as stored
    assert results_store.made_by([row(bench_command=command)]) == (
        "Made by `python -m scripts.bench adopt breakout-1 --arm 'n=--seed 1' --log breakout-1.log --code src "
        "--evaluate 10`."
    )


def test_the_seeds_view_shows_the_evaluations_where_a_run_has_them(tmp_path):
    plain = results_store.by_seed([row(seed=1)])
    assert "eval" not in plain
    scored = row(seed=2, extra={"eval_mean_return": 630.0, "eval_episodes": 10, "eval_best_mean_return": 612.5})
    table = results_store.by_seed([row(seed=1), scored])
    assert "| eval final (episodes) | eval best |" in table
    assert "| abc | 630.0 (10) | 612.5 |" in table and "| abc | - | - |" in table
