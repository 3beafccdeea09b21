"""Resume (``--resume RUN_DIR``): the checkpoint a run goes on from, read once and checked (``load_resume``), the
resumed run's config (``resume_config``), the check that the checkpoint's model fits the env and the model this run
builds (``check_compatible``), what the trainer does to the run directory before it goes on (episodes.csv
trimmed, the run's wall time so far), and the line it prints when the resume moves the lr schedule's end.

The checkpoint is the newest intact one (``newest_intact``): of checkpoints/latest.pt and the step-N.pt files, the
one at the highest step that loads and holds what a resume needs. The trainer writes step-N.pt before latest.pt, so a
full disk can fail latest.pt's write after step-N.pt's succeeded; latest.pt alone would send the run back a whole
checkpoint interval (or, with no latest.pt yet, refuse it). When the one taken is not latest.pt, a line says which and
why.

The config is the checkpoint's, with the flags given on the command line on top, except those that define the model
and the evaluations' way of choosing actions (``FIXED_ON_RESUME``, each with the reason its refusal gives). Rows of
episodes.csv logged after the checkpoint was taken (before a crash) are dropped, as the resumed run will produce those
episode indexes again; the trainer likewise purges TensorBoard events from the
checkpoint's step on. A row the checkpoint counted is never dropped, whatever the resumed session's worker count: the
checkpoint counts the episodes of every rank the run has had.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from a3c.learn.distributions import make_distribution
from a3c.learn.optim import OPTIMIZERS, scheduled_lr
from a3c.learn.running_stats import moments_from_state
from a3c.record.checkpoint import (
    INPUT_SCALE,
    LATEST,
    REQUIRED,
    check_settings_known,
    check_trained_spaces,
    load_checkpoint,
    saved_settings,
    step_checkpoints,
)
from a3c.record.files import atomic_write
from a3c.record.rows import finite_mean
from a3c.record.run_dir import resume_checkpoint
from a3c.spec.config import Config
from a3c.spec.config_text import as_flag
from a3c.spec.environment import EnvSpec
from a3c.spec.errors import UserError
from a3c.spec.flags import RESET_WHEN_OFF
from a3c.spec.setting_types import same_setting
from a3c.spec.validation import INERT_NEEDS, flag_name, inert_settings
from a3c.spec.wording import count

# settings a resumed run keeps, each with why: those that define the model and its optimizer state, and the
# evaluations' way of choosing actions (a setting an older checkpoint lacks reads as its ADDED_SETTINGS value)
_MODEL = (
    "a resumed run keeps its env, env kwargs, model (sizes, --gsde, initial weights, observation normalisation) and "
    "optimizer"
)
_EVALUATIONS = "its evaluations (eval.csv, checkpoints/best.pt) compare one way of choosing actions"
FIXED_ON_RESUME: dict[str, str] = {
    "env": _MODEL,
    "env_kwargs": _MODEL,
    "hidden_sizes": _MODEL,
    "shared_torso": _MODEL,
    "lstm": _MODEL,
    "optimizer": _MODEL,
    "normalize_obs": _MODEL,  # the model was trained on (un)normalised inputs
    "normalize_reward": _MODEL,
    "gsde": _MODEL,  # the policy head's width (gSDE's exploration matrix)
    "log_std_init": _MODEL,  # initial weights: the checkpoint's replace what these would make
    "ortho_init": _MODEL,
    "eval_stochastic": _EVALUATIONS,
}


def load_resume(run_dir: str | Path) -> dict[str, Any]:
    """The checkpoint to resume the run in ``run_dir`` from: the newest intact one (``newest_intact``), checked for
    completeness; a line on stderr when a newer file was passed over (latest.pt older, damaged or missing; a damaged
    step-N.pt), saying which it took and why."""
    run = Path(run_dir)
    resume_checkpoint(run)  # (the directory is a run's, with a checkpoint)
    path, payload, passed = newest_intact(run / "checkpoints")
    if passed:
        print(
            f"a3c: resuming from checkpoints/{path.name} (step {payload['global_step']:,}), the newest intact "
            f"checkpoint: {'; '.join(passed)}",
            file=sys.stderr,
        )
    if "wall_time_s" not in payload:  # an a3c before per-rank retention (wall_time_s came with it)
        count_forgotten_ranks(payload, run / "episodes.csv")
    return payload


def newest_intact(
    directory: Path, load: Callable[[Path], dict[str, Any]] | None = None
) -> tuple[Path, dict[str, Any], list[str]]:
    """The newest checkpoint in ``directory`` that loads and is complete (``load``, by default ``checked_checkpoint``:
    complete for a resume; a3c.load takes any that loads): (its path, its payload, why each newer candidate was passed
    over). The candidates are latest.pt and the step-N.pt files; step-N.pt
    is written before latest.pt, so a write that fails on a full disk can leave latest.pt older than the newest step
    file (or missing, or, written by something other than a3c's atomic writer, damaged). latest.pt is read first;
    then each step-N.pt newer than it, newest first, until one is intact (older ones cannot be newer than latest.pt,
    and are read only if latest.pt is not intact). UserError of latest.pt (or of the newest step file, without one)
    when none is intact."""
    load = load or checked_checkpoint
    latest = directory / LATEST
    passed: list[str] = []
    first_error: UserError | None = None
    best: tuple[Path, dict[str, Any]] | None = None
    if latest.is_file():
        try:
            best = (latest, load(latest))
        except UserError as err:
            first_error = err
            passed.append(f"checkpoints/{LATEST} {_why(err, latest)}")
    else:
        passed.append(f"checkpoints/{LATEST} is missing")
    floor = best[1]["global_step"] if best is not None else -1
    for step, path in reversed(step_checkpoints(directory)):
        if step <= floor:
            break
        try:
            payload = load(path)
        except UserError as err:
            first_error = first_error or err
            passed.append(f"checkpoints/{path.name} {_why(err, path)}")
            continue
        if payload["global_step"] <= floor:  # (named after another step than it holds: not a3c's writer)
            continue
        if best is not None:
            passed.append(f"checkpoints/{LATEST} is at step {floor:,}")
        best = (path, payload)
        break
    if best is None:
        assert first_error is not None, "resume_checkpoint found a checkpoint file"
        raise first_error
    return best[0], best[1], passed


def _why(err: UserError, path: Path) -> str:
    """A UserError about checkpoint ``path`` as the reason it was passed over: "is corrupt ...", without the path."""
    return str(err).split(f"{path} ", 1)[-1].split("; ", 1)[0]


def checked_checkpoint(path: Path) -> dict[str, Any]:
    """The checkpoint at ``path``, loaded (load_checkpoint) and checked for what a resume needs: every REQUIRED entry,
    and worker counters of one length. UserError naming the file and what is wrong."""
    payload = load_checkpoint(path)
    for key, kind in REQUIRED.items():
        if not isinstance(payload.get(key), kind):
            raise UserError(
                f"checkpoint {path} has no valid {key!r} entry (corrupt, or written by another version); "
                "start a new run instead"
            )
    counters = ("worker_steps", "episodes_written", "incarnations")
    workers = len(payload["episodes_written"])
    if any(payload[k].dim() != 1 or len(payload[k]) != workers for k in counters) or payload["model"].dim() != 1:
        raise UserError(f"checkpoint {path} has inconsistent worker counters (corrupt); start a new run instead")
    return payload


def count_forgotten_ranks(payload: dict[str, Any], episodes_csv: Path) -> None:
    """A checkpoint of an a3c before per-rank retention, written after a resume with fewer workers, counts only that
    session's ranks, while episodes.csv holds the complete rows of an earlier session's higher ranks (counted by
    that session's checkpoint). Such a rank gets, in ``payload``, the counter its rows show: its last index + 1
    (its steps, stats and incarnations 0), from its rows up to the checkpoint's step (a rank the checkpoint does not
    count that logged rows after it ran in a later session that crashed before its first checkpoint: those rows
    go, as every row logged after the checkpoint does). trim_episode_log then keeps those rows, and the
    coordinator's restore goes on after them (a rank it does not run keeps its counter for later checkpoints)."""
    counted, step = len(payload["episodes_written"]), payload["global_step"]
    last: dict[int, int] = {}
    for _, values in _episode_rows(episodes_csv)[1]:
        w, i = int(values["worker"]), int(values["index"])
        if w >= counted and values["global_step"] <= step:
            last[w] = max(last.get(w, -1), i)
    if not last:
        return
    extra = max(last) + 1 - counted
    written = torch.cat([payload["episodes_written"], torch.zeros(extra, dtype=payload["episodes_written"].dtype)])
    for w, i in last.items():
        written[w] = i + 1
    payload["episodes_written"] = written
    for key in ("worker_steps", "incarnations"):
        payload[key] = torch.cat([payload[key], torch.zeros(extra, dtype=payload[key].dtype)])
    stats = payload["worker_stats"]
    if stats.dim() == 2 and len(stats) == counted:
        payload["worker_stats"] = torch.cat([stats, torch.zeros(extra, stats.shape[1], dtype=stats.dtype)])


def resume_config(payload: dict[str, Any], run_dir: str | Path, overrides: dict[str, Any]) -> Config:
    """The resumed run's config: the checkpoint's, with ``overrides`` (the flags given on the command line) on
    top. UserError for an override of a setting that defines the model, or a --total-steps already reached. The
    model's input scale is the checkpoint's (``saved_settings``), whatever is given."""
    check_settings_known(payload, f"the checkpoint of {run_dir}", "resume")
    saved = saved_settings(payload)
    for key, reason in FIXED_ON_RESUME.items():
        old = _normal(saved.get(key))
        if key in overrides and not same_setting(overrides[key], old):
            new = _normal(overrides[key])
            # a switch as it is typed (--no-normalize-obs), not as "--normalize-obs False"
            given_now = as_flag(key, new) if isinstance(new, bool) else f"{flag_name(key)} {new!r}"
            before = as_flag(key, old) if isinstance(old, bool) else repr(old)
            raise UserError(
                f"{given_now} differs from the resumed run's {before}; {reason}: drop {given_now.split()[0]}, or "
                "start a new run"
            )
    if overrides.get("run_dir") is not None and Path(overrides["run_dir"]).resolve() != Path(run_dir).resolve():
        raise UserError("--run-dir and --resume name different directories; a resumed run continues in its own")
    merged = {**saved, **overrides, INPUT_SCALE: saved[INPUT_SCALE]}
    defaults = Config()
    for switch, on, settings in RESET_WHEN_OFF:
        if merged.get(switch) != on:
            # a run resumed with a switch off (a Ray run on shared memory, a tracked run without --track, a PPO run
            # under --algo a3c): the settings only that switch turns on go back to their defaults, as they would fail
            # validation, unless given again on this command line; a tracked run's W&B run id stays, for a later
            # session with --track
            merged.update({key: getattr(defaults, key) for key in settings if key not in overrides})
    try:
        config = Config.from_dict({**merged, "run_dir": str(run_dir), "resume": str(run_dir)})
    except TypeError as err:
        raise UserError(f"the checkpoint's config does not fit this a3c ({err}); start a new run instead") from None
    for key in inert_settings(config):  # (the same, for a setting two others leave with nothing to do now)
        if key not in overrides:
            setattr(config, key, getattr(defaults, key))
    config.validate()
    step = payload["global_step"]
    if config.total_steps <= step:
        raise UserError(
            f"the run in {run_dir} is already at step {step:,}, not below --total-steps {config.total_steps:,}; "
            "give a larger --total-steps to continue it"
        )
    return config


def reset_when_off(payload: dict[str, Any], config: Config, given: set[str]) -> tuple[list[str], str | None]:
    """The settings whose checkpoint values resume_config replaced with their defaults, their switch being off now
    (RESET_WHEN_OFF: a PPO run resumed under --algo a3c, a Ray run on shared memory; INERT_NEEDS: a run's
    --start-method resumed under --backend serial), not given again; and the note
    that says so (None where none was): the checkpoint's values are not kept, so switching back takes the defaults."""
    saved = saved_settings(payload)
    reset, switches = [], []
    for switch, on, settings in RESET_WHEN_OFF:
        if getattr(config, switch) == on:
            continue  # (on: its settings were kept; one that differs was reset for another reason, below)
        names = [
            name
            for name in settings
            if name not in given and name in saved and not same_setting(saved[name], getattr(config, name))
        ]
        if names:
            reset += names
            switches.append(as_flag(switch, on))
    for name, needs in INERT_NEEDS.items():  # (inert_settings': two settings together left it nothing to do)
        if name not in reset and name not in given and name in saved:
            if not same_setting(saved[name], getattr(config, name)):
                reset.append(name)
                switches.append(needs)
    if not reset:
        return [], None
    was = " and ".join(as_flag(name, _normal(saved[name])) for name in reset)
    return reset, (
        f"a3c: note: the run's {was} count only with {' or '.join(switches)}, off now: this session takes "
        f"{'its default' if len(reset) == 1 else 'their defaults'}, and so does a later one that turns "
        f"{'it' if len(switches) == 1 else 'them'} on again, unless given"
    )


def _normal(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value


def check_compatible(
    payload: dict[str, Any], spec: EnvSpec, n_params: int, source: str, param_dim: int | None = None
) -> None:
    """UserError if the checkpoint's model does not fit the env (its spaces) and the model this run builds
    (``n_params`` parameters, a policy head ``param_dim`` wide: by default, the plain family's for the action
    space; --gsde's head is wider)."""
    saved_spaces = payload.get("spaces")
    if isinstance(saved_spaces, dict):
        check_trained_spaces(saved_spaces, spec, source, "resume with the env it was trained on")
    n_actions = make_distribution(spec.action_space).param_dim if param_dim is None else param_dim
    if (payload["obs_dim"], payload["n_actions"]) != (spec.obs_dim, n_actions):
        raise UserError(
            f"{source} was trained with observations of size {payload['obs_dim']} and {payload['n_actions']} "
            f"actions, but the env now has {spec.obs_dim} and {n_actions}; resume with the env it was trained on"
        )
    if payload["model"].numel() != n_params:
        raise UserError(
            f"{source} holds {payload['model'].numel()} parameters but the model has {n_params}; "
            "resume with the --hidden-sizes (and --shared-torso) it was trained with"
        )


def check_restorable(payload: dict[str, Any], config: Config, obs_shape: tuple[int, ...], source: str) -> None:
    """UserError if the checkpoint's optimizer state, worker stats or running statistics would not load into the run
    ``config`` builds (a moment of another size, a missing entry: a file that unpickles but is corrupt or of another
    version): checked here, before the run's files are touched, by loading them into scratch copies the way the
    coordinator's restore will."""
    n_params = payload["model"].numel()
    fix = "use another checkpoint, or start a new run"
    try:
        OPTIMIZERS[config.optimizer](torch.zeros(n_params), lr=config.lr, slots=1).load_state_dict(payload["optimizer"])
    except (KeyError, RuntimeError, TypeError, ValueError, AttributeError) as err:
        what = f"no {err}" if isinstance(err, KeyError) else " ".join(str(err).split()) or type(err).__name__
        raise UserError(
            f"{source}: its --optimizer {config.optimizer} state does not fit its model ({what}); {fix}"
        ) from None
    stats = payload["worker_stats"]
    if stats.dim() != 2 or len(stats) != len(payload["episodes_written"]):
        raise UserError(f"{source}: its worker stats are shaped {tuple(stats.shape)}, not one row a worker; {fix}")
    for key, shape, wanted in (
        ("obs_stats", obs_shape, config.normalize_obs),
        ("reward_stats", (), config.normalize_reward),
    ):
        if wanted and key in payload:
            try:
                moments_from_state(payload[key], shape)
            except (KeyError, TypeError, ValueError) as err:
                what = f"no {err}" if isinstance(err, KeyError) else " ".join(str(err).split())
                raise UserError(f"{source}: its {key} do not fit the env ({what}); {fix}") from None


def _episode_rows(path: Path) -> tuple[list[str], list[tuple[list[str], dict[str, float]]]]:
    """episodes.csv's header and its whole rows (each as read, and by column as numbers), in file order; a row cut
    short or unreadable (the main process killed while writing it) is left out. ([], []) for no file."""
    if not path.is_file():
        return [], []
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return [], []
    header, parsed = rows[0], []
    for row in rows[1:]:
        if len(row) != len(header):
            continue
        try:
            parsed.append((row, {name: float(v) for name, v in zip(header, row, strict=True)}))
        except ValueError:
            continue
    return header, parsed


def trim_episode_log(path: Path, written: np.ndarray) -> list[dict[str, float]]:
    """Keep the rows of episodes.csv that the checkpoint counted (worker w's indexes below ``written[w]``; of a
    checkpoint that forgot ranks, the counters load_resume gave them), drop the rest (logged after the checkpoint,
    before a crash, or half-written), rewrite the file atomically, and return the kept rows in file order."""
    return trim_episode_log_counting(path, written)[0]


def trim_episode_log_counting(path: Path, written: np.ndarray) -> tuple[list[dict[str, float]], int]:
    """``trim_episode_log``, and how many whole rows it dropped (a half-written row is no episode)."""
    header, rows = _episode_rows(path)
    if not header:
        return [], 0
    kept = [(row, values) for row, values in rows if _counted(values, written)]
    atomic_write(path, lambda f: csv.writer(f).writerows([header, *(row for row, _ in kept)]))
    return [values for _, values in kept], len(rows) - len(kept)


def dropped_episodes_note(dropped: int, step: int) -> str | None:
    """The line a resume prints when episodes.csv held episodes after its checkpoint (at ``step``): a run stopped by
    --stop-at or --stop-when-solved keeps the solve's weights as its final checkpoint, while its workers finish the
    episodes under way; a run killed or crashed logged some after its last checkpoint. The run goes on from the
    checkpoint, so they are dropped (their steps are played again)."""
    if dropped == 0:
        return None
    return (
        f"a3c: note: {count(dropped, 'episode')} in episodes.csv came after the checkpoint at step {step:,} (finished "
        "while the run stopped, or before it was killed): dropped, as the run goes on from the checkpoint"
    )


def counted_episodes(path: Path, written: np.ndarray) -> list[dict[str, float]]:
    """The rows of episodes.csv that the checkpoint counted (what trim_episode_log keeps), read only."""
    _, rows = _episode_rows(path)
    return [values for _, values in rows if _counted(values, written)]


def last_window_mean(rows: list[dict[str, float]], size: int = 100) -> float | None:
    """The mean return of the run's last ``size`` episodes by global step (then worker, index: the record's order), as
    the dashboard's window holds them after a resume, averaged as it averages them (``finite_mean``); None before there
    are ``size``, or where none of them is finite."""
    if len(rows) < size:
        return None
    ordered = sorted(rows, key=lambda r: (r["global_step"], r["worker"], r["index"]))
    return finite_mean(r["return"] for r in ordered[-size:])


def already_solved_problem(config: Config, payload: dict[str, Any], threshold: float | None) -> str | None:
    """The line refusing a resume that would stop at its first episode: its stop (--stop-at, --stop-when-solved) is
    met by the 100-episode window its checkpoint left (a run that stopped solved, resumed for more steps, stopped
    again at once and said only "solved"). None where the run would train on."""
    if threshold is None or not config.stops_at_threshold or config.resume is None:
        return None
    written = payload["episodes_written"]
    rows = counted_episodes(Path(config.resume) / "episodes.csv", np.asarray(written))
    mean = last_window_mean(rows)
    if mean is None or mean < threshold:
        return None
    stop = f"--stop-at {threshold:g}" if config.stop_at is not None else f"--stop-when-solved (the env's {threshold:g})"
    fix = ["--stop-at none"] if config.stop_at is not None else []
    fix += ["--no-stop-when-solved"] if config.stop_when_solved else []
    return (
        f"the run's last 100 episodes average {mean:.1f}, which meets its {stop}, so it would stop at its first "
        f"episode; give {' and '.join(fix)} to train on, or a --stop-at above {mean:.1f}"
    )


def _counted(values: dict[str, float], written: np.ndarray) -> bool:
    w, i = int(values["worker"]), int(values["index"])
    return 0 <= w < len(written) and i < written[w]


def elapsed_wall_time(payload: dict[str, Any], kept: list[dict[str, float]]) -> float:
    """The run's wall time at the checkpoint ``payload`` (its ``wall_time_s``): what the resumed session's wall time
    goes on from, so that wall_time runs on across sessions. A checkpoint written before a3c saved it, by an a3c
    whose wall time began at 0 again in each session: the sessions' times added up from the episodes.csv rows it
    kept (``kept``), walked in global-step order. A session begins where the wall time drops below half of what
    the one before had reached (the rows of one session, ordered by step, can step back in time a little: the
    workers' episodes interleave), and adds what that one had reached; the last adds its newest row's time."""
    saved = payload.get("wall_time_s")
    if isinstance(saved, (int, float)) and saved >= 0:  # (NaN fails the comparison)
        return float(saved)
    before = reached = 0.0  # the earlier sessions' time; the time the current one has reached
    for row in sorted(kept, key=lambda r: (r["global_step"], r.get("worker", 0.0), r.get("index", 0.0))):
        wall = row["wall_time"]
        if wall < reached / 2:  # wall time began at 0 again: a new session
            before, reached = before + reached, 0.0
        reached = max(reached, wall)
    return before + reached


def lr_schedule_note(
    config: Config,
    previous_total: int,
    step: int,
    previous_lr: float | None = None,
    previous_schedule: str | None = None,
) -> str | None:
    """The line a resume prints when the lr at the step it goes on from moves: a linear schedule is a function of the
    run's global step and its --total-steps (a3c.learn.optim.scheduled_lr), so resumed with the same settings it goes
    on exactly as if the run had never stopped; with another total the lr becomes what a run planned with that total
    has at this step (it jumps, then reaches 0 at the new end); with another --lr-schedule (``previous_schedule``:
    the checkpoint's; default this run's) it jumps to the new schedule's. ``previous_lr``: the checkpoint's --lr
    (default: this run's). None when nothing moves, or where a constant schedule takes a --lr given."""
    old_lr = config.lr if previous_lr is None else previous_lr
    old_schedule = config.lr_schedule if previous_schedule is None else previous_schedule
    if config.lr_schedule == old_schedule:
        if config.lr_schedule != "linear" or (previous_total == config.total_steps and old_lr == config.lr):
            return None
    before = scheduled_lr(old_lr, old_schedule, step / previous_total)
    after = scheduled_lr(config.lr, config.lr_schedule, step / config.total_steps)
    if config.lr_schedule != old_schedule:
        end = f", down to 0 at --total-steps {config.total_steps:,}" if config.lr_schedule == "linear" else ""
        return (
            f"a3c: --lr-schedule {config.lr_schedule} (was {old_schedule}): the lr at step {step:,} goes from "
            f"{before:.3g} to {after:.3g}{end}"
        )
    return (
        f"a3c: --lr-schedule linear now ends at --total-steps {config.total_steps:,} (was {previous_total:,}): "
        f"the lr at step {step:,} goes from {before:.3g} to {after:.3g}, down to 0 at the new end"
    )
