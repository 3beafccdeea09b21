"""``RayBackend``: connects this process to Ray (a local instance, or a cluster by --ray-address), starts the
parameter server (a3c/run/backends/ray/server.py) on this, the driver's, node with the shared-memory reaper
(shm_reaper.py) ahead of it, hands the trainer the coordinator and the launcher (launcher.py), and closes what it
started: the server, its shared memory, the reaper, Ray. The backend's design is in a3c/run/backends/ray/__init__.py.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import ray
import torch
from ray.exceptions import GetTimeoutError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from a3c.learn.model import build_model
from a3c.run.backends.ray.common import CALL_TIMEOUT_S, START_TIMEOUT_S
from a3c.run.backends.ray.launcher import RayCoordinator, RayLauncher
from a3c.run.backends.ray.server import ParameterServer
from a3c.run.backends.ray.shm_reaper import ShmReaper, unlink
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec
from a3c.spec.errors import UserError

OBJECT_STORE_BYTES = 256 * 2**20  # of a local instance: weights and gradients are small (Atari CNN: ~7 MB)
# A local instance's Ray records an event for every task (for its dashboard and `ray list tasks`) and collects metrics
# (for Prometheus); a3c starts it without a dashboard and nobody reads them, while a worker makes a call per update.
# Off: 4-5% more steps/s with 16 workers on the slow env (1 env per worker) here, two runs each way. A cluster keeps
# its own settings.
LOCAL_SYSTEM_CONFIG = {"task_events_report_interval_ms": 0, "enable_metrics_collection": False}


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
            # (Ray's types give an actor handle's methods the plain methods' types; at run time they have .remote)
            names = ray.get(server.shared_memory_names.remote(), timeout=CALL_TIMEOUT_S)  # type: ignore[attr-defined]
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
    trainer's decide what a Ctrl-C means.

    Without an address, the instance is always a new one of the run's own (``ray.init(address="local")``): a bare
    ``ray.init()`` joins the cluster that RAY_ADDRESS names or that ``ray start`` last left on the machine, if any,
    whose resources are its own (it then refuses the local instance's ``num_cpus``). Joining one is what
    ``--ray-address auto`` asks for."""
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
            if os.environ.get("RAY_ADDRESS"):  # (a user who set it may have meant to join that cluster: say so)
                print(
                    f"a3c: --backend ray: starting a local Ray instance of this run's own; RAY_ADDRESS "
                    f"({os.environ['RAY_ADDRESS']}) is not joined without --ray-address auto",
                    file=sys.stderr,
                )
            cpus = max(os.cpu_count() or 1, int(np.ceil(config.workers * config.ray_cpus_per_worker)))
            ray.init(
                address="local",
                num_cpus=cpus,
                object_store_memory=OBJECT_STORE_BYTES,
                _system_config=LOCAL_SYSTEM_CONFIG,
                **common,
            )
        else:
            ray.init(address=config.ray_address, **common)
    except (ConnectionError, ValueError) as err:
        ray.shutdown()
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if config.ray_address is None:
            raise UserError(
                f"--backend ray: cannot start a local Ray instance ({first}); check `ray status` and the memory "
                "free, or give --ray-address to join a running cluster"
            ) from None
        where = "a running cluster (`ray start --head` on the head node)" if config.ray_address == "auto" else "it"
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
