"""The benchmark driver's command (scripts/bench.py): a stored run is skipped, the queue's dry run lists what would
run and what is stored, an arm stored with other flags is refused, and an a3c run stopped after its first checkpoint
is resumed by the same command (a second session, its steps going on), its row stored once it finishes."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from procs import PATIENCE, Run, kill_tree, wait_for

from a3c.spec.errors import install_extra
from docsgen import results_store
from scripts import bench
from scripts.benchmark import arms, queue, runner
from scripts.benchmark.store import Store, code_commit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmark"))
from test_store import row  # noqa: E402


def stored_row(env, arm_text, seed, budget, **more):
    arm = arms.parse_arm(arm_text)
    return row(env=env, arm=arm.name, seed=seed, budget=budget, commit=code_commit(), arm_spec=arm.spec(), **more)


def test_a_stored_run_is_skipped_and_nothing_starts(tmp_path, capsys):
    store = Store(tmp_path / "r.jsonl")
    store.append(stored_row("CartPole-v1", "preset=", 1, 1000, final_mean_100=42.0, wall_s=3.0))
    argv = ["run", "--env", "CartPole-v1", "--arm", "preset=", "--seeds", "1", "--budget", "1000"]
    code = bench.main([*argv, "--store", str(store.path), "--work-dir", str(tmp_path / "work")])
    out = capsys.readouterr().out
    assert code == 0 and "1 runs: 1 stored, 0 to run" in out
    assert not (tmp_path / "work").exists() and len(store.rows()) == 1


def test_the_dry_run_lists_what_would_run_and_what_is_stored(tmp_path, capsys, monkeypatch):
    # the queue's envs need Box2D and MuJoCo, which a machine running the tests may lack (the driver then refuses
    # the queue: test_an_env_whose_library_is_missing_is_refused_before_the_runs_are_listed); the listing is tested
    checked = []
    monkeypatch.setattr(bench, "check_env_id", checked.append)
    store = Store(tmp_path / "r.jsonl")
    store.append(stored_row("LunarLander-v3", "preset=", 501, 1_000_000, final_mean_100=250.0, wall_s=160.0))
    runs = queue.load(ROOT / "benchmarks" / "queue.toml")
    stopped = next(r for r in runs if (r.env, r.arm.name, r.seed) == ("LunarLander-v3", "preset", 502))
    checkpoints = stopped.folder(tmp_path / "work", code_commit()) / "run" / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints.parent / "config.json").write_text("{}")
    (checkpoints / "latest.pt").write_bytes(b"")
    argv = ["run", "--queue", str(ROOT / "benchmarks" / "queue.toml"), "--dry-run"]
    assert bench.main([*argv, "--store", str(store.path), "--work-dir", str(tmp_path / "work")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "LunarLander-v3 preset seed 501, 1,000,000 steps: stored (final 250.0, 160 s, commit " in lines[0]
    assert lines[1] == "LunarLander-v3 sb3-ppo seed 501, 1,000,000 steps: run"
    assert lines[2] == "LunarLander-v3 preset seed 502, 1,000,000 steps: resume"
    known = arms.a3c_flags()
    waiting = sum(bool(arms.unknown_flags(r.arm, known)) for r in runs)
    assert len(lines) == len(runs) + 1
    assert lines[-1].startswith(f"{len(runs)} runs: 1 stored, {len(runs) - 1 - waiting} to run, {waiting} waiting")
    assert sum("waits for a3c.train's" in line for line in lines) == waiting
    assert not any((tmp_path / "work").glob("*/sessions.jsonl")) and len(store.rows()) == 1  # nothing ran
    assert checked == sorted({r.env for r in runs})  # (each env of the queue has runs to run)


def test_an_arm_stored_with_other_flags_is_refused(tmp_path, capsys):
    store = Store(tmp_path / "r.jsonl")
    store.append(stored_row("CartPole-v1", "ppo=--algo ppo", 1, 1000))
    argv = ["run", "--env", "CartPole-v1", "--arm", "ppo=--algo ppo --lr 0.01", "--seeds", "2", "--budget", "1000"]
    assert bench.main([*argv, "--store", str(store.path), "--dry-run"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("python -m scripts.bench: error: arm 'ppo' is stored as ") and "a new name" in line


def _checkpoint_at(work: Path, step: int) -> bool:
    return any(int(p.stem.removeprefix("step-")) >= step for p in work.glob("*/run/checkpoints/step-*.pt"))


@pytest.mark.parametrize("stop", ["ctrl-c", "killed"])
def test_a_run_stopped_after_its_first_checkpoint_resumes_with_the_same_command(tmp_path, stop):
    """envs/Faulty-v0 hangs each env at its 100th step: the first session cannot end before it is stopped (two envs
    stop at ~200 of the 300 steps asked, after the checkpoint at 50-step intervals); the second, from the checkpoint
    on, needs fewer than 100 steps an env and ends. Stopped by Ctrl-C, or killed with the driver (a machine shut down,
    a terminal closed: the session then has no end and no summary, and still counts; before, a killed driver's session
    left no line and the row said one session fewer)."""
    store, work = tmp_path / "r.jsonl", tmp_path / "work"
    flags = "--workers 1 --envs-per-worker 2 --n-steps 5 --checkpoint-every 50 --env-kwargs hang_at=100 --eval-every 0"
    argv = ["run", "--env", "envs/Faulty-v0", "--arm", f"hang={flags}", "--seeds", "1", "--budget", "300"]
    argv += ["--store", str(store), "--work-dir", str(work)]
    cmd = [sys.executable, "-m", "scripts.bench", *argv]
    first = Run(cmd, tmp_path / "first.log")
    try:
        # stopped once a checkpoint at step 150 or later is written: from there the second session needs fewer than
        # 100 steps an env. (The Ctrl-C came at the first step file, which a busy machine may write at step 50-100,
        # before the envs hang: a first session stopped there left the second one to hang at each env's 100th step.)
        assert wait_for(lambda: _checkpoint_at(work, 150), 60), first.output()
        if stop == "ctrl-c":
            first.signal_group(signal.SIGINT)  # Ctrl-C in the driver's terminal
            assert first.wait(120) == 128 + signal.SIGINT, first.output()
        else:
            kill_tree(first.pid)  # the driver and its run (in a process group of its own), as a machine shuts down
            assert first.wait(120) == -signal.SIGKILL, first.output()
    finally:
        first.cleanup()
    assert not store.exists()
    (folder,) = work.iterdir()
    (session,) = runner.sessions(folder)
    if stop == "ctrl-c":
        assert "hang seed 1, 300 steps: stopped" in first.output()
        assert session["exit_code"] == 130 and session["summary"]["stop_reason"] == "interrupted"
        stopped_at = session["summary"]["total_steps"]
        assert 150 <= stopped_at < 300  # (the final checkpoint: at or past the step file waited for)
    else:  # begun, never ended
        assert session["exit_code"] is None and session["summary"] is None and "--run-dir" in session["command"]
        stopped_at = 150

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300 * PATIENCE)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "hang seed 1, 300 steps: resume" in second.stdout
    (result,) = Store(store).rows()
    assert result["sessions"] == 2 and "--resume " in result["command"] and result["total_steps"] == 300
    assert result["stop_reason"] == "total_steps" and result["arm"] == "hang" and result["commit"] == code_commit()
    assert result["curve"][-1][0] > stopped_at  # the episodes go on past the first session's
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=120 * PATIENCE)
    assert again.returncode == 0 and "1 runs: 1 stored, 0 to run" in again.stdout and len(Store(store).rows()) == 1


def test_an_evaluated_arm_stores_its_final_and_best_checkpoints_scores_and_a_missing_one_is_made_next_time(tmp_path):
    """--evaluate N: a3c.evaluate on the final checkpoint and on checkpoints/best.pt (the best of the evaluations during
    training); a finished run whose scores are missing (the driver stopped while it evaluated) is evaluated by the
    same command before its row is stored."""
    store, work = tmp_path / "r.jsonl", tmp_path / "work"
    flags = "--workers 1 --n-steps 8 --eval-every 500 --eval-episodes 1 --eval-stochastic"
    argv = ["run", "--env", "CartPole-v1", "--arm", f"ev={flags}", "--seeds", "1", "--budget", "1000"]
    argv += ["--evaluate", "2", "--store", str(store), "--work-dir", str(work)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "scripts.bench", *argv]
    first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300 * PATIENCE)
    assert first.returncode == 0, first.stdout + first.stderr
    (row,) = Store(store).rows()
    assert row["extra"]["eval_episodes"] == 2
    assert row["extra"]["eval_mean_return"] is not None and row["extra"]["eval_best_mean_return"] is not None
    (folder,) = work.iterdir()
    # the scores are of the most likely actions, though the run's own evaluations sampled (one protocol in the store)
    assert all(json.loads((folder / f).read_text())["deterministic"] for f in ("eval.json", "eval_best.json"))
    (folder / "eval_best.json").unlink()
    final_made = (folder / "eval.json").stat().st_mtime_ns
    store.unlink()
    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300 * PATIENCE)
    assert second.returncode == 0, second.stdout + second.stderr
    (again,) = Store(store).rows()
    assert again["extra"]["eval_best_mean_return"] == row["extra"]["eval_best_mean_return"]  # evaluate is seeded
    assert (folder / "eval.json").stat().st_mtime_ns == final_made  # the score made is kept, not made again
    assert len(runner.sessions(folder)) == 1  # no second training session
    # a score made for another --evaluate (or cut short) is not this arm's: made again
    (folder / "eval.json").write_text(json.dumps({"mean_return": 1.0, "episodes": 5}))
    store.unlink()
    third = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300 * PATIENCE)
    assert third.returncode == 0, third.stdout + third.stderr
    (last,) = Store(store).rows()
    assert last["extra"]["eval_mean_return"] == row["extra"]["eval_mean_return"] and last["extra"]["eval_episodes"] == 2


def test_a_run_that_ended_no_episode_is_stored_and_said_so_without_a_traceback(tmp_path, capsys):
    """Bug: a budget shorter than one episode per env (MountainCar-v0's 200 steps x 8 envs) stored its row with no
    final mean, and then the driver's line formatted None: a traceback, and the rest of the queue never started."""
    store = Store(tmp_path / "r.jsonl")
    argv = ["run", "--env", "MountainCar-v0", "--arm", "short=--eval-every 0", "--seeds", "1", "2", "--budget", "800"]
    code = bench.main([*argv, "--workers", "1", "--store", str(store.path), "--work-dir", str(tmp_path / "work")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.count("stored: final - (no episode ended)") == 2 and len(store.rows()) == 2
    assert all(r["final_mean_100"] is None for r in store.rows())
    assert bench.main([*argv, "--workers", "1", "--store", str(store.path), "--dry-run"]) == 0
    assert "stored (final -, " in capsys.readouterr().out


@pytest.mark.parametrize("flag", ["--env CartPole-v0", "--seed 7", "--total-steps=500", "--run-dir x", "--resume x"])
def test_an_arm_that_sets_what_the_driver_sets_is_refused(tmp_path, capsys, flag):
    """Bug: an arm's --env, --seed or --total-steps came after the driver's and won: the row said CartPole-v1 and
    the run trained Acrobot-v1, or it stopped short and was called "failed (exit 0)"."""
    argv = ["run", "--env", "CartPole-v1", "--arm", f"x=--lr 0.01 {flag}", "--seeds", "1", "--budget", "1000"]
    assert bench.main([*argv, "--store", str(tmp_path / "r.jsonl"), "--dry-run"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    name = flag.split()[0].split("=")[0]
    assert f"arm 'x' sets {name}" in line and "the driver" in line
    with pytest.raises(arms.ArmError):
        queue._arm("x", flag, 2, "queue.toml [arms] x")


def test_a_seed_range_too_long_to_run_is_refused_before_it_is_listed(tmp_path, capsys):
    argv = ["run", "--env", "CartPole-v1", "--arm", "a=", "--seeds", "1-1000000000", "--budget", "1000", "--dry-run"]
    assert bench.main([*argv, "--store", str(tmp_path / "r.jsonl")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "1-1000000000" in line and "at most" in line


def test_table_and_figure_name_a_missing_or_unreadable_store_and_a_figure_they_cannot_write(tmp_path, capsys):
    missing = tmp_path / "typo.jsonl"
    assert bench.main(["table", "--store", str(missing)]) == 2
    assert "no such file" in capsys.readouterr().err
    assert bench.main(["table", "--store", str(tmp_path)]) == 2  # a directory
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert str(tmp_path) in line and "Traceback" not in line
    store = Store(tmp_path / "r.jsonl")
    store.append(stored_row("CartPole-v1", "preset=", 1, 1000, final_mean_100=42.0, wall_s=3.0))
    for out in ("fig.txt", "fig"):
        assert bench.main(["figure", "--store", str(store.path), "--out", str(tmp_path / out)]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert "--out" in line and ".png" in line
    assert not list(tmp_path.glob("fig*"))


@pytest.mark.parametrize("view", ["arms", "seeds", "ratio"])
def test_the_table_command_prints_what_a_pages_marker_shows_in_each_view(tmp_path, capsys, view):
    """Found while rerunning the SB3 comparison: the pages' markers take view=ratio and seed=, the command the pages
    give for making a table took neither, so a reader could not print the speed table a page shows."""
    store = Store(tmp_path / "r.jsonl")
    for seed, (ours, theirs) in enumerate([(80_000.0, 8_000.0), (90_000.0, 7_500.0), (70_000.0, 9_000.0)], start=1):
        store.append(stored_row("CartPole-v1", "preset=", seed, 1000, final_mean_100=490.0, steps_per_s=ours))
        store.append(stored_row("CartPole-v1", "sb3-a2c", seed, 1000, final_mean_100=500.0, steps_per_s=theirs))
    argv = ["table", "--store", str(store.path), "--env", "CartPole-v1", "--arm", "preset", "sb3-a2c"]
    argv += ["--seed", "1", "2"]
    assert bench.main([*argv, "--view", view]) == 0
    printed = capsys.readouterr().out.strip()
    marker = f"view={view} env=CartPole-v1 arm=preset,sb3-a2c seed=1,2"
    assert printed == results_store.render(store.path, results_store.parse_filters(marker))
    assert "| 3 |" not in printed


def test_a_ratio_of_other_than_two_arms_is_one_line_naming_the_fix(tmp_path, capsys):
    store = Store(tmp_path / "r.jsonl")
    store.append(stored_row("CartPole-v1", "preset=", 1, 1000, final_mean_100=490.0, steps_per_s=9.0))
    assert bench.main(["table", "--store", str(store.path), "--view", "ratio"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--view ratio: needs two arms of CartPole-v1, not 1; give --arm A B" in line


@pytest.mark.parametrize("flag", ["--budget 0", "--budget -5", "--jobs 0", "--evaluate -1", "--threshold nan"])
def test_run_numbers_out_of_range_are_refused(tmp_path, capsys, flag):
    argv = ["run", "--env", "CartPole-v1", "--arm", "a=", "--seeds", "1", "--budget", "1000", *flag.split()]
    assert bench.main([*argv, "--store", str(tmp_path / "r.jsonl"), "--dry-run"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()  # one line, not argparse's usage block
    assert flag.split()[0] in line and "--help" in line


def _queue_file(tmp_path):
    path = tmp_path / "q.toml"
    path.write_text(
        '[arms]\na = ""\n[[runs]]\nname = "1 small"\nenvs = ["CartPole-v1"]\narms = ["a"]\nseeds = [1]\nbudget = 1000\n'
    )
    return path


@pytest.mark.parametrize(
    "flag",
    ["--env Acrobot-v1", "--seeds 5", "--budget 500", "--arm b=", "--threshold 10", "--workers 4", "--evaluate 3"],
)
def test_a_run_flag_beside_a_queue_is_refused_not_ignored(tmp_path, capsys, flag):
    """The queue names its runs: --env beside --queue used to be ignored, and the whole queue ran."""
    argv = ["run", "--queue", str(_queue_file(tmp_path)), *flag.split(), "--dry-run"]
    assert bench.main([*argv, "--store", str(tmp_path / "r.jsonl")]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert flag.split()[0] in line and "--queue" in line and "CartPole" not in captured.out


def test_only_that_matches_no_block_or_has_no_queue_is_refused(tmp_path, capsys):
    queue_file = _queue_file(tmp_path)
    argv = ["run", "--queue", str(queue_file), "--only", "Nonexistent", "--dry-run", "--store", str(tmp_path / "r")]
    assert bench.main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "'Nonexistent'" in line and "'1 small'" in line
    argv = ["run", "--env", "CartPole-v1", "--arm", "a=", "--seeds", "1", "--budget", "1000", "--only", "small"]
    assert bench.main([*argv, "--dry-run", "--store", str(tmp_path / "r")]) == 2
    assert "--only" in capsys.readouterr().err
    assert (
        bench.main(["run", "--queue", str(queue_file), "--only", "small", "--dry-run", "--store", str(tmp_path / "r")])
        == 0
    )
    assert "CartPole-v1" in capsys.readouterr().out


@pytest.mark.parametrize("env", ["NoSuch-v0", "CartPole-v9", "nosuchmodule:X-v0"])
def test_an_env_id_it_cannot_make_is_refused_before_the_runs_are_listed(tmp_path, capsys, env):
    """Found by probing: a dry run listed NoSuch-v0's runs as "to run" (each failed only when it started, maybe hours
    into a queue). Checked up front, without making any env; the line is a3c.train's for the same id."""
    argv = ["run", "--env", "CartPole-v1", "--env", env, "--arm", "a=", "--seeds", "1", "--budget", "1000"]
    assert bench.main([*argv, "--dry-run", "--store", str(tmp_path / "r")]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert repr(env.split(":")[0] if ":" in env else env) in line and captured.out == ""


def test_a_stored_runs_env_need_not_be_makeable_here(tmp_path, capsys):
    """A reviewer's find: the up-front check made every env of the plan, so a dry run of a queue whose Atari rows are
    stored failed on a machine without ale-py. Only the envs of runs still to run are checked."""
    store = Store(tmp_path / "r.jsonl")
    store.append(stored_row("NoSuch-v0", "preset=", 1, 1000, final_mean_100=1.0, wall_s=3.0))
    argv = ["run", "--env", "NoSuch-v0", "--arm", "preset=", "--seeds", "1", "--budget", "1000", "--dry-run"]
    assert bench.main([*argv, "--store", str(store.path)]) == 0
    assert "1 runs: 1 stored, 0 to run" in capsys.readouterr().out
    assert bench.main([*argv, "--seeds", "2", "--store", str(store.path)]) == 2  # seed 2 is to run
    assert "unknown env id 'NoSuch-v0'" in capsys.readouterr().err


def test_an_env_whose_library_is_missing_is_refused_before_the_runs_are_listed(tmp_path, capsys, monkeypatch):
    """Found reading the driver: its up-front check passed LunarLander-v3 on a machine without Box2D (the id is
    registered), so each of its runs failed as it started, maybe hours into a queue. Said first, in a3c.train's
    words."""
    monkeypatch.setitem(sys.modules, "Box2D", None)  # (its import fails, as where it is not installed)
    for name in [m for m in sys.modules if m.startswith("gymnasium.envs.box2d")]:  # (imported afresh: they import it)
        monkeypatch.delitem(sys.modules, name)
    argv = ["run", "--env", "CartPole-v1", "--env", "LunarLander-v3", "--arm", "a=", "--seeds", "1"]
    assert bench.main([*argv, "--budget", "1000", "--dry-run", "--store", str(tmp_path / "r")]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.endswith(
        f"error: LunarLander-v3 needs Box2D, which is not installed; install the extra: {install_extra('box2d')}"
    )
    assert captured.out == ""


def test_a_list_flag_given_twice_counts_both(tmp_path, capsys):
    """Found by probing: --arm A --arm B planned B's runs alone (argparse kept the last list), so a tuning command
    written one arm a flag ran half its arms without a word. Every list flag of run extends now."""
    argv = ["run", "--env", "CartPole-v1", "--env", "Acrobot-v1", "--arm", "a=", "--arm", "b=--lr 0.01"]
    argv += ["--seeds", "1", "--seeds", "2", "--budget", "1000", "--dry-run", "--store", str(tmp_path / "r")]
    assert bench.main(argv) == 0
    planned = [line for line in capsys.readouterr().out.splitlines() if line.endswith(": run")]
    assert len(planned) == 2 * 2 * 2
    assert {line.split()[1] for line in planned} == {"a", "b"} and {line.split()[0] for line in planned} == {
        "CartPole-v1",
        "Acrobot-v1",
    }


def test_workers_that_is_no_count_is_refused_before_anything_runs(tmp_path, capsys):
    argv = ["run", "--env", "CartPole-v1", "--arm", "a=", "--seeds", "1", "--budget", "1000", "--workers", "foo"]
    assert bench.main([*argv, "--dry-run", "--store", str(tmp_path / "r")]) == 2
    assert "--workers" in capsys.readouterr().err


def test_a_figure_it_cannot_write_is_one_line(tmp_path, capsys):
    store = Store(tmp_path / "r.jsonl")
    store.append(stored_row("CartPole-v1", "preset=", 1, 1000, final_mean_100=42.0, wall_s=3.0))
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert bench.main(["figure", "--store", str(store.path), "--out", str(blocker / "fig.png")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--out" in line and "cannot write" in line


def test_one_arm_name_with_two_specs_in_one_command_is_refused_and_repeats_run_once(tmp_path, capsys):
    """Found by probing: --arm x= "x=--lr 0.001" ran one run and stored it twice, the second row labelled --lr 0.001
    with a command that had none, and the store then refused the arm as it ran; repeated envs or seeds planned and
    stored a run twice."""
    store = tmp_path / "r.jsonl"
    argv = ["run", "--env", "CartPole-v1", "--arm", "x=", "x=--lr 0.001", "--seeds", "1", "--budget", "1000"]
    assert bench.main([*argv, "--store", str(store), "--dry-run"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "arm 'x' is given twice with other flags" in line and "a name of its own" in line
    argv = ["run", "--env", "CartPole-v1", "CartPole-v1", "--arm", "x=", "--seeds", "1", "1", "--budget", "1000"]
    assert bench.main([*argv, "--store", str(store), "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("CartPole-v1 x seed 1, 1,000 steps: run\n1 runs:")


def test_a_run_folder_made_with_other_flags_is_refused(tmp_path, capsys):
    """Found by probing: an arm's flags changed after a Ctrl-C resumed the old checkpoint under the new settings (its
    row labelled with flags its first steps did not run), and a finished run not yet stored was stored under them."""
    work, store = tmp_path / "work", tmp_path / "r.jsonl"
    run = runner.Run("CartPole-v1", arms.parse_arm("a="), 1, 1000)
    folder = run.folder(work, code_commit())
    folder.mkdir(parents=True)
    runner.record_arm(folder, run.arm)
    argv = ["run", "--env", "CartPole-v1", "--seeds", "1", "--budget", "1000", "--store", str(store)]
    argv += ["--work-dir", str(work), "--dry-run"]
    assert bench.main([*argv, "--arm", "a="]) == 0  # the same flags: its own folder
    capsys.readouterr()
    assert bench.main([*argv, "--arm", "a=--gamma 0.9"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "arm 'a' made" in line and "'--gamma', '0.9'" in line and "a new name" in line, line
