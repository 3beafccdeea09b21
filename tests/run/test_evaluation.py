"""The main process's side of evaluation during training (a3c.run.evaluation.Evaluation) with a real evaluator
process (a3c.run.evaluator): supervised like a worker, restarted, then given up; and when a snapshot already past
the next multiple of --eval-every is evaluated."""

import multiprocessing
import time

import pytest
from procs import wait_for

from a3c.learn.model import build_model, flatten_parameters
from a3c.record.checkpoint import load_checkpoint
from a3c.record.eval_log import read_eval_log
from a3c.run.backends.shared_memory import ProcessLauncher
from a3c.run.evaluation import Evaluation
from a3c.run.evaluator import EvalChannel, evaluator_main
from a3c.run.supervisor import Supervisor
from a3c.spec.config import Config
from a3c.spec.environment import describe_env


def _evaluator_process(config, log=None):
    """A model's flat parameters, an evaluator's channel, its launcher (fork) and its supervisor (not started)."""
    spec = describe_env(config.env)
    model, _ = build_model(spec, config)
    params, _ = flatten_parameters(model)
    channel = EvalChannel(params.numel())
    launcher = ProcessLauncher(
        multiprocessing.get_context("fork"), evaluator_main, lambda rank: (channel, config, spec)
    )
    supervisor = Supervisor(launcher, 1, channel.stats.numpy, 30.0, config.max_restarts, log=log, role="evaluator")
    return params, channel, launcher, supervisor


def test_evaluator_is_restarted_and_then_given_up(tmp_path):
    """The evaluator process is supervised like a worker: killed, it is restarted and evaluates again; past
    --max-restarts, evaluation is switched off (training would go on)."""
    config = Config(env="CartPole-v1", hidden_sizes=(8,), eval_every=100, eval_episodes=2, max_restarts=1)
    lines: list[str] = []
    params, channel, launcher, supervisor = _evaluator_process(config, lines.append)
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


def test_the_evaluator_ends_with_the_run_even_where_recording_its_last_result_fails(tmp_path):
    """Found in review: where recording the evaluation in flight failed at the run's end (eval.csv on a full disk,
    a3c.tune's callback raising), finish() raised before it stopped the evaluator, which then lived on, idle, in the
    caller's process (a notebook's) until it ended."""
    config = Config(env="CartPole-v1", hidden_sizes=(8,), eval_every=100, eval_episodes=2)
    params, channel, launcher, supervisor = _evaluator_process(config)
    evaluation = Evaluation(config, channel, tmp_path, tmp_path / "eval.csv", 0, time.time(), supervisor=supervisor)

    def failing_log(step, values):
        raise OSError(28, "No space left on device")

    try:
        evaluation.tick(100, lambda: {"model": params.clone(), "global_step": 100}, failing_log)
        assert evaluation.busy
        with pytest.raises(OSError):
            evaluation.finish(failing_log, wait=True)
        assert not launcher.procs[0].process.is_alive()
    finally:
        supervisor.kill_all()


def _values(mean_return):
    from a3c.record.eval_log import RESULT_FIELDS

    return {**dict.fromkeys(RESULT_FIELDS, 1.0), "mean_return": mean_return, "std_return": 0.0, "episodes": 2.0}


def test_a_non_finite_evaluation_is_never_the_best_nor_keeps_a_later_one_from_it(tmp_path):
    """Found by a probing review: an evaluation whose mean return was NaN (an env's one NaN reward) became "new best"
    and then no later one ever beat it (v > NaN is never true): best.pt stayed the NaN model for the rest of the run,
    and a resume brought the lock back from eval.csv and best.pt."""
    import math

    from a3c.record.checkpoint import save_checkpoint
    from a3c.run.evaluation import EvalResult, past_evaluations

    config = Config(env="CartPole-v1", hidden_sizes=(8,), eval_every=100, eval_episodes=2)
    model, _ = build_model(describe_env(config.env), config)
    params, _ = flatten_parameters(model)
    channel = EvalChannel(params.numel())
    lines = []
    evaluation = Evaluation(config, channel, tmp_path, tmp_path / "eval.csv", 0, time.time(), print_line=lines.append)
    try:
        for step, mean in ((100, math.nan), (200, 50.0), (300, math.inf), (400, 40.0)):
            evaluation._record(
                EvalResult(step, _values(mean)), {"model": params, "global_step": step}, lambda s, v: None
            )
        assert "new best" not in lines[0] and "new best" in lines[1] and "new best" not in lines[2] + lines[3]
        assert load_checkpoint(tmp_path / "best.pt")["global_step"] == 200 and evaluation.best["global_step"] == 200
    finally:
        evaluation.finish(lambda s, v: None, wait=False)
    # a resume: eval.csv's NaN row first, and a best.pt an older a3c wrote of a NaN evaluation
    save_checkpoint(
        tmp_path / "best.pt", {"model": params, "global_step": 100, "eval": {"global_step": 100.0, **_values(math.nan)}}
    )
    kept, best = past_evaluations(tmp_path / "eval.csv", tmp_path, 400)
    assert len(kept) == 4 and best is not None and best["global_step"] == 200
