"""``python -m a3c.tune``: the command line of a study (a3c/tune/study.py has the design). Its own flags are the
study's; every other flag is a flag of python -m a3c.train, parsed by a3c.train's own parser, and sets every trial's
settings: fixed, so not searched (``--env``, ``--total-steps``, ``--workers``, ``--backend ray``, ``--preset-file``...).

This is why a3c.tune sits above a3c.train in the layers (pyproject.toml): a trial is what ``python -m a3c.train`` would
run with those flags plus the trial's sampled settings, resolved by the same step (a3c/run/resolve.py).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib.util
import math
import signal
import sys
import typing
from collections.abc import Sequence
from pathlib import Path

from a3c.spec.errors import OneLineParser, UserError, install_extra
from a3c.spec.validation import flag_name
from a3c.train import parse_flags

if typing.TYPE_CHECKING:
    from a3c.tune.study import StudySettings

EXAMPLES = """Every other flag is one of python -m a3c.train --help, for every trial (a setting given is not searched).

examples:
  # 10 trials of 50k steps on CartPole-v1, one worker each
  python -m a3c.tune --env CartPole-v1 --trials 10 --total-steps 50000 --workers 1 --study-dir studies/cartpole
  # after Ctrl-C or a crash: go on (its finished trials are kept); a second terminal may run the same at once
  python -m a3c.tune --resume studies/cartpole
  # the best settings found, for a run of your own
  python -m a3c.train --env CartPole-v1 --preset-file studies/cartpole/best.toml
  # one study on several machines: a database they all reach, and the same flags on each
  python -m a3c.tune --env Acrobot-v1 --trials 50 --storage postgresql://host/db --study-name acrobot
"""

# the CNN torso's own: 512 wide and shared by actor and critic, whatever these say (a run refuses --hidden-sizes)
CNN_FIXED = {"hidden_sizes", "shared_torso"}
STUDY_ONLY = ("study_dir", "storage", "study_name", "space", "sampler", "pruner", "n_startup_trials", "evaluations")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m a3c.tune",
        description="Search an env's hyperparameters with Optuna: each trial an a3c run, the study in a database.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXAMPLES,
        allow_abbrev=False,  # (every flag it does not know is a3c.train's)
    )
    add = parser.add_argument
    add("--trials", type=int, metavar="N", help="finished trials (complete or pruned) the study runs to (default: 20)")
    add("--study-dir", metavar="DIR", help="the study's directory (default: studies/<env>__<unix-time>)")
    add(
        "--storage",
        metavar="URL",
        help="the study's database, any URL Optuna takes (default: sqlite:///STUDY_DIR/study.db); one server "
        "database lets several machines work on one study",
    )
    add("--study-name", metavar="NAME", help="the study's name in the database (default: the study directory's name)")
    add(
        "--resume", metavar="STUDY_DIR", help="go on with the study in STUDY_DIR (its study.json): finished trials kept"
    )
    add("--space", metavar="FILE", help="the search space, a TOML file (default and format: a3c/tune/space.toml)")
    add("--sampler", choices=("tpe", "random"), default="tpe", help="Optuna's sampler (default: tpe)")
    add("--pruner", choices=("median", "none"), default="median", help="Optuna's pruner (default: median)")
    add(
        "--n-startup-trials",
        type=int,
        default=5,
        metavar="N",
        help="trials sampled at random before TPE, and finished before the pruner prunes (default: 5)",
    )
    add(
        "--evaluations",
        type=int,
        default=10,
        metavar="N",
        help="evaluations per trial, reported to the pruner: --eval-every is --total-steps / N unless given "
        "(default: 10)",
    )
    add(
        "--timeout",
        type=float,
        metavar="S",
        help="start no trial after S seconds of this session (the one running finishes)",
    )
    return parser


def require_optuna() -> None:
    if importlib.util.find_spec("optuna") is None:
        raise UserError(f"python -m a3c.tune needs Optuna, which is not installed; {install_extra('tune')}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    own, rest = parser.parse_known_args(argv)
    _check_unknown(parser, rest)
    require_optuna()
    from a3c.tune import results
    from a3c.tune import study as studies

    if own.trials is not None and own.trials < 1:
        raise UserError(f"--trials must be at least 1 (got {own.trials})")
    if own.timeout is not None and not (math.isfinite(own.timeout) and own.timeout > 0):
        raise UserError(f"--timeout must be a positive number of seconds (got {own.timeout})")
    if own.resume is not None:
        study_dir, settings = Path(own.resume), _resumed(parser, own, rest)
    else:
        study_dir, settings = _new(own, rest)
    try:
        study = studies.open_study(settings)
    except UserError:
        if own.resume is None:  # a refused new study (its --storage, --study-name) leaves no folder behind
            with contextlib.suppress(OSError):
                study_dir.rmdir()  # (only where empty: a study's files are never removed)
        raise
    if own.resume is None:
        settings.write(study_dir)  # (once the database is open: a --storage that cannot be opened leaves none)
    env = str(parse_flags(settings.train_args)[0]["env"])
    done = len(studies.finished(study))
    print(
        f"a3c.tune: study {settings.study_name!r} ({settings.storage}): {done} of {settings.trials} trials finished; "
        f"trials in {study_dir / studies.TRIALS}",
        file=sys.stderr,
    )
    interrupted = False
    try:
        studies.optimize(study, settings, study_dir, own.timeout)
    except KeyboardInterrupt:
        interrupted = True
    summary = results.counts(study)
    counted = ", ".join(f"{n} {state.lower()}" for state, n in sorted(summary.items()))
    print(f"a3c.tune: trials: {counted or 'none ran'}", file=sys.stderr)
    best = results.write_best(study, study_dir, env)
    if best is not None:
        trial = study.best_trial
        settings_line = ", ".join(f"{k} {_show(v)}" for k, v in trial.params.items())
        print(f"a3c.tune: best: trial {trial.number}, eval mean return {trial.value:.2f}: {settings_line}")
        print(f"a3c.tune: its settings: {best}; train with: python -m a3c.train --env {env} --preset-file {best}")
    for path in results.write_figures(study, study_dir):
        print(f"a3c.tune: figure {path}", file=sys.stderr)
    if interrupted:
        print(
            f"a3c.tune: interrupted; the finished trials are in {settings.storage}; go on with: "
            f"python -m a3c.tune --resume {study_dir}",
            file=sys.stderr,
        )
        return 128 + signal.SIGINT
    return 0


def _resumed(parser: argparse.ArgumentParser, own: argparse.Namespace, rest: list[str]) -> StudySettings:
    from a3c.spec.environment import check_env_file_here
    from a3c.tune.study import StudySettings

    given = [name for name in STUDY_ONLY if getattr(own, name) != parser.get_default(name)]
    if given or rest:
        flags = ["--" + name.replace("_", "-") for name in given] + [a for a in rest if a.startswith("-")]
        raise UserError(
            f"--resume keeps the study's settings (its study.json), so {', '.join(flags)} cannot be given with it; "
            "only --trials and --timeout can"
        )
    study_dir = Path(own.resume)
    settings = StudySettings.read(study_dir)
    # the trials keep the study's env: a relative env file missing here would refuse every trial with advice (--env)
    # that --resume refuses
    check_env_file_here(str(parse_flags(settings.train_args)[0]["env"]), "resume", "study")
    if own.trials is not None and own.trials != settings.trials:
        settings.trials = own.trials
        settings.write(study_dir)
    return settings


def _new(own: argparse.Namespace, rest: list[str]) -> tuple[Path, StudySettings]:
    from a3c.record.files import make_folder
    from a3c.tune.check import check_space
    from a3c.tune.space import load_space
    from a3c.tune.study import StudySettings, check_new_study_dir, default_study_dir, sqlite_url

    values, given, show = parse_flags(rest)
    if show:
        raise UserError("--show-config is python -m a3c.train's; drop it here")
    for name in ("run_dir", "exp_name"):
        if name in given:
            raise UserError(
                f"{flag_name(name)}: each trial's run directory is STUDY_DIR/trials/trial-N; give --study-dir instead"
            )
    if own.n_startup_trials < 0 or own.evaluations < 1:
        raise UserError("--n-startup-trials must be >= 0 and --evaluations >= 1")
    space = load_space(Path(own.space) if own.space else None, _objective(values, given))
    if own.space is None and _observes_images(values):
        space = space.without(CNN_FIXED)  # the default space's [network] table is the MLP's
    searched = space.without(set(given))
    if not searched.dimensions:
        raise UserError(f"every setting of the space ({space.source}) is fixed by a flag given: nothing to search")
    # the trials' fixed settings with the space's values, checked once before anything starts (a3c/tune/check.py)
    line = check_space(searched, values, given, seed=int(values["seed"])).line()
    if line is not None:
        print(line, file=sys.stderr)
    study_dir = Path(own.study_dir) if own.study_dir else default_study_dir(values["env"])
    check_new_study_dir(study_dir)
    settings = StudySettings(
        study_name=own.study_name or study_dir.name,
        storage=own.storage or sqlite_url(study_dir),
        trials=own.trials or 20,
        train_args=list(rest),
        space=space.to_data(),
        space_source=space.source,
        sampler=own.sampler,
        pruner=own.pruner,
        n_startup_trials=own.n_startup_trials,
        evaluations=own.evaluations,
        seed=int(values["seed"]),
    )
    make_folder(study_dir, "--study-dir")
    return study_dir, settings


def _objective(values: dict[str, object], given: set[str]) -> str:
    """The trials' objective, whose default space they search: --algo if given, else the env's preset's."""
    from a3c.run.resolve import resolve_settings

    if "algo" not in given:
        try:
            return resolve_settings(values, given).config.algo
        except UserError:  # (the flags alone may be refused: the check of the space says why)
            pass
    return str(values["algo"])


def _observes_images(values: dict[str, object]) -> bool:
    """Whether the trials' env observes images (a CNN torso); False where it cannot be made (the check of the space
    says why)."""
    from a3c.spec.environment import describe_env, is_image

    try:
        spec = describe_env(str(values["env"]), typing.cast(dict, values["env_kwargs"]))
        return is_image(spec.observation_space)
    except UserError:
        return False


def _check_unknown(parser: argparse.ArgumentParser, rest: list[str]) -> None:
    """A flag neither a3c.tune's nor a3c.train's: one line naming it, with the flag of either meant (``--trial 3``:
    did you mean --trials?). a3c.train's parser alone would suggest only its own flags."""
    from a3c.train import build_parser as train_parser

    train = train_parser()
    try:
        _, unknown = train.parse_known_args(rest)
    except UserError:
        return  # (another error of a3c.train's flags: its parser reports it as it parses them)
    flags = [word for word in unknown if word.startswith("-")]
    if not flags:
        return
    known = [o for p in (parser, train) for o in p._option_string_actions if o.startswith("--")]
    guesses = []
    for word in flags:
        flag = word.split("=", 1)[0]
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.75)
        if close:
            guesses.append(f"{close[0]} for {flag}")
    meant = f" (did you mean {', '.join(guesses)}?)" if guesses else ""
    raise UserError(
        f"unrecognized arguments: {' '.join(unknown)}{meant}; see {parser.prog} --help and python -m a3c.train --help"
    )


def _show(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:.4g}" if isinstance(value, float) else str(value)
