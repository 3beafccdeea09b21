"""--resume RUN_DIR: the global step, the optimizer state and the episode indexes go on; episodes.csv is appended;
TensorBoard shows no step twice, even after a crash between the last checkpoint and the end (kill -9)."""

import csv
import json
import signal
import subprocess

import numpy as np
import pytest
import torch
from procs import (
    PATIENCE,
    Run,
    alive,
    descendants,
    episode_rows,
    episodes_started,
    indexes_contiguous,
    summary,
    train_cmd,
    wait_for,
)
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import a3c
import a3c.learn.update.step
from a3c.plot import main as plot_main
from a3c.plot import read_episodes
from a3c.record.figures import comparison_figure
from a3c.record.resume import newest_intact


def _scalar_steps(run_dir, tag):
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})  # purge_orphaned_data=True, as TensorBoard
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)]


def test_resume_continues_the_step_count(tmp_path):
    run_dir = tmp_path / "run"
    first = subprocess.run(train_cmd(run_dir, "--total-steps", "2000"), capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    s1 = summary(run_dir)
    ckpt1 = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    rows1 = episode_rows(run_dir)

    second = subprocess.run(
        train_cmd(run_dir, "--resume", str(run_dir), "--total-steps", "4000"),
        capture_output=True,
        text=True,
    )
    assert second.returncode == 0, second.stderr
    assert f"resuming {run_dir} at step {s1['total_steps']:,}" in second.stderr
    s2 = summary(run_dir)
    assert s2["resumed_from_step"] == s1["total_steps"]
    assert 4000 <= s2["total_steps"] <= 4000 + 2 * 2 * 5
    ckpt2 = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    # the optimizer's step counts (Adam's bias correction) went on from the checkpoint, not from zero
    assert ckpt2["optimizer"]["steps"].sum() > ckpt1["optimizer"]["steps"].sum()
    assert s2["updates"] == int(ckpt2["optimizer"]["steps"].sum())
    assert (ckpt1["session"], ckpt2["session"]) == (0, 1)  # the resumed session's workers draw fresh seeds
    rows2 = episode_rows(run_dir)
    assert rows2[: len(rows1)] == rows1  # appended, the first session's rows untouched
    assert indexes_contiguous(rows2)
    assert s2["episodes"] == len(rows2)
    assert all(int(r["global_step"]) > s1["total_steps"] - 20 for r in rows2[len(rows1) :])
    steps = _scalar_steps(run_dir, "charts/SPS")
    assert steps == sorted(set(steps)) and steps[-1] > s1["total_steps"]


# ten-step episodes by the thousand: many end in the rollout during which a checkpoint is taken (every episode a
# TensorBoard point, to compare TensorBoard with episodes.csv one to one). Not three-step ones: since the workers'
# arithmetic moved to numpy, 2 workers make ~7,000 of those a second, more than the main process logs on 2 cores,
# so the episode board overflows and counts them lost (summary.json's lost_episodes: 1,000-2,200 of 25,000 in an
# 80,000-step run), which breaks the contiguity this test checks for another reason; ten-step ones lose none
SHORT_EPISODES = ("--env", "envs/Classify-v0", "--env-kwargs", "episode_length=10", "--tb-episode-points-per-s", "0")


def test_resume_after_kill_9_drops_what_came_after_the_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    # checkpoints far apart (several dashboard ticks), so that the kill lands between two of them
    run = Run(
        train_cmd(run_dir, *SHORT_EPISODES, "--total-steps", "100000000", "--checkpoint-every", "15000"),
        tmp_path / "log.txt",
    )
    latest = run_dir / "checkpoints" / "latest.pt"

    def orphans_logged() -> bool:
        """Episodes and TensorBoard points exist past the newest checkpoint (what the crash will orphan)."""
        ckpt = torch.load(latest, weights_only=True)
        return (
            len(episode_rows(run_dir)) > int(ckpt["episodes_written"].sum()) + 20
            and max(_scalar_steps(run_dir, "charts/SPS"), default=0) > ckpt["global_step"]
        )

    try:
        assert wait_for(latest.exists, timeout=60), run.output()
        assert wait_for(orphans_logged, timeout=60)
        children = descendants(run.pid)
        run.proc.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
        assert wait_for(lambda: not alive(children), timeout=5)
    finally:
        run.cleanup()
    # the checkpoint the resume goes on from: maybe a later one than orphans_logged saw, and, where the kill fell
    # between a checkpoint's two writes (step-N.pt, then latest.pt), a step-N.pt newer than latest.pt (the CI run of
    # 73cee9f: latest.pt at 19,940, step-49680.pt written; this test read latest.pt and gave too small a budget)
    _, ckpt, _ = newest_intact(run_dir / "checkpoints")
    step = ckpt["global_step"]
    # (orphaned points existed when the kill was sent: orphans_logged; a checkpoint may have landed since)
    resumed = subprocess.run(
        train_cmd(run_dir, "--resume", str(run_dir), "--total-steps", str(step + 3000)),
        capture_output=True,
        text=True,
    )
    assert resumed.returncode == 0, resumed.stderr
    s = summary(run_dir)
    assert s["resumed_from_step"] == step and s["total_steps"] >= step + 3000
    assert json.loads((run_dir / "config.json").read_text())["tb_episode_points_per_s"] == 0
    rows = episode_rows(run_dir)
    assert indexes_contiguous(rows)  # no (worker, index) twice, none missing
    steps = _scalar_steps(run_dir, "charts/SPS")
    assert steps == sorted(set(steps)), "TensorBoard would show a step twice"
    # Bug (f374bab): episodes were stamped with the step read at their rollout's start, so some logged after the
    # checkpoint carried steps below it and survived the purge: TensorBoard kept episodes that episodes.csv dropped
    # (16,670 points against 16,540 rows in the review's run). Now TensorBoard holds exactly the rows' episodes.
    episode_steps = _scalar_steps(run_dir, "charts/episodic_return")
    assert sorted(episode_steps) == sorted(int(r["global_step"]) for r in rows)


def test_a_resume_of_a_run_still_training_is_refused_in_one_line_and_the_run_goes_on(tmp_path):
    """Bug (found combining flags): --resume of a run whose first process was still training was accepted, both wrote
    checkpoints/ at once and the second's episodes.csv replaced the first's rows. A training process now holds its
    run directory (an advisory lock, released with the process): a second one is refused in one line, exit 2, before
    it touches a file, and the first goes on."""
    run_dir = tmp_path / "run"
    cmd = train_cmd(run_dir, *SHORT_EPISODES, "--total-steps", "100000000", "--checkpoint-every", "2000")
    run = Run(cmd, tmp_path / "log.txt")
    try:
        assert wait_for(lambda: (run_dir / "checkpoints" / "latest.pt").exists(), timeout=60), run.output()
        csv_before = (run_dir / "episodes.csv").read_bytes()
        second = Run(train_cmd(run_dir, "--resume", str(run_dir), "--total-steps", "200000000"), tmp_path / "2.txt")
        try:
            assert second.wait(timeout=30) == 2, second.output()
        finally:
            second.cleanup()
        (line,) = second.output().strip().splitlines()
        assert "still training" in line and str(run_dir) in line and "Traceback" not in line
        assert run.proc.poll() is None, run.output()  # the first run goes on, its record only growing
        assert wait_for(lambda: len((run_dir / "episodes.csv").read_bytes()) > len(csv_before) + 1000, timeout=30)
        assert (run_dir / "episodes.csv").read_bytes().startswith(csv_before)
        run.signal_group(signal.SIGINT)
        assert run.wait(timeout=60) == 128 + signal.SIGINT, run.output()
    finally:
        run.cleanup()
    # once it has ended, the same resume goes on
    step = _latest(run_dir)["global_step"]
    done = subprocess.run(
        train_cmd(run_dir, "--resume", str(run_dir), "--total-steps", str(step + 500)),
        capture_output=True,
        text=True,
        timeout=60 * PATIENCE,
    )
    assert done.returncode == 0, done.stderr


def test_the_trainer_itself_holds_the_run_directory_of_a_new_run_and_of_a_resume(tmp_path, monkeypatch):
    """resolve_run's probe answers a resume first; the Trainer's own hold is for a process that comes in between,
    and for a new run (two started at once into one directory). Both, in this process, with the probe out of the
    way: refused in one line, nothing of the held run touched, and a new run's folders gone again."""
    from a3c.record.run_lock import RunLock
    from a3c.run import resolve

    settings = dict(backend="serial", workers=1, envs_per_worker=2, eval_every=0)
    held = tmp_path / "held"
    held.mkdir()
    other = RunLock(held)
    other.hold()
    try:
        with pytest.raises(ValueError, match="another process has just started a run in this directory"):
            a3c.train(total_steps=50, run_dir=str(held), **settings)
        assert list(held.iterdir()) == []
        run_dir = tmp_path / "run"
        a3c.train(total_steps=50, run_dir=str(run_dir), **settings)
        monkeypatch.setattr(resolve, "check_not_training", lambda path: None)
        other.release()
        other = RunLock(run_dir)
        other.hold()
        record = (run_dir / "episodes.csv").read_bytes(), (run_dir / "checkpoints" / "latest.pt").read_bytes()
        with pytest.raises(ValueError, match="the run is still training in another process"):
            a3c.train(resume=str(run_dir), total_steps=100, **settings)
        assert record == ((run_dir / "episodes.csv").read_bytes(), (run_dir / "checkpoints" / "latest.pt").read_bytes())
    finally:
        other.release()
    assert a3c.train(resume=str(run_dir), total_steps=100, **settings).summary["total_steps"] >= 100


def _by_step(rows):
    """episodes.csv's rows in the run's order: by global step, then worker, then index."""
    return sorted(rows, key=lambda r: [int(float(r[k])) for k in ("global_step", "worker", "index")])


def _latest(run_dir):
    return torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)


def test_resumes_with_2_1_1_2_workers_keep_the_record_append_only_and_ordered_by_step(tmp_path):
    """Issue 22, items 2 and 4, as the README's tour goes (train, Ctrl-C, resume, plot), with the worker count changed
    between sessions: 2 workers stopped by Ctrl-C, resumed with 1, again with 1, then with 2. Bugs: the resume with
    fewer workers forgot rank 1's episode counter, so the next resume dropped rank 1's rows and the one with 2
    workers repeated its indexes; wall time began at 0 in each session and the resume took "the last 100 episodes"
    in wall-time order (mean_return_100 over interleaved sessions) and a3c.plot drew the sessions interleaved. Now
    episodes.csv only grows, no (worker, index) repeats, wall time runs on across sessions (eval.csv's too), and
    mean_return_100 is the mean of the last 100 episodes by global step."""
    run_dir = tmp_path / "run"
    flags = ("--total-steps", "100000000", "--eval-every", "1500", "--eval-episodes", "2")
    first = Run(train_cmd(run_dir, *flags, workers=2), tmp_path / "log.txt")
    try:
        assert wait_for(lambda: episodes_started(run_dir, 150), timeout=120), first.output()
        first.signal_group(signal.SIGINT)
        assert first.wait(timeout=60) == 128 + signal.SIGINT, first.output()
    finally:
        first.cleanup()
    rows, ckpt = episode_rows(run_dir), _latest(run_dir)
    assert {int(r["worker"]) for r in rows} == {0, 1}
    sessions = [(rows, ckpt)]
    # each session long enough that every env ends an episode even for a policy that already holds the pole: a
    # CartPole episode ends by step 500 at the latest, and each of the session's envs takes `more / envs` steps
    for workers, more in ((1, 3000), (1, 2400), (2, 2400)):
        step = ckpt["global_step"]
        cmd = train_cmd(run_dir, "--resume", str(run_dir), "--total-steps", str(step + more), workers=workers)
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        before, before_ckpt = rows, ckpt
        rows, ckpt = episode_rows(run_dir), _latest(run_dir)
        assert rows[: len(before)] == before  # appended: no row removed, none rewritten
        assert len(rows) > len(before) and indexes_contiguous(rows)  # no (worker, index) twice, none missing
        assert len(ckpt["episodes_written"]) == 2 and int(ckpt["episodes_written"].sum()) == len(rows)
        new_wall = [float(r["wall_time"]) for r in rows[len(before) :]]
        assert min(new_wall) > before_ckpt["wall_time_s"] >= max(float(r["wall_time"]) for r in before)
        sessions.append((rows, ckpt))
        if len(sessions) == 3:  # two resumes
            last_100 = [float(r["return"]) for r in _by_step(rows)[-100:]]
            assert summary(run_dir)["mean_return_100"] == round(float(np.mean(last_100)), 2)
    s = summary(run_dir)
    assert s["episodes"] == len(rows) and s["wall_time_s"] >= max(float(r["wall_time"]) for r in rows)
    assert s["mean_return_100"] == round(float(np.mean([float(r["return"]) for r in _by_step(rows)[-100:]])), 2)
    with open(run_dir / "eval.csv") as f:
        evals = sorted(csv.DictReader(f), key=lambda r: float(r["global_step"]))
    assert len(evals) >= 2 and np.all(np.diff([float(r["wall_time"]) for r in evals]) > 0)
    # the plot (the tour's last step): both axes of the curves run forward, the wall-time axis to the run's end
    assert plot_main([str(run_dir)]) == 0
    episodes = read_episodes(run_dir)
    assert np.all(np.diff(episodes.columns["global_step"]) >= 0)
    fig = comparison_figure([episodes.curve("return")], "return")
    for ax in fig.axes[:2]:
        assert all(np.all(np.diff(line.get_xdata()) >= 0) for line in ax.lines)
    assert fig.axes[1].lines[-1].get_xdata()[-1] == max(float(r["wall_time"]) for r in rows)


def test_the_linear_lr_schedule_goes_on_from_the_run_s_global_step(tmp_path, monkeypatch, capsys):
    """What a resume means for --lr-schedule linear (docs/design.md): the lr at global step s is lr * (1 - s / T), T
    the run's --total-steps as now configured. A resume with the same --total-steps goes on with the same schedule;
    one with a larger budget spreads the rest of the decay over it (the lr a run started with that budget would have
    at s), so an extended run still ends at 0. Read off the pushes themselves (the serial backend, in this process)."""
    seen = []
    original = a3c.learn.update.step.scheduled_lr

    def spy(lr, schedule, progress):
        seen.append(progress)
        return original(lr, schedule, progress)

    monkeypatch.setattr(a3c.learn.update.step, "scheduled_lr", spy)
    settings = dict(env="CartPole-v1", backend="serial", workers=1, envs_per_worker=2, eval_every=0)
    first = a3c.train(**settings, lr_schedule="linear", total_steps=2000, run_dir=str(tmp_path / "run"))
    reached = first.summary["total_steps"]
    assert seen[0] == 0.0 and seen[-1] == pytest.approx((reached - 10) / 2000)
    seen.clear()
    capsys.readouterr()
    a3c.train(resume=str(tmp_path / "run"), total_steps=4000)
    # (found by probing: a resume keeps the checkpoint's backend, and the line did not say which)
    assert (
        f"resuming {tmp_path / 'run'} at step {reached:,} with 1 worker on the serial backend"
        in capsys.readouterr().err
    )
    # the first push after the resume: the run's step over the run's budget, not 0 (a restarted schedule)
    assert seen[0] == reached / 4000 and seen == sorted(seen)
    assert seen[-1] == pytest.approx((summary(tmp_path / "run")["total_steps"] - 10) / 4000)


def test_a_resume_that_moves_the_linear_schedule_s_end_says_so(tmp_path):
    """A resume with another --total-steps moves a linear schedule's end, so the lr jumps: one line says from what
    to what (and the resume line says how many workers the session runs). Same total, or a constant lr: no line."""
    run_dir = tmp_path / "run"
    first = subprocess.run(
        train_cmd(run_dir, "--total-steps", "2000", "--lr-schedule", "linear", "--lr", "0.001"),
        capture_output=True,
        text=True,
    )
    assert first.returncode == 0, first.stderr
    step = summary(run_dir)["total_steps"]
    second = subprocess.run(
        train_cmd(run_dir, "--resume", str(run_dir), "--total-steps", "4000", workers=1),
        capture_output=True,
        text=True,
    )
    assert second.returncode == 0, second.stderr
    assert f"resuming {run_dir} at step {step:,} with 1 worker\n" in second.stderr
    before, after = 0.001 * max(0.0, 1 - step / 2000), 0.001 * (1 - step / 4000)  # the first run reached its end
    assert (
        f"--lr-schedule linear now ends at --total-steps 4,000 (was 2,000): the lr at step {step:,} goes from "
        f"{before:.3g} to {after:.3g}" in second.stderr
    )


def test_the_lr_schedule_note_is_only_for_a_moved_linear_end():
    from a3c.run.trainer import lr_schedule_note
    from a3c.spec.config import Config

    def linear(total):
        return Config(env="CartPole-v1", lr=0.01, lr_schedule="linear", total_steps=total)

    assert lr_schedule_note(linear(1000), previous_total=1000, step=500) is None
    assert lr_schedule_note(Config(env="CartPole-v1", total_steps=1000), previous_total=500, step=400) is None
    note = lr_schedule_note(linear(4000), previous_total=2000, step=1000)
    assert note is not None and "the lr at step 1,000 goes from 0.005 to 0.0075" in note
    # a constant schedule resumed as linear (found by a probing review: the note took the old one for linear too,
    # "from 0.0075", and with the same total said nothing of the jump from 0.01)
    note = lr_schedule_note(linear(4000), previous_total=4000, step=1000, previous_schedule="constant")
    assert note == (
        "a3c: --lr-schedule linear (was constant): the lr at step 1,000 goes from 0.01 to 0.0075, down to 0 at "
        "--total-steps 4,000"
    )
    constant = Config(env="CartPole-v1", lr=0.01, lr_schedule="constant", total_steps=4000)
    note = lr_schedule_note(constant, previous_total=2000, step=1000, previous_schedule="linear")
    assert note == "a3c: --lr-schedule constant (was linear): the lr at step 1,000 goes from 0.005 to 0.01"


def test_a_resume_that_would_stop_at_its_first_episode_is_refused_in_one_line(tmp_path):
    """Found by probing: a run resumed for more steps whose --stop-at (or --stop-when-solved) its last 100 episodes
    already meet stopped again at its first episode, saying only "solved". Refused before anything starts, naming the
    window's mean and the flags that train on; with them, it goes on."""
    run_dir = tmp_path / "run"
    # Episodes capped at 20 steps: 5,000 steps make at least (5,000 - 4 x 19) / 20 = 246 of them (4 envs, each with at
    # most 19 steps of an episode still running), a full window however the run learns (CI once saw 98 uncapped
    # episodes in 5,000 steps on a run that learned fast; capped, runs here made 257-261, one learning faster fewer).
    capped = ("--env", "CartPole-v1", "--env-kwargs", "max_episode_steps=20")
    first = subprocess.run(train_cmd(run_dir, "--total-steps", "5000", *capped), capture_output=True)
    assert first.returncode == 0, first.stderr
    rows = (run_dir / "episodes.csv").read_text()
    assert len(episode_rows(run_dir)) >= 100  # the window the refusal reads
    resume = train_cmd(run_dir, "--resume", str(run_dir), "--total-steps", "6000", workers=1)
    refused = subprocess.run([*resume, "--stop-at", "5"], capture_output=True, text=True)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "which meets its --stop-at 5, so it would stop at its first episode; give --stop-at none" in refused.stderr
    assert (run_dir / "episodes.csv").read_text() == rows  # nothing touched
    goes_on = subprocess.run([*resume, "--stop-at", "1000"], capture_output=True, text=True)
    assert goes_on.returncode == 0, goes_on.stderr
    assert summary(run_dir)["total_steps"] >= 6000


def test_a_resume_that_evaluates_nothing_still_trims_eval_csv_and_reports_the_past_evaluations(tmp_path):
    """Found in review: eval.csv was trimmed to the checkpoint's step only where the resumed session evaluated (the
    evaluation's own set-up), so a resume with --eval-every 0 (or no evaluation left in its budget) kept rows written
    after the checkpoint, whose TensorBoard events were purged, and its summary.json said "evaluations": 0 with no
    best although eval.csv and best.pt held them."""
    run_dir = tmp_path / "run"
    settings = dict(env="CartPole-v1", backend="serial", workers=1, envs_per_worker=2, eval_episodes=2)
    a3c.train(**settings, total_steps=4000, eval_every=1000, run_dir=run_dir, checkpoint_every=0)
    with open(run_dir / "eval.csv") as f:
        rows = list(csv.DictReader(f))
    step = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)["global_step"]
    with open(run_dir / "eval.csv", "a") as f:  # a row written after the checkpoint, before a crash
        f.write(f"{step + 500},1.0,0.0,9.0,2,999.0\n")
    before = summary(run_dir)
    assert before["evaluations"] == len(rows) >= 1 and before["eval_best_mean_return"] is not None
    a3c.train(resume=run_dir, total_steps=6000, eval_every=0)
    with open(run_dir / "eval.csv") as f:
        assert list(csv.DictReader(f)) == rows  # the row past the checkpoint went
    after = summary(run_dir)
    for key in ("evaluations", "eval_best_mean_return", "eval_best_step", "eval_last_step", "eval_last_mean_return"):
        assert after[key] == before[key], key
