"""The parameter server of the Ray backend (a3c/run/backends/ray/__init__.py): the run's global state in one Ray
actor, pinned to the driver's node (``ParameterServer``: the shared-memory backend's coordinator and channels in the
actor's process, its tensors in named shared memory that workers on its node map), and ``RemoteMoments``, a worker's
handle on the running statistics the server keeps."""

from __future__ import annotations

import io
import pickle
import warnings
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np
import ray
import torch
import torch.multiprocessing

from a3c.learn.running_stats import Moments
from a3c.record.rows import FIELDS, Episode
from a3c.run.backends.shared_memory import INTERVAL, SharedMemoryCoordinator, create_shared_run
from a3c.run.threads import limit_native_threads
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec


class ParameterServer:
    """The global state of a run, in one Ray actor (see the module docstring). Its methods are the backend's
    interfaces, split into a worker's calls and the driver's."""

    def __init__(self, spec: EnvSpec, config: Config) -> None:
        limit_native_threads()  # one thread in torch's, the BLAS's and OpenMP's pools (a3c.run.threads)
        # The run's shared tensors are created as named files in /dev/shm, so that a worker actor on this node can map
        # them (shared_channel). torch's default strategy keeps only a file descriptor, which reaches a child process
        # and no other: worker actors are Ray's processes, not this one's children. The driver removes the names
        # when the run ends (shared_memory_names), or its reaper does if it dies first
        # (a3c.run.backends.ray.shm_reaper).
        torch.multiprocessing.set_sharing_strategy("file_system")
        # gradients arrive as read-only numpy arrays (Ray's zero-copy objects); the optimizer only reads them
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        assert isinstance(config.workers, int), "resolve --workers auto first"
        run, _, _ = create_shared_run(spec, config)
        self.coordinator = SharedMemoryCoordinator(run)
        self.channels = [self.coordinator.channel(rank) for rank in range(config.workers)]
        stats = {"obs_stats": run.obs_stats, "reward_stats": run.reward_stats}
        self.moments = {key: moments for key, moments in stats.items() if moments is not None}

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
        """Apply a gradient (arrival order), after what the worker published since its last call; return the lag, the
        new weights with their version, and the control. ``message``: the pickled (rank, gradient as float32 bytes,
        pulled_at, the lr to apply it with, publish()'s arguments or None), see ``RayChannel.push``; the reply is
        pickled the same way. One bytes object each way, because Ray's per-argument handling costs more than the
        pickling: a round trip of this call took 0.65 ms of CPU at each end packed, 0.85 ms as four arguments and a
        tuple returned (measured here; a worker makes this call once per update). Pickle is Ray's own format for every
        call, so this trusts nothing Ray did not already."""
        rank, grad, pulled_at, lr, published = pickle.loads(message)
        if published is not None:
            self.publish(rank, *published)
        lag = self.channels[rank].push(torch.from_numpy(np.frombuffer(grad, dtype=np.float32)), pulled_at, lr)
        return pickle.dumps((lag, *self.weights(), self.control()), protocol=pickle.HIGHEST_PROTOCOL)

    def publish(self, rank: int, steps: int, rows: bytes | None, stats: bytes) -> None:
        """``rows``: the episodes' rows (float64 bytes, a3c.record.rows.FIELDS each); ``stats``: the stats row."""
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
