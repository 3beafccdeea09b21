"""One run's life (scripts/benchmark/runner.py): what the driver does with a run folder (store, resume, run again),
and the row a finished run leaves, counted over all its sessions."""

import csv
import json
from pathlib import Path

import pytest

from scripts.benchmark import arms, runner

A3C = arms.parse_arm("a3c=")
PEER = arms.parse_arm("sb3-a2c")


def a3c_run_dir(folder, summaries, episodes, sessions=True):
    """A run folder as a3c.train and the driver leave it: config, a checkpoint, episodes, one session per summary
    (``sessions`` False: the run directory alone, the driver writing its own)."""
    run_dir = folder / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "config.json").write_text("{}")
    (run_dir / "checkpoints" / "latest.pt").write_bytes(b"")
    (run_dir / "summary.json").write_text(json.dumps(summaries[-1]))
    with open(run_dir / "episodes.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["worker", "index", "return", "global_step", "wall_time", "length"])
        out.writerows([[0, i, ret, step, wall, 1] for i, (step, wall, ret) in enumerate(episodes)])
    if not sessions:
        return run_dir
    with open(folder / "sessions.jsonl", "w") as f:
        for i, s in enumerate(summaries):
            f.write(
                json.dumps({"command": f"session {i}", "exit_code": 0, "summary": s, "machine": {"cores": 2}}) + "\n"
            )
    return run_dir


def test_the_state_of_a_run_folder(tmp_path):
    run = runner.Run("CartPole-v1", A3C, 1, 1000)
    folder = run.folder(tmp_path, "abc")
    assert folder.name == "CartPole-v1__a3c__1__1000__abc"
    assert runner.state(run, tmp_path, "abc") == "run"  # nothing yet
    stopped = {"stop_reason": "interrupted", "total_steps": 400}
    a3c_run_dir(folder, [stopped], [(100, 1.0, 5.0)])
    assert runner.state(run, tmp_path, "abc") == "resume"  # a checkpoint: --resume
    assert runner.state(run, tmp_path, "other-commit") == "run"  # another commit's run is another run
    peer = runner.Run("CartPole-v1", PEER, 1, 1000)
    (peer.folder(tmp_path, "abc") / "run").mkdir(parents=True)
    assert runner.state(peer, tmp_path, "abc") == "run"  # a peer stopped early starts again
    (folder / "run" / "summary.json").write_text(json.dumps({"stop_reason": "total_steps", "total_steps": 1000}))
    assert runner.state(run, tmp_path, "abc") == "store"  # finished, not stored yet
    (folder / "run" / "summary.json").write_text(json.dumps({"stop_reason": "solved", "total_steps": 600}))
    assert runner.state(run, tmp_path, "abc") == "store"


def test_the_row_of_a_resumed_run_counts_every_session(tmp_path):
    run = runner.Run("CartPole-v1", A3C, 1, 1000, threshold=15.0)
    first = {"stop_reason": "interrupted", "total_steps": 400, "resumed_from_step": None, "training_time_s": 2.0}
    second = {
        "stop_reason": "total_steps",
        "total_steps": 1000,
        "resumed_from_step": 300,  # the checkpoint it went on from: steps 300-400 ran twice
        "training_time_s": 5.0,
        "wall_time_s": 9.0,
        "workers": 2,
        "algo": "a3c",
    }
    episodes = [(100 * i, 0.9 * i, float(i)) for i in range(1, 121)]
    folder = run.folder(tmp_path, "abc")
    a3c_run_dir(folder, [first, second], episodes)
    row = runner.row_of(run, folder, "abc", "python -m scripts.bench run ...")
    assert row["sessions"] == 2 and row["command"] == "session 1" and row["machine"] == {"cores": 2}
    assert row["train_s"] == 7.0 and row["steps_per_s"] == (400 + 700) / 7.0
    assert row["wall_s"] == 9.0 and row["total_steps"] == 1000 and row["episodes"] == 120
    assert row["extra"]["bf16"] is None  # (no config.json here; a run's says whether its network ran in bfloat16)
    (folder / "run" / "config.json").write_text(json.dumps({"bf16": True}))
    assert runner.row_of(run, folder, "abc", "")["extra"]["bf16"] is True
    assert row["final_mean_100"] == sum(range(21, 121)) / 100
    # the first full window (episode 100, step 10,000, 90 s) already has a mean of 50.5 >= 15
    assert (row["reached_at_step"], row["reached_at_s"]) == (10000, 90.0)
    assert row["curve"][-1] == [12000, 108.0, row["final_mean_100"]] and len(row["curve"]) == 120
    assert row["extra"]["algo"] == "a3c" and row["workers"] == 2
    assert row["arm_spec"] == A3C.spec()


def test_the_machine_says_whether_it_has_bfloat16_instructions(monkeypatch):
    """Atari's preset computes in bfloat16 only where the CPU has the instructions: a row must say which it had."""
    from scripts import _common

    for has in (True, False):
        monkeypatch.setattr(_common, "native_bf16", lambda has=has: has)
        assert runner.host()["bf16_instructions"] is has


def test_a_run_another_driver_holds_is_left_alone(tmp_path):
    import fcntl

    from scripts.benchmark.store import Store

    run = runner.Run("CartPole-v1", A3C, 1, 1000)
    folder = run.folder(tmp_path, "abc")
    folder.mkdir(parents=True)
    with open(folder / "lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        store = Store(tmp_path / "r.jsonl")
        outcome = runner.execute(run, store, tmp_path, "abc", "cmd", runner.Children())
        assert outcome == ("running elsewhere", None)
    assert not (folder / "sessions.jsonl").exists() and not store.path.exists()


def test_a_session_killed_with_its_driver_counts_and_its_end_replaces_its_start(tmp_path):
    """sessions.jsonl: a session's line as it starts (no summary), again as it ends (the same id: it replaces the
    first). A session whose driver was killed has only the first: it counts in the row's sessions, not in steps/s."""
    run = runner.Run("CartPole-v1", A3C, 1, 1000)
    folder = run.folder(tmp_path, "abc")
    ended = {"stop_reason": "total_steps", "total_steps": 1000, "resumed_from_step": 200, "training_time_s": 4.0}
    a3c_run_dir(folder, [ended], [(10 * i, 0.1 * i, 1.0) for i in range(1, 101)])
    killed = {"session_id": "k", "command": "first", "exit_code": None, "summary": None, "machine": {"cores": 16}}
    began = {"session_id": "e", "command": "second", "exit_code": None, "summary": None, "machine": {"cores": 2}}
    (folder / "sessions.jsonl").write_text(
        "\n".join(json.dumps(e) for e in [killed, began, {**began, "exit_code": 0, "summary": ended}]) + "\n"
    )
    log = runner.sessions(folder)
    assert [(s["command"], s["exit_code"]) for s in log] == [("first", None), ("second", 0)]
    row = runner.row_of(run, folder, "abc", "cmd")
    assert row["sessions"] == 2 and row["command"] == "second" and row["machine"] == {"cores": 16}
    assert row["train_s"] == 4.0 and row["steps_per_s"] == 800 / 4.0  # the ended session's steps and time


class _FinishingChildren(runner.Children):
    """A run that finishes at once: its run directory as a finished a3c.train leaves it, exit 0."""

    def start(self, argv, out, lock=None):
        summary = {"stop_reason": "total_steps", "total_steps": 1000, "training_time_s": 2.0, "wall_time_s": 3.0}
        folder = Path(argv[argv.index("--run-dir") + 1]).parent
        a3c_run_dir(folder, [summary], [(10 * i, 0.03 * i, 1.0) for i in range(100)], sessions=False)
        return None

    def wait(self, child):
        return 0


def test_a_run_started_again_from_the_beginning_sets_its_earlier_sessions_aside(tmp_path):
    """A driver killed before the run's first checkpoint leaves a session line (begun, never ended) and no checkpoint:
    the next time, the run starts from the beginning, and the row counts that one session, not the lost attempt."""
    from scripts.benchmark.store import Store

    run = runner.Run("CartPole-v1", A3C, 1, 1000)
    folder = run.folder(tmp_path, "abc")
    folder.mkdir(parents=True)
    lost = {"session_id": "k", "command": "lost", "exit_code": None, "summary": None, "machine": {"cores": 16}}
    (folder / "sessions.jsonl").write_text(json.dumps(lost) + "\n")
    assert runner.state(run, tmp_path, "abc") == "run"
    store = Store(tmp_path / "r.jsonl")
    outcome, row = runner.execute(run, store, tmp_path, "abc", "cmd", _FinishingChildren())
    assert outcome == "stored" and row["sessions"] == 1 and row["machine"] != {"cores": 16}
    assert "--run-dir" in row["command"] and row["steps_per_s"] == 1000 / 2.0
    assert [json.loads(line)["command"] for line in (folder / "discarded_sessions.jsonl").read_text().splitlines()] == [
        "lost"
    ]


def test_a_session_line_cut_short_by_a_crash_is_skipped(tmp_path):
    (tmp_path / "sessions.jsonl").write_text('{"session_id": "a", "command": "one"}\n{"session_id": "b", "comm\n')
    assert [s["command"] for s in runner.sessions(tmp_path)] == ["one"]


def test_the_threshold_of_an_id_is_the_one_a3c_train_uses():
    """Found by review: an id without a version (which a3c.train takes at its highest) got no threshold (gym.spec
    has none for it), so its row had no reached_at step where the run had one."""
    assert runner.env_threshold("CartPole") == runner.env_threshold("CartPole-v1") == 475.0
    assert runner.env_threshold("NoSuchThing-v0") is None


def test_a_folder_whose_only_checkpoint_is_best_pt_runs_again(tmp_path):
    """Found by probing: a run stopped after an evaluation but before its first checkpoint held best.pt alone, which
    --resume cannot go on from ("no checkpoints/latest.pt"): the same command failed every time. It runs again."""
    run = runner.Run("CartPole-v1", A3C, 1, 1000)
    run_dir = run.folder(tmp_path, "abc") / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "config.json").write_text("{}")
    (run_dir / "checkpoints" / "best.pt").write_bytes(b"")
    assert runner.state(run, tmp_path, "abc") == "run"
    (run_dir / "checkpoints" / "step-400.pt").write_bytes(b"")
    assert runner.state(run, tmp_path, "abc") == "resume"


def test_signals_that_come_while_the_children_are_held_do_not_lock_the_driver():
    """Found by probing: the signal handler took a lock that was not re-entrant; a second Ctrl-C arriving inside the
    handler (or one arriving while the main thread held the lock, starting or reaping a run) waited on it forever,
    and the driver ignored SIGTERM after. Here the handler runs while its own thread holds the lock."""
    import signal
    import threading

    children = runner.Children()
    done = threading.Event()

    def held_then_signalled():
        with children._lock:
            children.forward(signal.SIGINT)
            children.forward(signal.SIGINT)
        done.set()

    threading.Thread(target=held_then_signalled, daemon=True).start()
    assert done.wait(30), "the handler waited on the lock its own thread held"
    assert children.stopping == signal.SIGINT


def test_a_niced_driver_starts_its_runs_as_niced_where_the_kernel_groups_sessions():
    """Found by measuring: a run starts in a session of its own (so that a terminal's Ctrl-C reaches the driver
    only), and where the kernel schedules sessions as groups (sched_autogroup) a new session's group weighs as much
    as any other, whatever the niceness of its processes: the "nice -n 10" Atari run took half of a 2-core machine
    beside a timed run at nice 0. The driver gives a run's session group its own niceness (7 over the test's)."""
    import os
    import subprocess
    import sys

    if not Path("/proc/self/autogroup").exists():
        pytest.skip("no scheduler session groups here (/proc/self/autogroup)")
    run = [sys.executable, "-c", "import time; time.sleep(0.5)"]
    driver = (
        "import os\n"
        "from scripts.benchmark import runner\n"
        "os.nice(7)\n"
        "children = runner.Children()\n"
        f"proc = children.start({run!r}, None)\n"
        "print(os.getpriority(os.PRIO_PROCESS, 0), open(f'/proc/{proc.pid}/autogroup').read().split()[-1])\n"
        "children.wait(proc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", driver],
        capture_output=True,
        text=True,
        cwd=runner.REPO,
        env={**os.environ, "PYTHONPATH": str(runner.REPO)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    driver_nice, group_nice = done.stdout.split()  # (7 over whatever niceness the test itself runs at)
    assert int(driver_nice) >= 7 and group_nice == driver_nice, done.stdout
