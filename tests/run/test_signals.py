"""Ctrl-C (SIGINT to the whole process group), SIGTERM to the main process, a second Ctrl-C, and the death of the main
process: each ends the run in time, leaves no process and no /dev/shm entry behind, and (when orderly) writes the
final checkpoint and summary.json."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from procs import (
    START_METHODS,
    Run,
    alive,
    descendants,
    episodes_started,
    leaked_shm,
    shm_entries,
    summary,
    train_cmd,
    wait_for,
)

LONG = ("--env", "CartPole-v1", "--total-steps", "100000000")  # a run that only a signal ends
# the workers are joined before the main process exits; its fork server and resource tracker exit when they read
# the end of its pipes, which on a machine with a load of 20 took more than 2 s (seen once in a full run)
CHILDREN_EXIT_S = 20.0


def left_running(children):
    """Which children still run, with their command lines (a worker, the fork server, the resource tracker?)."""
    names = {}
    for pid in alive(children):
        try:
            names[pid] = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()[:160]
        except OSError:
            names[pid] = "?"
    return f"left running: {names}"


def _start(tmp_path, start_method, *extra):
    run_dir = tmp_path / "run"
    before = shm_entries()
    run = Run(train_cmd(run_dir, *LONG, *extra, start_method=start_method), tmp_path / "log.txt")
    assert wait_for(lambda: episodes_started(run_dir), timeout=60), run.output()
    children = descendants(run.pid)
    assert len(children) >= 2, children  # the workers (+ forkserver, resource tracker)
    return run, run_dir, before, children


@pytest.mark.parametrize("start_method", START_METHODS)
def test_ctrl_c_to_the_group_stops_in_order(tmp_path, start_method):
    run, run_dir, before, children = _start(tmp_path, start_method)
    try:
        run.signal_group(signal.SIGINT)
        code = run.wait(timeout=30)  # (an orderly shutdown: seconds; the run's --total-steps would take minutes)
        assert code == 130, run.output()
        assert wait_for(lambda: not alive(children), timeout=CHILDREN_EXIT_S), left_running(children)
        assert not leaked_shm(before, children | {run.pid})
        s = summary(run_dir)
        assert s["stop_reason"] == "interrupted" and s["total_steps"] > 0
        ckpt = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
        assert ckpt["global_step"] == s["total_steps"]
        assert "Traceback" not in run.output()
        last = run.output().strip().splitlines()[-1]  # the final line says how to go on
        assert f"go on with: python -m a3c.train --resume {run_dir}" in last, last
    finally:
        run.cleanup()


def test_sigterm_to_the_main_process_stops_in_order(tmp_path):
    run, run_dir, before, children = _start(tmp_path, "fork")
    try:
        run.proc.send_signal(signal.SIGTERM)  # only the main process: it must stop the workers itself
        code = run.wait(timeout=30)
        assert code == 143, run.output()
        assert wait_for(lambda: not alive(children), timeout=CHILDREN_EXIT_S), left_running(children)
        assert not leaked_shm(before, children | {run.pid})
        assert summary(run_dir)["stop_reason"] == "terminated (SIGTERM)"
        assert (run_dir / "checkpoints" / "latest.pt").is_file()
    finally:
        run.cleanup()


def test_second_ctrl_c_exits_at_once_without_orphans(tmp_path):
    # worker 1 hangs in env.step, so the orderly shutdown has to wait JOIN_TIMEOUT_S for it: the second Ctrl-C
    # must cut that short
    run, run_dir, before, children = _start(
        tmp_path,
        "fork",
        "--env",
        "envs/Faulty-v0",
        "--env-kwargs",
        "hang_at=200",
        "hang_ranks=1",
        f"pid_dir={tmp_path}",
    )
    try:
        assert wait_for((tmp_path / "rank-1.hung").exists, timeout=60), run.output()  # worker 1 in its hang
        run.signal_group(signal.SIGINT)
        assert wait_for(lambda: "stopping after the current updates" in run.output(), timeout=30), run.output()
        assert run.proc.poll() is None, "the first Ctrl-C should still be waiting for the hung worker"
        run.signal_group(signal.SIGINT)
        code = run.wait(timeout=30)
        assert code == 130, run.output()
        assert wait_for(lambda: not alive(children), timeout=CHILDREN_EXIT_S), left_running(children)
        assert not leaked_shm(before, children | {run.pid})
        assert "exiting without the final checkpoint" in run.output()
    finally:
        run.cleanup()


def test_a_ctrl_c_while_the_run_waits_for_its_last_evaluation_drops_it_and_writes_the_final_checkpoint(tmp_path):
    """Found in review: at the end of a run the shutdown waited for the evaluation in flight without looking at the
    signals (a long Atari game can take minutes): a first Ctrl-C did nothing, and the second exited at once without
    the final checkpoint. The wait now says so after a moment, and a first Ctrl-C drops the evaluation."""
    run_dir = tmp_path / "run"
    env = ("--env", "envs/Faulty-v0", "--env-kwargs", "hang_at=5", "hang_ranks=evaluator", f"pid_dir={tmp_path}")
    cmd = train_cmd(run_dir, *env, "--total-steps", "4000", "--eval-every", "2000", "--eval-episodes", "1")
    run = Run(cmd, tmp_path / "log.txt")
    try:
        # the evaluator's env hangs (the event), and the end of the run says it waits for it: the wait's line comes
        # after 2 s of waiting, which a slow start of the evaluator under load can fill before the hang
        assert wait_for((tmp_path / "evaluator.hung").exists, timeout=120), run.output()
        assert wait_for(lambda: "waiting for the evaluation at step" in run.output(), timeout=120), run.output()
        run.signal_group(signal.SIGINT)
        code = run.wait(timeout=60)
        assert code == 0, run.output()  # the run had reached --total-steps: completed, its last evaluation dropped
        assert "was dropped (stopped while it ran)" in run.output()
        assert "exiting without the final checkpoint" not in run.output() and "Traceback" not in run.output()
        s = summary(run_dir)
        assert s["stop_reason"] == "total_steps" and s["total_steps"] >= 4000
        ckpt = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
        assert ckpt["global_step"] == s["total_steps"]
    finally:
        run.cleanup()


LATE_CTRL_C_SCRIPT = """
import sys
import a3c

if __name__ == "__main__":
    kwargs = {"hang_at": 5, "hang_ranks": "evaluator", "pid_dir": sys.argv[2]}
    try:
        a3c.train(env="envs/Faulty-v0", env_kwargs=kwargs, workers=2, envs_per_worker=2, total_steps=4000,
                  eval_every=2000, eval_episodes=1, run_dir=sys.argv[1], checkpoint_every=0)
    except KeyboardInterrupt as err:
        print("KeyboardInterrupt:", err)
        sys.exit(7)
    print("returned")
"""


def test_a_ctrl_c_as_a_run_ends_stops_a_script_that_calls_a3c_train(tmp_path):
    """Found in review: a3c.train returned as usual when the Ctrl-C came after the workers had ended (here: while the
    run waited for its last evaluation), so ``for seed in seeds: a3c.train(...)`` started the next run. It raises
    KeyboardInterrupt, as for a Ctrl-C during training."""
    script = tmp_path / "late.py"
    script.write_text(LATE_CTRL_C_SCRIPT)
    run_dir = tmp_path / "run"
    run = Run([sys.executable, str(script), str(run_dir), str(tmp_path)], tmp_path / "log.txt")
    try:
        assert wait_for((tmp_path / "evaluator.hung").exists, timeout=120), run.output()
        assert wait_for(lambda: "waiting for the evaluation at step" in run.output(), timeout=120), run.output()
        run.signal_group(signal.SIGINT)
        assert run.wait(timeout=60) == 7, run.output()
        assert "training interrupted at step" in run.output() and "returned" not in run.output()
        assert summary(run_dir)["total_steps"] >= 4000 and (run_dir / "checkpoints" / "latest.pt").is_file()
    finally:
        run.cleanup()


@pytest.mark.parametrize("start_method", START_METHODS)
def test_workers_exit_when_the_main_process_is_killed(tmp_path, start_method):
    run, run_dir, before, children = _start(tmp_path, start_method)
    try:
        run.proc.kill()  # SIGKILL: no handler, no cleanup in the main process
        run.wait(timeout=10)
        # (each child's parent watch polls every 0.5 s: on an idle machine they are all gone within a second or two)
        assert wait_for(lambda: not alive(children), timeout=CHILDREN_EXIT_S), left_running(children)
        assert not leaked_shm(before, children | {run.pid})
    finally:
        run.cleanup()


def _run_with_probe(script: str, own_group: bool = False) -> subprocess.CompletedProcess:
    """``script`` in a fresh interpreter (the fork server is one per process) that imports tests/_sigint_probe.py
    (``own_group``: in a session and process group of its own, for a signal to its whole group)."""
    tests_dir = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests_dir, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, start_new_session=own_group
    )


def test_fork_server_children_start_safe_from_sigint():
    """Risk closed (f374bab): the fork server was started with SIGINT live, so a worker it forked ran with Python's
    KeyboardInterrupt handler until the worker ignored SIGINT itself; a Ctrl-C in that window (1 in 6 trials)
    printed a worker's traceback. Checked in a fresh interpreter: the fork server is one per process."""
    script = (
        "import multiprocessing as mp\n"
        "from a3c.spec.config import Config\n"
        "from a3c.run.resolve import start_fork_server\n"
        "from _sigint_probe import report_sigint\n"
        "if __name__ == '__main__':\n"
        "    start_fork_server(Config(start_method='forkserver'))\n"
        "    p = mp.get_context('forkserver').Process(target=report_sigint)\n"
        "    p.start(); p.join(120)\n"
        "    raise SystemExit(99 if p.exitcode is None else p.exitcode)  # (99: still running after 120 s)\n"
    )
    done = _run_with_probe(script)
    assert done.returncode == 0, f"the fork server's child began with SIGINT live (exit {done.returncode})"


@pytest.mark.parametrize("start_method", START_METHODS)
def test_a_ctrl_c_while_a_worker_starts_is_not_lost_and_the_worker_is_safe_from_it(start_method):
    """Under the fork server, found by probing: the main process ignored SIGINT through each worker's start(), which
    there waits seconds on a run's first start (the server importing torch), and a Ctrl-C then was thrown away: the
    run trained on to its end. Under fork and spawn the same SIG_IGN, kept for the milliseconds of start() so that
    the child began ignoring SIGINT, lost a Ctrl-C that came in them (and at every restart of a worker). Now SIGINT
    is blocked, not ignored, while a child is made: the child begins with it blocked, and this process's handler has
    the signal once start() is done. Here the signal arrives as start() begins. In a fresh interpreter: the fork
    server is one per process."""
    script = (
        "import multiprocessing as mp, os, signal\n"
        "from a3c.spec.config import Config\n"
        "from a3c.run.resolve import start_fork_server\n"
        "from a3c.run.backends.shared_memory import ProcessLauncher\n"
        "from _sigint_probe import CTRL_C_AT_START, report_sigint_of_worker\n"
        "class Ctx:\n"
        "    def __init__(self, ctx): self.ctx = ctx\n"
        "    def __getattr__(self, name): return getattr(self.ctx, name)\n"
        f"    def Process(self, *args, **kwargs): return CTRL_C_AT_START[{start_method!r}](*args, **kwargs)\n"
        "if __name__ == '__main__':\n"
        "    got = []\n"
        "    signal.signal(signal.SIGINT, lambda *a: got.append(1))\n"
        f"    start_fork_server(Config(start_method={start_method!r}))\n"
        f"    ctx = Ctx(mp.get_context({start_method!r}))\n"
        "    launcher = ProcessLauncher(ctx, report_sigint_of_worker, lambda rank: ())\n"
        "    launcher.start(0, 0)\n"
        "    launcher.procs[0].process.join(120)\n"
        "    code = launcher.procs[0].process.exitcode\n"
        "    raise SystemExit(10 * (not got) + (99 if code is None else code))  # (99: still running)\n"
    )
    done = _run_with_probe(script)
    assert done.returncode != 10, "the Ctrl-C that came as the worker started was lost"
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"


@pytest.mark.parametrize("start_method", START_METHODS)
def test_a_sigterm_to_the_group_while_workers_start_spares_the_fork_server(start_method):
    """Found by probing: SIGTERM to the whole process group (timeout, Slurm's scancel, kill -TERM -PGID) while the
    workers started killed the fork server, which is in the group; the next start() raised EOFError, and the run
    ended in a traceback with a run directory that could neither be reused nor resumed. Children are made with SIGTERM
    blocked as with SIGINT (the fork server keeps it blocked and ends with this process, as it always did); a worker
    lifts the block once its own handler is set. Here the signal comes as the first worker's start() begins; the
    second's start needs the fork server alive. In a fresh interpreter in a group of its own."""
    script = (
        "import multiprocessing as mp, signal\n"
        "from a3c.spec.config import Config\n"
        "from a3c.run.resolve import start_fork_server\n"
        "from a3c.run.backends.shared_memory import ProcessLauncher\n"
        "from _sigint_probe import TERM_TO_GROUP_AT_START, report_sigterm_after_setup\n"
        "class Ctx:\n"
        "    def __init__(self, ctx): self.ctx, self.first = ctx, True\n"
        "    def __getattr__(self, name): return getattr(self.ctx, name)\n"
        "    def Process(self, *args, **kwargs):\n"
        f"        cls = TERM_TO_GROUP_AT_START[{start_method!r}] if self.first else self.ctx.Process\n"
        "        self.first = False\n"
        "        return cls(*args, **kwargs)\n"
        "if __name__ == '__main__':\n"
        "    got = []\n"
        "    signal.signal(signal.SIGTERM, lambda *a: got.append(1))\n"
        f"    start_fork_server(Config(start_method={start_method!r}))\n"
        f"    ctx = Ctx(mp.get_context({start_method!r}))\n"
        "    launcher = ProcessLauncher(ctx, report_sigterm_after_setup, lambda rank: ())\n"
        "    codes = []\n"
        "    for rank in (0, 1):\n"
        "        launcher.start(rank, 0)\n"
        "        launcher.procs[rank].process.join(120)\n"
        "        code = launcher.procs[rank].process.exitcode\n"
        "        codes.append(99 if code is None else code)  # (99: still running after 120 s)\n"
        "    raise SystemExit(10 * (not got) + max(codes))\n"
    )
    done = _run_with_probe(script, own_group=True)
    assert "EOFError" not in done.stderr, done.stderr
    assert done.returncode != 10, "the SIGTERM that came as the worker started did not reach the main process"
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"


@pytest.mark.parametrize("start_method", START_METHODS)
def test_after_its_set_up_a_worker_ignores_sigint_and_no_longer_blocks_it(start_method):
    """The block a child begins with is lifted once the child ignores SIGINT (a3c.run.worker.run_as_process): left
    on, it would pass to every process the worker starts (an env's own subprocesses, which expect the signals as
    usual)."""
    script = (
        "import multiprocessing as mp\n"
        "from a3c.spec.config import Config\n"
        "from a3c.run.resolve import start_fork_server\n"
        "from a3c.run.backends.shared_memory import ProcessLauncher\n"
        "from _sigint_probe import report_sigint_after_setup\n"
        "if __name__ == '__main__':\n"
        f"    start_fork_server(Config(start_method={start_method!r}))\n"
        f"    ctx = mp.get_context({start_method!r})\n"
        "    launcher = ProcessLauncher(ctx, report_sigint_after_setup, lambda rank: ())\n"
        "    launcher.start(0, 0)\n"
        "    launcher.procs[0].process.join(120)\n"
        "    code = launcher.procs[0].process.exitcode\n"
        "    raise SystemExit(99 if code is None else code)  # (99: still running after 120 s)\n"
    )
    done = _run_with_probe(script)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"


def test_a_ctrl_c_caught_by_the_cli_exits_130_even_when_it_came_inside_exec():
    """Found by probing: about one Ctrl-C in six during start-up ended ``python -m a3c.train`` killed by SIGINT (-2 to
    its parent, which reads a Ctrl-C'd run's 130), after the command's own line. CPython marks a KeyboardInterrupt that
    leaves code run by exec() of a string as unhandled even when it is caught later, and under ``python -m`` kills
    itself with SIGINT at exit when so marked."""
    tests_dir = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests_dir, os.environ.get("PYTHONPATH", "")])}
    # (SIGINT at its default in the child, whatever this process inherited: a shell's background job starts with it
    # ignored, and Python then installs no KeyboardInterrupt handler; the probe's Ctrl-C would pass unseen)
    done = subprocess.run(
        [sys.executable, "-m", "_sigint_probe"],
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert done.stderr.strip() == "probe: interrupted (Ctrl-C)", done.stderr
    assert done.returncode == 130, f"exit {done.returncode}"
