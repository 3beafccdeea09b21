"""A study: its directory, its settings (study.json), its Optuna study in a real database, and the loop that runs
trials until it has enough.

    STUDY_DIR/                 (--study-dir; default studies/<env>__<unix_time>)
      study.json               the study's settings: the trials' flags, the space, the storage, the sampler...
      study.db                 the Optuna study (SQLite), unless --storage names another database
      trials/trial-NNNN/       each trial's a3c run directory
      best.toml                the best trial's settings as a preset block (python -m a3c.train --preset-file)
      best.json                the best trial: number, value, settings, run directory
      plots/history.png        Optuna's optimization history
      plots/importance.png     Optuna's parameter importances (PED-ANOVA: needs no scikit-learn)

A trial that draws a combination of settings a run refuses (with the flags given, or with each other: the space is
checked as a whole before the first trial, a3c/tune/check.py) is refused at once: pruned with its reason recorded,
not one of --trials, and the study goes on (MAX_REFUSED_IN_ROW of them in a row stop it).

The database is what a resume trusts: every finished trial (complete or pruned) is in it as soon as it ends, so a
Ctrl-C (the running trial's run shuts down in order and the trial is marked failed) or a crash (the trial stays
"running" until its heartbeat is older than the grace period, then Optuna marks it failed) loses no finished trial.
``--resume STUDY_DIR`` reads study.json and goes on until the study has ``--trials`` finished trials; several
processes may do so at once (each its own trials, one database), and several machines with one ``--storage`` URL
(a server database: PostgreSQL, MySQL), each with a study directory of its own.

The sampler is TPE (rl-zoo3's choice; random for the first --n-startup-trials), the pruner Optuna's median pruner (a
trial whose evaluation is below the median of the finished trials' at the same step, once --n-startup-trials have
finished). The sampler's seed is the trials' --seed in the study's first session; a later session's (a resume, another
process joining) is its own, drawn from the seed, the trials so far and its process id: seeded as the first, it would
draw the first session's settings again. Trials run one at a time: a trial's run already uses every core (--workers
auto).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from a3c.record.files import atomic_write
from a3c.spec.errors import UserError
from a3c.tune.space import Space, space_from_data
from a3c.tune.trial import REFUSED, TrialBase, TrialFailed, run_trial

STUDY_JSON, STUDY_DB, TRIALS = "study.json", "study.db", "trials"
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
HEARTBEAT_S, GRACE_S = 60, 180  # a trial without a heartbeat for GRACE_S (a crashed process) is marked failed
MAX_FAILED_IN_ROW = 3  # trials failing one after the other: the study stops (a setting that cannot work)
# trials refused one after the other (combinations a run does not accept, each refused before any process starts, in
# a fraction of a second): the study stops, the space and the flags leaving the sampler almost nothing it may draw
MAX_REFUSED_IN_ROW = 50


@dataclass
class StudySettings:
    """study.json: what the study is (the same for every session of it)."""

    study_name: str
    storage: str
    trials: int  # finished trials (complete + pruned) the study runs to
    train_args: list[str]  # the trials' flags (those of python -m a3c.train), as typed
    space: dict[str, Any]  # the search space's data (a3c/tune/space.py)
    space_source: str
    sampler: str = "tpe"
    pruner: str = "median"
    n_startup_trials: int = 5
    evaluations: int = 10
    seed: int = 1  # the sampler's seed (the trials' --seed)

    def write(self, study_dir: Path) -> None:
        def dump(f: Any) -> None:
            json.dump(dataclasses.asdict(self), f, indent=2)
            f.write("\n")

        atomic_write(study_dir / STUDY_JSON, dump)

    @classmethod
    def read(cls, study_dir: Path) -> StudySettings:
        path = study_dir / STUDY_JSON
        if not study_dir.is_dir():
            raise UserError(f"--resume {study_dir}: no such directory; give the directory of an a3c.tune study")
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            known = {f.name for f in dataclasses.fields(cls)}
            settings = cls(**{k: v for k, v in data.items() if k in known})
            if not (isinstance(settings.train_args, list) and all(isinstance(a, str) for a in settings.train_args)):
                raise ValueError(f"train_args is not a list of flags: {settings.train_args!r}")
            if not isinstance(settings.space, dict):
                # (said before the study's database opens, not in the first trial)
                raise ValueError(f"space is not a table of settings: {settings.space!r}")
            return settings
        except (OSError, ValueError, TypeError) as err:  # (a UserError of the space is a ValueError)
            raise UserError(
                f"--resume {study_dir}: cannot read its {STUDY_JSON} ({err}); is it an a3c.tune study directory?"
            ) from None

    def space_(self) -> Space:
        return space_from_data(self.space, self.space_source)


def default_study_dir(env: str, now: float | None = None) -> Path:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", env)
    return Path("studies") / f"{name}__{int(now or time.time())}"


def sqlite_url(study_dir: Path) -> str:
    return f"sqlite:///{(study_dir / STUDY_DB).resolve()}"


def check_new_study_dir(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise UserError(f"--study-dir {path} exists and is not a directory; choose another path")
    if path.is_dir() and any(path.iterdir()):
        raise UserError(f"--study-dir {path} is not empty; choose a new directory, or --resume {path} to go on")


def storage(url: str) -> optuna.storages.RDBStorage:
    """The study's database (any URL SQLAlchemy takes), with heartbeats: a trial whose process died is failed."""
    try:
        with warnings.catch_warnings():  # (Optuna marks heartbeats experimental: two lines on every start otherwise)
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S)
    except Exception as err:  # SQLAlchemy's: a bad URL, a driver not installed, a server that does not answer
        message = " ".join(str(err).split())
        raise UserError(f"--storage {url}: cannot open it ({message}); give a database URL Optuna takes") from None


def open_study(settings: StudySettings) -> optuna.Study:
    """The study in its database: created, or loaded (a resume; another process or machine's study joined). A
    study that exists under this name with another env or space is a UserError."""
    pruner: optuna.pruners.BasePruner
    if settings.pruner == "none":
        pruner = optuna.pruners.NopPruner()
    else:
        pruner = optuna.pruners.MedianPruner(n_startup_trials=settings.n_startup_trials)
    with optuna_quiet():  # (Optuna's "A new study created in RDB" / "Using an existing study" lines: a3c.tune says)
        study = optuna.create_study(
            storage=storage(settings.storage),
            study_name=settings.study_name,
            direction="maximize",
            sampler=sampler(settings, settings.seed),
            pruner=pruner,
            load_if_exists=True,
        )
    so_far = len(study.get_trials(deepcopy=False))
    if so_far:
        # a resumed (or joining) session: a sampler seeded as the first session's would draw the same settings
        # again (TPE's random start-up, the random sampler): its seed is its own
        seed = int(np.random.SeedSequence((settings.seed, so_far, os.getpid())).generate_state(1)[0])
        study.sampler = sampler(settings, seed)
    identity = {"env": _env(settings.train_args), "space": settings.space}
    saved = study.user_attrs.get("a3c")
    if saved is None:
        study.set_user_attr("a3c", identity)
    elif saved != identity:
        raise UserError(
            f"the study {settings.study_name!r} in {settings.storage} searches {saved['env']} in another space (or "
            "another env); give another --study-name, or the same --env and --space"
        )
    return study


def sampler(settings: StudySettings, seed: int) -> optuna.samplers.BaseSampler:
    """TPE (random for its first --n-startup-trials, multivariate as rl-zoo3's), or random."""
    if settings.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # (multivariate: "experimental")
        return optuna.samplers.TPESampler(n_startup_trials=settings.n_startup_trials, seed=seed, multivariate=True)


def _env(train_args: list[str]) -> str:
    from a3c.train import parse_flags

    return str(parse_flags(train_args)[0]["env"])


def finished(study: optuna.Study) -> list[FrozenTrial]:
    """The trials that count toward --trials: complete or pruned, not refused (a3c/tune/trial.py: REFUSED)."""
    return [t for t in study.get_trials(deepcopy=False, states=FINISHED) if REFUSED not in t.user_attrs]


def refused(trial: FrozenTrial) -> bool:
    return trial.state == TrialState.PRUNED and REFUSED in trial.user_attrs


class EnoughTrials:
    """After each trial: stop the study once its finished trials (``finished``) and those running (this process's
    next, or another process's in flight) make ``trials``. Counting only the finished ones, two processes made 8 of
    7; counting refused ones, a space with refused combinations would end with fewer runs than asked for."""

    def __init__(self, trials: int) -> None:
        self.trials = trials

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        if len(finished(study)) + len(running) >= self.trials:
            study.stop()


def optimize(study: optuna.Study, settings: StudySettings, study_dir: Path, timeout: float | None) -> None:
    """Run trials, one at a time, until the study holds ``settings.trials`` finished ones (or ``timeout`` seconds
    have passed: no trial starts after it). KeyboardInterrupt after Ctrl-C: the trial in flight is marked failed,
    or, when the signal came as its run was ending anyway, recorded as it ended; no trial starts after it."""
    from a3c.train import parse_flags

    values, given, _ = parse_flags(settings.train_args)
    base = TrialBase(values, given, settings.evaluations)
    space = settings.space_().without(set(given))
    trials_dir = study_dir / TRIALS
    trials_dir.mkdir(parents=True, exist_ok=True)
    if len(finished(study)) >= settings.trials:
        return
    failed_in_row = refused_in_row = 0

    def after_trial(study: optuna.Study, trial: FrozenTrial) -> None:
        nonlocal failed_in_row, refused_in_row
        done = len(finished(study))
        if refused(trial):
            refused_in_row += 1
            print(f"a3c.tune: trial {trial.number} refused, not counted: {trial.user_attrs[REFUSED]}", file=sys.stderr)
            if refused_in_row >= MAX_REFUSED_IN_ROW:
                print(
                    f"a3c.tune: error: {refused_in_row} trials in a row drew settings a run refuses (the last one's "
                    "reason above); stopping the study: narrow the space (--space FILE) or change the flags",
                    file=sys.stderr,
                )
                study.stop()
            return
        refused_in_row = 0
        if trial.state == TrialState.COMPLETE:
            failed_in_row = 0
            best = study.best_trial
            print(
                f"a3c.tune: trial {trial.number} finished: eval mean return {trial.value:.2f} ({done} of "
                f"{settings.trials} trials finished; best: trial {best.number}, {best.value:.2f})",
                file=sys.stderr,
            )
        elif trial.state == TrialState.PRUNED:
            failed_in_row = 0
            step, value = _last_report(trial)
            print(
                f"a3c.tune: trial {trial.number} pruned at step {step:,} (eval mean return {value:.2f}; {done} of "
                f"{settings.trials} trials finished)",
                file=sys.stderr,
            )
        elif trial.state == TrialState.FAIL:
            failed_in_row += 1
            why = trial.user_attrs.get("failure", "see above")
            print(f"a3c.tune: trial {trial.number} failed ({why})", file=sys.stderr)
            if failed_in_row >= MAX_FAILED_IN_ROW:
                print(
                    f"a3c.tune: error: {failed_in_row} trials failed in a row; stopping the study (see their run "
                    "directories' output above)",
                    file=sys.stderr,
                )
                study.stop()

    late_signal = False

    def stop_after_this_trial() -> None:
        nonlocal late_signal
        late_signal = True
        study.stop()  # (Optuna records the trial in flight, then starts no other)

    def objective(trial: optuna.Trial) -> float:
        try:
            return run_trial(trial, base, space, trials_dir, stop_after_this_trial)
        except TrialFailed as err:
            trial.set_user_attr("failure", str(err))
            raise

    optimize_quietly(
        study,
        objective,
        timeout=timeout,
        # the trials running in other processes on this study count (EnoughTrials), the refused ones do not
        callbacks=[EnoughTrials(settings.trials), after_trial],
        catch=(TrialFailed,),
    )
    if late_signal:
        raise KeyboardInterrupt("Ctrl-C or SIGTERM as a trial was ending")


def optimize_quietly(study: optuna.Study, objective: Any, **kwargs: Any) -> None:
    """study.optimize with Optuna's own log lines off (a3c.tune prints one line per trial of its own; Optuna's line
    for a failed trial carries a traceback of the exception that only says the run failed)."""
    with optuna_quiet():
        study.optimize(objective, gc_after_trial=True, **kwargs)


@contextlib.contextmanager
def optuna_quiet() -> Iterator[None]:
    """Optuna's log lines at errors only, while the block runs."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(verbosity)


def _last_report(trial: FrozenTrial) -> tuple[int, float]:
    step = max(trial.intermediate_values, default=0)
    return step, trial.intermediate_values.get(step, float("nan"))
