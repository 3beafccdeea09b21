"""Checkpoints: the file (what it holds, written atomically, read safely), what a checkpoint of an earlier a3c lacks
and what that a3c did instead, the check of a checkpoint's spaces against the env as made now, the main process's
RNG state in it, and when checkpoints are written and which are kept. Going on from one (--resume) is
a3c/record/resume.py.

Writing: atomic (a3c.record.files.atomic_write: temp file, fsync, rename, fsync of the directory): a reader, or a run
resumed after a crash, sees the old checkpoint or the new one, never half of one. Reading: ``torch.load(weights_only=
True)``, which unpickles tensors and plain containers only, so a checkpoint cannot run code when loaded (a pickle that
would call ``open`` or ``os.system`` is refused); every other way a file can be wrong becomes a UserError naming the
file and the fix.

A checkpoint holds (see ``REQUIRED``): the global parameters, the optimizer state (its step counts included), the
global step and each worker's step and episode counters, each worker's cumulative stats, the restarts and worker
incarnations so far (the per-rank vectors cover every rank the run has had, not only the last session's), the run's
wall time so far (``wall_time_s``: the next session's wall time goes on from it), the main process's RNG states, the
env's sizes, its description as plain data (``env_spec``: what ``a3c.load`` builds the agent from without making the
env), the model's input scale (``input_scale``: what it multiplies observations by) and the config. What a checkpoint
of an earlier a3c lacks is filled with what that a3c did (``saved_settings``: ``ADDED_SETTINGS``, the input scale;
a3c.record.resume's ``load_resume``: the episode counters of ranks it forgot; ``elapsed_wall_time``).

Schedule and retention (``CheckpointSchedule``): a checkpoint (step-N.pt and latest.pt) is due every
``--checkpoint-every`` steps or every ``--checkpoint-every-s`` seconds, whichever comes first (0 turns either off;
both 0: the final latest.pt only). Time makes sense at any speed (100,000 steps are 1.5 s of CartPole with 16
workers, minutes of Atari); steps suit a reproducible schedule. After each write only the newest
``--keep-checkpoints`` step-N.pt files stay; latest.pt and best.pt (the evaluator's) are never deleted. step-N.pt is
written before latest.pt: where the second write fails (a full disk), the run ends (a3c/run/trainer.py) and --resume
goes on from the newest intact checkpoint of the two (a3c.record.resume), not from the older latest.pt.
"""

from __future__ import annotations

import dataclasses
import io
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

from a3c.learn.model import input_scale
from a3c.record.files import atomic_write
from a3c.record.run_dir import BEST as BEST  # (re-exported: the evaluator's file, beside the schedule's)
from a3c.record.run_dir import LATEST
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec, space_from_data
from a3c.spec.errors import UserError

FORMAT = 1
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
# settings added after checkpoints of format 1 were first written: what a checkpoint without them was trained with
ADDED_SETTINGS: dict[str, Any] = {
    "shared_torso": True,
    "lstm": 0,
    "normalize_obs": False,
    "normalize_reward": False,
    "input_shift": 0.0,  # (the CNN's input was not shifted before a3c.spec.background)
    "gsde": False,
    "log_std_init": 0.0,
    "ortho_init": True,  # (every dense layer was initialised orthogonally before --no-ortho-init)
    "eval_stochastic": False,  # (evaluations played the most likely actions before the setting)
}
# the payload entry that records what the model multiplies its observations by (a3c.learn.model.input_scale): stamped by
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
    # serialised in memory, then written: torch's zip writer, when a write of its own fails (a full disk), raises from
    # its close an error of its own (RuntimeError "[enforce fail at inline_container.cc] unexpected pos") that hides
    # the OSError; one plain write of the bytes raises the OSError itself, which the trainer turns into its one line
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    data = buffer.getbuffer()
    atomic_write(path, lambda f: f.write(data), binary=True)  # (fsync of the file and of the directory)


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
        reason = unpickling_reason(str(err))
        if reason and not any(word in reason.lower() for word in RUNS_CODE):
            # damaged bytes ("Unsupported operand 0"), not a request to load or call something
            raise UserError(f"checkpoint {path} is corrupt ({reason}); use another checkpoint") from None
        raise UserError(
            f"checkpoint {path} was refused by the safe loader ({reason or 'unsafe content'}): it is not a plain a3c "
            "checkpoint and may run code when unpickled; use a checkpoint that a3c wrote"
        ) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"checkpoint {path} is corrupt or not a torch file ({first}); use another checkpoint") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise UserError(f"checkpoint {path} is not an a3c checkpoint of format {FORMAT}; use one written by this a3c")
    return payload


# the lines of torch.load's refusal that are the same for every file, or advice (torch 2.6-2.13 word them so)
_BOILERPLATE = ("Weights only load failed", "Check the documentation of torch.load", "(1)", "(2)", "Please file")
_MARK = "WeightsUnpickler error:"
# the words of a refusal of something the file asks the loader to import or call ("Unsupported global: GLOBAL ...",
# "Trying to call reduce for unrecognized function ..."): what an unsafe pickle does
RUNS_CODE = ("global", "reduce", "function", "class", "module")


def unpickling_reason(message: str) -> str:
    """The reason in torch.load's weights-only refusal, without the advice around it: "Unsupported global: GLOBAL
    io.open was not an allowed global by default", "Trying to load unsupported GLOBAL posix.getcwd whose module
    posix is blocked" (a file asking to run code) or "Unsupported operand 0" (damaged bytes). torch words and places
    it differently from file to file: after "WeightsUnpickler error:" on its line or a later one, or on a line alone."""
    if _MARK in message:
        lines = message.split(_MARK, 1)[1].splitlines()
    else:
        lines = [line for line in message.splitlines() if not line.strip().startswith(_BOILERPLATE)]
    reason = next((line.strip() for line in lines if line.strip()), "")
    return reason.split(". ")[0].strip().rstrip(".")


def model_input_scale(payload: dict[str, Any]) -> float | None:
    """What the model of a checkpoint the trainer assembles multiplies its observations by: a3c.learn.model.input_scale
    of the payload's observation space (``env_spec``) and ``config``, as build_model chose it (a resumed run's config
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


def check_settings_known(payload: dict[str, Any], source: Path | str, to: str) -> None:
    """UserError where the checkpoint's config holds settings this a3c does not know: a newer a3c wrote it (no
    setting was ever taken out of Config), and a model or a run rebuilt without them would differ unsaid from the one
    trained. ``to``: what the user wanted to do with it (``load``, ``resume``)."""
    known = {field.name for field in dataclasses.fields(Config)}
    unknown = sorted(str(key) for key in payload["config"] if key not in known)
    if unknown:
        raise UserError(
            f"{source} holds settings this a3c does not know ({', '.join(unknown)}): it was written by a newer a3c; "
            f"upgrade a3c to {to} it"
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
    state = np.random.get_state()  # legacy=True (the default): ("MT19937", keys, pos, has_gauss, cached_gaussian)
    assert isinstance(state, tuple)
    _, keys, pos, has_gauss, gauss = state
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


def resumable(directory: Path) -> bool:
    """Whether ``directory`` holds a checkpoint a run can go on from: latest.pt or a step-N.pt (--resume takes the
    newest intact one: a3c.record.resume)."""
    return (Path(directory) / LATEST).is_file() or bool(step_checkpoints(directory))


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
