"""Evaluation end to end: during training (eval.csv, the eval/* tags, best.pt, summary.json, the serial backend's
inline evaluator) and after (python -m a3c.evaluate: the table line, the JSON, --best reproducing the run's
evaluation, --video, user errors). The main process's scheduling and the evaluator process in isolation:
tests/run/test_evaluation.py; eval.csv: tests/record/test_eval_log.py."""

import csv
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from procs import train_cmd
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from a3c import evaluate as evaluate_cli
from a3c.record.checkpoint import load_checkpoint
from a3c.record.eval_log import CSV_COLUMNS
from a3c.run.threads import THREAD_ENV_VARS
from a3c.spec.config import Config
from a3c.spec.errors import run_cli

EVERY, EPISODES, TOTAL = 2000, 3, 6000


def _rows(run_dir):
    with open(run_dir / "eval.csv", newline="") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("eval") / "run"
    cmd = train_cmd(
        run_dir,
        # CartPole behind a 1 ms step: 6,000 steps take seconds, several of the main process's 0.25 s ticks between
        # two multiples of --eval-every, however fast the trainer is (plain CartPole ran them in 0.7 s: 3 ticks)
        "--env",
        "envs/SlowCartPole-v1",
        "--env-kwargs",
        "latency=0.001",
        "--total-steps",
        str(TOTAL),
        "--eval-every",
        str(EVERY),
        "--eval-episodes",
        str(EPISODES),
        "--seed",
        "2",
    )
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "a3c: eval at step" in proc.stderr
    return run_dir


def test_eval_csv_tags_best_and_summary(run):
    rows = _rows(run)
    assert list(rows[0]) == list(CSV_COLUMNS)
    steps = [int(r["global_step"]) for r in rows]
    # one evaluation per multiple of --eval-every reached (a busy evaluator skips one, never queues it)
    assert len(rows) >= 2 and len({s // EVERY for s in steps}) == len(steps) and min(steps) >= EVERY
    assert steps == sorted(steps) and all(r["episodes"] == EPISODES for r in rows)
    assert all(r["min_return"] <= r["mean_return"] <= r["max_return"] for r in rows)

    events = EventAccumulator(str(run), size_guidance={"scalars": 0})
    events.Reload()
    for tag, key in (("eval/mean_return", "mean_return"), ("eval/std_return", "std_return")):
        points = events.Scalars(tag)
        assert [p.step for p in points] == steps
        assert np.allclose([p.value for p in points], [r[key] for r in rows], rtol=1e-6)
    assert [p.step for p in events.Scalars("eval/mean_length")] == steps

    best = max(rows, key=lambda r: r["mean_return"])
    payload = load_checkpoint(run / "checkpoints" / "best.pt")
    assert payload["global_step"] == int(best["global_step"])
    assert payload["eval"]["mean_return"] == best["mean_return"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["evaluations"] == len(rows)
    assert summary["eval_last_mean_return"] == rows[-1]["mean_return"]
    assert summary["eval_last_step"] == steps[-1]
    assert summary["eval_best_mean_return"] == best["mean_return"]
    assert summary["eval_best_step"] == int(best["global_step"])
    assert summary["total_steps"] >= TOTAL  # the evaluator's own steps are not counted in the run's


def test_evaluate_best_reproduces_the_runs_evaluation(run, tmp_path, capsys):
    """The evaluator and python -m a3c.evaluate play the same episodes (seeds of the run) with the same code."""
    out = tmp_path / "best.json"
    assert run_cli(evaluate_cli.main, [str(run), "--best", "--json", str(out)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert len(lines) == 1, lines  # one line, as the README says (issue 27: it was a 3-line markdown table)
    card = f"a3c: wrote {run / 'README.md'} (the model card, with this evaluation)"
    assert captured.err.strip().splitlines() == [f"a3c: wrote {out}", card]
    result = json.loads(out.read_text())
    best = max(_rows(run), key=lambda r: r["mean_return"])
    assert result["mean_return"] == best["mean_return"] and result["std_return"] == pytest.approx(best["std_return"])
    assert result["episodes"] == EPISODES and result["global_step"] == int(best["global_step"])
    step = f"(step {int(best['global_step']):,})"
    assert lines[0].startswith(str(run / "checkpoints" / "best.pt") + f" {step}: return {best['mean_return']:.2f} ± ")
    assert f", {EPISODES} episodes (deterministic, seed " in lines[0]


@pytest.fixture(scope="module")
def stochastic_run(tmp_path_factory):
    """A run evaluated by its policy's samples (--eval-stochastic, the atari presets')."""
    run_dir = tmp_path_factory.mktemp("eval-stochastic") / "run"
    flags = ("--env", "envs/SlowCartPole-v1", "--env-kwargs", "latency=0.001", "--total-steps", str(TOTAL))
    more = ("--eval-every", str(EVERY), "--eval-episodes", str(EPISODES), "--seed", "2", "--eval-stochastic")
    proc = subprocess.run(train_cmd(run_dir, *flags, *more), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return run_dir


def test_a_stochastic_evaluation_is_reproduced_and_can_be_played_deterministically(stochastic_run, tmp_path, capsys):
    """--eval-stochastic: the evaluator samples the policy's actions (rl-zoo3's Atari protocol); python -m
    a3c.evaluate --best plays the same samples by default (the same sampler, seeded alike), so it reproduces the
    evaluation that made best.pt best, and --deterministic plays the most likely actions instead."""
    card = (stochastic_run / "README.md").read_text()  # the model card of the run's end: its last evaluation's
    assert "the last evaluation during training (" in card and ", stochastic, seed 2)" in card
    out = tmp_path / "best.json"
    assert run_cli(evaluate_cli.main, [str(stochastic_run), "--best", "--json", str(out)]) == 0
    assert f"{EPISODES} episodes (stochastic, seed 2)" in capsys.readouterr().out
    result = json.loads(out.read_text())
    best = max(_rows(stochastic_run), key=lambda r: r["mean_return"])
    assert result["deterministic"] is False and result["global_step"] == int(best["global_step"])
    assert result["mean_return"] == best["mean_return"] and result["std_return"] == pytest.approx(best["std_return"])
    assert run_cli(evaluate_cli.main, [str(stochastic_run), "--best", "--deterministic", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["deterministic"] is True
    assert "(deterministic, seed 2)" in capsys.readouterr().out


def test_stochastic_and_deterministic_are_one_choice(run, capsys):
    assert run_cli(evaluate_cli.main, [str(run), "--stochastic", "--deterministic"], prog="a3c.evaluate") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--deterministic" in line and "--stochastic" in line


def test_evaluate_latest_with_options(run, capsys):
    assert run_cli(evaluate_cli.main, [str(run), "--episodes", "4", "--seed", "9", "--stochastic"]) == 0
    # the default: in the run directory, named by what differs from the run's own evaluation (deterministic, seed 2,
    # 3 episodes)
    result = json.loads((run / "evaluate-latest--stochastic--seed=9--episodes=4.json").read_text())
    assert result["episodes"] == 4 and len(result["returns"]) == 4 and result["seed"] == 9
    assert result["deterministic"] is False and result["checkpoint"].endswith("latest.pt")
    assert result["mean_return"] == pytest.approx(np.mean(result["returns"]))


def test_evaluate_in_a_variant_of_the_runs_env(run, tmp_path, capsys):
    """--env-kwargs plays the episodes in the run's env made with these keyword arguments over the run's own: here
    a time limit of 5 steps, which no CartPole episode reaches by falling (the pole takes longer), so every episode
    is exactly 5 long; the run's own kwargs (latency) stay, and the line and the JSON say what was played."""
    out = tmp_path / "variant.json"
    argv = [str(run), "--episodes", "3", "--env-kwargs", "max_episode_steps=5", "--json", str(out)]
    assert run_cli(evaluate_cli.main, argv) == 0
    line = capsys.readouterr().out.strip()
    result = json.loads(out.read_text())
    assert result["lengths"] == [5, 5, 5]
    assert result["env_kwargs"] == {"latency": 0.001, "max_episode_steps": 5}
    assert result["env_kwargs_over_run"] == {"max_episode_steps": 5}
    assert line.endswith(", 3 episodes (deterministic, seed 2, max_episode_steps=5)"), line
    assert run_cli(evaluate_cli.main, [str(run), "--episodes", "3", "--json", str(out)]) == 0
    plain = json.loads(out.read_text())
    assert min(plain["lengths"]) > 5 and plain["env_kwargs_over_run"] == {}
    assert "max_episode_steps" not in capsys.readouterr().out


def test_a_variant_evaluation_writes_a_file_of_its_own(run, capsys):
    """Found by probing: an --env-kwargs evaluation without --json wrote evaluate-latest.json over the plain one; a
    variant's default file names what it played."""
    assert run_cli(evaluate_cli.main, [str(run)]) == 0
    plain = (run / "evaluate-latest.json").read_text()
    argv = [str(run), "--env-kwargs", "max_episode_steps=5", "latency=0.002"]
    assert run_cli(evaluate_cli.main, argv) == 0
    assert (run / "evaluate-latest.json").read_text() == plain
    variant = json.loads((run / "evaluate-latest--latency=0.002,max_episode_steps=5.json").read_text())
    assert variant["env_kwargs_over_run"] == {"max_episode_steps": 5, "latency": 0.002}
    assert evaluate_cli.default_json_path(run / "checkpoints" / "best.pt", {"mode": "a b/c"}).name == (
        "evaluate-best--mode=a_b_c.json"
    )


def test_evaluations_of_another_policy_seed_or_length_write_files_of_their_own(run, capsys):
    """Found in review: --stochastic, --deterministic, --seed and --episodes evaluations wrote the same
    evaluate-latest.json, each over the one before; the default file names what differs from the run's own
    evaluation (here deterministic, seed 2, 3 episodes), so the plain one stays. The run's own --env-kwargs given
    again are no variant (found in review: they named the file and left the model card)."""
    assert run_cli(evaluate_cli.main, [str(run)]) == 0
    plain = (run / "evaluate-latest.json").read_text()
    for argv, name in [
        (["--stochastic"], "evaluate-latest--stochastic.json"),
        (["--seed", "7"], "evaluate-latest--seed=7.json"),
        (["--episodes", "1"], "evaluate-latest--episodes=1.json"),
        (["--deterministic", "--seed", "2", "--episodes", "3"], "evaluate-latest.json"),  # the run's own again
        (["--env-kwargs", "latency=0.001"], "evaluate-latest.json"),  # the run's own kwargs: no variant
        (
            ["--stochastic", "--env-kwargs", "max_episode_steps=5", "latency=0.001"],
            "evaluate-latest--max_episode_steps=5--stochastic.json",
        ),
    ]:
        assert run_cli(evaluate_cli.main, [str(run), *argv]) == 0, argv
        assert f"a3c: wrote {run / name}" in capsys.readouterr().err, argv
    assert json.loads((run / "evaluate-latest--stochastic.json").read_text())["deterministic"] is False
    assert json.loads((run / "evaluate-latest--seed=7.json").read_text())["seed"] == 7
    assert json.loads((run / "evaluate-latest.json").read_text())["returns"] == json.loads(plain)["returns"]


def test_evaluate_user_errors(run, tmp_path, capsys, monkeypatch):
    no_best = tmp_path / "no_best"
    (no_best / "checkpoints").mkdir(parents=True)
    shutil.copy(run / "config.json", no_best / "config.json")
    shutil.copy(run / "checkpoints" / "latest.pt", no_best / "checkpoints" / "latest.pt")
    cases = [
        ([str(tmp_path / "missing")], "no such run directory or checkpoint file"),
        ([str(run / "checkpoints" / "latest.pt"), "--best"], "--best takes a run directory"),
        ([str(no_best), "--best"], "has no checkpoints/best.pt: the run did not evaluate during training"),
        ([str(run), "--episodes", "0"], "--episodes must be at least 1"),
        ([str(run), "--episodes", "x"], "argument --episodes: invalid int value"),
        ([str(run), "--env-kwargs", "latency"], "--env-kwargs takes key=value pairs"),
        ([str(run), "--env-kwargs", "no_such_kwarg=1"], "rejects --env-kwargs"),
    ]
    for argv, message in cases:
        assert run_cli(evaluate_cli.main, argv, prog="a3c.evaluate") == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("a3c.evaluate: error: ") and message in err and err.count("\n") == 1, err
    monkeypatch.setattr(evaluate_cli.importlib.util, "find_spec", lambda name: None)  # moviepy not installed
    assert run_cli(evaluate_cli.main, [str(run), "--video", str(tmp_path / "v")], prog="a3c.evaluate") == 2
    expected = '--video needs moviepy, which is not installed; pip install -e ".[video]" in the a3c clone'
    assert expected in capsys.readouterr().err


def test_env_kwargs_that_change_the_spaces_are_named_in_the_refusal(tmp_path, capsys):
    """Found by probing: --env-kwargs obs=image on a run trained on vector observations was refused with "evaluate it
    where the env is the one it was trained on", which names no cause; the cause is the --env-kwargs given."""
    from agent_runs import untrained_run

    run = untrained_run(tmp_path / "run", Config(env="envs/Spaces-v0", env_kwargs={"obs": "dict"}))
    argv = [str(run), "--episodes", "1", "--env-kwargs", "obs=image"]
    assert run_cli(evaluate_cli.main, argv, prog="a3c.evaluate") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "drop the --env-kwargs that change them (obs='image')" in err, err
    assert not list(run.glob("evaluate-*.json"))


def test_video_of_an_env_that_takes_no_render_mode_says_so(tmp_path, capsys):
    """Found by probing: --video on an env whose constructor takes no render_mode blamed the user's --env-kwargs
    ("rejects --env-kwargs render_mode='rgb_array'"), which were not given."""
    pytest.importorskip("moviepy")
    from agent_runs import untrained_run

    run = untrained_run(tmp_path / "run", Config(env="envs/Catch-v0"))
    argv = [str(run), "--episodes", "1", "--video", str(tmp_path / "v")]
    assert run_cli(evaluate_cli.main, argv, prog="a3c.evaluate") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--video: env 'envs/Catch-v0' renders no frames" in err, err
    assert "drop --video" in err and "--env-kwargs" not in err
    assert not (tmp_path / "v").exists()


def test_evaluate_records_videos(run, tmp_path, capsys):
    pytest.importorskip("moviepy")
    pytest.importorskip("pygame")
    videos = tmp_path / "videos"
    assert run_cli(evaluate_cli.main, [str(run), "--episodes", "2", "--video", str(videos)]) == 0
    files = sorted(p.name for p in videos.glob("*.mp4"))
    assert files == ["latest-episode-0.mp4", "latest-episode-1.mp4"]
    assert all((videos / f).stat().st_size > 1000 for f in files)
    # a second evaluation into the folder would write over them (RecordVideo warns and goes on): refused
    stamps = {f: (videos / f).stat().st_mtime_ns for f in files}
    capsys.readouterr()
    assert run_cli(evaluate_cli.main, [str(run), "--episodes", "2", "--video", str(videos)], prog="a3c.evaluate") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already holds 2 videos named latest-episode-*.mp4" in err, err
    assert {f: (videos / f).stat().st_mtime_ns for f in files} == stamps


def test_evaluate_records_the_episodes_it_scores_sampled_actions_too(run, tmp_path):
    """--video plays the episodes one at a time where the plain evaluation plays them as a batch: with sampled
    actions (--stochastic) each episode draws from its own sampler, so the recorded episodes are the ones scored
    (their draws were the batch's first: the videos showed other episodes than the numbers)."""
    pytest.importorskip("moviepy")
    pytest.importorskip("pygame")
    returns = {}
    for name, extra in (("plain", []), ("video", ["--video", str(tmp_path / "videos")])):
        out = tmp_path / f"{name}.json"
        argv = [str(run), "--episodes", "4", "--stochastic", "--json", str(out), *extra]
        assert run_cli(evaluate_cli.main, argv) == 0
        returns[name] = json.loads(out.read_text())["returns"]
    assert returns["video"] == returns["plain"], returns
    assert len(list((tmp_path / "videos").glob("*.mp4"))) == 4


def test_evaluate_video_without_a_display_prints_no_error(run, tmp_path):
    """SDL's probe of a display printed "error: XDG_RUNTIME_DIR is invalid or not set" though the videos were fine."""
    pytest.importorskip("moviepy")
    pytest.importorskip("pygame")
    quiet = ("DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "SDL_VIDEODRIVER")
    env = {k: v for k, v in os.environ.items() if k not in quiet}
    cmd = [sys.executable, "-m", "a3c.evaluate", str(run), "--episodes", "1", "--video", str(tmp_path / "v")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "error" not in proc.stderr.lower(), proc.stderr
    assert [p.name for p in (tmp_path / "v").glob("*.mp4")] == ["latest-episode-0.mp4"]


def test_serial_backend_evaluates_in_the_main_process(tmp_path):
    run_dir = tmp_path / "serial"
    # a 2 ms env: a dashboard tick (0.25 s of the workers' turns) never jumps past a multiple of --eval-every
    slow = ("--env", "envs/SlowCartPole-v1", "--env-kwargs", "latency=0.002")
    cmd = train_cmd(
        run_dir, *slow, "--backend", "serial", "--total-steps", "3000", "--eval-every", "1000", "--eval-episodes", "2"
    )
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rows = _rows(run_dir)  # inline: an evaluation never finds the previous one still running
    assert [int(r["global_step"]) // 1000 for r in rows] == [1, 2, 3]
    assert (run_dir / "checkpoints" / "best.pt").is_file()


def test_the_cli_plays_on_one_native_thread(run, tmp_path):
    """Torch's pool of one thread per core, beside other work (the next training run, a niced evaluation beside a
    timed one), waits at every parallel op for a core another process holds: a batch of 10 Atari frames at 9
    passes/s on 2 threads against 312 on one, one of 2 cores busy (alone, 2 threads gain 1.4x). The CLI takes the
    evaluator's one thread per native pool."""
    command = (
        "import runpy, sys, torch\n"
        "try:\n"
        "    runpy.run_module('a3c.evaluate', run_name='__main__')\n"
        "except SystemExit as end:\n"
        "    print('exit', end.code, 'threads', torch.get_num_threads())\n"
    )
    out = tmp_path / "eval.json"
    # every pool's variable at 2 (a test before may have set this process's to 1, which a child would inherit)
    two_threads = {**os.environ, **dict.fromkeys(THREAD_ENV_VARS, "2")}
    cmd = [sys.executable, "-c", command, str(run), "--episodes", "1", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=two_threads)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "exit 0 threads 1" and out.exists()
    # called as a function from a user's process, it leaves that process's threads alone
    library = "import sys, torch; from a3c import evaluate; evaluate.main(sys.argv[1:]); print(torch.get_num_threads())"
    cmd = [sys.executable, "-c", library, str(run), "--episodes", "1", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=two_threads)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "2"


@pytest.mark.parametrize(
    "where", ["video", "video-under-a-file", "json", "json-where-no-file-goes", "json-a-folder", "json-name-too-long"]
)
def test_an_output_path_that_cannot_be_written_is_refused_before_any_episode(run, tmp_path, monkeypatch, capsys, where):
    """Bugs (found combining flags): --video naming a file ended in RecordVideo's FileExistsError traceback; --json
    into a missing folder played every episode (minutes, on Atari) before it said it could not write. Both are now
    one line before the first episode."""
    played = []
    monkeypatch.setattr("a3c.record.agent.run_episodes", lambda *a, **k: played.append(1))
    (tmp_path / "afile").write_text("")
    flag = {
        "video": ["--video", str(tmp_path / "afile")],
        "video-under-a-file": ["--video", str(tmp_path / "afile" / "videos")],
        "json": ["--json", str(tmp_path / "nodir" / "x.json")],
        "json-where-no-file-goes": ["--json", "/proc/x.json"],  # (a folder that refuses files, even to root)
        "json-a-folder": ["--json", str(tmp_path)],
        "json-name-too-long": ["--json", str(tmp_path / ("x" * 300))],  # (was a traceback: is_dir() raised)
    }[where]
    assert run_cli(evaluate_cli.main, [str(run), "--episodes", "2", *flag], prog="a3c.evaluate") == 2
    err = capsys.readouterr().err
    assert err.startswith("a3c.evaluate: error: ") and err.count("\n") == 1 and f"--{where.split('-')[0]}" in err, err
    assert played == []


def test_a_result_file_that_cannot_be_written_is_worded_alike_before_and_after_the_episodes(
    tmp_path, capsys, monkeypatch
):
    """--json FILE is checked before the episodes; a write that fails after them (the default path, beside a
    checkpoint whose folder went away; a disk that filled) says it in the same words, as one line."""
    played = {
        "checkpoint": str(tmp_path / "gone" / "latest.pt"),
        "global_step": 10,
        "deterministic": True,
        "seed": 0,
        "env_kwargs_over_run": {},
        "protocol_over_run": {},
        "mean_return": 1.0,
        "std_return": 0.0,
        "mean_length": 1.0,
        "episodes": 1,
    }
    monkeypatch.setattr(evaluate_cli, "evaluate", lambda *args, **kwargs: played)
    before, after = tmp_path / "nodir" / "x.json", tmp_path / "gone" / "evaluate-latest.json"
    assert run_cli(evaluate_cli.main, ["run", "--json", str(before)], prog="a3c.evaluate") == 2
    said_before = capsys.readouterr().err
    assert run_cli(evaluate_cli.main, ["run"], prog="a3c.evaluate") == 2  # (the default path, written after)
    said_after = capsys.readouterr().err  # (the result's line went to stdout)
    head = "a3c.evaluate: error: cannot write"
    assert said_before == f"{head} {before} (no folder {before.parent}); give a writable --json FILE\n"
    assert said_after == f"{head} {after} (No such file or directory); give a writable --json FILE\n"
