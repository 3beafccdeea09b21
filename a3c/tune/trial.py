"""One trial of a study: an ordinary a3c run (its own run directory, STUDY_DIR/trials/trial-NNNN, with the files of
any run), started through the command line's own path (a3c/run/resolve.py's ``resolve_run``, then the Trainer), with
the settings: defaults < the env's preset (or --preset-file) < the trial's sampled settings < the flags given on the
tune command line. Its objective is the run's own evaluation (--eval-every, --eval-episodes): each result is reported
to Optuna as it is recorded (the Trainer's ``on_eval``), and when the pruner says so the run stops as
--stop-when-solved stops one (summary.json's stop_reason ``pruned``). The value of a finished trial is its last
evaluation's mean return (as rl-zoo3's objective: the best would favour the luckiest evaluation). With --track, each
trial is a W&B run of its own, in a group named after the study (unless --wandb-group is given).

Reports are made at the evaluation's due step (a multiple of --eval-every) rather than at the step of the weights it
scored (a snapshot's, a little past it and different in every run): Optuna's median pruner compares trials at equal
steps. No trial is pruned in the first third of its budget (rl-zoo3's warm-up), nor at its final evaluation.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from a3c.run.resolve import resolve_run, resolve_settings
from a3c.spec.config import Config
from a3c.spec.errors import UserError
from a3c.spec.presets import NOT_PRESETTABLE
from a3c.tune.space import Space

PRUNED = "pruned"  # summary.json's stop_reason of a pruned trial's run
# the user attribute of a refused trial: the reason a run refused the combination it drew (its settings with the flags
# given; a3c/tune/check.py judged the space as a whole). Such a trial is pruned before any process starts: the
# sampler ranks it below every trial that ran (TPE: a pruned trial without reports is the worst), it is not one of
# --trials, and the study goes on
REFUSED = "refused"
INTERRUPTED = (128 + signal.SIGINT, 128 + signal.SIGTERM)  # the Trainer's exit codes after Ctrl-C or SIGTERM


class TrialFailed(Exception):
    """A trial's run ended in failure (exit code 1: a worker out of restarts, a full disk...) or recorded no
    evaluation: the trial is marked failed and the study goes on."""


@dataclass(frozen=True)
class TrialBase:
    """What every trial of a study starts from: the tune command line's trial flags, parsed as a3c.train parses
    them (``values``: every setting, the defaults where none was typed; ``given``: the Config fields typed), and the
    number of evaluations a trial makes when --eval-every is not given."""

    values: Mapping[str, Any]
    given: Set[str]
    evaluations: int


def trial_settings(base: TrialBase, sampled: Mapping[str, Any], run_dir: Path) -> tuple[dict[str, Any], set[str]]:
    """The (values, given) a trial's run resolves from: the base, the sampled settings on top of the preset (given,
    as if typed), the run directory, and --eval-every a fraction of --total-steps unless typed."""
    values = {**base.values, **sampled, "run_dir": str(run_dir)}
    given = set(base.given) | set(sampled) | {"run_dir"}
    if "eval_every" not in base.given:
        total = resolve_settings(values, given).config.total_steps  # (the preset's, unless typed)
        values["eval_every"] = max(1, total // base.evaluations)
        given.add("eval_every")
    return values, given


def preset_settings(config: Config, workers_typed: bool) -> dict[str, Any]:
    """The settings of a trial's resolved ``config`` that a preset block holds (a3c/tune/results.py writes it): those
    away from the defaults that a preset may set; the worker count only if it was typed (not --workers auto's)."""
    defaults = Config().to_dict()
    settings = {}
    for name, value in config.to_dict().items():
        if name in NOT_PRESETTABLE or name in ("workers_auto", "input_scale", "input_shift", "wandb_id"):
            continue
        if name == "workers" and not workers_typed:
            continue
        if value != defaults[name]:
            settings[name] = value
    return settings


class Reporter:
    """The Trainer's ``on_eval`` for one trial: reports each evaluation to Optuna at its due step, and asks the run to
    stop when the trial should be pruned (past the warm-up, before the final evaluation)."""

    def __init__(self, trial: optuna.Trial, eval_every: int, total_steps: int) -> None:
        self.trial, self.every, self.total = trial, eval_every, total_steps
        self.last: tuple[int, float] | None = None  # (due step, mean return) of the last evaluation
        self.pruned_at: int | None = None

    def __call__(self, step: int, result: dict[str, float]) -> str | None:
        due = max(self.every, step // self.every * self.every)
        value = float(result["mean_return"])
        if self.last is not None and due <= self.last[0]:
            return None  # (one report per due step)
        self.last = (due, value)
        self.trial.report(value, due)
        final = due + self.every > self.total
        if not final and self.pruned_at is None and 3 * due > self.total and self.trial.should_prune():
            self.pruned_at = due
            return PRUNED
        return None


def run_trial(
    trial: optuna.Trial, base: TrialBase, space: Space, trials_dir: Path, on_late_signal: Callable[[], None]
) -> float:
    """Sample the trial's settings, run it, and return its value; optuna.TrialPruned when pruned (or refused: its
    settings a run does not accept, the user attribute REFUSED says why), TrialFailed when its run failed,
    KeyboardInterrupt when it was interrupted (Ctrl-C, SIGTERM: the run shut down in order).
    ``on_late_signal()`` when a Ctrl-C or SIGTERM came as the run was ending anyway (it completed, exit code 0): the
    trial counts as it ended, and the caller starts no other (the user asked to stop)."""
    from a3c.run.trainer import Trainer  # (torch: imported once the study is open)

    run_dir = trials_dir / f"trial-{trial.number:04d}"
    sampled = space.sample(trial)
    try:
        values, given = trial_settings(base, sampled, run_dir)
        if values.get("track") and "wandb_group" not in given:  # --track: a study's trials form one W&B group
            values["wandb_group"] = trial.study.study_name
            given.add("wandb_group")
        run = resolve_run(values, given)
    except UserError as err:  # a combination a run refuses: the trial is refused (see REFUSED), not the study
        reason = " ".join(str(err).split())
        trial.set_user_attr(REFUSED, reason)
        raise optuna.TrialPruned(f"refused: {reason}") from None
    config = run.config
    trial.set_user_attr("run_dir", str(run_dir.resolve()))
    trial.set_user_attr("preset", json.loads(json.dumps(preset_settings(config, "workers" in base.given))))
    shown = ", ".join(f"{d.name} {_show(sampled[d.field])}" for d in space.dimensions)
    print(f"a3c.tune: trial {trial.number}: {shown or '(nothing searched)'}; {run_dir}", file=sys.stderr)
    reporter = Reporter(trial, config.eval_every, config.total_steps)
    trainer = Trainer(run, on_eval=reporter)
    exit_code = trainer.run()
    if exit_code == 0 and trainer.signal_received is not None:
        on_late_signal()
    if exit_code in INTERRUPTED:
        trial.set_user_attr("interrupted", True)
        raise KeyboardInterrupt(f"trial {trial.number} interrupted")
    summary = _summary(run_dir)
    if exit_code != 0:
        raise TrialFailed(f"trial {trial.number}'s run failed ({summary.get('stop_reason', f'exit code {exit_code}')})")
    for key in ("total_steps", "mean_return_100", "wall_time_s", "eval_best_mean_return"):
        trial.set_user_attr(key, summary.get(key))
    if reporter.pruned_at is not None:
        assert reporter.last is not None
        raise optuna.TrialPruned(f"at step {reporter.pruned_at:,} (eval mean return {reporter.last[1]:.2f})")
    if reporter.last is None:
        raise TrialFailed(f"trial {trial.number}'s run recorded no evaluation (see its eval.csv); --eval-every lower?")
    trial.set_user_attr("eval_step", reporter.last[0])
    return reporter.last[1]


def _summary(run_dir: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((run_dir / "summary.json").read_text()))
    except (OSError, ValueError):
        return {}


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return str(value).lower() if isinstance(value, bool) else str(value)
