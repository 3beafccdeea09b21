"""The run directory's plain files: config.json holds every setting as resolved; the final line a run prints."""

import json
import os
import re
import subprocess

import pytest
from procs import train_cmd

from a3c.record.run_dir import RunDirectory, final_line, round_return
from a3c.spec.config import Config

BASE = {
    "total_steps": 206_840,
    "wall_time_s": 27.71,
    "steps_per_s": 7697.4,
    "episodes": 2071,
    "mean_return_100": 475.09,
    "solved_at_step": 203_752,
    "solved_at_s": 27.23,
    "stop_reason": "solved",
    "resumed_from_step": None,
}


def test_config_json_holds_resolved_run_dir_and_start_method(tmp_path):
    run = RunDirectory(tmp_path)
    run.write_config(Config(workers=3, run_dir=None, start_method=None))
    data = json.loads(run.config_json.read_text())
    assert data["run_dir"] == str(tmp_path)
    assert data["start_method"] == Config().resolved_start_method() and data["start_method"] is not None
    assert data["workers"] == 3 and data["workers_auto"] is None


def test_the_mean_is_rounded():
    assert round_return(-165.92100780778622) == -165.92
    assert round_return(None) is None
    line = final_line({**BASE, "mean_return_100": round_return(-165.92100780778622), "stop_reason": "total_steps"}, "r")
    assert "mean return (last 100) -165.92;" in line


def test_solved_says_at_which_step_and_when():
    line = final_line(BASE, "runs/x")
    assert line.startswith("a3c: solved at step 203,752 (27.2 s); ")
    assert "206,840 steps in 27.7 s (7,697 steps/s), 2,071 episodes, mean return (last 100) 475.09; runs/x" in line


def test_total_steps_and_interrupted():
    done = final_line({**BASE, "stop_reason": "total_steps"}, "r")
    assert done.startswith("a3c: reached --total-steps 206,840; ") and "solved" not in done
    stopped = final_line({**BASE, "stop_reason": "interrupted"}, "r")
    assert stopped.startswith("a3c: stopped: interrupted; ")
    # (with its final checkpoint written: how to go on)
    stopped = final_line({**BASE, "stop_reason": "interrupted", "final_checkpoint_step": 1000}, "runs/r")
    assert "; go on with: python -m a3c.train --resume runs/r; runs/r" in stopped


def test_after_a_resume_this_session_is_told_apart_from_the_run():
    s = {**BASE, "stop_reason": "total_steps", "resumed_from_step": 150_000, "total_steps": 200_000}
    line = final_line(s, "r")
    assert "this session: steps 150,000 -> 200,000 (50,000 steps) in 27.7 s (7,697 steps/s)" in line
    assert "the run: 200,000 steps, 2,071 episodes" in line
    # the run's wall time goes on across sessions: this session's part of it is session_wall_time_s
    resumed = {**s, "wall_time_s": 40.0, "session_wall_time_s": 12.5, "solved_at_s": 35.0, "stop_reason": "solved"}
    line = final_line({**resumed, "solved_at_step": 180_000}, "r")
    assert line.startswith("a3c: solved at step 180,000 (7.5 s into this session); ")
    assert "(50,000 steps) in 12.5 s (7,697 steps/s)" in line
    solved_now = final_line({**BASE, "resumed_from_step": 150_000}, "r")
    assert solved_now.startswith("a3c: solved at step 203,752 (27.2 s into this session); ")
    solved_before = final_line({**BASE, "resumed_from_step": 250_000, "total_steps": 260_000}, "r")
    assert solved_before.startswith("a3c: solved at step 203,752 (in an earlier session); ")


def test_the_final_line_labels_the_training_rate_and_points_out_a_collapse(tmp_path):
    """The steps/s beside "N steps in T s" is over the training window (from the first step), not N / T: labelled.
    A final 100-episode mean far below the run's best says so, and where the best evaluated policy is."""
    line = final_line({**BASE, "stop_reason": "total_steps", "training_time_s": 25.0}, tmp_path)
    assert "206,840 steps in 27.7 s (training 25.0 s at 7,697 steps/s)" in line
    collapsed = {**BASE, "stop_reason": "total_steps", "mean_return_100": 90.01}
    collapsed |= {"best_mean_return_100": 456.0, "best_mean_return_100_at_step": 80_000}
    assert "far below the run's best 100-episode mean, 456 at step 80,000: see episodes.csv" in final_line(
        collapsed, tmp_path
    )
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "best.pt").write_bytes(b"")
    assert "456 at step 80,000: checkpoints/best.pt holds its best evaluated policy" in final_line(collapsed, tmp_path)
    near = {**collapsed, "mean_return_100": 400.0}  # (within a quarter of the best: nothing to say)
    assert "far below" not in final_line(near, tmp_path)
    # a run stopped by its solve shows the window that met the threshold: better windows came from the episodes the
    # workers finished while stopping, not from a collapse (found by running the docs: FrozenLake's 0.7 "far below"
    # 0.94)
    solved = {**collapsed, "stop_reason": "solved", "mean_return_100": 0.7, "best_mean_return_100": 0.94}
    assert "far below" not in final_line(solved, tmp_path)


def test_no_episode_yet():
    line = final_line({**BASE, "mean_return_100": None, "episodes": 0, "stop_reason": "total_steps"}, "r")
    assert "no episode finished" in line and "None" not in line


def test_episodes_whose_returns_were_all_non_finite_are_not_called_none():
    """Found by a probing review: 52 episodes, every return NaN (an env's NaN rewards): the line said "52 episodes, no
    episode finished"."""
    line = final_line({**BASE, "mean_return_100": None, "episodes": 52, "stop_reason": "total_steps"}, "r")
    assert "52 episodes, no finite return to average (see episodes.csv)" in line and "no episode finished" not in line


EASY_MODULE = """
import gymnasium as gym

# CartPole with a threshold a random policy reaches (its mean return is about 22): a run solves within seconds
gym.register(
    "EasyCartPole-v0",
    entry_point="gymnasium.envs.classic_control:CartPoleEnv",
    max_episode_steps=500,
    reward_threshold=15.0,
)
"""


def test_the_real_final_line_when_solved_and_after_a_resume(tmp_path):
    (tmp_path / "a3c_test_easy.py").write_text(EASY_MODULE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])}
    run_dir = tmp_path / "run"
    flags = ("--env", "a3c_test_easy:EasyCartPole-v0", "--stop-when-solved", "--total-steps", "200000")
    first = subprocess.run(train_cmd(run_dir, *flags), capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    s1 = json.loads((run_dir / "summary.json").read_text())
    assert s1["stop_reason"] == "solved" and s1["total_steps"] < 200_000
    assert s1["mean_return_100"] == round(s1["mean_return_100"], 2)
    last = first.stderr.strip().splitlines()[-1]
    assert last.startswith(f"a3c: solved at step {s1['solved_at_step']:,} ({s1['solved_at_s']:.1f} s); ")
    assert f"{s1['total_steps']:,} steps in " in last and f"mean return (last 100) {s1['mean_return_100']:g}" in last

    # resumed as it was (--stop-when-solved is kept from the checkpoint): the window is still solved, so the run would
    # stop at its first episode: refused, naming the window's mean and the fix (it used to stop there, saying "solved")
    target = s1["total_steps"] + 100_000
    resume = train_cmd(run_dir, "--resume", str(run_dir), "--total-steps", str(target))
    refused = subprocess.run(resume, capture_output=True, text=True, env=env)
    assert refused.returncode == 2 and "so it would stop at its first episode" in refused.stderr, refused.stderr
    window = float(re.search(r"last 100 episodes average ([0-9.]+)", refused.stderr).group(1))
    # with a threshold above the window, the session trains on until it meets it, and its final line says so
    second = subprocess.run([*resume, "--stop-at", f"{window + 3:.1f}"], capture_output=True, text=True, env=env)
    assert second.returncode == 0, second.stderr
    s2 = json.loads((run_dir / "summary.json").read_text())
    last = second.stderr.strip().splitlines()[-1]
    # (the session goes on from the final checkpoint: the one taken at the solve, before the last updates in flight)
    resumed_at = s1["final_checkpoint_step"]
    assert s1["solved_at_step"] <= resumed_at <= s1["total_steps"]
    assert s2["stop_reason"] == "solved" and s2["stopped_solved_at_step"] > resumed_at
    assert last.startswith(f"a3c: solved at step {s2['stopped_solved_at_step']:,} (") and "into this session" in last
    session = s2["total_steps"] - resumed_at
    assert f"this session: steps {resumed_at:,} -> {s2['total_steps']:,} ({session:,} steps) in " in last
    assert f"the run: {s2['total_steps']:,} steps, {s2['episodes']:,} episodes" in last


def _config_json_cannot_be_written(monkeypatch) -> None:
    """config.json's temporary file is on a full disk (the first write of a new run)."""
    import builtins
    import errno

    from a3c.record import files

    def fake_open(path, *args, **kwargs):
        if os.path.basename(path) == "config.json.tmp":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(files, "open", fake_open, raising=False)


@pytest.mark.parametrize("existed", [False, True], ids=["new-dir", "empty-dir"])
def test_a_new_run_that_cannot_write_config_json_leaves_its_directory_as_it_found_it(tmp_path, monkeypatch, existed):
    """Bug (review of issue 22): when config.json could not be written for a new run with an explicit --run-dir,
    RunDirectory.create had already made checkpoints/ and plots/, so the advice "start the run again" failed (the
    directory is "not empty"). The failed start removes what it made, and only that."""
    from a3c.record.run_dir import RunDirWriteError
    from a3c.run.resolve import check_new_run_dir

    path = tmp_path / "runs" / "mine"
    if existed:
        path.mkdir(parents=True)
    _config_json_cannot_be_written(monkeypatch)
    run = RunDirectory.create(Config(run_dir=str(path)))
    assert run.checkpoints.is_dir() and run.plots.is_dir()
    with pytest.raises(RunDirWriteError) as err:
        run.write_config(Config(run_dir=str(path)))
    assert path.is_dir() == existed and (not existed or list(path.iterdir()) == [])
    assert (tmp_path / "runs").is_dir() == existed  # (a parent it made too)
    line = err.value.line(path, resumable=False)
    assert line.endswith("then start the run again (it has no checkpoint to resume from)"), line
    check_new_run_dir(path)  # what starting again checks: passes
    # a directory that holds something else is left alone
    other = tmp_path / "other"
    run = RunDirectory.create(Config(run_dir=str(other)))
    (run.plots / "mine.png").write_bytes(b"")
    with pytest.raises(RunDirWriteError):
        run.write_config(Config(run_dir=str(other)))
    assert sorted(p.name for p in other.iterdir()) == ["plots"] and (other / "plots" / "mine.png").is_file()


def test_the_advice_after_a_failed_write_names_the_directory_to_remove_when_it_holds_files(tmp_path):
    """A run that wrote files before a write failed, and has no checkpoint: starting it again in the same --run-dir
    is refused ("not empty"), so the last line says to remove it (or to give another --run-dir) first."""
    import errno

    from a3c.record.run_dir import RunDirWriteError

    err = RunDirWriteError("episodes.csv", OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    (tmp_path / "episodes.csv").write_text("worker\n")
    line = err.line(tmp_path, resumable=False)
    assert f"then remove {tmp_path} (or give another --run-dir) and start the run again" in line, line
    assert err.line(tmp_path, resumable=True).endswith(f"then --resume {tmp_path}")


def test_start_the_run_again_works_after_config_json_could_not_be_written(tmp_path, monkeypatch, capfd):
    """The command line: the failed start ends with one line whose advice, followed (the same command again once
    the disk has room), starts the run."""
    from a3c.spec.errors import run_cli
    from a3c.train import main as train_main

    run_dir = tmp_path / "run"
    argv = ["--backend", "serial", "--workers", "1", "--envs-per-worker", "2", "--total-steps", "200"]
    argv += ["--eval-every", "0", "--run-dir", str(run_dir)]
    with monkeypatch.context() as patch:
        _config_json_cannot_be_written(patch)
        assert run_cli(train_main, argv, prog="a3c.train") == 1
    last = capfd.readouterr().err.strip().splitlines()[-1]
    assert last.endswith(
        "while writing config.json; free space, then start the run again (it has no checkpoint to resume from)"
    ), last
    assert run_cli(train_main, argv, prog="a3c.train") == 0, capfd.readouterr().err
    assert (run_dir / "config.json").is_file() and (run_dir / "checkpoints" / "latest.pt").is_file()


def test_episodes_csv_rows_are_compact_and_keep_what_the_worker_had(tmp_path):
    """Issue 27: a run of millions of one-step episodes (Blackjack-v1) wrote 120 bytes a row, every float as its
    full repr. The return stays exact, the losses keep float32's precision (7 significant digits), the wall time
    its millisecond; a one-step episode's row is about 70 bytes."""
    import numpy as np

    from a3c.record.rows import FIELD, FIELDS, Episode
    from a3c.record.run_dir import EpisodeLog

    values = np.zeros(len(FIELDS))
    ret = 0.1 + 0.2  # not a short decimal: kept exactly
    values[FIELD["return"]], values[FIELD["length"]], values[FIELD["global_step"]] = ret, 1, 41_824
    loss = float(np.float32(0.096))  # a float32 loss, widened: 0.09599997848272324
    values[FIELD["loss"]], values[FIELD["policy_loss"]] = loss, -0.05850466340780258
    values[FIELD["value_loss"]], values[FIELD["entropy"]] = float("nan"), 0.0715017318725586
    values[FIELD["wall_time"]] = 23.919488191604614
    log = EpisodeLog(tmp_path / "episodes.csv")
    log.append([Episode(0, 15_043, values)])
    log.close()
    header, row = (tmp_path / "episodes.csv").read_text().splitlines()
    assert header.split(",")[:3] == ["worker", "index", "return"]
    parsed = dict(zip(header.split(","), row.split(","), strict=True))
    assert float(parsed["return"]) == ret and parsed["length"] == "1" and parsed["global_step"] == "41824"
    assert np.float32(float(parsed["loss"])) == np.float32(loss) and parsed["value_loss"] == "nan"
    assert parsed["wall_time"] == "23.919" and len(row) <= 80, row  # 120 before


def test_the_default_run_directory_is_named_by_the_objective():
    """Before: a PPO run went to runs/CartPole-v1__a3c__1__T (the experiment name's default was "a3c")."""
    from a3c.record.run_dir import default_run_dir

    assert default_run_dir(Config(algo="ppo", env="ALE/Pong-v5"), now=17).name == "ALE_Pong-v5__ppo__1__17"
    assert default_run_dir(Config(env="CartPole-v1"), now=17).name == "CartPole-v1__a3c__1__17"
    assert default_run_dir(Config(algo="ppo", exp_name="mine"), now=17).name == "CartPole-v1__mine__1__17"


def test_a_budget_passed_says_why_the_run_went_past_it():
    """Before: "reached --total-steps 212,992" for a requested 200,000."""
    line = final_line({**BASE, "stop_reason": "total_steps", "total_steps": 212_992}, "r", budget=200_000)
    assert line.startswith(
        "a3c: reached --total-steps 200,000 (at 212,992: each worker ends the rollout and update it is in); "
    )
    exact = final_line({**BASE, "stop_reason": "total_steps", "total_steps": 200_000}, "r", budget=200_000)
    assert exact.startswith("a3c: reached --total-steps 200,000; ")


def test_a_directory_that_is_not_empty_suggests_resume_only_where_a_run_can_go_on(tmp_path):
    """The "not empty" refusal suggested --resume for any directory, which then failed ("no checkpoint") where the
    directory held something else, or a run that ended before its first checkpoint."""
    from a3c.record.run_dir import check_new_run_dir
    from a3c.spec.errors import UserError

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UserError) as err:
        check_new_run_dir(tmp_path)
    assert "--resume" not in str(err.value) and "choose a new directory" in str(err.value)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "latest.pt").write_bytes(b"")
    with pytest.raises(UserError, match=rf"or --resume {tmp_path} to continue"):
        check_new_run_dir(tmp_path)
