"""Evaluation: during training (a3c.run.evaluator: eval.csv, the eval/* tags, best.pt, summary.json, the supervised
evaluator process, the serial backend's inline evaluator) and after (python -m a3c.evaluate: the table line, the
JSON, --best reproducing the run's evaluation, --video, user errors)."""

import csv
import json
import multiprocessing
import shutil
import subprocess
import time

import numpy as np
import pytest
from procs import train_cmd, wait_for
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from a3c import evaluate as evaluate_cli
from a3c.learn.model import build_model, flatten_parameters
from a3c.record.checkpoint import load_checkpoint
from a3c.run.backends.shared_memory import ProcessLauncher
from a3c.run.evaluator import CSV_COLUMNS, EvalChannel, Evaluation, evaluator_main, read_eval_log
from a3c.run.supervisor import Supervisor
from a3c.spec.config import Config
from a3c.spec.environment import describe_env
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
        "--total-steps",
        str(TOTAL),
        "--eval-every",
        str(EVERY),
        "--eval-episodes",
        str(EPISODES),
        "--seed",
        "2",
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
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
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("| checkpoint | step | episodes | return (mean ± std) | mean length |")
    result = json.loads(out.read_text())
    best = max(_rows(run), key=lambda r: r["mean_return"])
    assert result["mean_return"] == best["mean_return"] and result["std_return"] == pytest.approx(best["std_return"])
    assert result["episodes"] == EPISODES and result["global_step"] == int(best["global_step"])
    assert f"| {EPISODES} | {best['mean_return']:.2f} ± " in lines[2] and "best.pt" in lines[2]


def test_evaluate_latest_with_options(run, capsys):
    assert run_cli(evaluate_cli.main, [str(run), "--episodes", "4", "--seed", "9", "--stochastic"]) == 0
    result = json.loads((run / "evaluate-latest.json").read_text())  # the default: in the run directory
    assert result["episodes"] == 4 and len(result["returns"]) == 4 and result["seed"] == 9
    assert result["deterministic"] is False and result["checkpoint"].endswith("latest.pt")
    assert result["mean_return"] == pytest.approx(np.mean(result["returns"]))


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
    ]
    for argv, message in cases:
        assert run_cli(evaluate_cli.main, argv, prog="a3c.evaluate") == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("a3c.evaluate: error: ") and message in err and err.count("\n") == 1, err
    monkeypatch.setattr(evaluate_cli.importlib.util, "find_spec", lambda name: None)  # moviepy not installed
    assert run_cli(evaluate_cli.main, [str(run), "--video", str(tmp_path / "v")], prog="a3c.evaluate") == 2
    assert "--video needs moviepy, which is not installed; pip install 'a3c[video]'" in capsys.readouterr().err


def test_evaluate_records_videos(run, tmp_path):
    pytest.importorskip("moviepy")
    pytest.importorskip("pygame")
    videos = tmp_path / "videos"
    assert run_cli(evaluate_cli.main, [str(run), "--episodes", "2", "--video", str(videos)]) == 0
    files = sorted(p.name for p in videos.glob("*.mp4"))
    assert files == ["latest-episode-0.mp4", "latest-episode-1.mp4"]
    assert all((videos / f).stat().st_size > 1000 for f in files)


def test_serial_backend_evaluates_in_the_main_process(tmp_path):
    run_dir = tmp_path / "serial"
    # a 2 ms env: a dashboard tick (0.25 s of the workers' turns) never jumps past a multiple of --eval-every
    slow = ("--env", "envs/SlowCartPole-v1", "--env-kwargs", "latency=0.002")
    cmd = train_cmd(
        run_dir, *slow, "--backend", "serial", "--total-steps", "3000", "--eval-every", "1000", "--eval-episodes", "2"
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    rows = _rows(run_dir)  # inline: an evaluation never finds the previous one still running
    assert [int(r["global_step"]) // 1000 for r in rows] == [1, 2, 3]
    assert (run_dir / "checkpoints" / "best.pt").is_file()


def test_evaluator_is_restarted_and_then_given_up(tmp_path):
    """The evaluator process is supervised like a worker: killed, it is restarted and evaluates again; past
    --max-restarts, evaluation is switched off (training would go on)."""
    config = Config(env="CartPole-v1", hidden_sizes=(8,), eval_every=100, eval_episodes=2, max_restarts=1)
    spec = describe_env(config.env)
    model, _ = build_model(spec, config)
    params, _ = flatten_parameters(model)
    channel = EvalChannel(params.numel())
    launcher = ProcessLauncher(
        multiprocessing.get_context("fork"), evaluator_main, lambda rank: (channel, config, spec)
    )
    lines: list[str] = []
    supervisor = Supervisor(launcher, 1, channel.stats.numpy, 30.0, 1, log=lines.append, role="evaluator")
    evaluation = Evaluation(
        config, channel, tmp_path, tmp_path / "eval.csv", 0, time.time(), supervisor=supervisor, print_line=lines.append
    )
    logged: list[int] = []

    def tick_until_done(step):
        snapshot = {"model": params.clone(), "global_step": step}
        assert wait_for(
            lambda: (
                (evaluation.tick(step, lambda: snapshot, lambda s, v: logged.append(s)), logged)[1]
                and logged[-1] == step
                and not evaluation.busy
            ),
            60,
        )

    try:
        tick_until_done(100)
        launcher.procs[0].process.kill()
        launcher.procs[0].process.join(5)
        tick_until_done(200)
        assert any(
            "the evaluator was killed by signal SIGKILL; restarting it (restart 1 of 1" in line for line in lines
        )
        launcher.procs[0].process.kill()
        launcher.procs[0].process.join(5)
        assert wait_for(lambda: (evaluation.tick(250, dict, lambda s, v: None), evaluation.failed)[1], 10)
        assert any("evaluation is off for the rest of the run" in line for line in lines), lines
        assert [int(r["global_step"]) for r in read_eval_log(tmp_path / "eval.csv")] == [100, 200]
        assert load_checkpoint(tmp_path / "best.pt")["global_step"] == 100  # the same weights: not better at 200
    finally:
        evaluation.finish(lambda s, v: None, wait=False)
        supervisor.kill_all()


def test_a_snapshot_past_the_next_multiple_is_not_evaluated_again(tmp_path):
    """The snapshot is taken after the tick read the step, and the workers run on in between: one taken at 210 after a
    tick at 150 (--eval-every 100) covers the multiple 200; the tick that then reads 210 must not evaluate the same
    weights at the same step a second time (eval.csv had two rows at the last step of a fast run)."""
    config = Config(env="CartPole-v1", hidden_sizes=(8,), eval_every=100, eval_episodes=2)
    model, _ = build_model(describe_env(config.env), config)
    params, _ = flatten_parameters(model)
    channel = EvalChannel(params.numel())
    evaluation = Evaluation(config, channel, tmp_path, tmp_path / "eval.csv", 0, time.time(), print_line=print)
    snapshot = {"model": params.clone(), "global_step": 210}
    try:
        evaluation.tick(150, lambda: snapshot, lambda s, v: None)
        assert evaluation.requests == 1
        channel.done[0] = 1  # the evaluator's answer
        evaluation.tick(210, lambda: snapshot, lambda s, v: None)
        assert evaluation.requests == 1 and not evaluation.busy
        assert [int(r["global_step"]) for r in read_eval_log(tmp_path / "eval.csv")] == [210]
        evaluation.tick(300, lambda: {**snapshot, "global_step": 300}, lambda s, v: None)
        assert evaluation.requests == 2
    finally:
        evaluation.finish(lambda s, v: None, wait=False)


def test_eval_log_trimmed_to_a_checkpoint(tmp_path):
    path = tmp_path / "eval.csv"
    path.write_text(
        ",".join(CSV_COLUMNS)
        + "\n"
        + "\n".join(f"{s},1.0,0.0,1.0,1.0,1.0,2,0.1,3.0" for s in (100, 200, 300))
        + "\n300,1.0,0.0"  # a row cut by a crash
    )
    kept = read_eval_log(path, max_step=200)
    assert [r["global_step"] for r in kept] == [100, 200]
    assert [r["global_step"] for r in read_eval_log(path)] == [100, 200]  # the file itself was rewritten
