"""One trial (a3c/tune/trial.py): the reports to the pruner at due steps, the warm-up and the final evaluation that
are never pruned, the preset block's settings, and the trial's settings over the preset."""

from __future__ import annotations

import pytest

from a3c.spec.config import Config
from a3c.train import parse_flags

pytest.importorskip("optuna")

from a3c.tune.trial import PRUNED, Reporter, TrialBase, preset_settings, trial_settings  # noqa: E402


class FakeTrial:
    def __init__(self, prune: bool) -> None:
        self.prune, self.reports, self.asked = prune, [], 0

    def report(self, value, step):
        self.reports.append((step, value))

    def should_prune(self):
        self.asked += 1
        return self.prune


def test_evaluations_are_reported_at_their_due_step_and_pruning_waits_for_the_warm_up():
    trial = FakeTrial(prune=True)
    reporter = Reporter(trial, eval_every=1000, total_steps=6000)
    assert reporter(1040, {"mean_return": 5.0}) is None  # 1/6 of the budget: warm-up
    assert reporter(2130, {"mean_return": 6.0}) is None  # 1/3: still warm-up
    assert trial.asked == 0
    assert reporter(3010, {"mean_return": 7.0}) == PRUNED
    assert trial.reports == [(1000, 5.0), (2000, 6.0), (3000, 7.0)]
    assert reporter.pruned_at == 3000 and reporter.last == (3000, 7.0)


def test_the_final_evaluation_is_reported_but_never_prunes_and_a_due_step_is_reported_once():
    trial = FakeTrial(prune=True)
    reporter = Reporter(trial, eval_every=1000, total_steps=3000)
    assert reporter(3020, {"mean_return": 9.0}) is None  # the final one: the trial has its whole budget
    assert reporter(3500, {"mean_return": 1.0}) is None  # the same due step again: ignored
    assert trial.reports == [(3000, 9.0)] and trial.asked == 0 and reporter.last == (3000, 9.0)
    keep = FakeTrial(prune=False)
    going = Reporter(keep, eval_every=1000, total_steps=6000)
    assert going(4000, {"mean_return": 3.0}) is None and keep.asked == 1


def test_a_trials_settings_sit_on_the_preset_and_under_the_flags_given(tmp_path):
    values, given, _ = parse_flags(["--env", "CartPole-v1", "--total-steps", "40000", "--n-steps", "8"])
    base = TrialBase(values, given, evaluations=8)
    got, typed = trial_settings(base, {"lr": 0.004, "gamma": 0.95}, tmp_path / "t")
    assert got["lr"] == 0.004 and got["gamma"] == 0.95 and {"lr", "gamma", "run_dir", "eval_every"} <= typed
    assert got["eval_every"] == 5000 and got["run_dir"] == str(tmp_path / "t")
    from a3c.run.resolve import resolve_settings

    config = resolve_settings(got, typed).config
    assert config.lr_schedule == "linear" and config.preset == "CartPole-v1"  # CartPole's preset, under the sample
    assert config.total_steps == 40000 and config.n_steps == 8  # the flags given


def test_the_preset_block_holds_what_differs_from_the_defaults_but_never_where_the_run_goes():
    config = Config(
        env="Acrobot-v1", preset="Acrobot-v1", seed=7, run_dir="x", lr=0.003, workers=2, track=True,
        workers_auto={"chose": 2}, input_scale=1.0, wandb_id="abc", eval_every=1000,
    )  # fmt: skip
    assert preset_settings(config, workers_typed=False) == {"lr": 0.003, "eval_every": 1000}
    assert preset_settings(config, workers_typed=True) == {"lr": 0.003, "eval_every": 1000, "workers": 2}
