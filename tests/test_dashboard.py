"""The dashboard without worker processes: a board filled by hand, ticks, and the event file read back with
TensorBoard's own EventAccumulator (scalars, policy lag per interval, custom-scalars layout, hparams, image)."""

import re

import numpy as np
import pytest
import torch
from procs import DESIGN_TAGS
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.custom_scalar import layout_pb2
from tensorboard.plugins.hparams import plugin_data_pb2

from a3c.backends.shared_memory import SharedMemoryCoordinator, SharedRun
from a3c.board import FIELD, FIELDS, EpisodeBoard, Stat
from a3c.dashboard import HPARAM_METRICS, LOSS_HISTORY_TAG, Dashboard, custom_scalars_layout, hparam_values
from a3c.optim import make_optimizer
from a3c.plots import png_size
from a3c.run_dir import RunDirectory

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
    ea = EventAccumulator(str(path), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    ea.Reload()
    return ea


@pytest.fixture
def dashboard(tmp_path):
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    run.plots.mkdir()
    board = EpisodeBoard(WORKERS, capacity=64)
    interval = Interval()
    dash = Dashboard(
        run, coordinator_for(board), total_steps=10_000, reward_threshold=None, start_time=0.0, interval=interval
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
    board.add_steps(1, 200)
    dash.tick()
    interval.value += 1
    # interval 2: nobody updates, steps move on: no lag point for it
    board.add_steps(2, 200)
    dash.tick()
    dash.close()

    ea = read_events(dash.run.path)
    tags = set(ea.Tags()["scalars"])
    for rank in range(WORKERS):
        assert {f"workers/{rank}/episodic_return", f"workers/{rank}/episode_loss"} <= tags
    expected = DESIGN_TAGS | {"perf/policy_lag_max"}
    assert expected <= tags, expected - tags
    assert [(e.step, e.value) for e in ea.Scalars("workers/0/episodic_return")] == [(100, 10.0), (300, 20.0)]
    assert [e.value for e in ea.Scalars("workers/2/episodic_return")] == [12.0]
    assert [e.value for e in ea.Scalars("charts/episodic_return")] == [10.0, 11.0, 12.0, 20.0]
    assert [(e.step, e.value) for e in ea.Scalars("perf/policy_lag_max")] == [(200, 7.0), (400, 4.0)]
    assert [e.value for e in ea.Scalars("perf/policy_lag")] == pytest.approx([(3 + 7 + 2) / 3, 4.0])


def test_policy_lag_max_without_an_interval_source_uses_the_newest_tagged_interval(tmp_path):
    run = RunDirectory(tmp_path)
    board = EpisodeBoard(2, capacity=8)
    dash = Dashboard(run, coordinator_for(board), total_steps=100, reward_threshold=None, start_time=0.0)
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
