"""--backend ray: the same run directory and tags as the shared-memory backend (workers on the server's node reaching
it through shared memory, and by actor calls), checkpoints that resume on either backend, no shared memory left
behind, workers spread over a (local, two-node) Ray cluster with each node's own way to the server, a node lost
mid-run with its workers restarted on the other and exact counts, and Ctrl-C leaving no Ray process behind."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

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


SAME_NODE_PROBE = """
import json, os, pickle, subprocess, sys
from a3c.backends.ray_backend import ParameterServer, remove_shared_memory
from a3c.config import Config
from a3c.environment import describe_env

config = Config(workers=2, eval_every=0)
server = ParameterServer(describe_env(config.env, {}), config)  # no Ray needed to build one: its state, in this process
before = server.coordinator.params.clone()
names = server.shared_memory_names()
# another process, not a child sharing this one's descriptors (close_fds): what a worker actor on this node is
worker = (
    "import pickle, sys, torch; channel = pickle.loads(sys.stdin.buffer.read()); "
    "channel.push(torch.ones_like(channel.params), 0); channel.publish(7, [], channel.load_stats())"
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
    done = subprocess.run([sys.executable, "-c", SAME_NODE_PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["moved"] and result["updates"] == 1 and result["global_step"] == 7
    # params, 2 Adam moments, the step slots, the board's rows, counters, steps and stats, the control
    assert result["names"] >= 9 and all(result["on_disk"]) and not any(result["left"])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("same_node", ["shared-memory", "ray"])
def test_ray_backend_writes_the_same_run_directory_and_tags_and_resumes_on_shared_memory(tmp_path, same_node):
    flags = ("--total-steps", "6000", "--checkpoint-every", "3000")
    before = _torch_shm()
    ray_run = f"ray --ray-same-node {same_node}"
    outputs: dict[str, str] = {}
    dirs = run_backends(tmp_path, ("shared-memory", ray_run), *flags, timeout=200, outputs=outputs)
    dirs["ray"] = dirs.pop(ray_run)
    assert _paths(outputs[ray_run]) == dict.fromkeys(
        range(2), "shared memory" if same_node == "shared-memory" else "actor calls"
    )
    assert not _torch_shm() - before, "the parameter server's shared memory outlived the run"
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
        timeout=100,
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
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("a3c.train: error: --ray-address 127.0.0.1:9: cannot connect to Ray"), done.stderr
    assert "Traceback" not in done.stderr and not run_dir.exists()


@pytest.mark.timeout(240)
def test_ctrl_c_stops_a_ray_run_cleanly_and_leaves_no_ray_process(tmp_path):
    run_dir = tmp_path / "run"
    before = _torch_shm()
    run = Run(train_cmd(run_dir, *RAY, "--total-steps", "100000000"), tmp_path / "log.txt")
    try:
        assert wait_for(lambda: episodes_started(run_dir, 20), timeout=120), run.output()
        started = descendants(run.pid)  # the local Ray instance (GCS, raylet) and its worker processes
        assert len(started) >= 4, run.output()
        t0 = time.monotonic()
        run.signal_group(signal.SIGINT)  # a terminal's Ctrl-C: the whole process group
        code = run.wait(timeout=30)
        took = time.monotonic() - t0
        assert code == 128 + signal.SIGINT, run.output()
        assert took < 10, f"took {took:.1f} s to stop"
        assert wait_for(lambda: not alive(started), timeout=10), f"left running: {alive(started)}"
        assert not _torch_shm() - before, "the parameter server's shared memory outlived the run"
    finally:
        run.cleanup()
    s = summary(run_dir)
    assert s["stop_reason"] == "interrupted" and s["episodes"] == len(episode_rows(run_dir))
    assert (run_dir / "checkpoints" / "latest.pt").is_file()


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


@pytest.mark.timeout(600)
def test_a_lost_node_s_workers_restart_on_the_other_and_the_counts_stay_exact(tmp_path, cluster):
    c, other = cluster
    run_dir = tmp_path / "run"
    cmd = train_cmd(
        run_dir, *RAY, "--ray-address", c.address, "--workers", "4", "--total-steps", "60000", "--max-restarts", "2"
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
        code = run.wait(timeout=300)
        out = run.output()
    finally:
        run.cleanup()
    assert code == 0, out
    for rank in on_other:
        assert f"worker {rank} was killed by signal SIGKILL (its Ray actor died" in out
    after = _nodes(out)
    assert all(node != other.node_id for node in after.values())  # restarted on the head node
    assert set(_paths(out).values()) == {"shared memory"}  # ... where they reach the server through shared memory
    s = summary(run_dir)
    assert s["restarts"] == len(on_other) and s["total_steps"] >= 60000
    rows = episode_rows(run_dir)
    assert indexes_contiguous(rows) and s["episodes"] == len(rows) and s["lost_episodes"] == 0
    ckpt = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert ckpt["global_step"] == s["total_steps"] == int(ckpt["worker_steps"].sum())  # no step counted twice
    assert json.loads((run_dir / "config.json").read_text())["backend"] == "ray"
    # the cluster is healthy after the run: every process of its head node still runs
    assert c.head_node.remaining_processes_alive()
