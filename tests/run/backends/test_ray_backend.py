"""--backend ray: the same run directory and tags as the shared-memory backend (workers on the server's node reaching
it through shared memory, and by actor calls), checkpoints that resume on either backend, no shared memory left
behind (the run's own names: other runs on the machine make theirs; also after a SIGKILLed driver), a same-node
straggler ended by SIGTERM rather than a kill, workers spread over a (local, two-node) Ray cluster with each node's
own way to the server, a node lost mid-run with its workers restarted on the other and exact counts, and Ctrl-C
leaving no Ray process behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
import torch
from procs import (
    DESIGN_TAGS,
    Run,
    alive,
    descendants,
    episode_rows,
    episodes_started,
    indexes_contiguous,
    run_backends,
    run_files,
    scalar_tags,
    shm_entries,
    summary,
    train_cmd,
    wait_for,
)

ray = pytest.importorskip("ray", reason="--backend ray needs the [ray] extra (.ci/run installs it)")
from ray.cluster_utils import Cluster  # noqa: E402

RAY = ("--backend", "ray", "--eval-every", "0")
PLACEMENT = re.compile(r"a3c: worker (\d+) on Ray node ([0-9a-f]+) \(reaches the parameter server by ([a-z ]+)\)")


def _nodes(output: str) -> dict[int, str]:
    """Each rank's node, as the run printed it (the latest actor of the rank)."""
    return {int(rank): node for rank, node, _ in PLACEMENT.findall(output)}


def _paths(output: str) -> dict[int, str]:
    """How each rank reaches the parameter server (shared memory, actor calls), as the run printed it."""
    return {int(rank): path for rank, _, path in PLACEMENT.findall(output)}


def _torch_shm() -> set[str]:
    """torch's shared memory segments on this machine (the parameter server's are among them while a run lasts)."""
    return {e for e in shm_entries() if e.startswith("torch_")}


class RunShm:
    """The torch shared memory that a run's processes create while this watches them (a context manager): every
    POLL_S, /dev/shm and the processes below ``root``; a torch_<pid>_... name counts when its pid (the process that
    made it) is one of them. Other runs on this machine (other tests, other sessions) make names of their own, which
    come and go as they please: a test of what this run leaves must look at this run's names only."""

    POLL_S = 0.1

    def __init__(self, root: int) -> None:
        self.root, self.names, self._done = root, set(), threading.Event()
        self._before = _torch_shm()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._done.wait(self.POLL_S):
            self.poll()

    def poll(self) -> None:
        pids = {str(p) for p in descendants(self.root)}
        self.names |= {n for n in _torch_shm() - self._before if n.split("_")[1] in pids}

    def left(self) -> set[str]:
        """The run's names still in /dev/shm."""
        return self.names & _torch_shm()

    def __enter__(self) -> RunShm:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


SAME_NODE_PROBE = """
import json, os, pickle, subprocess, sys
from a3c.run.backends.ray.backend import remove_shared_memory
from a3c.run.backends.ray.server import ParameterServer
from a3c.spec.config import Config
from a3c.spec.environment import describe_env

config = Config(workers=2, eval_every=0)
server = ParameterServer(describe_env(config.env, {}), config)  # no Ray needed to build one: its state, in this process
before = server.coordinator.params.clone()
names = server.shared_memory_names()
# another process, not a child sharing this one's descriptors (close_fds): what a worker actor on this node is
worker = (
    "import pickle, sys, torch; channel = pickle.loads(sys.stdin.buffer.read()); "
    "channel.push(torch.ones_like(channel.params), 0, 1e-3); channel.publish(7, [], channel.load_stats())"
)
subprocess.run([sys.executable, "-c", worker], input=server.shared_channel(1), check=True, close_fds=True)
c = server.coordinator
on_disk = [os.path.exists("/dev/shm/" + n.lstrip("/")) for n in names]
remove_shared_memory(names)
print(json.dumps({
    "moved": bool((c.params != before).all()),
    "updates": c.optimizer.step_count(),
    "global_step": c.global_step(),
    "names": len(names),
    "on_disk": on_disk,
    "left": [os.path.exists("/dev/shm/" + n.lstrip("/")) for n in names],
}))
"""


def test_a_worker_on_the_server_s_node_updates_the_server_s_state_in_place_and_the_names_are_removed():
    """ParameterServer.shared_channel, unpickled in an unrelated process, maps the server's own memory (its update and
    its steps land in the server's tensors); remove_shared_memory removes every name the run used. In a subprocess:
    the server switches its process to torch's file_system sharing."""
    done = subprocess.run([sys.executable, "-c", SAME_NODE_PROBE], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["moved"] and result["updates"] == 1 and result["global_step"] == 7
    # params, 2 Adam moments, the step slots, the board's rows, counters, steps and stats, the control
    assert result["names"] >= 9 and all(result["on_disk"]) and not any(result["left"])


@pytest.mark.parametrize("same_node", ["shared-memory", "ray"])
def test_ray_backend_writes_the_same_run_directory_and_tags_and_resumes_on_shared_memory(tmp_path, same_node):
    flags = ("--total-steps", "6000", "--checkpoint-every", "3000")
    ray_run = f"ray --ray-same-node {same_node}"
    outputs: dict[str, str] = {}
    dirs = run_backends(tmp_path, ("shared-memory",), *flags)
    with RunShm(os.getpid()) as shm:  # the Ray run's processes are this test's descendants
        dirs["ray"] = run_backends(tmp_path, (ray_run,), *flags, outputs=outputs)[ray_run]
    assert _paths(outputs[ray_run]) == dict.fromkeys(
        range(2), "shared memory" if same_node == "shared-memory" else "actor calls"
    )
    # the server's state (parameters, optimizer, board, control) was in named shared memory, and none of it is left
    # once the driver has exited: RayBackend.close removes it before it returns (no wait here, none needed)
    assert len(shm.names) >= 9, shm.names
    assert not shm.left(), "the parameter server's shared memory outlived the run"
    assert run_files(dirs["ray"]) == run_files(dirs["shared-memory"])
    tags = scalar_tags(dirs["ray"])
    assert tags == scalar_tags(dirs["shared-memory"]) and DESIGN_TAGS <= tags
    for rank in range(2):  # the per-worker streams too
        workers = [dirs[b] / "workers" / str(rank) for b in ("ray", "shared-memory")]
        assert scalar_tags(workers[0]) == scalar_tags(workers[1])
    s = summary(dirs["ray"])
    assert set(s) == set(summary(dirs["shared-memory"]))
    assert s["total_steps"] >= 6000 and s["updates"] > 0 and s["lost_episodes"] == 0
    rows = episode_rows(dirs["ray"])
    assert indexes_contiguous(rows) and {int(r["worker"]) for r in rows} == {0, 1} and s["episodes"] == len(rows)
    ckpt = torch.load(dirs["ray"] / "checkpoints" / "latest.pt", weights_only=True)
    assert ckpt["global_step"] == s["total_steps"] == int(ckpt["worker_steps"].sum())
    assert int(ckpt["optimizer"]["steps"].sum()) == s["updates"]  # every update applied once (server or worker)

    # a run started on Ray goes on under the shared-memory backend from its checkpoint (its Ray-only settings left)
    resumed = subprocess.run(
        train_cmd(dirs["ray"], "--resume", str(dirs["ray"]), "--total-steps", "9000", "--backend", "shared-memory"),
        capture_output=True,
        text=True,
    )
    assert resumed.returncode == 0, resumed.stderr
    s2 = summary(dirs["ray"])
    assert s2["resumed_from_step"] == s["total_steps"] and s2["total_steps"] >= 9000
    resumed_config = json.loads((dirs["ray"] / "config.json").read_text())
    assert resumed_config["backend"] == "shared-memory" and resumed_config["ray_same_node"] == "shared-memory"
    assert indexes_contiguous(episode_rows(dirs["ray"]))


def test_an_unreachable_cluster_is_one_line_and_exit_2_and_leaves_no_run_directory(tmp_path):
    run_dir = tmp_path / "run"
    done = subprocess.run(
        train_cmd(run_dir, *RAY, "--ray-address", "127.0.0.1:9", "--total-steps", "1000"),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("a3c.train: error: --ray-address 127.0.0.1:9: cannot connect to Ray"), done.stderr
    assert "Traceback" not in done.stderr and not run_dir.exists()


def test_ctrl_c_stops_a_ray_run_cleanly_and_leaves_no_ray_process(tmp_path):
    run_dir = tmp_path / "run"
    run = Run(train_cmd(run_dir, *RAY, "--total-steps", "100000000"), tmp_path / "log.txt")
    try:
        with RunShm(run.pid) as shm:
            assert wait_for(lambda: episodes_started(run_dir, 20), timeout=120), run.output()
            shm.poll()
        assert len(shm.names) >= 9, shm.names  # the server's state, in named shared memory
        started = descendants(run.pid)  # the local Ray instance (GCS, raylet) and its worker processes
        assert len(started) >= 4, run.output()
        run.signal_group(signal.SIGINT)  # a terminal's Ctrl-C: the whole process group
        code = run.wait(timeout=30)  # (a hang is caught here)
        out = run.output()
        assert code == 128 + signal.SIGINT, out
        # the workers stopped on the stop, not by the launcher's fallbacks for one that does not (RayLauncher.join)
        assert not any(s in out for s in ("did not stop within", "terminating it", "killing it")), out
        assert wait_for(lambda: not alive(started), timeout=10), f"left running: {alive(started)}"
        assert not shm.left(), "the parameter server's shared memory outlived the run"
    finally:
        run.cleanup()
    s = summary(run_dir)
    assert s["stop_reason"] == "interrupted" and s["episodes"] == len(episode_rows(run_dir))
    assert (run_dir / "checkpoints" / "latest.pt").is_file()


def test_a_sigkilled_driver_leaves_none_of_the_server_s_shared_memory(tmp_path):
    """A driver killed by SIGKILL runs no close(): its reaper (a3c.run.backends.ray.shm_reaper, in its own session)
    removes the parameter server's names once the driver is gone."""
    run_dir = tmp_path / "run"
    run = Run(train_cmd(run_dir, *RAY, "--total-steps", "100000000"), tmp_path / "log.txt")
    started: set[int] = set()
    try:
        with RunShm(run.pid) as shm:
            assert wait_for(lambda: episodes_started(run_dir, 20), timeout=120), run.output()
            shm.poll()
        started = descendants(run.pid)
        assert len(shm.names) >= 9, shm.names  # the server's state: params, optimizer, board, control
        os.kill(run.pid, signal.SIGKILL)  # the driver alone, as the OOM killer would: it runs nothing more
        run.wait(timeout=30)
        assert wait_for(lambda: not shm.left(), timeout=60), f"left in /dev/shm: {shm.left()}"
    finally:
        run.cleanup()
        for pid in alive(started):  # re-parented when the driver died: no longer below run.pid
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


STRAGGLER_PROBE = """
import json, time
import a3c.run.backends.ray.launcher
from a3c.run.backends.ray.backend import RayBackend
from a3c.run.backends.ray.launcher import RayLauncher
from a3c.record.rows import Stat
from a3c.spec.config import Config
from a3c.spec.environment import describe_env

# the grace between the SIGTERM and a kill: 2 s, a bound on Ray's way back (the actor's return reaching the driver)
# that a busy machine can exceed, and then "killing it" read as a straggler that ignored SIGTERM; one that does
# ignore it is still killed, a minute later
a3c.run.backends.ray.launcher.TERMINATE_GRACE_S = 60.0

config = Config(workers=1, envs_per_worker=1, total_steps=10**9, eval_every=0, backend="ray")
spec = describe_env(config.env, {})
backend = RayBackend.start(config, spec)
try:
    c, log = backend.coordinator, []
    launcher = RayLauncher(
        lambda rank: (rank, c.channel(rank), config, spec, time.time(), 0), 1.0, log.append, c.shared_memory_node
    )
    launcher.start(0, 0)
    deadline = time.monotonic() + 240
    while launcher.exitcode(0) is None and time.monotonic() < deadline:
        c.drain()
        if c.stats()[0, Stat.UPDATES] >= 3:  # running, on shared memory (the server's node is this one)
            break
        time.sleep(0.1)
    launcher.join(0.1)  # no stop was asked for: only the launcher can end it
    snap = c.snapshot()
    print(json.dumps({
        "code": launcher.exitcode(0),
        "log": log,
        "applied": int(snap["optimizer"]["steps"].sum()),
        "counted": int(snap["worker_stats"][0, Stat.UPDATES]),
    }))
finally:
    backend.close()
"""


def test_a_same_node_straggler_is_sigtermed_and_finishes_its_update_before_any_kill():
    """A worker actor on the server's node applies its updates to the shared parameters itself: the launcher's join
    ends it as ProcessLauncher ends a worker process (SIGTERM: the loop stops at its top), not by a kill that could
    land inside an update. Here it never sees a stop (none was asked for), so only the SIGTERM can end it: it returns
    (exit code 0), with every update it counted applied."""
    done = subprocess.run([sys.executable, "-c", STRAGGLER_PROBE], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert any("on Ray node" in line and "by shared memory" in line for line in result["log"]), result
    assert any("did not stop within 0.1 s; terminating it" in line for line in result["log"]), result
    assert not any("killing it" in line for line in result["log"]), result
    assert result["code"] == 0, result
    assert result["applied"] == result["counted"] >= 3, result


@pytest.fixture
def cluster():
    """Two Ray nodes on this machine (a head and one more), 4 CPUs each, on 127.0.0.1."""
    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 4, "node_ip_address": "127.0.0.1", "include_dashboard": False},
    )
    other = c.add_node(num_cpus=4, node_ip_address="127.0.0.1")
    c.wait_for_nodes()
    try:
        yield c, other
    finally:
        c.shutdown()


def test_a_lost_node_s_workers_restart_on_the_other_and_the_counts_stay_exact(tmp_path, cluster):
    """The run's budget is out of reach and it is stopped (Ctrl-C) only once the lost node's workers have restarted
    on the head node and written episodes there: it cannot end before the loss is noticed (with a 60,000-step
    budget it once did, on a busy machine, and the restart this test is about never happened)."""
    c, other = cluster
    run_dir = tmp_path / "run"
    cmd = train_cmd(
        run_dir, *RAY, "--ray-address", c.address, "--workers", "4", "--total-steps", "100000000", "--max-restarts", "2"
    )
    run = Run(cmd, tmp_path / "log.txt")
    try:
        assert wait_for(lambda: len(_nodes(run.output())) == 4, timeout=300), run.output()
        placed = _nodes(run.output())
        assert len(set(placed.values())) == 2, f"workers not spread over both nodes: {placed}"
        on_other = {rank for rank, node in placed.items() if node == other.node_id}
        assert on_other and on_other != set(placed)
        # the head node's workers (the server's node) through shared memory, the other's by actor calls
        paths = _paths(run.output())
        assert all(paths[rank] == ("actor calls" if rank in on_other else "shared memory") for rank in placed), paths
        assert wait_for(lambda: episodes_started(run_dir, 50), timeout=120), run.output()
        c.remove_node(other)  # the node is lost: its worker actors die with it

        # (each wait ends early if the run does: a run that failed is reported at once, not after the timeout)
        def moved() -> bool:
            return all(node != other.node_id for node in _nodes(run.output()).values())

        assert wait_for(lambda: run.proc.poll() is not None or moved(), timeout=300) and moved(), run.output()
        written = {rank: len(_rows_of(run_dir, rank)) for rank in on_other}

        def wrote() -> bool:
            return all(len(_rows_of(run_dir, r)) > written[r] for r in on_other)

        assert wait_for(lambda: run.proc.poll() is not None or wrote(), timeout=120) and wrote(), run.output()
        assert run.proc.poll() is None, run.output()
        run.signal_group(signal.SIGINT)
        code = run.wait(timeout=120)
        out = run.output()
    finally:
        run.cleanup()
    assert code == 128 + signal.SIGINT, out
    for rank in on_other:
        assert f"worker {rank} was killed by signal SIGKILL (its Ray actor died" in out
    assert set(_paths(out).values()) == {"shared memory"}  # restarted where they reach the server by shared memory
    s = summary(run_dir)
    assert s["restarts"] == len(on_other) and s["stop_reason"] == "interrupted"
    rows = episode_rows(run_dir)
    assert indexes_contiguous(rows) and s["episodes"] == len(rows) and s["lost_episodes"] == 0
    ckpt = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert ckpt["global_step"] == s["total_steps"] == int(ckpt["worker_steps"].sum())  # no step counted twice
    assert json.loads((run_dir / "config.json").read_text())["backend"] == "ray"
    # the cluster is healthy after the run: every process of its head node still runs
    assert c.head_node.remaining_processes_alive()


def _rows_of(run_dir: Path, rank: int) -> list[dict[str, str]]:
    """The episode rows ``rank`` has written so far (none while episodes.csv does not exist yet)."""
    try:
        return [r for r in episode_rows(run_dir) if int(r["worker"]) == rank]
    except FileNotFoundError:
        return []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def running_cluster():
    """A Ray cluster already running on this machine, as `ray start --head` leaves one, bound to 127.0.0.1, yielding
    the environment a user's shell would have with it (RAY_ADDRESS: what ``ray.init()`` without an address joins).
    Its own temp dir (short: Ray's socket paths must fit 107 characters), so that its ray_current_cluster file is
    seen by no other test's run; ended at teardown through its own ``ray start --block`` process, whose reaper ends
    what it started (``ray stop`` would end every cluster on the machine, other tests' too)."""
    temp = tempfile.mkdtemp(prefix="a3c-ray-", dir="/tmp")
    port = _free_port()
    address = f"127.0.0.1:{port}"
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    cmd = [ray_cli, "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(port)]
    cmd += ["--include-dashboard=false", "--num-cpus", "1", "--temp-dir", temp]
    cmd += ["--ray-client-server-port", str(_free_port()), "--dashboard-agent-listen-port", str(_free_port())]
    cmd += ["--object-store-memory", str(100 * 2**20)]
    with open(os.path.join(temp, "start.log"), "w") as log:
        cli = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        up = wait_for(lambda: _answers(address) or cli.poll() is not None, timeout=120)
        started = open(os.path.join(temp, "start.log")).read()
        assert up and cli.poll() is None, f"ray start did not come up: {started}"
        yield {**os.environ, "RAY_ADDRESS": address}
    finally:
        cluster_processes = descendants(cli.pid)
        cli.terminate()  # (SIGTERM: its reaper ends the GCS, the raylet and their workers)
        try:
            cli.wait(timeout=60)
        except subprocess.TimeoutExpired:
            cli.kill()
        if not wait_for(lambda: not alive(cluster_processes), timeout=30):
            for pid in alive(cluster_processes):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        shutil.rmtree(temp, ignore_errors=True)


def test_without_an_address_a_run_starts_its_own_ray_even_with_a_cluster_running_here(tmp_path, running_cluster):
    """A cluster that `ray start` left on the machine (found through RAY_ADDRESS, as ``ray.init()`` finds one) is not
    joined by a run given no --ray-address: the run starts a local instance of its own and trains. Before, ray.init()
    without an address joined that cluster and refused the local instance's num_cpus: exit 2, "--ray-address None:
    cannot connect to Ray (When connecting to an existing cluster, num_cpus and num_gpus must not be provided.)"."""
    run_dir = tmp_path / "run"
    done = subprocess.run(
        train_cmd(run_dir, *RAY, "--total-steps", "2000"), capture_output=True, text=True, env=running_cluster
    )
    assert done.returncode == 0, done.stderr
    assert "--ray-address None" not in done.stderr, done.stderr
    assert f"starting a local Ray instance of this run's own; RAY_ADDRESS ({running_cluster['RAY_ADDRESS']})" in (
        done.stderr
    )
    assert summary(run_dir)["total_steps"] >= 2000
