"""--backend ray: the same run directory and tags as the shared-memory backend, checkpoints that resume on either
backend, workers spread over a (local, two-node) Ray cluster, a node lost mid-run with its workers restarted on the
other and exact counts, and Ctrl-C leaving no Ray process behind."""

from __future__ import annotations

import json
import re
import signal
import subprocess
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
    summary,
    train_cmd,
    wait_for,
)

ray = pytest.importorskip("ray", reason="--backend ray needs the [ray] extra (.ci/run installs it)")
from ray.cluster_utils import Cluster  # noqa: E402

RAY = ("--backend", "ray", "--eval-every", "0")
PLACEMENT = re.compile(r"a3c: worker (\d+) on Ray node ([0-9a-f]+)")


def _nodes(output: str) -> dict[int, str]:
    """Each rank's node, as the run printed it (the latest actor of the rank)."""
    return {int(rank): node for rank, node in PLACEMENT.findall(output)}


@pytest.mark.timeout(300)
def test_ray_backend_writes_the_same_run_directory_and_tags_and_resumes_on_shared_memory(tmp_path):
    flags = ("--total-steps", "6000", "--checkpoint-every", "3000")
    dirs = run_backends(tmp_path, ("shared-memory", "ray"), *flags, timeout=200)
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
    assert int(ckpt["optimizer"]["steps"].sum()) == s["updates"]  # every update applied once, by the server

    # a run started on Ray goes on under the shared-memory backend from its checkpoint
    resumed = subprocess.run(
        train_cmd(dirs["ray"], "--resume", str(dirs["ray"]), "--total-steps", "9000"),
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert resumed.returncode == 0, resumed.stderr
    s2 = summary(dirs["ray"])
    assert s2["resumed_from_step"] == s["total_steps"] and s2["total_steps"] >= 9000
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
    s = summary(run_dir)
    assert s["restarts"] == len(on_other) and s["total_steps"] >= 60000
    rows = episode_rows(run_dir)
    assert indexes_contiguous(rows) and s["episodes"] == len(rows) and s["lost_episodes"] == 0
    ckpt = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert ckpt["global_step"] == s["total_steps"] == int(ckpt["worker_steps"].sum())  # no step counted twice
    assert json.loads((run_dir / "config.json").read_text())["backend"] == "ray"
    # the cluster is healthy after the run: every process of its head node still runs
    assert c.head_node.remaining_processes_alive()
