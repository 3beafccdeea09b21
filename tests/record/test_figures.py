"""Figures (a3c/record/figures.py) and the `python -m a3c.plot` command (a3c/plot.py) on hand-written episodes.csv
files."""

import csv
import gc
import json
import subprocess
import sys
import weakref

import numpy as np
import pytest

from a3c.plot import main as plot_main
from a3c.plot import read_episodes, run_names
from a3c.record.figures import (
    DownsampledSeries,
    LossHistory,
    comparison_figure,
    figure_png,
    loss_history_figure,
    png_size,
    rolling_mean,
    thin,
)
from a3c.record.run_dir import CSV_COLUMNS
from a3c.spec.errors import EXIT_USAGE, run_cli

PNG = b"\x89PNG\r\n\x1a\n"


def write_run(path, workers: int, episodes: int, seconds_per_episode: float = 0.1, cut_last_line: bool = False):
    """A run directory as a3c.train leaves it, as far as a3c.plot reads it: config.json and episodes.csv."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"env": "CartPole-v1", "workers": workers}))
    rng = np.random.default_rng(workers)
    with open(path / "episodes.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for i in range(episodes):
            rank = i % workers
            row = {
                "worker": rank,
                "index": i // workers,
                "return": 10 + i + rng.normal(),
                "length": 20,
                "loss": 5.0 / (1 + i) + rng.random(),
                "policy_loss": 0.1,
                "value_loss": 0.2,
                "entropy": 0.6,
                "global_step": 20 * (i + 1),
                "wall_time": seconds_per_episode * i + 0.01 * rank,
            }
            writer.writerow([row[c] for c in CSV_COLUMNS])
        if cut_last_line:
            f.write("1,99,12.5,20,0.3")  # a row the run has not finished writing
    return path


def test_rolling_mean_matches_a_loop():
    y = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0])
    for window in (1, 2, 3, 10):
        expected = [np.mean(y[max(0, i + 1 - window) : i + 1]) for i in range(len(y))]
        assert rolling_mean(y, window) == pytest.approx(expected)


def test_thin_keeps_at_most_max_points_and_the_ends():
    x = np.arange(10_001)
    tx, ty = thin(x, x * 2.0, max_points=100)
    assert len(tx) <= 101 and tx[0] == 0 and tx[-1] == 10_000
    assert np.all(ty == tx * 2.0)
    sx, _ = thin(x[:50], x[:50], max_points=100)
    assert len(sx) == 50


def test_loss_history_figure_renders_to_png_of_its_size():
    losses = {0: [3.0, 2.0, 1.0], 1: [4.0, 2.5]}
    times = {0: [0.1, 0.3, 0.5], 1: [0.2, 0.4]}
    fig = loss_history_figure(losses, times, title="t")
    right = fig.axes[1]
    # all workers' losses in wall-time order: 3.0 (0.1), 4.0 (0.2), 2.0 (0.3), 2.5 (0.4), 1.0 (0.5)
    assert list(right.lines[0].get_ydata()) == [3.0, 4.0, 2.0, 2.5, 1.0]
    assert [list(line.get_ydata()) for line in fig.axes[0].lines] == [[3.0, 2.0, 1.0], [4.0, 2.5]]
    png = figure_png(fig)
    assert png.startswith(PNG)
    assert png_size(png) == (320, 880)  # figsize (11, 4) at 80 dpi


def test_read_episodes_sorts_by_global_step_and_skips_a_cut_line(tmp_path):
    run = read_episodes(write_run(tmp_path / "r", workers=2, episodes=30, cut_last_line=True))
    assert len(run.columns["return"]) == 30
    assert np.all(np.diff(run.columns["global_step"]) >= 0) and np.all(np.diff(run.columns["wall_time"]) >= 0)
    assert run.label == "r (CartPole-v1, 2 workers)"


def append_session(path, episodes: int, wall_from: float, seconds_per_episode: float = 0.1):
    """A resumed session's rows appended to a run written by write_run (1 worker: rank 0): its global steps go on
    from the file's last; its wall times from ``wall_from`` (0: as a3c before issue 22 wrote them, every session's
    clock starting at 0 again)."""
    with open(path / "episodes.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    last_step, next_index = float(rows[-1]["global_step"]), 1 + max(int(r["index"]) for r in rows if r["worker"] == "0")
    with open(path / "episodes.csv", "a", newline="") as f:
        writer = csv.writer(f)
        for i in range(episodes):
            row = {c: 0.1 for c in CSV_COLUMNS}
            row.update(worker=0, index=next_index + i, length=20, global_step=last_step + 20 * (i + 1))
            row.update({"return": 1000.0 + i, "wall_time": wall_from + seconds_per_episode * (i + 1)})
            writer.writerow([row[c] for c in CSV_COLUMNS])


def test_a_resumed_run_is_read_and_drawn_in_the_order_of_its_global_step(tmp_path):
    """Bug (issue 22, item 4): a3c.plot sorted episodes.csv by wall time, which began at 0 again in each session, so
    a resumed run's sessions interleaved: the curves against the step zigzagged. The run's order is the global step's;
    each panel of the figures draws its line in the order of its own axis."""
    old = write_run(tmp_path / "old", workers=2, episodes=40)  # steps 20..800, wall 0..3.9 s
    append_session(old, episodes=30, wall_from=0.0)  # steps 820..1400, wall 0.1..3 s again
    run = read_episodes(old)
    steps = run.columns["global_step"]
    assert len(steps) == 70 and np.all(np.diff(steps) > 0)
    assert list(run.columns["return"][-30:]) == [1000.0 + i for i in range(30)]  # the resumed session, last
    new = write_run(tmp_path / "new", workers=2, episodes=40)
    append_session(new, episodes=30, wall_from=4.5)  # as a3c writes it now: wall time goes on across sessions
    fig = comparison_figure([read_episodes(new).curve("return")], "return", window=10)
    by_step, by_time = fig.axes[:2]
    for ax in (by_step, by_time):
        for line in ax.lines:
            assert np.all(np.diff(line.get_xdata()) >= 0)
    assert by_time.lines[-1].get_xdata()[-1] == pytest.approx(4.5 + 3.0)  # the wall-time axis reaches the run's end
    assert by_step.lines[-1].get_ydata()[-1] == pytest.approx(np.mean([1000.0 + i for i in range(20, 30)]))
    assert plot_main([str(old)]) == 0 and plot_main([str(new)]) == 0


def test_a3c_plot_draws_the_loss_history_in_the_run_s_order_and_says_so(tmp_path, monkeypatch):
    """The loss-history figure of python -m a3c.plot: each worker's losses in its episode order on the left, all
    workers' in the run's order (the global step's, as read_episodes sorts the rows) on the right, whose axis says
    so; a resumed run's sessions (wall time began at 0 again in the second) do not interleave."""
    import a3c.plot

    run = write_run(tmp_path / "old", workers=2, episodes=40)
    append_session(run, episodes=30, wall_from=0.0)
    figures = {}

    def save_figure(fig, path):
        figures[path.name] = (fig.axes[1].get_xlabel(), [list(line.get_ydata()) for line in fig.axes[0].lines])
        figures[path.name] += (list(fig.axes[1].lines[0].get_ydata()),)
        return path

    monkeypatch.setattr(a3c.plot, "save_figure", save_figure)
    episodes = read_episodes(run)
    a3c.plot.draw([episodes], tmp_path / "out")
    label, per_worker, overall = figures["loss_history.png"]
    assert "global step" in label and "time" not in label
    workers, losses = episodes.columns["worker"], episodes.columns["loss"]
    assert overall == list(losses)  # the rows as read: in global-step order
    assert per_worker == [list(losses[workers == 0]), list(losses[workers == 1])]


def test_plot_one_run_writes_pngs_into_its_plots_dir(tmp_path):
    run = write_run(tmp_path / "one", workers=2, episodes=200)
    proc = subprocess.run([sys.executable, "-m", "a3c.plot", str(run)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    written = [line for line in proc.stdout.splitlines() if line]
    expected = [run / "plots" / name for name in ("loss_history.png", "returns.png", "losses.png")]
    assert written == [str(p) for p in expected]
    for path in expected:
        assert path.read_bytes().startswith(PNG)


def test_plot_several_runs_on_one_figure(tmp_path):
    one = write_run(tmp_path / "w1", workers=1, episodes=100, seconds_per_episode=0.2)
    many = write_run(tmp_path / "w16", workers=16, episodes=400, seconds_per_episode=0.02)
    out = tmp_path / "compare"
    assert plot_main([str(one), str(many), "--out", str(out), "--window", "20"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["losses.png", "returns.png", "w16__loss_history.png", "w1__loss_history.png"]
    assert all((out / n).read_bytes().startswith(PNG) for n in names)


def test_runs_that_share_a_name_get_files_and_labels_of_their_own(tmp_path, capsys):
    """Found by probing: two run directories of one name (a/cp, b/cp) wrote one cp__loss_history.png twice (the second
    over the first) and shared one legend label; and a run of one worker was labelled "1 workers"."""
    first = write_run(tmp_path / "a" / "cp", workers=1, episodes=50)
    second = write_run(tmp_path / "b" / "cp", workers=2, episodes=50)
    third = write_run(tmp_path / "w1", workers=1, episodes=50)
    out = tmp_path / "compare"
    assert plot_main([str(first), str(second), str(third), "--out", str(out)]) == 0
    written = capsys.readouterr().out.split()
    assert len(written) == len(set(written)) == 5
    assert sorted(p.name for p in out.iterdir()) == [
        "a__cp__loss_history.png",
        "b__cp__loss_history.png",
        "losses.png",
        "returns.png",
        "w1__loss_history.png",
    ]
    labels = [
        read_episodes(p, name).label for p, name in zip((first, second, third), ("a/cp", "b/cp", "w1"), strict=True)
    ]
    assert labels == ["a/cp (CartPole-v1, 1 worker)", "b/cp (CartPole-v1, 2 workers)", "w1 (CartPole-v1, 1 worker)"]
    assert run_names([first, second, third]) == ["a/cp", "b/cp", "w1"]
    assert run_names([tmp_path / "x", tmp_path / "x"]) == ["x", "x (2)"]  # one directory named twice


@pytest.mark.parametrize(
    ("make", "argv", "message"),
    [
        (lambda tmp: None, ["{tmp}/missing"], "does not exist"),
        (lambda tmp: (tmp / "afile").write_text(""), ["{tmp}/afile"], "is a file, not a directory"),
        (lambda tmp: (tmp / "empty").mkdir(), ["{tmp}/empty"], "holds no episodes.csv"),
        (
            lambda tmp: ((tmp / "h").mkdir(), (tmp / "h" / "episodes.csv").write_text(",".join(CSV_COLUMNS) + "\n")),
            ["{tmp}/h"],
            "no finished episodes",
        ),
        (lambda tmp: write_run(tmp / "a", 1, 5) and write_run(tmp / "b", 1, 5), ["{tmp}/a", "{tmp}/b"], "--out"),
        # (found by probing: --out was asked for before a run directory that does not exist was named)
        (lambda tmp: write_run(tmp / "a", 1, 5), ["{tmp}/a", "{tmp}/nosuch"], "nosuch does not exist"),
        # (found by probing: the line listed every needed column, those present too)
        (
            lambda tmp: ((tmp / "c").mkdir(), (tmp / "c" / "episodes.csv").write_text("worker,return,loss\n1,2,3\n")),
            ["{tmp}/c"],
            "lacks the columns global_step, wall_time;",
        ),
        (lambda tmp: None, ["--bogus"], "--help"),
        # (found by probing: a UnicodeDecodeError traceback)
        (
            lambda tmp: ((tmp / "bin").mkdir(), (tmp / "bin" / "episodes.csv").write_bytes(b"\xff\xfe\x00binary")),
            ["{tmp}/bin"],
            "(not text); is it an a3c.train episodes.csv?",
        ),
    ],
)
def test_user_errors_are_one_line_and_exit_2(tmp_path, capsys, make, argv, message):
    make(tmp_path)
    code = run_cli(plot_main, [a.format(tmp=tmp_path) for a in argv], prog="a3c.plot")
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert err.count("\n") == 1 and err.startswith("a3c.plot: error: ") and message in err


def test_downsampled_series_is_bounded_and_every_episode_counts_once():
    s = DownsampledSeries(capacity=8)
    values = np.arange(1000, dtype=float)
    for v in values:
        s.append(v)
    x, y = s.points()
    assert s.count == 1000 and len(y) <= 9 and s.means.nbytes == 8 * 8
    # bucket means weighted by their sizes give back the mean of every episode
    sizes = np.full(s.full, s.stride)
    if len(y) > s.full:
        sizes = np.append(sizes, s.count - s.full * s.stride)
    assert sizes.sum() == 1000
    assert np.sum(y * sizes) / 1000 == pytest.approx(values.mean())
    assert np.all(np.diff(x) > 0) and x[0] == (s.stride - 1) / 2
    small = DownsampledSeries(capacity=8)
    for v in (3.0, 1.0, 2.0):
        small.append(v)
    assert [list(a) for a in small.points()] == [[0.0, 1.0, 2.0], [3.0, 1.0, 2.0]]  # short histories: every point


def test_figure_memory_does_not_grow_with_redraws_of_a_growing_history():
    """8 redraws while the history grows by 16 x 100 episodes each time (past its capacity after the first): the
    history's buffers keep their size, a rendered figure is emptied at once, and every earlier figure is freed by the
    next render, so at most one figure is ever alive. Before the fix, figures waited in reference cycles for
    Python's cyclic GC, holding megabytes of renderer memory each: RSS grew 2.3 MB per redraw of a growing history
    (docs/guides/long-runs.md); scripts/soak.py shows the main process flat over a long run."""
    history = LossHistory(workers=16, capacity=32)
    rng = np.random.default_rng(0)
    figures, sizes = [], []
    gc.disable()  # no automatic collection: only what figure_png frees is freed
    try:
        for redraw in range(8):
            for _ in range(100):
                for rank in range(16):
                    history.add(rank, float(rng.random()))
            fig = history.figure(title=f"redraw {redraw}")
            figures.append(weakref.ref(fig))
            assert figure_png(fig).startswith(PNG)
            assert not fig.axes and not hasattr(fig.canvas, "renderer")  # emptied: artists and Agg buffer gone
            del fig
            sizes.append(history.nbytes())
            alive = [i for i, ref in enumerate(figures) if ref() is not None]
            assert alive == [redraw], f"figures {alive} alive after redraw {redraw}"
    finally:
        gc.enable()
    assert history.episodes == 8 * 100 * 16
    assert len(set(sizes)) == 1  # fixed-size buffers from the start
    x, y = history.overall.points()
    assert len(y) <= 33 and x[-1] < history.episodes
