"""Checkpoints and resume.

Writing: atomic (a3c.files.atomic_write: temp file, fsync, rename, fsync of the directory): a reader, or a run resumed
after a crash, sees the old checkpoint or the new one, never half of one. Reading: ``torch.load(weights_only=True)``,
which unpickles tensors and plain containers only, so a checkpoint cannot run code when loaded (a pickle that would call
``open`` or ``os.system`` is refused); every other way a file can be wrong becomes a UserError naming the file and the
fix.

A checkpoint holds (see ``REQUIRED``): the global parameters, the optimizer state (its step counts included), the
global step and each worker's step and episode counters, each worker's cumulative stats, the restarts and worker
incarnations so far (the per-rank vectors cover every rank the run has had, not only the last session's), the run's
wall time so far (``wall_time_s``: the next session's wall time goes on from it), the main process's RNG states, the
env's sizes, its description as plain data (``env_spec``: what ``a3c.load`` builds the agent from without making the
env), the model's input scale (``input_scale``: what it multiplies observations by) and the config. What a checkpoint
of an earlier a3c lacks is filled with what that a3c did (``saved_settings``: ``ADDED_SETTINGS``, the input scale;
``load_resume``: the episode counters of ranks it forgot; ``elapsed_wall_time``).

Resume (``--resume RUN_DIR``): the config is the checkpoint's, with the flags given on the command line on top, except
those that define the model (``FIXED_ON_RESUME``). Rows of episodes.csv logged after the checkpoint was taken
(before a crash) are dropped, as the resumed run will produce those episode indexes again; the trainer likewise
purges TensorBoard events from the checkpoint's step on. A row the checkpoint counted is never dropped, whatever the
resumed session's worker count: the checkpoint counts the episodes of every rank the run has had.

Schedule and retention (``CheckpointSchedule``): a checkpoint (step-N.pt and latest.pt) is due every
``--checkpoint-every`` steps or every ``--checkpoint-every-s`` seconds, whichever comes first (0 turns either off;
both 0: the final latest.pt only). Time makes sense at any speed (100,000 steps are 1.5 s of CartPole with 16
workers, minutes of Atari); steps suit a reproducible schedule. After each write only the newest
``--keep-checkpoints`` step-N.pt files stay; latest.pt and best.pt (the evaluator's) are never deleted.
"""

from __future__ import annotations

import csv
import math
import pickle
import random
import re
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from a3c.config import RAY_ONLY_SETTINGS, Config
from a3c.distributions import make_distribution
from a3c.environment import EnvSpec, space_from_data
from a3c.errors import UserError
from a3c.files import atomic_write
from a3c.model import input_scale

FORMAT = 1
LATEST = "latest.pt"
BEST = "best.pt"  # written by the evaluator; retention never deletes it
STEP_FILE = re.compile(r"^step-(\d+)\.pt$")
# key -> the type it must have; anything else means the file is not a checkpoint this a3c can use
REQUIRED: dict[str, type | tuple[type, ...]] = {
    "model": torch.Tensor,
    "optimizer": dict,
    "global_step": int,
    "worker_steps": torch.Tensor,
    "episodes_written": torch.Tensor,
    "worker_stats": torch.Tensor,
    "incarnations": torch.Tensor,
    "restarts": int,
    "obs_dim": int,
    "n_actions": int,
    "config": dict,
    "rng": dict,
}
# settings that define the model and its optimizer state: a resumed run cannot change them
FIXED_ON_RESUME: tuple[str, ...] = (
    "env",
    "env_kwargs",
    "hidden_sizes",
    "shared_torso",
    "lstm",
    "optimizer",
    "normalize_obs",  # the model was trained on (un)normalised inputs
    "normalize_reward",
)
# settings added after checkpoints of format 1 were first written: what a checkpoint without them was trained with
ADDED_SETTINGS: dict[str, Any] = {"shared_torso": True, "lstm": 0, "normalize_obs": False, "normalize_reward": False}
# the payload entry that records what the model multiplies its observations by (a3c.model.input_scale): stamped by
# save_checkpoint, read back by saved_input_scale (a checkpoint without it gets the scale its a3c used)
INPUT_SCALE = "input_scale"


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` at ``path`` atomically, with the format and, for a trainer's payload (its ``env_spec`` and
    ``config``), the model's input scale (``input_scale``, unless the payload has it: ``model_input_scale``). A write
    that fails (a full disk) raises OSError, leaving the previous file in place and no temporary file behind (its
    space given back)."""
    payload = {"format": FORMAT, **payload}
    if INPUT_SCALE not in payload and (scale := model_input_scale(payload)) is not None:
        payload[INPUT_SCALE] = scale
    atomic_write(path, lambda f: torch.save(payload, f), binary=True)  # (fsync of the file and of the directory)


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint written by save_checkpoint; UserError if missing, corrupt, unsafe or of another format."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint {path} does not exist; give a run directory that holds checkpoints/latest.pt")
    if not zipfile.is_zipfile(path):  # torch.save has written zip archives since torch 1.6; a3c never wrote others
        raise UserError(f"checkpoint {path} is corrupt or not a torch file (not a zip archive); use another checkpoint")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        # the reason is the "WeightsUnpickler error: ..." line of torch's long message, e.g. "Unsupported global:
        # GLOBAL io.open was not an allowed global": the file asks to run code, which the safe loader never does
        reason = next((line.strip() for line in str(err).splitlines() if "WeightsUnpickler error" in line), "")
        reason = reason.removeprefix("WeightsUnpickler error:").split(". ")[0].strip() or "unsafe content"
        raise UserError(
            f"checkpoint {path} was refused by the safe loader ({reason}): it is not a plain a3c checkpoint and may "
            "run code when unpickled; use a checkpoint that a3c wrote"
        ) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"checkpoint {path} is corrupt or not a torch file ({first}); use another checkpoint") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise UserError(f"checkpoint {path} is not an a3c checkpoint of format {FORMAT}; use one written by this a3c")
    return payload


def load_resume(run_dir: str | Path) -> dict[str, Any]:
    """The checkpoint to resume the run in ``run_dir`` from (its checkpoints/latest.pt), checked for completeness."""
    run = Path(run_dir)
    if not run.exists():
        raise UserError(f"--resume {run}: no such directory; give the run directory of an earlier a3c run")
    if not run.is_dir() or not (run / "config.json").is_file():
        raise UserError(f"--resume {run} is not an a3c run directory (no config.json); give the run's directory")
    path = run / "checkpoints" / LATEST
    if not path.is_file():
        raise UserError(
            f"--resume {run}: the run has no checkpoints/{LATEST} (it ended before its first checkpoint); "
            "start a new run instead"
        )
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
    if "wall_time_s" not in payload:  # an a3c before per-rank retention (wall_time_s came with it)
        count_forgotten_ranks(payload, run / "episodes.csv")
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


def model_input_scale(payload: dict[str, Any]) -> float | None:
    """What the model of a checkpoint the trainer assembles multiplies its observations by: a3c.model.input_scale of
    the payload's observation space (``env_spec``) and ``config``, as build_model chose it (a resumed run's config
    carries its checkpoint's scale). None for a payload without them (not a trainer's)."""
    try:
        space = space_from_data(payload["env_spec"]["observation_space"])
        config = Config.from_dict(payload["config"])
    except (KeyError, TypeError, ValueError):
        return None
    return input_scale(space, config)  # type: ignore[arg-type]  # an EnvSpec's observation space is a Box


def saved_input_scale(payload: dict[str, Any]) -> float | None:
    """What the model of the checkpoint ``payload`` multiplies its observations by: its ``input_scale`` entry (or
    its config's). A checkpoint written before either: the scale its a3c gave every model, 1/255 for uint8
    observations (with --normalize-obs too: such a model was trained on normalised observations x 1/255, and must
    go on seeing them so) and 1 for others; None where it does not say its observations' dtype (it predates
    --normalize-obs, and today's rule gives it the same scale)."""
    saved = payload.get(INPUT_SCALE, payload["config"].get(INPUT_SCALE))
    if saved is not None:
        if isinstance(saved, bool) or not isinstance(saved, (int, float)) or not 0.0 < saved < math.inf:
            raise UserError(
                f"the checkpoint's input_scale entry {saved!r} is not a positive number (corrupt); use another one"
            )
        return float(saved)
    uint8 = _uint8_observations(payload)
    return None if uint8 is None else (1.0 / 255.0 if uint8 else 1.0)


def _uint8_observations(payload: dict[str, Any]) -> bool | None:
    """Whether the checkpoint's observations are uint8: from its env description (``env_spec``), else from the
    spaces' repr (``spaces``, stored by every a3c that had --normalize-obs: gymnasium's ``Box(low, high, shape,
    dtype)``); None when it has neither."""
    env_spec = payload.get("env_spec")
    if isinstance(env_spec, dict) and isinstance(env_spec.get("observation_space"), dict):
        try:
            return np.dtype(str(env_spec["observation_space"]["dtype"])) == np.uint8
        except (KeyError, TypeError):
            pass
    spaces = payload.get("spaces")
    if isinstance(spaces, dict) and isinstance(spaces.get("observation_space"), str):
        return spaces["observation_space"].replace(" ", "").endswith(",uint8)")
    return None


def saved_settings(payload: dict[str, Any]) -> dict[str, Any]:
    """The settings the checkpoint's model was trained with, for Config.from_dict: its config, completed for a
    checkpoint written before a setting existed (``ADDED_SETTINGS``; its input scale: ``saved_input_scale``). What
    every rebuild of a model from a checkpoint starts from (--resume, a3c.load, python -m a3c.evaluate)."""
    return {**ADDED_SETTINGS, **payload["config"], INPUT_SCALE: saved_input_scale(payload)}


def resume_config(payload: dict[str, Any], run_dir: str | Path, overrides: dict[str, Any]) -> Config:
    """The resumed run's config: the checkpoint's, with ``overrides`` (the flags given on the command line) on
    top. UserError for an override of a setting that defines the model, or a --total-steps already reached. The
    model's input scale is the checkpoint's (``saved_settings``), whatever is given."""
    saved = saved_settings(payload)
    for key in FIXED_ON_RESUME:
        if key in overrides and _normal(overrides[key]) != _normal(saved.get(key)):
            flag = "--" + key.replace("_", "-")
            raise UserError(
                f"{flag} {_normal(overrides[key])!r} differs from the resumed run's {saved.get(key)!r}; a resumed "
                f"run keeps its env, env kwargs, model sizes and optimizer: drop {flag}, or start a new run"
            )
    if overrides.get("run_dir") is not None and Path(overrides["run_dir"]).resolve() != Path(run_dir).resolve():
        raise UserError("--run-dir and --resume name different directories; a resumed run continues in its own")
    merged = {**saved, **overrides, INPUT_SCALE: saved[INPUT_SCALE]}
    if merged.get("backend") != "ray":
        # a Ray run resumed under another backend: its Ray-only settings (--push-every, --ray-same-node) have no
        # meaning there, and would fail validation; back to their defaults unless given again on this command line
        defaults = Config()
        for key in RAY_ONLY_SETTINGS:
            if key not in overrides:
                merged[key] = getattr(defaults, key)
    try:
        config = Config.from_dict({**merged, "run_dir": str(run_dir), "resume": str(run_dir)})
    except TypeError as err:
        raise UserError(f"the checkpoint's config does not fit this a3c ({err}); start a new run instead") from None
    config.validate()
    step = payload["global_step"]
    if config.total_steps <= step:
        raise UserError(
            f"the run in {run_dir} is already at step {step:,}, not below --total-steps {config.total_steps:,}; "
            "give a larger --total-steps to continue it"
        )
    return config


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


def check_trained_spaces(trained: dict[str, Any], now: EnvSpec, source: Path | str, fix: str) -> None:
    """UserError when the env as made now (``now``) has other spaces than those the checkpoint ``source`` was
    trained on (``trained``: their EnvSpec.describe(), as the checkpoint stored it): the env's code changed since.
    ``fix``: what to do about it (resume with the env it was trained on, ...)."""
    if trained != now.describe():
        raise UserError(
            f"{source} was trained on {trained.get('observation_space')} observations and "
            f"{trained.get('action_space')} actions, but env {now.env_id!r} now has {now.observation_space} and "
            f"{now.action_space}; {fix}"
        )


def rng_state() -> dict[str, Any]:
    """The main process's RNG states (torch, numpy's global, Python's), as types weights_only can load."""
    _, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "numpy_keys": torch.from_numpy(keys.astype(np.int64)),
        "numpy_pos": int(pos),
        "numpy_gauss": (int(has_gauss), float(gauss)),
        "python": (int(version), list(internal), gauss_next),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    has_gauss, gauss = state["numpy_gauss"]
    np.random.set_state(
        ("MT19937", state["numpy_keys"].numpy().astype(np.uint32), state["numpy_pos"], has_gauss, gauss)
    )
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))


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
    header, rows = _episode_rows(path)
    if not header:
        return []
    kept = [(row, values) for row, values in rows if _counted(values, written)]
    atomic_write(path, lambda f: csv.writer(f).writerows([header, *(row for row, _ in kept)]))
    return [values for _, values in kept]


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


def step_file(step: int) -> str:
    return f"step-{step}.pt"


def step_checkpoints(directory: Path) -> list[tuple[int, Path]]:
    """The step-N.pt files in ``directory``, oldest (smallest N) first."""
    found = []
    for path in Path(directory).iterdir() if Path(directory).is_dir() else ():
        match = STEP_FILE.match(path.name)
        if match and path.is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


def prune_checkpoints(directory: Path, keep: int) -> list[Path]:
    """Delete all but the ``keep`` newest step-N.pt files in ``directory``; returns the deleted paths. Only files
    named step-N.pt are touched: latest.pt, best.pt and anything else stay."""
    files = step_checkpoints(directory)
    doomed = [path for _, path in files[: max(0, len(files) - keep)]]
    for path in doomed:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
    return doomed


class CheckpointSchedule:
    """When to write checkpoints during a run, and which files to keep.

    ``every_steps``/``every_s``: a checkpoint is due when the global step has passed the next multiple of
    ``every_steps``, or ``every_s`` seconds have passed since the last one (or the start), whichever first; 0 turns
    either off. ``due`` returns the file names to write (step-N.pt and latest.pt; latest.pt alone when ``keep`` is
    0), or () when none is due; ``files`` the names for a checkpoint whose snapshot holds a given step (the trainer
    names step-N.pt from its snapshot, taken after the step ``due`` was given); ``written`` moves the schedule on and
    deletes step files beyond the newest ``keep``.
    """

    def __init__(
        self,
        every_steps: int,
        every_s: float,
        keep: int,
        step: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.every_steps, self.every_s, self.keep, self.clock = every_steps, every_s, keep, clock
        self._advance(step)

    @classmethod
    def from_config(cls, config: Config, step: int = 0) -> CheckpointSchedule:
        return cls(config.checkpoint_every, config.checkpoint_every_s, config.keep_checkpoints, step)

    def _advance(self, step: int) -> None:
        every = self.every_steps
        self.next_step = (step // every + 1) * every if every > 0 else None
        self.next_time = self.clock() + self.every_s if self.every_s > 0 else None

    def due(self, step: int) -> tuple[str, ...]:
        by_steps = self.next_step is not None and step >= self.next_step
        by_time = self.next_time is not None and self.clock() >= self.next_time
        if not (by_steps or by_time):
            return ()
        return self.files(step)

    def files(self, step: int) -> tuple[str, ...]:
        """The files of a checkpoint at global step ``step``: step-N.pt and latest.pt, or latest.pt alone."""
        return (step_file(step), LATEST) if self.keep > 0 else (LATEST,)

    def written(self, directory: Path, step: int) -> list[Path]:
        """After the checkpoint of ``step`` was written: the next due point, and retention; returns deleted files."""
        self._advance(step)
        return prune_checkpoints(directory, self.keep)
