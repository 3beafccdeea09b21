"""The dashboard without worker processes: a board filled by hand, ticks, and the event files read back with
TensorBoard's own EventAccumulator (scalars, policy lag per interval, per-worker event streams, the per-episode rate
limit with exact aggregates, custom-scalars layout, hparams, image, the purge on resume)."""

import csv
import itertools
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from procs import DESIGN_TAGS
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.custom_scalar import layout_pb2
from tensorboard.plugins.hparams import plugin_data_pb2

from a3c.learn.optim import make_optimizer
from a3c.record.dashboard import LOSS_HISTORY_TAG, Dashboard
from a3c.record.figures import png_size
from a3c.record.rows import FIELD, FIELDS, Stat
from a3c.record.run_dir import RunDirectory
from a3c.record.tensorboard_writer import HPARAM_METRICS, WORKERS_DIR, custom_scalars_layout, hparam_values
from a3c.run.backends.shared_memory import SharedMemoryCoordinator, SharedRun
from a3c.run.board import EpisodeBoard

WORKERS = 3


def episode(ret: float, loss: float, global_step: int, wall_time: float) -> np.ndarray:
    row = np.zeros(len(FIELDS))
    row[FIELD["return"]], row[FIELD["length"]], row[FIELD["loss"]] = ret, 10, loss
    row[FIELD["global_step"]], row[FIELD["wall_time"]] = global_step, wall_time
    return row


class Interval:
    """The store's logging-interval counter, as the trainer drives it: tick, then next()."""

    def __init__(self) -> None:
        self.value = 0

    def __call__(self) -> int:
        return self.value


def update(board: EpisodeBoard, rank: int, lag: int, interval: int) -> None:
    """What Worker.record_update does to the stats row for one applied update."""
    s = board.stats.numpy()[rank]
    s[Stat.UPDATES] += 1
    s[Stat.LAG_SUM] += lag
    s[Stat.GRAD_NORM_SUM] += 0.5
    if s[Stat.LAG_MAX_INTERVAL] != interval or s[Stat.UPDATES] == 1:
        s[Stat.LAG_MAX], s[Stat.LAG_MAX_INTERVAL] = lag, interval
    else:
        s[Stat.LAG_MAX] = max(s[Stat.LAG_MAX], lag)
    s[Stat.LOSS : Stat.ENTROPY + 1] = (1.0, 0.5, 0.25, 0.6)


def coordinator_for(board: EpisodeBoard) -> SharedMemoryCoordinator:
    """The main process's side of the shared-memory backend around ``board`` (the model is a dummy)."""
    params = torch.zeros(1).share_memory_()
    return SharedMemoryCoordinator(SharedRun(params, make_optimizer("adam", params, 1e-3, board.workers), board, 10**9))


def read_events(path) -> EventAccumulator:
    """The event files directly in ``path`` (one TensorBoard run; subdirectories are runs of their own)."""
    ea = EventAccumulator(str(path), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    ea.Reload()
    return ea


def worker_events(run: RunDirectory, rank: int) -> EventAccumulator:
    return read_events(run.path / WORKERS_DIR / str(rank))


def an_earlier_session(path: Path) -> None:
    """Date the event files under ``path`` a second back, as a real earlier session's are (a resumed session starts
    seconds after the one it resumes). TensorBoard reads a stream's files in name order, and a name is
    events.out.tfevents.<second>.<host>.<pid>.<n>, n a counter of the process: two sessions in one test process in
    one second sort by n as text ("12" before "9"), and a purge read before the points it purges purges nothing."""
    for file in path.rglob("events.out.tfevents.*"):
        parts = file.name.split(".", 4)  # events, out, tfevents, the second, the rest (the host may hold dots)
        parts[3] = f"{int(parts[3]) - 1:010d}"
        file.rename(file.with_name(".".join(parts)))


def clock():
    """A clock that moves 10 s per reading: every tick ends a TensorBoard interval (at the default 1 point/s)."""
    return itertools.count(1000.0, 10.0).__next__


@pytest.fixture
def dashboard(tmp_path):
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    run.plots.mkdir()
    board = EpisodeBoard(WORKERS, capacity=64)
    interval = Interval()
    dash = Dashboard(
        run,
        coordinator_for(board),
        total_steps=10_000,
        reward_threshold=None,
        start_time=0.0,
        interval=interval,
        clock=clock(),
    )
    yield dash, board, interval
    dash.close()


def test_scalars_of_every_worker_and_policy_lag_max_of_the_ending_interval(dashboard):
    dash, board, interval = dashboard
    # interval 0: worker 0 lags 3 then 7, worker 1 lags 2; worker 2 does nothing
    update(board, 0, 3, interval())
    update(board, 0, 7, interval())
    update(board, 1, 2, interval())
    for rank in range(WORKERS):
        board.write(rank, episode(ret=10.0 + rank, loss=0.1 * rank, global_step=100 + rank, wall_time=1.0 + rank))
    board.add_steps(0, 200)
    dash.tick()
    interval.value += 1  # the trainer's store.next_interval() after the tick
    # interval 1: only worker 1 updates (lag 4); worker 0's slot still holds its larger maximum of interval 0 (7),
    # which must not leak into interval 1
    update(board, 1, 4, interval())
    board.write(0, episode(ret=20.0, loss=0.3, global_step=300, wall_time=5.0))
    board.stats[1, Stat.NONFINITE_SAMPLES] = 3  # worker 1 left 3 samples out of its --normalize-* statistics
    board.add_steps(1, 200)
    dash.tick()
    interval.value += 1
    # interval 2: nobody updates, steps move on: no lag point for it
    board.add_steps(2, 200)
    dash.tick()
    dash.close()

    ea = read_events(dash.run.path)
    tags = set(ea.Tags()["scalars"])
    for rank in range(WORKERS):  # each worker's tags in its own stream (its own TensorBoard run), not the run's
        own = {f"workers/{rank}/episodic_return", f"workers/{rank}/episode_loss"}
        assert own | {f"workers/{rank}/episodic_return_mean"} <= set(worker_events(dash.run, rank).Tags()["scalars"])
        assert not own & tags
    expected = DESIGN_TAGS | {"perf/policy_lag_max"}
    assert expected <= tags, expected - tags
    w0 = worker_events(dash.run, 0)
    assert [(e.step, e.value) for e in w0.Scalars("workers/0/episodic_return")] == [(100, 10.0), (300, 20.0)]
    assert [e.value for e in worker_events(dash.run, 2).Scalars("workers/2/episodic_return")] == [12.0]
    assert set(worker_events(dash.run, 1).Tags()["scalars"]) == {
        "workers/1/episodic_return",
        "workers/1/episode_loss",
        "workers/1/episodic_return_mean",
        "workers/1/episode_loss_mean",
    }
    assert [e.value for e in ea.Scalars("charts/episodic_return")] == [10.0, 11.0, 12.0, 20.0]
    assert [(e.step, e.value) for e in ea.Scalars("perf/policy_lag_max")] == [(200, 7.0), (400, 4.0)]
    assert [e.value for e in ea.Scalars("perf/policy_lag")] == pytest.approx([(3 + 7 + 2) / 3, 4.0])
    assert [e.value for e in ea.Scalars("perf/nonfinite_samples")] == [0.0, 3.0, 3.0]  # summed over workers


def test_policy_lag_max_without_an_interval_source_uses_the_newest_tagged_interval(tmp_path):
    run = RunDirectory(tmp_path)
    board = EpisodeBoard(2, capacity=8)
    dash = Dashboard(run, coordinator_for(board), total_steps=100, reward_threshold=None, start_time=0.0, clock=clock())
    update(board, 0, 9, 4)  # worker 0 last updated in interval 4
    update(board, 1, 5, 5)  # worker 1 is in interval 5: only its maximum is of the ending interval
    board.add_steps(0, 10)
    dash.tick()
    update(board, 0, 2, 6)  # the next interval: worker 0's new, smaller maximum replaces its 9 of interval 4
    board.add_steps(0, 10)
    dash.tick()
    board.add_steps(0, 10)  # no update since: no new interval, no point
    dash.tick()
    dash.close()
    assert [e.value for e in read_events(tmp_path).Scalars("perf/policy_lag_max")] == [5.0, 2.0]


def test_custom_scalars_layout_groups_every_worker_of_a_metric_in_one_chart(dashboard):
    dash, _, _ = dashboard
    dash.close()
    ea = read_events(dash.run.path)
    content = ea.PluginTagToContent("custom_scalars")
    assert content  # the plugin's config tag
    layout = layout_pb2.Layout()
    layout.ParseFromString(ea.Tensors(next(iter(content))).pop().tensor_proto.string_val[0])
    charts = {(c.title, chart.title): list(chart.multiline.tag) for c in layout.category for chart in c.chart}
    assert [c.title for c in layout.category] == list(custom_scalars_layout())
    every_return = charts[("return", "every worker")]
    every_loss = charts[("loss", "every worker (episode mean)")]
    for rank in (0, 1, 15):
        assert any(re.search(rx, f"workers/{rank}/episodic_return") for rx in every_return)
        assert any(re.search(rx, f"workers/{rank}/episode_loss") for rx in every_loss)
    assert not any(re.search(rx, "workers/0/episode_loss") for rx in every_return)
    assert any(re.search(rx, "charts/episodic_return") for rx in charts[("return", "all workers")])
    lag = charts[("perf", "policy lag (mean, max)")]
    assert any(re.search(rx, "perf/policy_lag_max") for rx in lag) and any(
        re.search(rx, "perf/policy_lag") for rx in lag
    )


def test_hparams_hold_the_configuration_and_the_final_metrics(dashboard):
    dash, board, _ = dashboard
    board.add_steps(0, 500)
    config = {"lr": 0.001, "workers": 3, "env": "CartPole-v1", "hidden_sizes": [64, 64], "resume": None}
    summary = {"mean_return_100": 123.5, "steps_per_s": 4000.0, "solved_at_step": None}
    dash.write_hparams(config, summary)
    dash.close()
    ea = read_events(dash.run.path)
    content = ea.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    assert start.hparams["lr"].number_value == pytest.approx(0.001)
    assert start.hparams["workers"].number_value == 3
    assert start.hparams["env"].string_value == "CartPole-v1"
    assert start.hparams["hidden_sizes"].string_value == "[64, 64]"
    assert start.hparams["resume"].string_value == "None"
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    assert {m.name.tag for m in experiment.metric_infos} == set(HPARAM_METRICS.values())
    assert [(e.step, e.value) for e in ea.Scalars("final/mean_return_100")] == [(500, 123.5)]
    assert "final/solved_at_step" not in ea.Tags()["scalars"]  # not solved: declared, left empty


def test_hparam_values_keep_numbers_and_write_the_rest_as_text():
    values = hparam_values({"a": 1, "b": 0.5, "c": "x", "d": True, "e": None, "f": (1, 2), "g": {"k": 1}})
    assert values == {"a": 1, "b": 0.5, "c": "x", "d": "True", "e": "None", "f": "[1, 2]", "g": '{"k": 1}'}


def test_loss_history_figure_is_refreshed_during_the_run_and_published_as_an_image(tmp_path):
    run = RunDirectory(tmp_path)
    run.plots.mkdir()
    board = EpisodeBoard(2, capacity=64)
    dash = Dashboard(
        run, coordinator_for(board), total_steps=100, reward_threshold=None, start_time=0.0, plot_every_s=0.0
    )
    for i in range(5):
        for rank in range(2):
            board.write(rank, episode(ret=1.0, loss=float(i + rank), global_step=10 * i, wall_time=float(i)))
        board.add_steps(0, 10)
        dash.tick()
    dash._collect_plot(wait=True)  # the refresh in flight, as the next tick would pick it up
    assert (run.plots / "loss_history.png").read_bytes()[:4] == b"\x89PNG"
    dash.save_loss_history()
    dash.close()
    ea = read_events(tmp_path)
    images = ea.Images(LOSS_HISTORY_TAG)
    assert len(images) >= 2  # at least one refresh during the ticks, and the final one
    assert images[-1].step == 50
    png = (run.plots / "loss_history.png").read_bytes()
    assert images[-1].encoded_image_string == png
    assert (images[-1].height, images[-1].width) == png_size(png)


def test_per_episode_points_are_rate_limited_and_the_interval_aggregates_stay_exact(tmp_path):
    """2 workers, 600 episodes each over 6 s of episode wall time, read in 6 ticks that each end an interval: at
    1 point/s a group writes at most one sample per second of episode time, while the mean/min/max/count of every
    interval are those of all of its episodes (checked against episodes.csv, which keeps every episode)."""
    run = RunDirectory(tmp_path)
    run.plots.mkdir()
    board = EpisodeBoard(2, capacity=1024)
    dash = Dashboard(
        run, coordinator_for(board), total_steps=10**9, reward_threshold=None, start_time=0.0, clock=clock()
    )
    rng = np.random.default_rng(0)
    step, per_tick = 0, []
    for second in range(6):
        batch = []
        for i in range(100):
            for rank in range(2):
                step += 7
                ret, loss = float(rng.normal(50, 20)), float(rng.normal())
                t = second + (2 * i + rank) / 200  # 200 episodes per second of wall time
                row = episode(ret=ret, loss=loss, global_step=step, wall_time=t)
                row[FIELD["length"]] = float(rng.integers(5, 500))
                board.write(rank, row)
                batch.append((rank, ret, row[FIELD["length"]], loss, step))
        board.add_steps(0, 1400)
        dash.tick()
        per_tick.append(batch)
    dash.close()

    with open(run.episodes_csv) as f:
        assert len(list(csv.DictReader(f))) == 1200  # the complete record
    ea = read_events(run.path)
    samples = ea.Scalars("charts/episodic_return")
    assert 5 <= len(samples) <= 6  # 1 per second of episode time, not 200
    assert len(ea.Scalars("charts/episodic_length")) == len(samples)
    returns32 = {float(np.float32(r)) for batch in per_tick for _, r, *_ in batch}  # TensorBoard stores float32
    assert all(e.value in returns32 for e in samples)  # each sample is a real episode's value
    for name, reduce in (("mean", np.mean), ("min", np.min), ("max", np.max)):
        got = [e.value for e in ea.Scalars(f"charts/episodic_return_{name}")]
        assert got == pytest.approx([reduce([r for _, r, *_ in b]) for b in per_tick], rel=1e-6), name
        got = [e.value for e in ea.Scalars(f"charts/episodic_length_{name}")]
        assert got == pytest.approx([reduce([n for _, _, n, *_ in b]) for b in per_tick], rel=1e-6), name
    assert [e.value for e in ea.Scalars("charts/episodes")] == [200.0] * 6
    assert [e.step for e in ea.Scalars("charts/episodic_return_mean")] == [max(b[-1][4], b[-2][4]) for b in per_tick]
    for rank in range(2):
        w = worker_events(run, rank)
        assert 5 <= len(w.Scalars(f"workers/{rank}/episodic_return")) <= 6
        mine = [[e for e in b if e[0] == rank] for b in per_tick]
        got = [e.value for e in w.Scalars(f"workers/{rank}/episode_loss_mean")]
        assert got == pytest.approx([np.mean([e[3] for e in b]) for b in mine], rel=1e-6)
        got = [e.value for e in w.Scalars(f"workers/{rank}/episodic_return_mean")]
        assert got == pytest.approx([np.mean([e[1] for e in b]) for b in mine], rel=1e-6)


def test_zero_points_per_s_writes_every_episode(tmp_path):
    run = RunDirectory(tmp_path)
    board = EpisodeBoard(1, capacity=64)
    dash = Dashboard(
        run, coordinator_for(board), total_steps=100, reward_threshold=None, start_time=0.0, points_per_s=0.0
    )
    for i in range(20):
        board.write(0, episode(ret=float(i), loss=0.0, global_step=i, wall_time=0.001 * i))
    board.add_steps(0, 20)
    dash.tick()
    dash.close()
    assert [e.value for e in read_events(tmp_path).Scalars("charts/episodic_return")] == [float(i) for i in range(20)]
    assert len(worker_events(run, 0).Scalars("workers/0/episodic_return")) == 20


def test_zero_points_per_s_writes_an_episode_read_after_a_later_ending_one(tmp_path):
    """Workers publish in their own rhythm: an episode that ended earlier (wall time) can be read in a later tick
    than another worker's later-ending one. With points_per_s = 0 it is written all the same (it was dropped: the
    sampler compared its wall time with the last sample's, and TensorBoard then held fewer points than episodes.csv
    rows in the kill -9 resume test)."""
    run = RunDirectory(tmp_path)
    board = EpisodeBoard(2, capacity=64)
    dash = Dashboard(
        run, coordinator_for(board), total_steps=100, reward_threshold=None, start_time=0.0, points_per_s=0.0
    )
    board.write(1, episode(ret=1.0, loss=0.0, global_step=10, wall_time=2.0))
    board.add_steps(1, 10)
    dash.tick()
    board.write(0, episode(ret=2.0, loss=0.0, global_step=20, wall_time=1.0))  # ended first, read second
    board.add_steps(0, 10)
    dash.tick()
    dash.close()
    assert [e.value for e in read_events(tmp_path).Scalars("charts/episodic_return")] == [1.0, 2.0]


def test_purge_on_resume_reaches_every_event_stream(tmp_path):
    """What a resume writes: TensorBoard drops, in the run's stream and in each worker's, the points at or after the
    checkpoint's step that an earlier session wrote."""
    run = RunDirectory(tmp_path)
    board = EpisodeBoard(2, capacity=64)
    first = Dashboard(
        run, coordinator_for(board), total_steps=10**6, reward_threshold=None, start_time=0.0, clock=clock()
    )
    for step in (100, 200, 300):
        for rank in range(2):
            board.write(rank, episode(ret=float(step), loss=0.0, global_step=step, wall_time=step / 10))
        board.add_steps(0, 100)
        first.tick()
    first.close()  # "crashed" after step 300; the checkpoint was at step 200
    an_earlier_session(tmp_path)
    second = Dashboard(
        run, coordinator_for(EpisodeBoard(2, capacity=64)), total_steps=10**6, reward_threshold=None, start_time=0.0
    )
    second.tensorboard.purge_from(200)
    second.close()
    assert [e.step for e in read_events(tmp_path).Scalars("charts/episodic_return")] == [100]
    for rank in range(2):
        assert [e.step for e in worker_events(run, rank).Scalars(f"workers/{rank}/episodic_return")] == [100]


def test_purge_on_resume_reaches_the_streams_of_ranks_the_session_no_longer_runs(tmp_path):
    """Bug (issue 22, item 9): the purge reached the streams of the resumed session's ranks only; resumed with fewer
    workers, worker 1's points past the checkpoint stayed in TensorBoard, though episodes.csv dropped them."""
    run = RunDirectory(tmp_path)
    board = EpisodeBoard(2, capacity=64)
    first = Dashboard(
        run, coordinator_for(board), total_steps=10**6, reward_threshold=None, start_time=0.0, points_per_s=0.0
    )
    for step in (100, 200, 300):
        for rank in range(2):
            board.write(rank, episode(ret=float(step), loss=0.0, global_step=step, wall_time=step / 10))
        board.add_steps(0, 100)
        first.tick()
    first.close()  # "crashed" after step 300; the checkpoint was at step 200
    an_earlier_session(tmp_path)
    second = Dashboard(
        run, coordinator_for(EpisodeBoard(1, capacity=64)), total_steps=10**6, reward_threshold=None, start_time=0.0
    )
    second.resume([], 200, restarts=0)
    second.close()
    for rank in range(2):
        assert [e.step for e in worker_events(run, rank).Scalars(f"workers/{rank}/episodic_return")] == [100]


def kept_row(worker: int, index: int, ret: float, global_step: int, wall_time: float) -> dict[str, float]:
    """An episodes.csv row as trim_episode_log returns it."""
    row = dict(zip(FIELDS, episode(ret, 0.5, global_step, wall_time).tolist(), strict=True))
    return {"worker": float(worker), "index": float(index), **row}


def test_resume_takes_the_last_100_episodes_by_global_step(tmp_path):
    """Bug (issue 22, item 4): the resume replayed the kept rows in wall-time order, and wall time began at 0 again
    in each session, so the sessions interleaved: "the last 100 episodes" mixed old and new ones (mean_return_100 of
    155.3 where the last 100 by global step averaged 128.0), and solved_at_step could fire on an earlier session's
    episodes. Two sessions of 100 episodes, each with wall times 0..9.9 s: the first returns 0, the second 10."""
    kept = [kept_row(0, i, 0.0, 10 * (i + 1), 0.1 * i) for i in range(100)]
    kept += [kept_row(0, 100 + i, 10.0, 1000 + 10 * (i + 1), 0.1 * i + 0.05) for i in range(100)]
    run = RunDirectory(tmp_path)
    dash = Dashboard(
        run, coordinator_for(EpisodeBoard(1, capacity=64)), total_steps=10**6, reward_threshold=10.0, start_time=0.0
    )
    try:
        dash.resume(kept[::-1], 2001, restarts=0)  # (the replay's order is the rows' global step, not the file's)
        assert dash.episodes == 200
        assert dash.mean_return_100() == 10.0
        assert (dash.solved_at_step, dash.solved_at_s) == (2000, pytest.approx(9.95))
        # replayed episodes put the run's first solve on record, but are not this session's: --stop-when-solved
        # stops on a window this session's own episodes complete (a collapsed run trains back to solved)
        assert not dash.solved() and dash.threshold_met is None
    finally:
        dash.close()


def test_the_last_100_episodes_are_the_last_by_global_step_whatever_order_they_are_read_in(tmp_path):
    """Workers publish at the end of their rollouts, so an episode can be read after one of a larger global step:
    mean_return_100 is over the 100 largest steps (ties by worker, then index), as episodes.csv sorted by them."""
    board = EpisodeBoard(2, capacity=256)
    run = RunDirectory(tmp_path)
    dash = Dashboard(run, coordinator_for(board), 10**6, reward_threshold=None, start_time=0.0, points_per_s=0.0)
    rng = np.random.default_rng(0)
    try:
        for tick in range(6):
            for rank in range(2):
                for i in range(20):  # worker 1 runs 15 steps behind worker 0: its episodes arrive late
                    step = 100 * tick + 5 * i - 15 * rank
                    board.write(rank, episode(ret=float(rng.integers(0, 500)), loss=0.0, global_step=step, wall_time=0))
            board.add_steps(0, 100)
            dash.tick()
        dash.log.sync()
        order = ("global_step", "worker", "index")
        with open(run.episodes_csv) as f:
            rows = sorted(csv.DictReader(f), key=lambda r: [int(float(r[k])) for k in order])
        assert dash.mean_return_100() == np.mean([float(r["return"]) for r in rows[-100:]])
    finally:
        dash.close()


def test_a_tensorboard_writer_that_fails_to_open_puts_the_excepthook_back(tmp_path, monkeypatch):
    """The writer quiets its event threads' OSErrors by replacing threading.excepthook; when its SummaryWriter cannot
    be made (a full disk at the start) there is no writer to close, and the hook must be the process's again."""
    import threading

    import a3c.record.tensorboard_writer as tensorboard_writer

    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    before = threading.excepthook
    monkeypatch.setattr(tensorboard_writer, "SummaryWriter", refuse)
    with pytest.raises(Exception, match="No space left on device"):
        tensorboard_writer.TensorBoardWriter(tmp_path / "tb", workers=2)
    assert threading.excepthook is before


@pytest.mark.parametrize("with_origin", [True, False])
def test_the_first_perf_point_counts_from_the_sessions_start(tmp_path, with_origin):
    """The trainer builds the dashboard after launching the workers: a short run can have taken all its steps by
    then. Measured from the session's start (``origin``, taken before the launch), the first perf point counts
    every step; measured from the dashboard's construction (no origin) it saw none, and charts/SPS was never
    written."""
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    run.plots.mkdir()
    board = EpisodeBoard(WORKERS, capacity=64)
    source = coordinator_for(board)
    times = itertools.count(1000.0, 10.0)
    origin = (next(times), source.global_step(), source.stats().copy())  # the session starts at t = 1000 s
    board.add_steps(0, 500)  # every step of the run, taken before the dashboard exists
    update(board, 0, 2, 0)
    dash = Dashboard(
        run,
        source,
        total_steps=500,
        reward_threshold=None,
        start_time=0.0,
        clock=times.__next__,
        origin=origin if with_origin else None,
    )
    dash.tick()
    dash.close()
    tags = set(read_events(run.path).Tags()["scalars"])
    if not with_origin:
        assert "charts/SPS" not in tags  # what the origin is for
        return
    points = read_events(run.path).Scalars("charts/SPS")
    assert [p.step for p in points] == [500]
    seconds = 500 / points[0].value  # from the origin (t = 1000 s) to the tick, a whole number of 10 s readings
    assert 10 <= seconds <= 60 and seconds / 10 == pytest.approx(round(seconds / 10), abs=1e-4)


def test_non_finite_returns_stay_out_of_the_100_episode_mean(tmp_path):
    """Found by probing: a +inf and a -inf return in one window crashed the run in math.fsum (a traceback, no final
    checkpoint, no summary); a NaN or an inf alone made the mean NaN or inf, summary.json then held NaN (not JSON),
    and --stop-at declared a solve at an inf mean. The window's mean is that of its finite returns."""
    run = RunDirectory(tmp_path)
    board = EpisodeBoard(1, capacity=128)
    dash = Dashboard(run, coordinator_for(board), total_steps=1000, reward_threshold=31.0, start_time=0.0)
    returns = [30.0] * 96 + [np.inf, -np.inf, np.nan, 30.0]
    for step, ret in enumerate(returns, start=1):
        board.write(0, episode(ret=ret, loss=0.0, global_step=step, wall_time=float(step)))
        board.add_steps(0, 1)
    dash.tick()
    assert dash.mean_return_100() == 30.0
    assert not dash.solved() and dash.best_window == (30.0, 100)
    dash.close()


def test_a_window_without_a_finite_return_has_no_mean(tmp_path):
    run = RunDirectory(tmp_path)
    board = EpisodeBoard(1, capacity=64)
    dash = Dashboard(run, coordinator_for(board), total_steps=100, reward_threshold=1.0, start_time=0.0)
    board.write(0, episode(ret=np.inf, loss=0.0, global_step=1, wall_time=1.0))
    board.add_steps(0, 1)
    dash.tick()
    assert dash.mean_return_100() is None and not dash.solved()
    dash.close()


def test_finite_returns_whose_sum_overflows_have_a_mean(tmp_path):
    """Found reading the window's mean: finite returns near the float's limit (a broken env's 1.5e308) made math.fsum
    raise OverflowError in the dashboard's tick (the run crashed as with +inf beside -inf). Their mean is a float."""
    run = RunDirectory(tmp_path)
    board = EpisodeBoard(1, capacity=128)
    dash = Dashboard(run, coordinator_for(board), total_steps=1000, reward_threshold=None, start_time=0.0)
    for step in range(1, 101):
        board.write(0, episode(ret=1.5e308, loss=0.0, global_step=step, wall_time=float(step)))
        board.add_steps(0, 1)
    dash.tick()
    assert dash.mean_return_100() == 1.5e308
    dash.close()


def test_a_solve_is_dated_by_the_newest_episode_of_its_window(tmp_path):
    """Found by probing: a worker publishes its episodes after its update, so an episode can reach the main process
    after newer ones; the solve (and the best window) was dated by the episode just added, an old one: "solved at
    step 60" with 3 episodes ended by step 60 (the window's 100 episodes had ended by step 1,144). The step and time
    of a window are those of its newest episode."""
    run = RunDirectory(tmp_path)
    board = EpisodeBoard(2, capacity=128)
    dash = Dashboard(run, coordinator_for(board), total_steps=100_000, reward_threshold=15.0, start_time=0.0)
    for i in range(1, 100):  # worker 0's 99 episodes, steps 100 .. 9,900
        board.write(0, episode(ret=20.0, loss=0.0, global_step=100 * i, wall_time=float(i)))
        board.add_steps(0, 100)
    dash.tick()
    assert dash.solved_at_step is None  # 99 episodes: no window yet
    board.write(1, episode(ret=20.0, loss=0.0, global_step=60, wall_time=0.5))  # worker 1's first, published late
    dash.tick()
    assert (dash.solved_at_step, dash.solved_at_s) == (9900, 99.0)
    assert dash.threshold_met == (9900, 99.0, 20.0) and dash.best_window == (20.0, 9900)
    dash.close()
