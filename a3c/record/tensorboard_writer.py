"""The run's TensorBoard event streams (``TensorBoardWriter``): the all-workers tags, the hparams and the
loss-history image go to the run directory's own event file; each worker's tags (``workers/<rank>/...``) to an event
file of their own in ``workers/<rank>/``. TensorBoard colours lines by run, and each of those subdirectories is a run,
so in the multi-line charts every worker has its own colour. Also the custom-scalars layout (every worker of a metric
in one multi-line chart), written once, and the purge a resume writes into every stream.

Every write that fails (a full disk) raises a3c.record.run_dir.RunDirWriteError naming "its TensorBoard event files";
a writer thread's own failure is kept off stderr and raised at the next event or flush instead
(``_quiet_event_writer_threads``). What is written, and when, is the dashboard's (a3c/record/dashboard.py).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.compat.proto.summary_pb2 import Summary
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams
from torch.utils.tensorboard.writer import FileWriter

from a3c.record.episode_scalars import ALL
from a3c.record.figures import png_size
from a3c.record.run_dir import RunDirWriteError, writing

WORKERS_DIR = "workers"  # workers/<rank>/: each worker's event stream (a TensorBoard run of its own)
# Events each stream's writer thread may hold before add_event blocks (SummaryWriter's default is 10). The thread
# serialises each event and computes its CRC in pure Python (~0.1 ms); with 10 places, a tick that writes many
# events (--tb-episode-points-per-s 0 writes one per episode) blocks on every put and hands the GIL back and forth
# with the thread at each. With room for a tick's events the tick runs through and the thread drains after it.
TB_QUEUE = 4096
EVENT_FILES = (
    "its TensorBoard event files"  # what a3c.record.run_dir.RunDirWriteError names for a failed TensorBoard write
)
# final metrics of the hparams table: summary.json key -> scalar tag
HPARAM_METRICS: dict[str, str] = {
    "mean_return_100": "final/mean_return_100",
    "steps_per_s": "final/steps_per_s",
    "solved_at_step": "final/solved_at_step",
    "eval_best_mean_return": "final/eval_best_mean_return",
}


def custom_scalars_layout() -> dict[str, dict[str, list[Any]]]:
    """The custom-scalars dashboard: per category, charts side by side; each chart lists tag regexes."""
    return {
        "return": {
            "every worker": ["Multiline", [r"^workers/\d+/episodic_return$"]],
            "every worker (mean per interval)": ["Multiline", [r"^workers/\d+/episodic_return_mean$"]],
            "all workers": ["Multiline", ["^charts/episodic_return$"]],
            "all workers (mean, min, max per interval)": ["Multiline", [r"^charts/episodic_return_(mean|min|max)$"]],
            "episode length": ["Multiline", ["^charts/episodic_length$", "^charts/episodic_length_mean$"]],
        },
        "loss": {
            "every worker (episode mean)": ["Multiline", [r"^workers/\d+/episode_loss$"]],
            "every worker (mean per interval)": ["Multiline", [r"^workers/\d+/episode_loss_mean$"]],
            "all workers": ["Multiline", ["^losses/loss$", "^losses/policy_loss$", "^losses/value_loss$"]],
            "entropy": ["Multiline", ["^losses/entropy$"]],
            "approx_kl, every worker (--algo ppo)": ["Multiline", [r"^workers/\d+/approx_kl$", "^losses/approx_kl$"]],
            "clip fraction, every worker (--algo ppo)": [
                "Multiline",
                [r"^workers/\d+/clip_fraction$", "^losses/clip_fraction$"],
            ],
            "explained variance (--algo ppo)": ["Multiline", [r"^workers/\d+/explained_variance$"]],
        },
        "eval": {  # a3c.run.evaluator: the policy (--eval-stochastic: its samples), on the evaluator's own envs
            "mean and std of the return": ["Multiline", ["^eval/mean_return$", "^eval/std_return$"]],
            "mean episode length": ["Multiline", ["^eval/mean_length$"]],
        },
        "perf": {
            "policy lag (mean, max)": ["Multiline", ["^perf/policy_lag$", "^perf/policy_lag_max$"]],
            "steps per second": ["Multiline", ["^charts/SPS$"]],
            "updates per second": ["Multiline", ["^perf/updates_per_s$"]],
            "gradient norm (before clipping)": ["Multiline", ["^perf/grad_norm$"]],
            "faults": [
                "Multiline",
                ["^perf/skipped_updates$", "^perf/nonfinite_samples$", "^perf/restarts$", "^perf/lost_episodes$"],
            ],
        },
    }


def hparam_values(config: Mapping[str, Any]) -> dict[str, int | float | str]:
    """Config values as TensorBoard hparams accept them: numbers stay numbers, everything else becomes text."""
    out: dict[str, int | float | str] = {}
    for key, value in config.items():
        if isinstance(value, bool) or value is None:
            out[key] = str(value)
        elif isinstance(value, (int, float, str)):
            out[key] = value
        else:
            out[key] = json.dumps(value, sort_keys=True)
    return out


class TensorBoardWriter:
    """The event streams of the run in ``path``: the run's own, and one per worker rank (``workers`` of them at the
    start; a rank beyond them gets its stream when first written to). The custom-scalars layout is written at once."""

    def __init__(self, path: Path, workers: int) -> None:
        self.path = Path(path)
        self._restore_excepthook = _quiet_event_writer_threads()
        try:
            with writing(EVENT_FILES):
                self.writer = SummaryWriter(log_dir=str(self.path), flush_secs=1, max_queue=TB_QUEUE)
                self.worker_writers = {r: self._worker_writer(r) for r in range(workers)}
                self.writer.add_custom_scalars(custom_scalars_layout())
        except BaseException:
            self._restore_excepthook()  # no writer to close later: the process's excepthook as it was
            raise
        self._dirty: set[int] = set()  # groups written since the last flush

    def _worker_writer(self, rank: int) -> SummaryWriter:
        with writing(EVENT_FILES):
            return SummaryWriter(log_dir=str(self.path / WORKERS_DIR / str(rank)), flush_secs=1, max_queue=TB_QUEUE)

    def _writer(self, group: int) -> SummaryWriter:
        if group == ALL:
            return self.writer
        if group not in self.worker_writers:  # a rank beyond the board's (not expected; kept safe)
            self.worker_writers[group] = self._worker_writer(group)
        return self.worker_writers[group]

    def add_scalars(self, step: int, values: Mapping[str, float], group: int = ALL) -> None:
        """Several scalars at one step, as ONE event (what SummaryWriter.add_scalar writes, one value each, but
        batched), in the stream of ``group`` (ALL: the run's own; a rank: that worker's). The main process shares
        the cores with the workers: one add_scalar costs ~150 us of Python (proto building, queueing, and
        tensorboard's pure-Python CRC of every record), so batching the values of one step is worth it.
        TensorBoard reads each value of the event as a point of its own tag."""
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(v)) for tag, v in values.items()])
        writer = self._writer(group)
        with writing(EVENT_FILES):  # (a failed write of the writer's thread is raised here, at its next event)
            _file_writer(writer).add_event(Event(wall_time=time.time(), step=step, summary=summary))
        self._dirty.add(group)

    def flush(self) -> None:
        """Flush the streams written since the last flush (every dashboard tick)."""
        with writing(EVENT_FILES):
            for group in self._dirty:
                self._writer(group).flush()
        self._dirty.clear()

    def purge_from(self, step: int) -> None:
        """On resume: TensorBoard drops, in every stream, the events at or after ``step`` written before this point
        (what SummaryWriter(purge_step=...) writes): they came after the checkpoint, before a crash, and will be
        written again. Every worker stream in the run directory, those of ranks this session does not run too (an
        earlier session had more workers; their points after the checkpoint are not in episodes.csv either)."""
        for rank in self._worker_streams_on_disk():
            self._writer(rank)  # a writer of its own, so that the purge lands in that stream
        with writing(EVENT_FILES):
            for writer in (self.writer, *self.worker_writers.values()):
                _file_writer(writer).add_event(Event(step=step, session_log=SessionLog(status=SessionLog.START)))

    def _worker_streams_on_disk(self) -> list[int]:
        """The ranks with an event stream (workers/<rank>/) in the run directory."""
        workers = self.path / WORKERS_DIR
        found = workers.iterdir() if workers.is_dir() else ()
        return sorted(int(d.name) for d in found if d.is_dir() and d.name.isdigit())

    def add_image(self, tag: str, png: bytes, step: int) -> None:
        """A PNG as the image ``tag`` at ``step``, in the run's own stream."""
        height, width = png_size(png)
        image = Summary.Image(height=height, width=width, colorspace=4, encoded_image_string=png)
        with writing(EVENT_FILES):
            _file_writer(self.writer).add_summary(Summary(value=[Summary.Value(tag=tag, image=image)]), step)

    def write_hparams(self, config: Mapping[str, Any], summary: Mapping[str, Any], step: int) -> None:
        """The resolved configuration with the final metrics (at global step ``step``), in the run's own event file
        (TensorBoard's HPARAMS tab lists the run itself). Metrics that have no value (not solved) are declared but
        left empty."""
        experiment, start, end = hparams(hparam_values(config), {tag: 0.0 for tag in HPARAM_METRICS.values()})
        with writing(EVENT_FILES):
            for proto in (experiment, start, end):
                _file_writer(self.writer).add_summary(proto)
            for key, tag in HPARAM_METRICS.items():
                if summary.get(key) is not None:
                    self.writer.add_scalar(tag, float(summary[key]), step)
            self.writer.flush()

    def close(self) -> None:
        """Flush and close every stream, each attempted even when one fails; then the first failure is raised."""
        failures: list[RunDirWriteError] = []
        for writer in (self.writer, *self.worker_writers.values()):
            try:
                self._close_writer(writer)
            except RunDirWriteError as err:
                failures.append(err)
        self._restore_excepthook()
        if failures:
            raise failures[0]

    @staticmethod
    def _close_writer(writer: SummaryWriter) -> None:
        with writing(EVENT_FILES):
            writer.flush()
            writer.close()


def _file_writer(writer: SummaryWriter) -> FileWriter:
    """The writer's event file (SummaryWriter makes it in its constructor; torch types the attribute optional)."""
    assert writer.file_writer is not None
    return writer.file_writer


def _quiet_event_writer_threads() -> Callable[[], None]:
    """Keep the traceback of a TensorBoard writer thread that fails to write (a full disk) off stderr: its
    SummaryWriter raises the same OSError in this thread at the next event or flush, where it becomes a
    RunDirWriteError and ends the run with one line. Every other thread's exception goes to the hook as before.
    Returns the function that puts the previous hook back."""
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if isinstance(args.exc_value, OSError) and type(args.thread).__name__ == "_AsyncWriterThread":
            return  # tensorboard.summary.writer.event_file_writer's writer thread: raised again in add_event/flush
        previous(args)

    threading.excepthook = hook

    def restore() -> None:
        if threading.excepthook is hook:
            threading.excepthook = previous

    return restore
