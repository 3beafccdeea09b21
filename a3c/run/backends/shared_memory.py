"""The shared-memory backend (the default): the global parameters, the optimizer state, the episode board and the
control flags are tensors in shared memory on this machine; workers are processes that reach them Hogwild-style,
without locks. ``SharedMemoryCoordinator`` is the main process's side, ``SharedMemoryChannel`` a worker's (sent to
the worker process by pickling: torch passes its tensors as shared memory), ``ProcessLauncher`` starts the processes.

The same coordinator serves the serial backend (a3c/run/backends/serial.py), whose workers run in this process: the
tensors are then simply memory, and the channel is the same code.
"""

from __future__ import annotations

import multiprocessing.forkserver
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import torch

from a3c.learn.distributions import Distribution
from a3c.learn.model import build_model, flatten_parameters
from a3c.learn.optim import _SharedOptimizer, make_optimizer
from a3c.learn.running_stats import SharedMoments
from a3c.record.rows import Episode, Stat
from a3c.run.backends import TERMINATE_GRACE_S
from a3c.run.board import BoardReader, EpisodeBoard
from a3c.run.child_signals import children_begin_with_stop_signals_blocked
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec
from a3c.spec.errors import UserError
from a3c.spec.seeding import model_init_seed

STOP, INTERVAL = 0, 1  # slots of the control tensor; the main process is their only writer
# per-worker stats that count over the whole run (restored on resume); the others are gauges of a live process
CUMULATIVE_STATS = (
    Stat.UPDATES,
    Stat.SKIPPED,
    Stat.GRAD_NORM_SUM,
    Stat.LAG_SUM,
    Stat.NONFINITE_SAMPLES,
    Stat.DROPPED_MINIBATCHES,
    Stat.DROPPED_SAMPLES,
)


@dataclass
class SharedRun:
    """The shared state of a run, what every channel and the coordinator hold (picklable: tensors travel as shared
    memory). ``obs_stats``/``reward_stats``: the running statistics of --normalize-obs/--normalize-reward, or None."""

    params: torch.Tensor
    optimizer: _SharedOptimizer
    board: EpisodeBoard
    total_steps: int
    obs_stats: SharedMoments | None = None
    reward_stats: SharedMoments | None = None


def create_shared_run(spec: EnvSpec, config: Config) -> tuple[SharedRun, torch.nn.Module, Distribution]:
    """The global model (initialised from --seed: the same weights in every backend), its parameters as one flat
    shared tensor, the shared optimizer, the episode board and the running statistics; and the model and its
    distribution (for what the main process needs to know about them)."""
    assert isinstance(config.workers, int), "resolve --workers auto first"
    torch.manual_seed(model_init_seed(config.seed))
    with _fits_in_memory():
        model, dist = build_model(spec, config)
        params, _ = flatten_parameters(model, shared=True)
        run = SharedRun(
            params,
            make_optimizer(config.optimizer, params, config.lr, slots=config.workers, eps=config.optimizer_eps),
            EpisodeBoard(config.workers),
            config.total_steps,
            obs_stats=SharedMoments(spec.obs_shape, config.workers) if config.normalize_obs else None,
            reward_stats=SharedMoments((), config.workers) if config.normalize_reward else None,
        )
    return run, model, dist


_TRIED = re.compile(r"allocate (\d+) bytes")


@contextmanager
def _fits_in_memory() -> Iterator[None]:
    """The model and the shared state too big for this machine (--hidden-sizes or --workers far too large): torch's
    allocator fails (RuntimeError "can't allocate memory", "not enough memory"; "Cannot allocate memory" from the
    shared-memory mapping; MemoryError): a user error in one line, not its traceback."""
    try:
        yield
    except (RuntimeError, MemoryError) as err:
        text = str(err)
        if not isinstance(err, MemoryError) and "allocate memory" not in text and "not enough memory" not in text:
            raise
        tried = _TRIED.search(text)
        size = f" (it asked for {int(tried[1]):,} bytes)" if tried else ""
        raise UserError(
            f"the model and the workers' shared state do not fit in this machine's memory{size}; give smaller "
            "--hidden-sizes or fewer --workers"
        ) from None


class SharedMemoryChannel:
    """A worker's view of the shared state (a3c.run.backends.WorkerChannel). Picklable."""

    def __init__(self, rank: int, run: SharedRun, control: torch.Tensor) -> None:
        self.rank, self.params, self.optimizer, self.board = rank, run.params, run.optimizer, run.board
        self.control, self.total_steps = control, run.total_steps
        self.obs_stats, self.reward_stats = run.obs_stats, run.reward_stats
        self._views: tuple[np.ndarray, np.ndarray] | None = None  # numpy views, made in the worker's process
        self._dest: tuple[torch.Tensor, np.ndarray] | None = None  # pull's destination and its view

    def __getstate__(self) -> dict[str, object]:
        # a numpy view would not travel as a view of the shared memory
        return {**self.__dict__, "_views": None, "_dest": None}

    def _numpy(self) -> tuple[np.ndarray, np.ndarray]:
        """(the shared parameters, the control slots) as numpy views: each read or copy through them costs a
        fraction of torch's dispatch, on every iteration of every worker."""
        if self._views is None:
            self._views = (self.params.detach().numpy(), self.control.numpy())
        return self._views

    def pull(self, dest: torch.Tensor) -> int:
        # one memcpy of the whole model; other workers may be writing (Hogwild)
        if self._dest is None or self._dest[0] is not dest:
            self._dest = (dest, dest.detach().numpy())
        np.copyto(self._dest[1], self._numpy()[0])
        return self.optimizer.step_count()

    def push(self, grad: torch.Tensor, pulled_at: int, lr: float) -> int:
        """The gradient handoff. The worker's gradient lives in its own (private) flat buffer; the shared optimizer
        reads it and updates the shared parameters and shared moments in place. No gradient tensor is ever shared,
        so there is no `.grad` of the global model to keep alive across processes (the usual Hogwild pitfall), and
        workers never see each other's half-written gradients: only parameter and moment updates interleave. The
        gradient comes clipped and ``lr`` scheduled (a3c.learn.update.step): the transport only applies them."""
        return self.optimizer.step(grad, slot=self.rank, lr=lr) - pulled_at  # the steps others took since the pull

    def should_stop(self) -> bool:
        return bool(self._numpy()[1][STOP]) or self.board.global_step() >= self.total_steps

    def interval(self) -> int:
        return int(self._numpy()[1][INTERVAL])

    def global_step(self) -> int:
        return self.board.global_step()

    def load_stats(self) -> np.ndarray:
        return self.board.stats.numpy()[self.rank].copy()

    def publish(self, steps: int, episodes: Sequence[np.ndarray], stats: np.ndarray) -> None:
        # the steps first: an episode the main process can read is then always within the global step it reads
        # after it (a checkpoint's global_step covers every episode it counts)
        if steps:
            self.board.add_steps(self.rank, steps)
        for row in episodes:  # each row is published by its counter (a3c.run.board's write protocol)
            self.board.write(self.rank, row)
        # one slice assignment: a worker killed (SIGKILL) mid-publish leaves its stats row either before or after
        # this batch, never with the counters half-advanced
        self.board.stats.numpy()[self.rank] = stats

    def all_ready(self) -> bool:
        return bool(self.board.stats.numpy()[:, Stat.READY].all())


class SharedMemoryCoordinator:
    """The main process's view (a3c.run.backends.Coordinator)."""

    def __init__(self, run: SharedRun) -> None:
        if not run.params.is_shared():
            raise ValueError("the global parameters must be in shared memory")
        self.run = run
        self.params, self.optimizer, self.board, self.total_steps = (
            run.params,
            run.optimizer,
            run.board,
            run.total_steps,
        )
        self.workers = run.board.workers
        self.control = torch.zeros(2, dtype=torch.int64).share_memory_()
        self.reader = BoardReader(run.board)
        # the episode counters of ranks an earlier session ran and this one does not (ranks workers.. on), as
        # restored: carried into every snapshot, so that no checkpoint forgets them (see restore)
        self.retired_written = torch.zeros(0, dtype=torch.int64)

    def channel(self, rank: int) -> SharedMemoryChannel:
        return SharedMemoryChannel(rank, self.run, self.control)

    # -- reading -----------------------------------------------------------------------------------------------
    def drain(self) -> list[Episode]:
        return self.reader.drain()

    @property
    def lost(self) -> int:
        return self.reader.lost

    def episodes_read(self) -> np.ndarray:
        return self.reader.read.copy()

    def stats(self) -> np.ndarray:
        return self.board.stats.numpy()

    def global_step(self) -> int:
        return self.board.global_step()

    # -- control -----------------------------------------------------------------------------------------------
    def should_stop(self) -> bool:
        return bool(self.control[STOP]) or self.global_step() >= self.total_steps

    def request_stop(self) -> None:
        self.control[STOP] = 1

    def interval(self) -> int:
        return int(self.control[INTERVAL])

    def next_interval(self) -> None:
        self.control[INTERVAL] += 1

    # -- checkpoints -------------------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The per-rank vectors cover every rank the run has had: this session's ranks, then those it does not run
        (their episode counters as restored; their steps and cumulative stats are rank 0's since the restore)."""
        steps = self.board.steps.clone()  # one read of the counters: global_step is exactly their sum
        retired = len(self.retired_written)
        stats = self.board.stats.clone()
        return {
            "model": self.params.clone(),
            "optimizer": self.optimizer.state_dict(),
            "global_step": int(steps.sum()),
            "worker_steps": torch.cat([steps, torch.zeros(retired, dtype=steps.dtype)]),
            "episodes_written": torch.cat([torch.from_numpy(self.reader.read.copy()), self.retired_written]),
            "worker_stats": torch.cat([stats, torch.zeros(retired, stats.shape[1], dtype=stats.dtype)]),
            **self.running_stats(),
        }

    def running_stats(self) -> dict[str, Any]:
        """The merged normalisation statistics (what evaluation and a3c.load apply, frozen), by checkpoint key."""
        out = {}
        for key, shared in (("obs_stats", self.run.obs_stats), ("reward_stats", self.run.reward_stats)):
            if shared is not None:
                out[key] = shared.state_dict()
        return out

    def restore(self, payload: dict[str, Any]) -> None:
        """A resumed run may have another number of workers. Ranks beyond the new count give their steps and
        cumulative stats to rank 0 (so the global step and the run's totals stay exact) and keep their episode
        counters, which every later snapshot carries: a rank that comes back in a later session goes on with its
        indexes, and no resume drops its rows from episodes.csv (the record is append-only, docs/design.md). Ranks
        new to the run start at zero."""
        board, n = self.board, self.workers
        self.params.copy_(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        steps = payload["worker_steps"].to(torch.int64)
        written = payload["episodes_written"].to(torch.int64)
        saved_stats = payload["worker_stats"]
        m = min(n, len(steps))
        board.steps[:m] = steps[:m]
        board.steps[0] += steps[m:].sum()
        board.written[:m] = written[:m]
        self.retired_written = written[m:].clone()
        for col in CUMULATIVE_STATS:
            if col < saved_stats.shape[1]:  # a checkpoint older than a column has none of it
                board.stats[:m, col] = saved_stats[:m, col]
                board.stats[0, col] += saved_stats[m:, col].sum()
        for key, shared in (("obs_stats", self.run.obs_stats), ("reward_stats", self.run.reward_stats)):
            if shared is not None and key in payload:
                shared.load_state_dict(payload[key])
        self.reader = BoardReader(board, start=board.written.numpy())


# -- processes ---------------------------------------------------------------------------------------------------
@dataclass
class _Process:
    process: Any  # multiprocessing BaseProcess
    errors: Connection  # read end of this incarnation's traceback pipe
    started_at: float  # time.time() when start() returned


class ProcessLauncher:
    """Starts ``target(*args_for(rank), incarnation, errors_pipe)`` as a process per worker (a3c.run.backends.Launcher).

    Each worker process gets its own one-way pipe for its traceback (one writer per pipe, so a worker killed while
    writing cannot leave a lock held for the others, as a shared queue could)."""

    def __init__(
        self,
        ctx: Any,
        target: Callable[..., None],
        args_for: Callable[[int], tuple[Any, ...]],
        log: Callable[[str], None] | None = None,
        name: Callable[[int], str] = lambda rank: f"a3c-worker-{rank}",
    ) -> None:
        """``name``: each process's name (ps, the join's messages, multiprocessing.current_process().name)."""
        self.ctx, self.target, self.args_for, self.name = ctx, target, args_for, name
        self.procs: dict[int, _Process] = {}
        self.log = log or (lambda line: print(line, file=sys.stderr))

    def start(self, rank: int, incarnation: int) -> None:
        previous = self.procs.get(rank)
        if previous is not None:
            previous.errors.close()
        read_end, write_end = self.ctx.Pipe(duplex=False)
        process = self.ctx.Process(
            target=self.target,
            args=(*self.args_for(rank), incarnation, write_end),
            name=self.name(rank),
            daemon=True,
        )
        # Made with SIGINT and SIGTERM blocked (a3c.run.child_signals): the child begins with them blocked until it has
        # its own handling, and a Ctrl-C or SIGTERM that comes meanwhile reaches this process's handler when start()
        # returns, instead of being lost.
        # Under the fork server the child is forked by the server and begins with the server's mask: only the
        # server's own start is made so (a no-op where it runs), and start() runs with SIGINT live, as it may wait
        # seconds for the server's imports on a run's first start (a second Ctrl-C then still exits at once).
        method = self.ctx.get_start_method()
        with children_begin_with_stop_signals_blocked(method):
            if method == "forkserver":
                multiprocessing.forkserver.ensure_running()
            else:
                process.start()
        if method == "forkserver":
            process.start()
        write_end.close()  # the child has its own copy; ours would keep the pipe open forever
        self.procs[rank] = _Process(process, read_end, time.time())

    def exitcode(self, rank: int) -> int | None:
        return self.procs[rank].process.exitcode

    def running_since(self, rank: int) -> float | None:
        return self.procs[rank].started_at  # a process runs once start() returns (its imports are start-up)

    def traceback(self, rank: int) -> str | None:
        errors = self.procs[rank].errors
        try:
            if errors.poll(0.2):  # the worker sends before it exits; a short wait covers the pipe's latency
                return str(errors.recv())
        except (EOFError, OSError):
            pass
        return None

    def kill(self, rank: int) -> None:
        process = self.procs[rank].process
        process.kill()  # hung, maybe in C code: only SIGKILL is sure to end it
        process.join(timeout=5.0)

    def kill_all(self) -> None:
        for p in self.procs.values():
            if p.process.pid is not None and p.process.exitcode is None:
                try:
                    os.kill(p.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds in all for the workers to exit (after a stop request), then SIGTERM the
        stragglers: a worker's SIGTERM handler only sets a flag that its loop reads at the top (a3c.run.worker), so it
        finishes the update in hand and never leaves one half-applied. SIGKILL only for one still alive after that
        (stuck in an env step)."""
        deadline = time.monotonic() + timeout
        live = [p.process for p in self.procs.values()]
        for p in live:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        stragglers = [p for p in live if p.is_alive()]
        for p in stragglers:
            self.log(f"a3c: {p.name} did not stop within {timeout:g} s; terminating it")
            p.terminate()
        for p in stragglers:
            p.join(timeout=TERMINATE_GRACE_S)
            if p.is_alive():
                self.log(f"a3c: {p.name} ignored SIGTERM for {TERMINATE_GRACE_S:g} s; killing it")
                p.kill()
                p.join(timeout=1.0)
        for p in self.procs.values():
            p.errors.close()

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)

    def pids(self) -> list[int]:
        return [p.process.pid for p in self.procs.values() if p.process.pid is not None]
