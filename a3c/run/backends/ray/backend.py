"""The Ray backend (``--backend ray``): the same trainer on a Ray cluster (or a local Ray instance).

- A **parameter-server actor** (``ParameterServer``), pinned to the driver's node, holds the global parameters, the
  optimizer state, the episode board, the control state and the running statistics, in shared memory on its node.
  It is the shared-memory backend's coordinator and channels, in the actor's process: Ray runs one method of an
  actor at a time, so the gradients that come by actor calls are applied one at a time, in arrival order; those of
  the workers on its node land in between, Hogwild-style, as worker processes' do under the default backend (and a
  checkpoint's snapshot is taken as that backend takes it: the step counters read once, the model while they run).
- **Worker actors** (``RayWorker``), spread over the nodes, run the same ``a3c.run.worker.Worker`` loop as worker
  processes do. A worker on the server's node (``--ray-same-node shared-memory``, the default) reaches the global
  state in place: the server keeps it in named shared memory, and the worker maps it and runs the shared-memory
  backend's own channel (Hogwild updates, no call to the server per update); Ray only places, watches and restarts
  it. A worker on another node (or every worker, with ``--ray-same-node ray``) uses ``RayChannel``, which turns
  the loop's calls into few actor calls. Per iteration: one
  round trip (``push``: the gradient goes, the lag, the new weights and the control state come back, so the next
  ``pull`` is local; pipelined: the reply is taken one push later, the round trip overlapping the next rollout),
  which also carries what the loop published since the last push (steps, episodes, stats:
  applied first, so a worker's steps, episodes and stats arrive in the order the loop made them; a publish waits at
  most PUBLISH_HOLD_S for a push before it is sent on its own, Ray running one caller's calls in order). With
  ``--push-every N`` the gradients of N rollouts are summed and pushed once (N times fewer round trips, N rollouts
  on the same weights).
- The **driver** (``RayCoordinator``) reads everything new in one call per dashboard tick (``tick``: episodes, stats,
  global step) and answers the trainer, dashboard and supervisor from that copy. ``RayLauncher`` starts a worker
  actor per rank; a dead actor (process killed, node lost) shows as an exit by SIGKILL, and the supervisor restarts
  the rank in a new actor (same rank, next incarnation: fresh seeds), which Ray places on a live node.

Checkpoints hold exactly what the shared-memory backend's hold, so a run started on one backend resumes on the other.
"""

from __future__ import annotations

import gc
import io
import os
import pickle
import re
import signal
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np
import ray
import torch
import torch.multiprocessing
from ray.exceptions import GetTimeoutError, RayActorError, RayError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from a3c.learn.model import build_model
from a3c.learn.running_stats import Moments
from a3c.run.backends.ray.shm_reaper import ShmReaper, unlink
from a3c.run.backends.shared_memory import INTERVAL, SharedMemoryChannel, SharedMemoryCoordinator, create_shared_run
from a3c.run.board import FIELDS, Episode
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec
from a3c.spec.errors import UserError
from a3c.spec.seeding import WorkerSeeds

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # Ray colours the header of a remote traceback
CONTROL_REFRESH_S = 0.1  # a worker that has not pushed for this long asks the server whether to stop
PUBLISH_HOLD_S = 0.05  # what a worker publishes rides on its next push, unless it has waited this long
# a worker at the start line asks the server this often whether every worker is there: each ask is a round trip
# (about 1.3 ms of CPU, the two ends together, measured here), and the workers already waiting would otherwise take
# the CPU that the last ones need to start (16 workers on 2 cores polling every 2 ms: 6-7% of a core each)
READY_POLL_S = 0.05
CALL_TIMEOUT_S = 120.0  # the driver's calls to the server (a server this slow is gone)
START_TIMEOUT_S = 600.0  # the server's start: a new Ray worker process imports torch (slow on a busy machine)
TERMINATE_GRACE_S = 2.0  # a straggler SIGTERMed at the join has this long to finish its update (as ProcessLauncher's)
OBJECT_STORE_BYTES = 256 * 2**20  # of a local instance: weights and gradients are small (Atari CNN: ~7 MB)
# A local instance's Ray records an event for every task (for its dashboard and `ray list tasks`) and collects metrics
# (for Prometheus); a3c starts it without a dashboard and nobody reads them, while a worker makes a call per update.
# Off: 4-5% more steps/s with 16 workers on the slow env (1 env per worker) here, two runs each way. A cluster keeps
# its own settings.
LOCAL_SYSTEM_CONFIG = {"task_events_report_interval_ms": 0, "enable_metrics_collection": False}


class ParameterServer:
    """The global state of a run, in one Ray actor (see the module docstring). Its methods are the backend's
    interfaces, split into a worker's calls and the driver's."""

    def __init__(self, spec: EnvSpec, config: Config) -> None:
        torch.set_num_threads(1)
        # The run's shared tensors are created as named files in /dev/shm, so that a worker actor on this node can map
        # them (shared_channel). torch's default strategy keeps only a file descriptor, which reaches a child process
        # and no other: worker actors are Ray's processes, not this one's children. The driver removes the names
        # when the run ends (shared_memory_names), or its reaper does if it dies first
        # (a3c.run.backends.ray.shm_reaper).
        torch.multiprocessing.set_sharing_strategy("file_system")
        # gradients arrive as read-only numpy arrays (Ray's zero-copy objects); the optimizer only reads them
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        run, _, _ = create_shared_run(spec, config)
        self.coordinator = SharedMemoryCoordinator(run)
        self.channels = [self.coordinator.channel(rank) for rank in range(config.workers)]
        self.moments = {"obs_stats": run.obs_stats, "reward_stats": run.reward_stats}

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    # -- a worker's calls ----------------------------------------------------------------------------------------
    def shared_channel(self, rank: int) -> bytes:
        """Rank's shared-memory channel (a3c.run.backends.shared_memory.SharedMemoryChannel) onto this server's state,
        for a worker on this node: pickled with torch's reductions, so its tensors travel as the names of their shared
        memory, not as copies; unpickled in the worker, they map the same memory."""
        return bytes(ForkingPickler.dumps(self.channels[rank], pickle.HIGHEST_PROTOCOL))

    def shared_memory_names(self) -> list[str]:
        """The names of the shared memory the run's state lives in, for the driver to remove when the run ends:
        torch_shm_manager would remove them once the last process mapping them is gone, but Ray kills an actor's
        child processes (the manager among them) with the actor, and the files would stay in /dev/shm."""
        names: set[str] = set()

        class Collect(pickle.Pickler):
            def persistent_id(self, obj: Any) -> Any:
                if isinstance(obj, torch.Tensor):  # (manager socket, name, size): already shared, so no new memory
                    names.add(obj.untyped_storage()._share_filename_cpu_()[1].decode())
                    return len(names)  # anything but None: the pickle is thrown away
                return None

        Collect(io.BytesIO(), pickle.HIGHEST_PROTOCOL).dump((self.coordinator.run, self.coordinator.control))
        return sorted(names)

    def weights(self) -> tuple[int, bytes]:
        """The global parameters (float32 bytes) and their version (the update count)."""
        return self.coordinator.optimizer.step_count(), self.coordinator.params.detach().numpy().tobytes()

    def control(self) -> tuple[bool, int, int]:
        """(stop, logging interval, global step)."""
        c = self.coordinator
        return c.should_stop(), c.interval(), c.global_step()

    def push(self, message: bytes) -> bytes:
        """Apply a gradient (arrival order), after what the worker published since its last call; return the lag,
        the new weights with their version, and the control. ``message``: the pickled (rank, gradient as float32
        bytes, pulled_at, publish()'s arguments or None), see ``RayChannel.push``; the reply is pickled the same
        way. One bytes object each way, because Ray's per-argument handling costs more than the pickling: a round
        trip of this call took 0.65 ms of CPU at each end packed, 0.85 ms as four arguments and a tuple returned
        (measured here; a worker makes this call once per update). Pickle is Ray's own format for every call, so
        this trusts nothing Ray did not already."""
        rank, grad, pulled_at, published = pickle.loads(message)
        if published is not None:
            self.publish(rank, *published)
        lag = self.channels[rank].push(torch.from_numpy(np.frombuffer(grad, dtype=np.float32)), pulled_at)
        return pickle.dumps((lag, *self.weights(), self.control()), protocol=pickle.HIGHEST_PROTOCOL)

    def publish(self, rank: int, steps: int, rows: bytes | None, stats: bytes) -> None:
        """``rows``: the episodes' rows (float64 bytes, a3c.run.board.FIELDS each); ``stats``: the stats row."""
        episodes = [] if rows is None else list(np.frombuffer(rows).reshape(-1, len(FIELDS)))
        self.channels[rank].publish(steps, episodes, np.frombuffer(stats))

    def load_stats(self, rank: int) -> np.ndarray:
        return self.channels[rank].load_stats()

    def ready(self) -> tuple[bool, tuple[bool, int, int]]:
        """(every worker at the start line, the control): one round trip for a waiting worker's poll."""
        return self.channels[0].all_ready(), self.control()

    def moments_read(self, key: str, row: int) -> Moments:
        return self.moments[key].read(row)

    def moments_publish(self, key: str, slot: int, moments: Moments) -> None:
        self.moments[key].publish(slot, moments)

    def moments_merged(self, key: str, skip: int | None) -> Moments:
        return self.moments[key].merged(skip=skip)

    # -- the driver's calls --------------------------------------------------------------------------------------
    def state(self) -> tuple[np.ndarray, int, int, np.ndarray]:
        """(stats rows, global step, lost episodes, episodes read per worker)."""
        c = self.coordinator
        return c.stats().copy(), c.global_step(), c.lost, c.episodes_read()

    def tick(self) -> tuple[list[Episode], np.ndarray, int, int, np.ndarray]:
        """Every episode published since the last tick, and the state after reading them."""
        return (self.coordinator.drain(), *self.state())

    def snapshot(self) -> dict[str, Any]:
        return self.coordinator.snapshot()

    def running_stats(self) -> dict[str, Any]:
        return self.coordinator.running_stats()

    def restore(self, payload: dict[str, Any]) -> None:
        self.coordinator.restore(payload)

    def request_stop(self) -> None:
        self.coordinator.request_stop()

    def set_interval(self, interval: int) -> None:
        self.coordinator.control[INTERVAL] = interval


class RemoteMoments:
    """A worker's handle on running statistics kept by the server (what a3c.learn.running_stats's appliers call on
    SharedMoments: read, publish, merged)."""

    def __init__(self, server: Any, key: str, shape: tuple[int, ...]) -> None:
        self.server, self.key, self.shape = server, key, shape

    def read(self, row: int) -> Moments:
        return ray.get(self.server.moments_read.remote(self.key, row))

    def publish(self, slot: int, moments: Moments) -> None:
        self.server.moments_publish.remote(self.key, slot, moments)  # ordered before this worker's next calls

    def merged(self, skip: int | None = None) -> Moments:
        return ray.get(self.server.moments_merged.remote(self.key, skip))


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
        with torch.no_grad():
            dest.copy_(self._weights)
        return self._version

    def _receive(self, reply: Any) -> int:
        lag, version, weights, control = pickle.loads(ray.get(reply))
        self._set_weights(version, weights)
        self._set_control(control)
        return lag

    def push(self, grad: torch.Tensor, pulled_at: int) -> int:
        """Pipelined: the gradient is sent, then the reply to the PREVIOUS push is taken (it has had a whole rollout
        to arrive), so the round trip overlaps the next rollout instead of stalling the loop. The next rollout then
        acts on the weights from before this update (one more update of policy lag, measured as such by the server:
        the A3C trade of staleness for throughput). Returns the previous push's lag (0 for the first)."""
        if self.push_every > 1:
            if self._sum is None:
                self._sum, self._summed_from = grad.clone(), pulled_at
            else:
                self._sum += grad
            self._summed += 1
            if self._summed < self.push_every:
                return self._version - pulled_at  # nothing applied yet: no update has come in between
            grad, pulled_at, self._sum, self._summed = self._sum, self._summed_from, None, 0
        message = (self.rank, grad.numpy().tobytes(), pulled_at, self._take_queued())
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

        torch.set_num_threads(1)  # as in a worker process: N workers x M intra-op threads would thrash
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


class RayCoordinator:
    """The driver's view (a3c.run.backends.Coordinator): one ``tick`` call to the server per dashboard tick; the stats,
    the global step and the counters are answered from what that call returned."""

    def __init__(
        self,
        server: Any,
        workers: int,
        total_steps: int,
        push_every: int,
        stats_shapes: dict,
        shared_memory_node: str | None = None,
    ) -> None:
        """``shared_memory_node``: the server's node, when workers there reach it through shared memory."""
        self.server, self.workers, self.total_steps = server, workers, total_steps
        self.push_every, self.stats_shapes, self.shared_memory_node = push_every, stats_shapes, shared_memory_node
        self._stop = False
        self._interval = 0
        self._set_state(self._call(server.state, timeout=START_TIMEOUT_S))

    def _call(self, method: Any, *args: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
        return ray.get(method.remote(*args), timeout=timeout)

    def _set_state(self, state: tuple[np.ndarray, int, int, np.ndarray]) -> None:
        self._stats, self._global_step, self._lost, self._read = state

    def channel(self, rank: int) -> RayChannel:
        return RayChannel(rank, self.server, self.push_every, self.stats_shapes, self.shared_memory_node)

    def drain(self) -> list[Episode]:
        episodes, *state = self._call(self.server.tick)
        self._set_state(tuple(state))  # type: ignore[arg-type]
        for ep in episodes:
            ep.values = np.array(ep.values)  # writable (the dashboard stamps them); Ray's arrays are read-only
        return episodes

    @property
    def lost(self) -> int:
        return self._lost

    def episodes_read(self) -> np.ndarray:
        return self._read.copy()

    def stats(self) -> np.ndarray:
        return self._stats

    def global_step(self) -> int:
        return self._global_step

    def should_stop(self) -> bool:
        return self._stop or self._global_step >= self.total_steps

    def request_stop(self) -> None:
        self._stop = True
        try:
            self._call(self.server.request_stop)
        except (RayError, GetTimeoutError):
            pass  # the server is gone (the cluster went down): the workers are gone with it

    def interval(self) -> int:
        return self._interval

    def next_interval(self) -> None:
        self._interval += 1
        self.server.set_interval.remote(self._interval)

    def snapshot(self) -> dict[str, Any]:
        return self._call(self.server.snapshot)

    def running_stats(self) -> dict[str, Any]:
        return self._call(self.server.running_stats)

    def restore(self, payload: dict[str, Any]) -> None:
        self._call(self.server.restore, payload)
        self._set_state(self._call(self.server.state))


class RayLauncher:
    """A worker actor per rank (a3c.run.backends.Launcher); ``args_for(rank)`` gives RayWorker.run's arguments but the
    incarnation. Workers are spread over the nodes, ``cpus`` CPUs each (Ray's scheduling resource).
    ``shared_memory_node``: the node whose workers reach the server through shared memory (None: none do)."""

    def __init__(
        self,
        args_for: Callable[[int], tuple[Any, ...]],
        cpus: float,
        log: Callable[[str], None],
        shared_memory_node: str | None = None,
    ) -> None:
        self.args_for, self.cpus, self.log, self.shared_memory_node = args_for, cpus, log, shared_memory_node
        self.actor_class = ray.remote(RayWorker)
        self.actors: dict[int, Any] = {}
        self.refs: dict[int, Any] = {}
        self.codes: dict[int, int | None] = {}
        self.tracebacks: dict[int, str | None] = {}
        self.nodes: dict[int, str] = {}  # the node of each rank's current actor, once it is known
        self.actor_pids: dict[int, int] = {}  # ... and its process id there
        self._placing: dict[int, Any] = {}  # rank -> the pending answer of its new actor's placement()

    def start(self, rank: int, incarnation: int) -> None:
        actor = self.actor_class.options(
            num_cpus=self.cpus, scheduling_strategy="SPREAD", name=None, max_restarts=0
        ).remote()
        self.actors[rank] = actor
        self._placing[rank] = actor.placement.remote()  # runs before run(): an actor runs its calls in order
        self.refs[rank] = actor.run.remote(*self.args_for(rank), incarnation)
        self.codes[rank], self.tracebacks[rank] = None, None
        self.nodes.pop(rank, None)
        self.actor_pids.pop(rank, None)

    def _report_placement(self, rank: int, timeout: float = 0.0) -> None:
        """Once rank's actor is placed (within ``timeout``): one line naming its node (where its envs run, where to
        find its logs)."""
        ref = self._placing.get(rank)
        if ref is None or not ray.wait([ref], timeout=timeout)[0]:
            return
        del self._placing[rank]
        try:
            self.nodes[rank], self.actor_pids[rank] = ray.get(ref)
        except RayError:
            return  # the actor died before it ran: exitcode() reports that
        path = "shared memory" if self.nodes[rank] == self.shared_memory_node else "actor calls"
        self.log(f"a3c: worker {rank} on Ray node {self.nodes[rank]} (reaches the parameter server by {path})")

    def _settle(self, rank: int, timeout: float = 0.0) -> None:
        """Record rank's exit code if its run has ended (within ``timeout``)."""
        if self.codes[rank] is not None:
            return
        ready, _ = ray.wait([self.refs[rank]], timeout=timeout)
        if not ready:
            return
        try:
            ray.get(ready[0])
            self.codes[rank] = 0
        except RayTaskError as err:  # the worker raised: its traceback, as the worker wrote it
            self.codes[rank], self.tracebacks[rank] = 1, ANSI_ESCAPE.sub("", str(err))
        except RayActorError as err:  # the actor's process died, or its node was lost
            self.codes[rank] = -signal.SIGKILL
            self.tracebacks[rank] = f"its Ray actor died: {str(err).strip().splitlines()[0]}"

    def exitcode(self, rank: int) -> int | None:
        self._report_placement(rank)
        self._settle(rank)
        return self.codes[rank]

    def traceback(self, rank: int) -> str | None:
        return self.tracebacks[rank]

    def kill(self, rank: int) -> None:
        ray.kill(self.actors[rank], no_restart=True)
        self._settle(rank, timeout=5.0)

    def kill_all(self) -> None:
        for actor in self.actors.values():
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 (an emergency stop: go on with the others)
                pass

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the workers to see the stop and return; then end the stragglers as
        ProcessLauncher.join does where they apply updates themselves (on shared memory, on this node): SIGTERM,
        which makes the loop stop at its top (RayWorker.run), so the update in hand is finished and never left
        half-applied in the shared parameters; a kill only for one still running TERMINATE_GRACE_S later (stuck in an
        env step). A straggler that reaches the server by actor calls is killed at once: its updates are the
        server's calls, and an actor is killed between two of its calls, never inside the server's update."""
        running = [rank for rank in self.refs if self.codes[rank] is None]
        self._wait(running, timeout)
        stragglers = [rank for rank in running if self.codes[rank] is None]
        terminated = [rank for rank in stragglers if self._terminate(rank, timeout)]
        self._wait(terminated, TERMINATE_GRACE_S)
        for rank in stragglers:
            if self.codes[rank] is not None:
                continue
            if rank in terminated:
                self.log(f"a3c: worker {rank} (a Ray actor) ignored SIGTERM for {TERMINATE_GRACE_S:g} s; killing it")
            else:
                self.log(f"a3c: worker {rank} (a Ray actor) did not stop within {timeout:g} s; killing it")
            self.kill(rank)

    def _wait(self, ranks: list[int], timeout: float) -> None:
        """Wait up to ``timeout`` for the runs of ``ranks`` to end; record the exit codes of those that did."""
        if ranks:
            ray.wait([self.refs[r] for r in ranks], num_returns=len(ranks), timeout=timeout)
        for rank in ranks:
            self._settle(rank)

    def _terminate(self, rank: int, timeout: float) -> bool:
        """SIGTERM rank's actor if it runs on shared memory (on ``shared_memory_node``: the server's node, which is
        this driver's, so its pid is one here). Whether it was sent."""
        self._report_placement(rank, timeout=1.0)  # answered before run() began, so at once if it runs
        pid = self.actor_pids.get(rank)
        if self.shared_memory_node is None or self.nodes.get(rank) != self.shared_memory_node or pid is None:
            return False
        self.log(f"a3c: worker {rank} (a Ray actor) did not stop within {timeout:g} s; terminating it")
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:  # gone already: the wait that follows records how
            pass
        return True

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)

    def pids(self) -> list[int]:
        return []  # actors may live on other machines


class RayBackend:
    """Connects to Ray (or starts a local instance), creates the parameter server, and closes what it started."""

    def __init__(
        self,
        server: Any,
        coordinator: RayCoordinator,
        model: torch.nn.Module,
        dist: Any,
        owns: bool,
        shared_memory_names: Sequence[str] = (),
        reaper: ShmReaper | None = None,
    ) -> None:
        self.server, self.coordinator, self.model, self.dist, self.owns = server, coordinator, model, dist, owns
        self.shared_memory_names = shared_memory_names
        self.reaper = reaper  # removes the names if this process dies without close() (a3c.run.backends.ray.shm_reaper)

    @classmethod
    def start(cls, config: Config, spec: EnvSpec) -> RayBackend:
        """Connect, and start the parameter server on this (the driver's) node. UserError, with Ray shut down
        again, when Ray cannot be reached or the server does not start."""
        assert isinstance(config.workers, int)
        owns = connect(config)
        reaper: ShmReaper | None = None
        try:
            reaper = ShmReaper.start()  # before the server makes its files: from then on, none outlives this process
            # the model here only answers questions about it (parameter count, head size): the server builds the
            # global one, its optimizer and its board
            model, dist = build_model(spec, config)
            here = ray.get_runtime_context().get_node_id()
            server = (
                ray.remote(ParameterServer)
                .options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False))
                .remote(spec, config)
            )
            stats_shapes = {}
            if config.normalize_obs:
                stats_shapes["obs_stats"] = tuple(spec.obs_shape)
            if config.normalize_reward:
                stats_shapes["reward_stats"] = ()
            coordinator = RayCoordinator(
                server,
                config.workers,
                config.total_steps,
                config.push_every,
                stats_shapes,
                shared_memory_node=here if config.ray_same_node == "shared-memory" else None,
            )
            names = ray.get(server.shared_memory_names.remote(), timeout=CALL_TIMEOUT_S)
            reaper.add(names)
        except GetTimeoutError:
            _close_reaper(reaper)
            ray.shutdown()
            raise UserError(
                f"the Ray parameter server did not start within {START_TIMEOUT_S:g} s (a new Ray worker process "
                "imports torch; on an overloaded machine or a full cluster that can take this long); check `ray "
                "status` and the load, then run again"
            ) from None
        except BaseException:
            _close_reaper(reaper)
            ray.shutdown()
            raise
        return cls(server, coordinator, model, dist, owns, names, reaper)

    def launcher(self, args_for: Callable[[int], tuple[Any, ...]], cpus: float) -> RayLauncher:
        return RayLauncher(
            args_for,
            cpus,
            log=lambda line: print(line, file=sys.stderr),
            shared_memory_node=self.coordinator.shared_memory_node,
        )

    def close(self) -> None:
        """End the server; remove its shared memory (this is its node) before returning, so that no name of the run
        is left in /dev/shm once the driver has exited, whatever the server's process still does; dismiss the reaper;
        disconnect (a local instance started here is shut down with it)."""
        try:
            ray.kill(self.server, no_restart=True)
        except Exception:  # noqa: BLE001 (already gone)
            pass
        remove_shared_memory(self.shared_memory_names)
        _close_reaper(self.reaper)
        ray.shutdown()


def _close_reaper(reaper: ShmReaper | None) -> None:
    if reaper is not None:
        reaper.close()


def connect(config: Config) -> bool:
    """Connect this process to Ray: a new local instance (``--ray-address`` unset), a running cluster (``auto`` or
    an address). Returns whether a new instance was started. Ray's own SIGINT/SIGTERM handlers are not kept: the
    trainer's decide what a Ctrl-C means."""
    if ray.is_initialized():
        return False
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    pythonpath = os.pathsep.join(filter(None, (os.getcwd(), os.environ.get("PYTHONPATH"))))
    common: dict[str, Any] = {
        "_node_ip_address": config.ray_node_ip,
        "include_dashboard": False,
        "logging_level": "ERROR",
        "log_to_driver": False,
        # `module:Name-v0` envs from the current directory can be imported by the workers
        "runtime_env": {"env_vars": {"PYTHONPATH": pythonpath}},
    }
    if config.ray_address not in (None, "auto"):
        _check_reachable(config.ray_address)
    if config.ray_address is not None and _is_loopback(config.ray_address.rpartition(":")[0]):
        # A cluster on this machine, reached on 127.0.0.1 (a test cluster): Ray would rewrite a loopback address to
        # the machine's outward one before connecting, which a cluster bound to 127.0.0.1 does not answer on. Its
        # switch for that (read where the address is resolved) is this constant; keep the address as given.
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        if config.ray_address is None:
            assert isinstance(config.workers, int)
            # Ray runs its workers at nice 15 by default (below the raylet); here they are the run's workers, as
            # worker processes are: the same priority as this process (a cluster keeps its own setting)
            os.environ.setdefault("RAY_worker_niceness", "0")
            cpus = max(os.cpu_count() or 1, int(np.ceil(config.workers * config.ray_cpus_per_worker)))
            ray.init(
                num_cpus=cpus, object_store_memory=OBJECT_STORE_BYTES, _system_config=LOCAL_SYSTEM_CONFIG, **common
            )
        else:
            ray.init(address=config.ray_address, **common)
    except (ConnectionError, ValueError) as err:
        ray.shutdown()
        where = "a running cluster (`ray start --head` on the head node)" if config.ray_address == "auto" else "it"
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(
            f"--ray-address {config.ray_address}: cannot connect to Ray ({first}); check {where}, or leave "
            "--ray-address out to start a local Ray instance"
        ) from None
    finally:
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
    return config.ray_address is None


def remove_shared_memory(names: Sequence[str]) -> None:
    """Remove the named shared memory (ParameterServer.shared_memory_names) from this node. A process still mapping
    it keeps its mapping; only the name goes."""
    unlink(names)


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast on an address nothing answers at (Ray itself retries for minutes): UserError naming it."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except ValueError:
        raise UserError(f"--ray-address {address}: expected HOST:PORT (e.g. 10.0.0.5:6379) or auto") from None
    except OSError as err:
        raise UserError(
            f"--ray-address {address}: cannot connect to Ray ({err.strerror or err}); check that the cluster's head "
            "runs there (`ray status` on it), or leave --ray-address out to start a local Ray instance"
        ) from None


def _is_loopback(host: str) -> bool:
    return host in ("localhost", "::1", "[::1]") or host.startswith("127.")
