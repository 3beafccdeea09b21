"""A worker's side of the Ray backend (a3c/run/backends/ray/__init__.py): ``RayChannel``, the WorkerChannel over
the parameter server's actor calls (one pipelined round trip per update, publishes riding on it), and ``RayWorker``,
the actor that runs one worker incarnation's loop (a3c.run.worker.Worker) on that channel, or, on the server's node,
on the shared-memory channel onto the server's state."""

from __future__ import annotations

import gc
import os
import pickle
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import ray
import torch

from a3c.run.backends.ray.server import RemoteMoments
from a3c.run.backends.shared_memory import SharedMemoryChannel
from a3c.run.threads import limit_native_threads
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec
from a3c.spec.seeding import WorkerSeeds

CONTROL_REFRESH_S = 0.1  # a worker that has not pushed for this long asks the server whether to stop
PUBLISH_HOLD_S = 0.05  # what a worker publishes rides on its next push, unless it has waited this long
# a worker at the start line asks the server this often whether every worker is there: each ask is a round trip
# (about 1.3 ms of CPU, the two ends together, measured here), and the workers already waiting would otherwise take
# the CPU that the last ones need to start (16 workers on 2 cores polling every 2 ms: 6-7% of a core each)
READY_POLL_S = 0.05


class RayChannel:
    """A worker's view (a3c.run.backends.WorkerChannel) over the parameter server. Picklable (an actor handle)."""

    def __init__(
        self,
        rank: int,
        server: Any,
        push_every: int,
        stats_shapes: dict[str, tuple[int, ...]] | None = None,
        shared_memory_node: str | None = None,
    ) -> None:
        self.rank, self.server, self.push_every = rank, server, push_every
        self.shared_memory_node = shared_memory_node  # the server's node, when workers there use shared memory
        shapes = stats_shapes or {}
        self.obs_stats = RemoteMoments(server, "obs_stats", shapes["obs_stats"]) if "obs_stats" in shapes else None
        self.reward_stats = RemoteMoments(server, "reward_stats", ()) if "reward_stats" in shapes else None
        self._weights: torch.Tensor | None = None
        self._version = 0
        self._control = (False, 0, 0)
        self._control_at = 0.0
        self._sum: torch.Tensor | None = None  # --push-every: the gradients summed so far, and how many
        self._summed = 0
        self._summed_from = 0  # the version the first of them was computed on
        # what publish() was given and not yet sent: [steps, [episode rows], stats row, since when]
        self._queued: list | None = None
        self._in_flight: Any = None  # the reply of the last push, not yet taken
        self._ready_asked_at = -READY_POLL_S

    def __getstate__(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "server": self.server,
            "push_every": self.push_every,
            "stats_shapes": {m.key: m.shape for m in (self.obs_stats, self.reward_stats) if m is not None},
            "shared_memory_node": self.shared_memory_node,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def same_node_channel(self) -> SharedMemoryChannel | None:
        """In a worker actor on ``shared_memory_node`` (the server's node, when the run lets workers there use shared
        memory): the shared-memory channel onto the server's state, to run the worker loop on instead of this one.
        Otherwise None."""
        if self.shared_memory_node is None or ray.get_runtime_context().get_node_id() != self.shared_memory_node:
            return None
        return pickle.loads(ray.get(self.server.shared_channel.remote(self.rank)))

    def _set_control(self, control: tuple[bool, int, int]) -> None:
        self._control, self._control_at = control, time.monotonic()

    def _refresh_control(self) -> None:
        if time.monotonic() - self._control_at > CONTROL_REFRESH_S:
            self._send_queued()
            self._set_control(ray.get(self.server.control.remote()))

    def _take_queued(self) -> tuple | None:
        """publish()'s arguments for everything queued since the last send (steps summed, rows in order, the
        newest stats row), or None."""
        if self._queued is None:
            return None
        steps, rows, stats, _ = self._queued
        self._queued = None
        return steps, (np.stack(rows).astype(np.float64).tobytes() if rows else None), stats.tobytes()

    def _send_queued(self) -> None:
        queued = self._take_queued()
        if queued is not None:
            self.server.publish.remote(self.rank, *queued)  # no wait: ordered before this worker's next call

    def _set_weights(self, version: int, weights: bytes) -> None:
        self._weights, self._version = torch.from_numpy(np.frombuffer(weights, dtype=np.float32).copy()), version

    def pull(self, dest: torch.Tensor) -> int:
        # the weights came with the newest push reply (or are fetched once, at the start)
        if self._weights is None:
            self._set_weights(*ray.get(self.server.weights.remote()))
        assert self._weights is not None
        with torch.no_grad():
            dest.copy_(self._weights)
        return self._version

    def _receive(self, reply: Any) -> int:
        lag, version, weights, control = pickle.loads(ray.get(reply))
        self._set_weights(version, weights)
        self._set_control(control)
        return lag

    def push(self, grad: torch.Tensor, pulled_at: int, lr: float) -> int:
        """Pipelined: the gradient is sent, then the reply to the PREVIOUS push is taken (it has had a whole rollout
        to arrive), so the round trip overlaps the next rollout instead of stalling the loop. The next rollout then
        acts on the weights from before this update (one more update of policy lag, measured as such by the server:
        the A3C trade of staleness for throughput). Returns the previous push's lag (0 for the first). With
        --push-every n the n gradients are summed and applied at the last one's ``lr``."""
        if self.push_every > 1:
            if self._sum is None:
                self._sum, self._summed_from = grad.clone(), pulled_at
            else:
                self._sum += grad
            self._summed += 1
            if self._summed < self.push_every:
                return self._version - pulled_at  # nothing applied yet: no update has come in between
            grad, pulled_at, self._sum, self._summed = self._sum, self._summed_from, None, 0
        message = (self.rank, grad.numpy().tobytes(), pulled_at, lr, self._take_queued())
        sent = self.server.push.remote(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))
        previous, self._in_flight = self._in_flight, sent
        return 0 if previous is None else self._receive(previous)

    def should_stop(self) -> bool:
        self._refresh_control()
        return self._control[0]

    def interval(self) -> int:
        return self._control[1]

    def global_step(self) -> int:
        return self._control[2]  # as of this worker's last push: at most the step at its next publish

    def load_stats(self) -> np.ndarray:
        return np.array(ray.get(self.server.load_stats.remote(self.rank)))  # a writable copy (Ray's is read-only)

    def publish(self, steps: int, episodes: Sequence[np.ndarray], stats: np.ndarray) -> None:
        """Queued, to ride on the next push (one call per iteration instead of two); sent on its own once it has
        waited PUBLISH_HOLD_S (a worker that skips updates still sends its heartbeat)."""
        now = time.monotonic()
        if self._queued is None:
            self._queued = [0, [], None, now]
        self._queued[0] += steps
        self._queued[1].extend(episodes)
        self._queued[2] = stats.copy()
        if now - self._queued[3] > PUBLISH_HOLD_S:
            self._send_queued()

    def all_ready(self) -> bool:
        """Asked at most every READY_POLL_S (the loop calls it every few ms): a worker learns that all are there at
        most that late, a small share of any run that needs Ray."""
        self._send_queued()  # this worker's READY first
        wait = self._ready_asked_at + READY_POLL_S - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        ready, control = ray.get(self.server.ready.remote())
        self._ready_asked_at = time.monotonic()
        self._set_control(control)
        return ready

    def flush(self) -> None:
        """Send what is queued and wait until the server has run every call this worker made (before it exits)."""
        self._send_queued()
        if self._in_flight is not None:
            self._receive(self._in_flight)
            self._in_flight = None
        ray.get(self.server.control.remote())


class RayWorker:
    """A worker actor: runs one worker incarnation's loop (a3c.run.worker.Worker) until its channel says stop."""

    def run(
        self,
        rank: int,
        channel: RayChannel,
        config: Config,
        spec: EnvSpec,
        run_start: float,
        session: int,
        incarnation: int,
    ) -> None:
        # imported in the actor's process: a3c.run.preload is what a fork server loads before forking worker processes,
        # the worker loop and what autograd's first backward imports (sympy, ~500 modules). Without it every worker's
        # first update paid that after the start line, inside the measured run (seconds on a busy machine)
        import a3c.run.preload  # noqa: F401
        from a3c.run.worker import Worker

        limit_native_threads()  # as in a worker process: N workers x M threads in each native pool would thrash
        # as in a worker process (a3c.run.worker.run_as_process): what is loaded by now (Ray, torch, gymnasium, a3c)
        # goes into a generation the garbage collector never scans again; a full collection would visit all of it
        gc.freeze()
        # on the server's node: the global state in place, as a worker process reaches it (nothing to flush: every
        # write is in shared memory when it returns)
        local = channel.same_node_channel()
        seeds = WorkerSeeds(config.seed, session, rank, incarnation)
        worker = Worker(rank, local or channel, config, spec, run_start, seeds)
        terminate = threading.Event()
        # A worker on shared memory applies its updates to the server's state itself (Hogwild): it must never die
        # inside one. The launcher ends it as ProcessLauncher ends a worker process (RayLauncher.join: SIGTERM, then
        # a kill only after TERMINATE_GRACE_S), and for this call the SIGTERM handler only sets a flag that the loop
        # reads at its top (as a3c.run.worker.run_as_process's), in place of Ray's, which raises SystemExit wherever the
        # loop is. A signal rather than an actor method: Ray runs one call of an actor at a time, so a terminate()
        # call would wait behind this one, and a threaded actor (max_concurrency) would take the loop off the main
        # thread, the only one Python runs signal handlers in (a plain actor's calls run there, so signal.signal works
        # here). A SIGTERM before this line finds Ray's handler: the worker has applied no update yet.
        previous = _flag_on_sigterm(terminate) if local is not None else None
        try:
            worker.run(terminate.is_set)
        finally:
            if local is None:
                channel.flush()
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)  # Ray's again: the actor's process exits on SIGTERM

    def placement(self) -> tuple[str, int]:
        """(this actor's node, its process id): where it runs, and the pid RayLauncher.join SIGTERMs on its node."""
        return ray.get_runtime_context().get_node_id(), os.getpid()


def _flag_on_sigterm(flag: threading.Event) -> Any:
    """Make SIGTERM set ``flag`` (and nothing else); return the handler it replaces (SIG_DFL if not Python's)."""
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: flag.set())
    return signal.SIG_DFL if previous is None else previous
