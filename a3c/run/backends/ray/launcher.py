"""The driver's side of the Ray backend (a3c/run/backends/ray/__init__.py): ``RayCoordinator``, the Coordinator that
reads everything new from the parameter server in one call per dashboard tick, and ``RayLauncher``, the Launcher that
starts a worker actor per rank, reads a dead actor as an exit by SIGKILL, and ends stragglers at the join."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError, RayTaskError

from a3c.record.rows import Episode
from a3c.run.backends import TERMINATE_GRACE_S
from a3c.run.backends.ray.channel import RayChannel, RayWorker
from a3c.run.backends.ray.common import CALL_TIMEOUT_S, START_TIMEOUT_S

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # Ray colours the header of a remote traceback


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
        self._set_state(tuple(state))
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
        self.placed_at: dict[int, float] = {}  # ... and when its placement was answered (its process is up)
        self._placing: dict[int, Any] = {}  # rank -> the pending answer of its new actor's placement()

    def start(self, rank: int, incarnation: int) -> None:
        actor = self.actor_class.options(
            num_cpus=self.cpus, scheduling_strategy="SPREAD", name=None, max_restarts=0
        ).remote()
        self.actors[rank] = actor
        # (Ray's types give an actor handle's methods the plain methods' types; at run time they have .remote)
        self._placing[rank] = actor.placement.remote()  # type: ignore[attr-defined]  # runs before run(): in order
        self.refs[rank] = actor.run.remote(*self.args_for(rank), incarnation)  # type: ignore[attr-defined]
        self.codes[rank], self.tracebacks[rank] = None, None
        self.nodes.pop(rank, None)
        self.actor_pids.pop(rank, None)
        self.placed_at.pop(rank, None)

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
        self.placed_at[rank] = time.time()
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

    def running_since(self, rank: int) -> float | None:
        """From the placement's answer: until then the actor waits for a node with a free CPU, or its new process is
        still importing torch (a minute or more on a busy machine), and is not hung."""
        self._report_placement(rank)
        return self.placed_at.get(rank)

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
        # where each straggler runs (answered before its run() began, so at once for one that runs): one wait for all
        placing = [self._placing[rank] for rank in stragglers if rank in self._placing]
        if placing:
            ray.wait(placing, num_returns=len(placing), timeout=1.0)
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
        self._report_placement(rank)
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
