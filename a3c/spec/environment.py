"""Making environments from an id and checking that their spaces are ones the trainer supports.

Ids can be registered gymnasium ids, ids of this project's `envs/` namespace, or `module:Name-v0` (gymnasium imports
the module, which registers the id). Every failure a user can cause becomes a UserError with a suggestion.

Observations: Box, or Dict/Tuple spaces (nested) of Boxes, Discretes, MultiBinaries and MultiDiscretes, which
``make_env`` flattens into one Box with gymnasium's FlattenObservation (discrete parts one-hot), so that the model and
the worker only ever see Boxes. Actions: Discrete, MultiDiscrete, float Box (a3c.learn.distributions).
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.util
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import find_highest_version, get_env_id, load_env_creator, parse_env_id

import envs  # noqa: F401  (this project's envs: importing the package registers the `envs/` ids)
from a3c.spec.atari import AtariFrames, atari_make_kwargs, register_ale
from a3c.spec.errors import UserError, install_extra

# the action spaces a3c.learn.distributions.make_distribution has a distribution for (checked here without torch: the
# preflight checks run before torch is imported)
SUPPORTED_ACTION_SPACES: tuple[type[gym.Space], ...] = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.Box)
# the leaves of Dict/Tuple observation spaces that FlattenObservation turns into a Box
FLATTENED_LEAVES: tuple[type[gym.Space], ...] = (
    gym.spaces.Box,
    gym.spaces.Discrete,
    gym.spaces.MultiBinary,
    gym.spaces.MultiDiscrete,
)


def action_family(space: gym.Space) -> str:
    """The action-space family whose plain defaults a run without a preset takes (a3c/spec/presets.toml's family
    tables): ``continuous`` for Box actions (a Gaussian policy), ``discrete`` for Discrete and MultiDiscrete ones."""
    return "continuous" if isinstance(space, gym.spaces.Box) else "discrete"


def is_image(space: gym.spaces.Box) -> bool:
    """3-D observations, and 2-D ones of uint8 or bool (a grey frame, a grid), are images (a CNN torso, which takes
    any size: the A3C paper's convolutions from 36x36 up, two small ones below); everything else is a vector (an
    MLP)."""
    return len(space.shape) == 3 or (len(space.shape) == 2 and space.dtype in (np.uint8, np.bool_))


@dataclass(frozen=True)
class EnvSpec:
    """What the model and the trainer need to know about an environment: its spaces (shapes, dtypes, the action
    space itself; gymnasium spaces pickle, so workers get them too) and its registry facts."""

    env_id: str
    observation_space: gym.spaces.Box
    action_space: gym.Space
    reward_threshold: float | None
    max_episode_steps: int | None
    clip_rewards: bool = False  # train on sign(reward) (Atari), while episode returns are reported unclipped

    @property
    def obs_dtype(self) -> np.dtype:
        """The rollout buffers' dtype: uint8 observations (frames) stay uint8, scaled inside the model, and bool ones
        (grids) stay bool (a byte each; the model turns them into 0.0/1.0); the rest float32."""
        dtype = self.observation_space.dtype
        return np.dtype(dtype) if dtype in (np.uint8, np.bool_) else np.dtype(np.float32)

    @property
    def obs_shape(self) -> tuple[int, ...]:
        return tuple(self.observation_space.shape)

    @property
    def obs_dim(self) -> int:
        """Observations flattened."""
        return int(np.prod(self.obs_shape))

    def describe(self) -> dict[str, Any]:
        """The spaces as plain data (checkpoints, config.json): what a later run or a loader checks against."""
        return {"observation_space": repr(self.observation_space), "action_space": repr(self.action_space)}

    def to_data(self) -> dict[str, Any]:
        """Everything here as plain data (str, int, float, bool, None, lists, dicts), which a checkpoint stores and
        ``torch.load(weights_only=True)`` reads back: ``from_data`` rebuilds the spec without making the env, so
        ``a3c.load`` never imports the module a ``module:Name`` env id names."""
        return {
            "env_id": self.env_id,
            "observation_space": space_to_data(self.observation_space),
            "action_space": space_to_data(self.action_space),
            "reward_threshold": self.reward_threshold,
            "max_episode_steps": self.max_episode_steps,
            "clip_rewards": self.clip_rewards,
        }

    @classmethod
    def from_data(cls, data: Any, source: str) -> EnvSpec:
        """The spec ``to_data`` described, checked as ``spec_of`` checks an env's; UserError naming ``source`` (the
        file it came from) when the data is not such a description."""
        try:
            obs_space = space_from_data(data["observation_space"])
            act_space = space_from_data(data["action_space"])
            threshold, limit = data["reward_threshold"], data["max_episode_steps"]
            spec = cls(
                env_id=str(data["env_id"]),
                observation_space=obs_space,  # type: ignore[arg-type]  # checked below
                action_space=act_space,
                reward_threshold=None if threshold is None else float(threshold),
                max_episode_steps=None if limit is None else int(limit),
                clip_rewards=bool(data["clip_rewards"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as err:
            raise UserError(
                f"{source} has a malformed env description ({type(err).__name__}: {err}); the checkpoint is corrupt "
                "or from another a3c version: use one written by this a3c"
            ) from None
        check_spaces(obs_space, act_space, spec.env_id)
        return spec


def space_to_data(space: gym.Space) -> dict[str, Any]:
    """A space of an EnvSpec (Box, Discrete, MultiDiscrete; the others never reach one: see ``check_spaces``) as
    plain data. Box bounds that are one value everywhere are stored as that value (an Atari frame's 0 and 255), others
    as nested lists (float32 and float64 values survive the trip through a Python float exactly)."""
    if isinstance(space, gym.spaces.Box):
        return {
            "type": "Box",
            "dtype": space.dtype.name,
            "shape": list(space.shape),
            "low": _bound(space.low),
            "high": _bound(space.high),
        }
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start), "dtype": space.dtype.name}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "nvec": space.nvec.tolist(),
            "start": space.start.tolist(),
            "dtype": space.dtype.name,
        }
    raise TypeError(f"no plain-data form for {space!r}")  # a bug: spec_of lets no other space through


def space_from_data(data: dict[str, Any]) -> gym.Space:
    """The space ``space_to_data`` described; TypeError, ValueError or KeyError for anything else."""
    kind = data["type"]
    dtype = np.dtype(str(data["dtype"]))
    if not _numeric_or_bool(dtype):
        raise ValueError(f"dtype {dtype} is neither numeric nor bool")
    if kind == "Box":
        shape = tuple(int(d) for d in data["shape"])
        # a bound stored as one number is that number everywhere
        low, high = (np.broadcast_to(np.asarray(data[k], dtype=dtype), shape).copy() for k in ("low", "high"))
        return gym.spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
    if kind == "Discrete":
        # dtype only where it is not the default: gymnasium before 1.1 has no such argument
        if dtype == np.int64:
            return gym.spaces.Discrete(int(data["n"]), start=int(data["start"]))
        return gym.spaces.Discrete(int(data["n"]), start=int(data["start"]), dtype=dtype)
    if kind == "MultiDiscrete":
        nvec, start = np.asarray(data["nvec"], dtype=dtype), np.asarray(data["start"], dtype=dtype)
        return gym.spaces.MultiDiscrete(nvec, dtype=dtype, start=start)
    raise ValueError(f"unknown space type {kind!r}")


def _bound(values: np.ndarray) -> Any:
    """One Box bound as plain data: a number where it is the same everywhere, else nested lists."""
    flat = values.reshape(-1)
    if flat.size and bool(np.all(flat == flat[0])):
        return flat[0].item()
    return values.tolist()


def _close_ids(env_id: str) -> str:
    here = _registered_here(env_id)
    if here:  # the id of a user's module, typed without its module: the module:Id form imports it
        return f"; did you mean {', '.join(here)}? (the module:Id form imports the module, which registers the id)"
    ids = [str(k) for k in gym.registry.keys()]
    close = difflib.get_close_matches(env_id, ids, n=3, cutoff=0.5)
    if not close:
        lowered = env_id.lower()
        close = [i for i in ids if lowered.split("/")[-1].split("-")[0] in i.lower()][:3]
    return f"; did you mean {', '.join(close)}?" if close else "; see gymnasium.pprint_registry() for the ids"


MAX_SOURCE_BYTES = 1_000_000  # a Python file of the current directory larger than this is not searched for an id


def _registered_here(env_id: str) -> list[str]:
    """``module:ID`` for each Python file of the current directory that names ``env_id`` in quotes (as its
    ``gymnasium.register`` call does): where a user's env id was typed without the module that registers it."""
    if ":" in env_id or "/" in env_id:
        return []
    found = []
    for path in sorted(Path.cwd().glob("*.py"))[:200]:
        try:
            if path.stat().st_size > MAX_SOURCE_BYTES:
                continue
            text = path.read_text(errors="ignore")
        except OSError:
            continue
        if f'"{env_id}"' in text or f"'{env_id}'" in text:
            found.append(f"{path.stem}:{env_id}")
    return found


LIFE_LOST = "a3c_life_lost"  # info key: a terminal that is a lost life, not the end of the game (training only)


def is_atari(env_id: str) -> bool:
    return env_id.split(":")[-1].startswith("ALE/")


def env_module(env_id: str) -> str | None:
    """The module a ``module:Name-v0`` id names (gymnasium.make imports it, running its code), or the file a
    ``path/to/file.py:Name-v0`` id names; None for other ids."""
    return env_id.rpartition(":")[0] if ":" in env_id else None


def env_file(env_id: str) -> str | None:
    """The file a ``path/to/file.py:Name-v0`` id names, as written (relative paths: to the directory a run started
    in); None for other ids."""
    module = env_module(env_id)
    return module if module is not None and _is_file(module) else None


def check_env_file_here(env_id: str, verb: str, what: str = "run") -> None:
    """A run's env id is fixed once it started (a resume keeps it, an evaluation makes it again; a tuning study's
    trials keep theirs), so a missing env file cannot be mended with --env, the usual advice: ``verb`` (resume,
    evaluate) from where the path leads to a file. A relative path is read from the directory the ``what`` (run,
    study) started in. UserError when the file is not there."""
    path = env_file(env_id)
    if path is None:
        return
    file = _env_path(path)
    if file.is_file():
        return
    if file.is_absolute() or path.startswith("~"):  # (~user of no user: not relative to any directory either)
        raise UserError(
            f"the {verb}d {what}'s env file {path}: no such file; the {what} keeps its env: put the file back"
        )
    raise UserError(
        f"the {verb}d {what}'s env file {path} is not in {Path.cwd()}: its path is relative to the directory the "
        f"{what} started in; {verb} from there, or put the file back there"
    )


def _env_path(module: str) -> Path:
    """The path an env id's file part names, ``~`` expanded; as written where ``~user`` names no user (expanduser
    raises), so that the caller's "no such file" is the answer."""
    try:
        return Path(module).expanduser()
    except RuntimeError:
        return Path(module)


def _is_file(module: str) -> bool:
    """Whether the module part of an env id is a path to a Python file (``./my_env.py``), not a module name."""
    return module.endswith(".py") or "/" in module or "\\" in module


FORMS = (
    "give --env path/to/file.py:Name-v0 (a Python file that registers the id) or module:Name-v0 with the module on "
    "sys.path (PYTHONPATH)"
)


def import_env_module(module: str) -> None:
    """Import the module of a ``module:Name-v0`` id, or run the file of a ``file.py:Name-v0`` id as the module named
    like the file (once a process: its ``gymnasium.register`` call then registers the id, and an entry point it
    names as ``f"{__name__}:Class"`` imports it back); UserError for one that is missing or fails."""
    if not module.strip():
        raise UserError(f"env id ':...' names no module before its colon; {FORMS}")
    if not _is_file(module):
        fresh = module not in sys.modules  # (a module imported before registers nothing now: nothing to record)
        before = dict(gym.registry)
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise UserError(
                f"env module {module!r} does not import ({err}); check the module name and PYTHONPATH"
            ) from None
        except Exception as err:  # the user's module itself fails (SyntaxError, an error at import time)
            raise UserError(
                f"env module {module!r} fails on import ({type(err).__name__}: {err}); fix the module"
            ) from None
        if fresh:
            REGISTERED_BY[module] = _registered_since(before)
        return
    path = _env_path(module)
    if path.is_dir():
        raise UserError(f"env file {module} is a directory; give the Python file in it that registers the id ({FORMS})")
    if not path.is_file():
        raise UserError(f"env file {module}: no such file; {FORMS}")
    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path.resolve()):
        return  # (run once: a second run would register its ids again)
    spec = importlib.util.spec_from_file_location(name, path.resolve())
    if spec is None or spec.loader is None or not name.isidentifier():
        raise UserError(f"env file {module} is not a Python module (file name: a Python name, .py); {FORMS}")
    new = importlib.util.module_from_spec(spec)
    sys.modules[name] = new
    before = dict(gym.registry)
    try:
        spec.loader.exec_module(new)
    except Exception as err:  # the user's file itself fails (SyntaxError, an error at import time)
        del sys.modules[name]
        raise UserError(f"env file {module} fails on import ({type(err).__name__}: {err}); fix the file") from None
    REGISTERED_BY[module] = _registered_since(before)


def _registered_since(before: dict[str, Any]) -> list[str]:
    """The ids registered since the registry was ``before``: new ids, and ids registered again (a file run a second
    time from another path, a package that registered them on an earlier import: new EnvSpec objects)."""
    return sorted(k for k, spec in gym.registry.items() if before.get(k) is not spec)


# the ids each env module or file registered as it was imported (import_env_module), for the message of an id it
# does not register
REGISTERED_BY: dict[str, list[str]] = {}


def _not_registered_by(module: str, name: str) -> str | None:
    """The message for an id ``module:name`` whose module (or file) was imported but registered no ``name``; None
    where what it registered is not known (a module imported before)."""
    ids = REGISTERED_BY.get(module)
    if ids is None or name in ids:  # (registered: gymnasium's NameNotFound came from elsewhere)
        return None
    what = "env file" if _is_file(module) else "env module"
    if not ids:
        return (
            f"{what} {module} registers no env id; call gymnasium.register(id={name!r}, entry_point=...) in it "
            "(docs: the own-env guide)"
        )
    return (
        f"{what} {module} registers no {name} (it registers {', '.join(ids)}); give --env {module}:{ids[0]}, or "
        f"register {name} in it"
    )


def make_env(env_id: str, env_kwargs: dict[str, Any] | None = None, training: bool = True) -> gym.Env:
    """gymnasium.make with user errors turned into UserError (unknown id, module that does not import, bad kwargs).
    ``ALE/*`` ids get the standard Atari preprocessing (``training``: a lost life is a terminal, see
    ``atari_wrappers``); Dict/Tuple observations are flattened."""
    user_kwargs = dict(env_kwargs or {})
    kwargs = atari_make_kwargs(env_id, user_kwargs) if is_atari(env_id) else user_kwargs  # (checked before the import)
    make_id = register_env_id(env_id)
    module = env_module(env_id)
    try:
        env = gym.make(make_id, **kwargs)
    except (gym.error.NameNotFound, gym.error.NamespaceNotFound, gym.error.VersionNotFound) as err:
        raise _unknown_id(env_id, module, err) from None
    except gym.error.DependencyNotInstalled as err:
        raise _missing_library(env_id, err) from None
    except gym.error.Error as err:
        raise _cannot_make(env_id, err) from None
    except UserError:
        raise  # the env's own message for a bad kwarg (a UserError is a ValueError)
    except AttributeError as err:
        # gymnasium's env checker, for an env class whose __init__ sets no observation or action space (any other
        # AttributeError of the env's is a bug of its own, and raises)
        if "must specify an" not in str(err):
            raise
        which = "action_space" if "action space" in str(err) else "observation_space"
        raise _cannot_make(env_id, f"{err}; set self.{which} in the env's __init__") from None
    except (TypeError, ValueError, RuntimeError, AssertionError) as err:
        # gymnasium.make and the env's constructor raise these for a kwarg of the wrong name, type or range
        # (max_episode_steps="abc" or 0; ale-py's RuntimeError for a game mode or difficulty the game lacks; the
        # Box2D envs' assert on gravity or wind_power); anything the env raises without the user's kwargs is a bug,
        # and raises
        rejected = _rejected_kwargs(make_id, {k: v for k, v in kwargs.items() if k not in user_kwargs}, user_kwargs)
        if rejected is None:
            raise
        given = " ".join(f"{key}={user_kwargs[key]!r}" for key in rejected)
        raise KwargsRejected(
            f"env {env_id!r} rejects --env-kwargs {given} ({type(err).__name__}: {err}); give values of the "
            "names, types and ranges the env takes, or drop them",
            rejected,
        ) from None
    if is_atari(env_id):
        try:
            return atari_wrappers(env, training)
        except gym.error.DependencyNotInstalled:
            raise _needs_opencv(env_id) from None
    if isinstance(env.observation_space, (gym.spaces.Dict, gym.spaces.Tuple)) and _flattenable(env.observation_space):
        env = gym.wrappers.FlattenObservation(env)
    return env


def _unknown_id(env_id: str, module: str | None, err: Exception) -> UserError:
    """The UserError for an id gymnasium has no env for (``err``: its NameNotFound and kin)."""
    name = env_id.rpartition(":")[2]
    own = None if module is None else _not_registered_by(module, name)
    if own is not None:
        return UserError(own)
    if module is not None:  # (imported before this process made the env: what it registers is not known)
        return UserError(
            f"unknown env id {env_id!r}: module {module} registered no {name} ({err}); call "
            f"gymnasium.register(id={name!r}, entry_point=...) in it, or give a registered id"
            f"{_close_ids(name)}"
        )
    return UserError(f"unknown env id {env_id!r} ({err}){_close_ids(env_id.split(':')[-1])}")


def register_env_id(env_id: str) -> str:
    """Make ``env_id`` known to gymnasium's registry without making the env: import the module of a ``module:Id`` id
    (or run the file of a ``file.py:Id`` one), whose ``gymnasium.register`` call registers the id, and register the
    ALE ids for an Atari one. The id for gymnasium.make; UserError where the module, the file or ale-py is missing.
    (make_env's first step and check_env_id's: the two say the same of an id.)"""
    module = env_module(env_id)
    if module is not None:
        import_env_module(module)
    if is_atari(env_id):
        register_ale(env_id)
    if module is not None and _is_file(module):  # (gymnasium would take the path for a module name: the id alone)
        return env_id.rpartition(":")[2]
    return env_id


def check_env_id(env_id: str) -> None:
    """A UserError where ``env_id`` names no env registered here (an unknown id, a module of ``module:Id`` that does
    not import or registers no such id, an Atari game without ale-py) or one whose library is missing (LunarLander
    without Box2D, a MuJoCo env without mujoco), as make_env would say it, but without making the env: for a command
    that plans many runs and says so before the first (the benchmark driver)."""
    register_env_id(env_id)
    try:
        spec = registered_spec(env_id.rpartition(":")[2])
    except (gym.error.NameNotFound, gym.error.NamespaceNotFound, gym.error.VersionNotFound) as err:
        raise _unknown_id(env_id, env_module(env_id), err) from None
    except gym.error.Error as err:  # (a deprecated version, LunarLander-v2; an id gymnasium cannot parse)
        raise _cannot_make(env_id, err) from None
    if is_atari(env_id) and importlib.util.find_spec("cv2") is None:  # (the preprocessing's, at make_env's end)
        raise _needs_opencv(env_id)
    if isinstance(spec.entry_point, str):  # ("module:Class": a callable one is imported already)
        # the module of the env's class, as gymnasium.make imports it before it makes the env: gymnasium's
        # families whose library is missing raise DependencyNotInstalled here (MuJoCo's, Box2D's, at import)
        try:
            load_env_creator(spec.entry_point)
        except gym.error.DependencyNotInstalled as err:
            raise _missing_library(env_id, err) from None
        except (ImportError, AttributeError) as err:  # (a registration whose module or class is not there)
            raise _cannot_make(
                env_id,
                f"its entry point {spec.entry_point!r} does not load ({type(err).__name__}: {err}); "
                "fix its registration",
            ) from None


def _cannot_make(env_id: str, detail: object) -> UserError:
    """The UserError for an env gymnasium cannot make or find, with what it said (``detail``)."""
    return UserError(f"cannot make env {env_id!r}: {detail}")


def _needs_opencv(env_id: str) -> UserError:
    """The UserError for an Atari game where OpenCV (the preprocessing's resize) is not installed."""
    return UserError(f"{env_id} needs OpenCV; install the extra: {install_extra('atari')}")


def registered_max_episode_steps(env_id: str) -> int | None:
    """The time limit the env's registration sets (gymnasium's max_episode_steps, before any --env-kwargs); None
    where it sets none or the id is not registered here."""
    try:
        return registered_spec(register_env_id(env_id).rpartition(":")[2]).max_episode_steps
    except Exception:  # an id this process cannot name: no limit to compare with
        return None


def registered_spec(spec_id: str) -> gym.envs.registration.EnvSpec:
    """gymnasium's EnvSpec of ``spec_id`` (an id without its ``module:``), an id without a version taken at its
    highest one, as gymnasium.make takes it (gymnasium.spec would raise a bare gymnasium.error.Error); NameNotFound
    and kin for an unknown id."""
    namespace, name, version = parse_env_id(spec_id)
    latest = find_highest_version(namespace, name) if version is None else None
    return gym.spec(spec_id if latest is None else get_env_id(namespace, name, latest))


def _missing_library(env_id: str, err: gym.error.DependencyNotInstalled) -> UserError:
    """The UserError for an env whose library is not installed (``err``: gymnasium's DependencyNotInstalled, whose
    advice is gymnasium's own extra): the extra of this project that installs it, where there is one."""
    needs = _env_extra(env_id.rpartition(":")[2])
    if needs is None:
        return _cannot_make(env_id, err)
    library, extra = needs
    return UserError(f"{env_id} needs {library}, which is not installed; install the extra: {install_extra(extra)}")


# the env families of gymnasium whose libraries are an extra of this project (pyproject.toml): entry point -> extra
ENV_EXTRAS: dict[str, tuple[str, str]] = {
    "gymnasium.envs.box2d": ("Box2D", "box2d"),
    "gymnasium.envs.mujoco": ("MuJoCo", "mujoco"),
}


def _env_extra(env_id: str) -> tuple[str, str] | None:
    """(the library, the extra that installs it) for an env of a gymnasium family that needs one; else None."""
    try:
        entry_point = registered_spec(env_id).entry_point
    except gym.error.Error:
        return None
    module = entry_point if isinstance(entry_point, str) else getattr(entry_point, "__module__", "")
    return next((needs for prefix, needs in ENV_EXTRAS.items() if module.startswith(prefix)), None)


class KwargsRejected(UserError):
    """make_env's UserError for keyword arguments the env will not be made with; ``keys``: those blamed (a caller
    that added one of its own, as a3c.evaluate's render_mode for --video, tells its own from the user's)."""

    def __init__(self, message: str, keys: list[str]) -> None:
        super().__init__(message)
        self.keys = keys


def _rejected_kwargs(env_id: str, base: dict[str, Any], user: dict[str, Any]) -> list[str] | None:
    """After gymnasium.make(env_id, **base, **user) raised TypeError, ValueError, RuntimeError or AssertionError: the
    user's kwargs to blame (those that fail alone, else all of them: it is their combination), or None when the env
    also fails without them (then it is not the user's input). Makes the env again, on this error path only."""
    if not user or not _makes(env_id, base):
        return None
    alone = [key for key, value in user.items() if not _makes(env_id, {**base, key: value})]
    return alone or list(user)


def _makes(env_id: str, kwargs: dict[str, Any]) -> bool:
    """Whether gymnasium.make(env_id, **kwargs) succeeds (the env is closed again)."""
    try:
        gym.make(env_id, **kwargs).close()
    except Exception:  # any failure counts: this only decides whom an error is blamed on
        return False
    return True


# what an env raises for a value it was made with but cannot use (Pendulum-v1's g="abc": a TypeError in the physics)
FIRST_STEP_ERRORS = (TypeError, ValueError, AssertionError, RuntimeError)


@contextlib.contextmanager
def kwargs_blamed_for_first_step(env_id: str, env_kwargs: dict[str, Any]) -> Iterator[None]:
    """Around the reset and first step of an env made with ``env_kwargs``: one of FIRST_STEP_ERRORS becomes the
    UserError naming the user's kwargs when the env made without them resets and steps; else (the env's own bug) it
    raises as it was. Makes the env again, on this error path only."""
    try:
        yield
    except FIRST_STEP_ERRORS as err:
        if not env_kwargs or not _steps(env_id, {}):
            raise
        given = " ".join(f"{key}={value!r}" for key, value in env_kwargs.items())
        raise UserError(
            f"env {env_id!r} fails its first step with --env-kwargs {given} ({type(err).__name__}: {err}); give "
            "values of the names, types and ranges the env takes, or drop them"
        ) from None


def _steps(env_id: str, kwargs: dict[str, Any]) -> bool:
    """Whether the env made with ``kwargs`` resets and takes a step (it is closed again)."""
    try:
        env = make_env(env_id, kwargs)
        try:
            _first_step(env)
        finally:
            env.close()
    except Exception:  # any failure counts: this only decides whom an error is blamed on
        return False
    return True


def _first_step(env: gym.Env) -> None:
    """Reset ``env`` (seed 0) and take one random action."""
    env.reset(seed=0)
    env.action_space.seed(0)
    env.step(env.action_space.sample())


def atari_wrappers(env: gym.Env, training: bool = True) -> gym.Env:
    """The DQN/A3C preprocessing (a3c.spec.atari: no-op starts, frame skip 4 with max-pooling, 84x84 grey, 4 frames
    stacked: uint8 [4, 84, 84]); when ``training``, a lost life ends the episode for the learner
    (``LifeLossTerminal``) while the game and its reported return go on."""
    env = AtariFrames(env)
    return LifeLossTerminal(env) if training else env


class LifeLossTerminal(gym.Wrapper):
    """A lost life is ``terminated`` (no bootstrap past it: the value of a life), marked ``info[LIFE_LOST]``, and the
    ``reset()`` that follows continues the game instead of restarting it (it returns the last observation); at the
    game's real end, reset() resets. The worker reports an episode only at the game's end, so returns are per game.
    (gymnasium's ``terminal_on_life_loss`` restarts the game at every lost life: every game would be one life.)"""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lives, self.game_over, self.last_obs = 0, True, None

    def _lives(self) -> int:
        atari: Any = self.env.unwrapped  # ale_py's AtariEnv (typed as a plain Env here): ``ale`` is its emulator
        return int(atari.ale.lives())

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over, self.last_obs = terminated or truncated, obs
        lives = self._lives()
        if 0 < lives < self.lives and not self.game_over:
            terminated, info = True, {**info, LIFE_LOST: True}
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        if self.game_over or self.last_obs is None:
            obs, info = self.env.reset(**kwargs)
            self.lives, self.game_over = self._lives(), False
            return obs, info
        return self.last_obs, {}


def _flattenable(space: gym.Space) -> bool:
    """A Dict/Tuple space whose leaves (at any depth) are all spaces FlattenObservation makes numbers of."""
    if isinstance(space, gym.spaces.Dict):
        return len(space.spaces) > 0 and all(_flattenable(s) for s in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return len(space.spaces) > 0 and all(_flattenable(s) for s in space.spaces)
    return isinstance(space, FLATTENED_LEAVES)


def spec_of(env: gym.Env, env_id: str) -> EnvSpec:
    """Check the spaces (see ``check_spaces``) and describe them."""
    obs_space, act_space = env.observation_space, env.action_space
    check_spaces(obs_space, act_space, env_id)
    spec = env.spec
    return EnvSpec(
        env_id=env_id,
        observation_space=obs_space,  # type: ignore[arg-type]  # a Box: checked
        action_space=act_space,
        reward_threshold=None if spec is None else spec.reward_threshold,
        max_episode_steps=None if spec is None else spec.max_episode_steps,
        clip_rewards=is_atari(env_id),
    )


def _numeric_or_bool(dtype: Any) -> bool:
    return dtype is not None and (np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_))


def check_spaces(obs_space: gym.Space, act_space: gym.Space, env_id: str) -> None:
    """UserError unless the spaces are ones a3c trains on: Box observations of numbers or booleans, any shape (as
    make_env leaves them: images of any size to a CNN, the rest flattened to an MLP) and Discrete, MultiDiscrete or
    float Box actions."""
    if not isinstance(obs_space, gym.spaces.Box) or not _numeric_or_bool(obs_space.dtype):
        fix = "wrap the env in a gymnasium.ObservationWrapper that returns one of those"
        if isinstance(obs_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
            # a bare index (FrozenLake's cell): the one-hot recipe, rather than a3c one-hotting it behind the back
            # of a3c.load's agent, which takes the observations the model saw (see docs/guides/spaces.md)
            fix = (
                f"for {type(obs_space).__name__} observations, register the env wrapped in gymnasium's "
                "FlattenObservation (one-hot) and train that: the README's 'Your own environment' shows how"
            )
        raise UserError(
            f"env {env_id!r} has observation space {obs_space}, which is not supported; a3c supports Box "
            "observations of numbers or booleans, and Dict/Tuple spaces of Box, Discrete, MultiBinary and "
            f"MultiDiscrete (flattened): {fix}"
        )
    float_box = isinstance(act_space, gym.spaces.Box) and np.issubdtype(act_space.dtype, np.floating)
    if not isinstance(act_space, SUPPORTED_ACTION_SPACES) or (isinstance(act_space, gym.spaces.Box) and not float_box):
        raise UserError(
            f"env {env_id!r} has action space {act_space}, which is not supported; a3c supports Discrete, "
            "MultiDiscrete and float Box actions"
        )


def describe_env(env_id: str, env_kwargs: dict[str, Any] | None = None, *, first_step: bool = False) -> EnvSpec:
    """Make the env once (in the main process, before any worker starts) to validate it and read its spaces.

    ``first_step`` (a new run's check of the user's --env-kwargs): with kwargs given, also reset the env and take one
    step in the same make, so that kwargs the env takes but cannot use are one line here (else every worker met
    them, and the run went through its restarts to the env's traceback). Nothing is stepped without kwargs: the env's
    own failures are its bugs."""
    env = make_env(env_id, env_kwargs)  # (its own refusals are one line already: not wrapped again below)
    try:
        spec = spec_of(env, env_id)
        if first_step and env_kwargs:
            with kwargs_blamed_for_first_step(env_id, env_kwargs):
                _first_step(env)
        return spec
    finally:
        env.close()
