"""Checkpoints and resume.

Writing: atomic (temp file, fsync, rename, fsync of the directory): a reader, or a run resumed after a crash, sees the
old checkpoint or the new one, never half of one. Reading: ``torch.load(weights_only=True)``, which unpickles tensors
and plain containers only, so a checkpoint cannot run code when loaded (a pickle that would call ``open`` or
``os.system`` is refused); every other way a file can be wrong becomes a UserError naming the file and the fix.

A checkpoint holds (see ``REQUIRED``): the global parameters, the optimizer state (its step counts included), the
global step and each worker's step and episode counters, each worker's cumulative stats, the restarts and worker
incarnations so far (the per-rank vectors cover every rank the run has had, not only the last session's), the run's
wall time so far (``wall_time_s``: the next session's wall time goes on from it), the main process's RNG states, the
env's sizes, its description as plain data (``env_spec``: what ``a3c.load`` builds the agent from without making the
env) and the config.

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
import os
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

from a3c.learn.distributions import make_distribution
from a3c.spec.config import RAY_ONLY_SETTINGS, Config
from a3c.spec.environment import EnvSpec
from a3c.spec.errors import UserError

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


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` at ``path`` atomically. A write that fails (a full disk) raises OSError, leaving the previous
    file in place and no temporary file behind (its space given back)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save({"format": FORMAT, **payload}, f)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:  # whatever stopped the write: the half-written file goes
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)  # readers see the old file or the new one, never half of one
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


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
    return payload


def resume_config(payload: dict[str, Any], run_dir: str | Path, overrides: dict[str, Any]) -> Config:
    """The resumed run's config: the checkpoint's, with ``overrides`` (the flags given on the command line) on
    top. UserError for an override of a setting that defines the model, or a --total-steps already reached."""
    saved = {**ADDED_SETTINGS, **payload["config"]}
    for key in FIXED_ON_RESUME:
        if key in overrides and _normal(overrides[key]) != _normal(saved.get(key)):
            flag = "--" + key.replace("_", "-")
            raise UserError(
                f"{flag} {_normal(overrides[key])!r} differs from the resumed run's {saved.get(key)!r}; a resumed "
                f"run keeps its env, env kwargs, model sizes and optimizer: drop {flag}, or start a new run"
            )
    if overrides.get("run_dir") is not None and Path(overrides["run_dir"]).resolve() != Path(run_dir).resolve():
        raise UserError("--run-dir and --resume name different directories; a resumed run continues in its own")
    merged = {**saved, **overrides}
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
    if isinstance(saved_spaces, dict) and saved_spaces != spec.describe():
        raise UserError(
            f"{source} was trained on {saved_spaces.get('observation_space')} observations and "
            f"{saved_spaces.get('action_space')} actions, but the env now has {spec.observation_space} and "
            f"{spec.action_space}; resume with the env it was trained on"
        )
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


def trim_episode_log(path: Path, written: np.ndarray) -> list[dict[str, float]]:
    """Keep the rows of episodes.csv that the checkpoint counted (worker w's indexes below ``written[w]``), drop the
    rest (logged after the checkpoint, before a crash, or half-written), rewrite the file atomically, and return the
    kept rows in file order."""
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return []
    header, kept, parsed = rows[0], [], []
    for row in rows[1:]:
        if len(row) != len(header):
            continue
        try:
            values = {name: float(v) for name, v in zip(header, row, strict=True)}
        except ValueError:
            continue
        w, i = int(values["worker"]), int(values["index"])
        if 0 <= w < len(written) and i < written[w]:
            kept.append(row)
            parsed.append(values)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        csv.writer(f).writerows([header, *kept])
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return parsed


def elapsed_wall_time(payload: dict[str, Any], kept: list[dict[str, float]]) -> float:
    """The run's wall time at the checkpoint ``payload`` (its ``wall_time_s``): what the resumed session's wall time
    goes on from, so that wall_time runs on across sessions. A checkpoint written before a3c saved it: the newest
    wall time among the episodes.csv rows it kept (``kept``)."""
    saved = payload.get("wall_time_s")
    if isinstance(saved, (int, float)) and saved >= 0:  # (NaN fails the comparison)
        return float(saved)
    return max((row["wall_time"] for row in kept), default=0.0)


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
