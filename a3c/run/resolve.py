"""Start-up, straight down: one step (``resolve_run``) turns what a user asked for, the command line's flags or
``a3c.train``'s settings, into a ``ResolvedRun``, the one object the Trainer takes. After it nothing validates the
settings again or reads the checkpoint again.

    resolve_settings   a new run: defaults < the env's preset < the settings given; --resume: the checkpoint's
                       config < the settings given (its checkpoints/latest.pt read here, once); then validated
    preflight          what Config.validate cannot check alone: Ray installed for --backend ray, wandb for --track,
                       the env id and its spaces, the Gaussian's settings (--gsde, --log-std-init) on Box
                       actions only, --hidden-sizes on vector observations only, the TensorBoard port, an empty
                       run directory for a new run
    check_compatible   --resume: the checkpoint's model fits the env and the model this run builds
    start_fork_server  a new run: the fork server starts now, so that it imports torch while this process does
    resolve_workers    --workers auto: the count measured (a3c/run/workers_auto.py)
    resolve_input_shift  a new run on frames: their background level, which the CNN subtracts (a3c/spec/background.py)

Every check a user's input can fail comes before any process and any directory exists; each failure is one
UserError (on the command line one line and exit code 2; from a3c.train a ValueError with the same message).

A new run's resolution is free of torch up to the fork server's start, so that the command checks its input and
starts the server within a fraction of a second: the server then imports torch, gymnasium and the rest of
a3c.run.preload (about 2 s) while the main process imports its own (about 2 s more) instead of after it. That halves
the start-up of a run with many workers. A resume reads its checkpoint with torch, and its fork server starts later,
when the trainer launches the workers.

"Given" settings are what the user typed or passed: the command line's flags typed (a flag typed with its default
value counts), a3c.train's keyword settings and the fields of its Config that differ from the defaults. They beat
the preset (``preset="none"`` / ``--preset none``: the plain defaults) and, on resume, the checkpoint's config.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import multiprocessing
import multiprocessing.forkserver
import secrets
import sys
from collections.abc import Iterator, Mapping, Set
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from a3c.record.run_dir import check_new_run_dir, resume_checkpoint
from a3c.record.run_lock import check_not_training
from a3c.record.tensorboard_server import check_port
from a3c.run.child_signals import children_begin_with_stop_signals_blocked
from a3c.run.workers_auto import resolve_workers
from a3c.spec.atari import check_new_run_kwargs
from a3c.spec.background import resolve_input_shift
from a3c.spec.config import Config
from a3c.spec.config_text import (
    as_flag,
    lag_limit_note,
    no_evaluation_note,
    out_of_reach_warning,
    overshoot_note,
    preset_line,
    recurrent_minibatch_note,
    short_run_warning,
)
from a3c.spec.environment import (
    EnvSpec,
    check_env_file_here,
    describe_env,
    is_atari,
    is_image,
    registered_max_episode_steps,
)
from a3c.spec.errors import UserError, install_extra
from a3c.spec.flags import BOX_ONLY_SETTINGS
from a3c.spec.preset_choice import (
    CHECKPOINT,
    CPU,
    DEFAULT,
    FLAG,
    PRESET,
    Choice,
    check_given_for_objective,
    resolve_new_run,
)
from a3c.spec.validation import flag_name


@dataclass(frozen=True)
class Settings:
    """A run's settings, resolved and validated (``resolve_settings``): ``config`` (its worker count may still be
    "auto"), ``sources`` (where each setting came from: default, preset, flag or checkpoint; what --show-config
    prints) and, for --resume, the checkpoint the run goes on from (``resume``; None for a new run)."""

    config: Config
    sources: dict[str, str]
    resume: dict[str, Any] | None = None
    choice: Choice | None = None  # a new run's table of the presets file, and why (a3c.spec.preset_choice)


@dataclass(frozen=True)
class ResolvedRun:
    """Everything the Trainer starts from, checked: the config (validated, its worker count resolved: an int, with
    ``workers_auto`` recording how --workers auto chose it), the env's spec, where each setting came from, the
    checkpoint a resumed run goes on from (read once, checked against the env and the model; None for a new run) and
    the session (0 for a new run, one more than the checkpoint's for a resume: its workers get fresh seeds)."""

    config: Config
    spec: EnvSpec
    sources: dict[str, str]
    resume: dict[str, Any] | None
    session: int


def resolve_run(values: Mapping[str, Any], given: Set[str]) -> ResolvedRun:
    """The settings (``values``: every Config field's value, the defaults where none was given; ``given``: the names
    of those given, see the module docstring) -> the resolved run, in the order of the module docstring. Raises
    UserError for bad input, before any process or directory exists (the fork server aside, which starts only
    once the input is checked)."""
    if values.get("resume") is not None:  # a run another process still trains, refused before its checkpoint is read
        resume_checkpoint(values["resume"])  # (a path that is no run says so first)
        check_not_training(values["resume"])  # (the Trainer holds the directory for good)
    settings = resolve_settings(values, given)
    config, resume = settings.config, settings.resume
    spec = check_settings(settings)  # the user's input, checked without torch ...
    if config.stop_when_solved:  # (the registry looked up only where the warning may apply)
        warning = out_of_reach_warning(
            config, spec.reward_threshold, spec.max_episode_steps, registered_max_episode_steps(config.env)
        )
        if warning is not None:
            print(warning, file=sys.stderr)
    if resume is None:  # the preset applied and what it set (flags win); a run too short for its schedule or its eval
        lines = (
            preset_line(config, settings.sources, settings.choice),
            short_run_warning(config, settings.sources),
            no_evaluation_note(config, settings.sources),
        )
        for line in lines:
            if line is not None:
                print(line, file=sys.stderr)
    if resume is not None:
        note = no_evaluation_note(config, settings.sources, step=int(resume["global_step"]))
        if note is not None:
            print(note, file=sys.stderr)
    else:
        start_fork_server(config)  # ... so that the fork server imports torch while we do, not after us
    # --workers auto: measured now, while the fork server starts; a resumed run weighs the steps it has left
    config = resolve_workers(config, spec, steps_done=0 if resume is None else int(resume["global_step"]))
    for note in (lag_limit_note(config), recurrent_minibatch_note(config)):
        if note is not None:
            print(note, file=sys.stderr)
    if resume is None:  # a new run's frames: their background level, which the CNN takes off (a resume keeps its own)
        note = overshoot_note(config)
        if note is not None:
            print(note, file=sys.stderr)
        config = resolve_input_shift(config, spec)
        if config.input_shift:
            print(
                f"a3c: the frames' background level ({config.input_shift * 255:.0f} of 255) is taken off the CNN's "
                "input (a3c/spec/background.py)",
                file=sys.stderr,
            )
    if config.track and config.wandb_id is None:  # (a resumed run keeps its checkpoint's: the same W&B run)
        config = dataclasses.replace(config, wandb_id=new_wandb_id())
    session = 0 if resume is None else int(resume.get("session", 0)) + 1
    return ResolvedRun(config, spec, settings.sources, resume, session)


def check_settings(settings: Settings) -> EnvSpec:
    """Every check of resolved ``settings`` that needs more than the settings (the env made, a resumed run's
    checkpoint held to it, a resume whose stop its episodes already meet); returns the env's spec. A run's and
    --show-config's alike: what the run would refuse, --show-config refuses. Raises UserError."""
    config, resume = settings.config, settings.resume
    made = settings.choice.spec if settings.choice is not None else None  # (the env, where the choice made it)
    if resume is not None:  # (a resumed run keeps its env id: a missing file is not mended with --env)
        check_env_file_here(config.env, "resume")
    spec = preflight(config, made, settings.sources)
    if resume is not None:
        check_resume_fits(resume, spec, config)
        from a3c.record.resume import already_solved_problem  # (torch: loaded for the resume already)

        problem = already_solved_problem(config, resume, config.stop_threshold(spec.reward_threshold))
        if problem is not None:
            raise UserError(problem)
    return spec


def resolve_settings(values: Mapping[str, Any], given: Set[str]) -> Settings:
    """A new run: defaults < the env's preset (a3c/spec/presets.toml) < the settings given. --resume: the run's
    checkpointed config < the settings given (presets are not applied again over a resumed run). Validated."""
    if values.get("resume") is not None:
        return _resumed(values, given)
    if {"exp_name", "run_dir"} <= set(given):
        raise UserError(
            "--exp-name names the default run directory, and --run-dir names another; drop --exp-name, or --run-dir"
        )
    with _bad_types():
        config, sources, choice = resolve_new_run(dict(values), set(given))
    return Settings(config, sources, choice=choice)


@contextmanager
def _bad_types() -> Iterator[None]:
    """A TypeError of Config's validation (from a3c.train: e.g. a string where a number belongs) as a UserError."""
    try:
        yield
    except TypeError as err:
        raise UserError(f"bad setting: {err}") from None


def _resumed(values: Mapping[str, Any], given: Set[str]) -> Settings:
    """--resume RUN_DIR: its checkpoint, read once, and its config with the settings given on top."""
    for name in ("preset", "preset_file", "exp_name"):
        if name in given:
            flag = flag_name(name)
            raise UserError(
                f"{flag} does not apply to --resume: a resumed run keeps its checkpoint's config; drop {flag}, and "
                "give the flags you want to change"
            )
    given = set(given) - {"resume"}
    overrides = {name: values[name] for name in given}
    if "workers" in overrides:  # a count given now replaces the one --workers auto chose before, and its reason
        overrides["workers_auto"] = None
    run_dir = values["resume"]
    resume_checkpoint(run_dir)  # a path that is no run answers now, before torch is imported (a second or more)
    from a3c.record.resume import load_resume, reset_when_off, resume_config  # imports torch: only when resuming

    payload = load_resume(run_dir)
    with _bad_types():
        config = resume_config(payload, run_dir, overrides)
    check_given_for_objective(config.to_dict(), given)
    sources = {f.name: FLAG if f.name in given else CHECKPOINT for f in dataclasses.fields(Config)}
    sources["resume"] = sources["run_dir"] = FLAG
    reset, note = reset_when_off(payload, config, given)
    sources.update(dict.fromkeys(reset, DEFAULT))  # (--show-config: the default's, not the checkpoint's)
    if note is not None:
        print(note, file=sys.stderr)
    return Settings(config, sources, payload)


def preflight(config: Config, spec: EnvSpec | None = None, sources: Mapping[str, str] | None = None) -> EnvSpec:
    """The checks of a validated ``config`` (resolve_settings) that need no torch but more than the settings; returns
    the env's spec (``spec``: the env's, where it was made already). ``sources``: where each setting came from, so
    that a setting refused is taken off where it was set (the flag, or the preset's). Raises UserError."""

    defaults = Config()

    def drop(*names: str) -> str:
        """How to take ``names`` off: drop the flags given, undo what the preset set (in one go: a preset for
        another action space may set several)."""
        typed = [name for name in names if sources is None or sources.get(name) not in (PRESET, CPU)]
        preset_set = [name for name in names if name not in typed]
        fixes = [f"drop {' and '.join(map(flag_name, typed))}"] if typed else []
        if preset_set:
            preset = f"the preset {config.preset}" if config.preset else "the env's preset"
            undo = " ".join(as_flag(name, getattr(defaults, name)) for name in preset_set)
            fixes.append(f"{preset} sets {' and '.join(map(flag_name, preset_set))}; give {undo}, or another --preset")
        return "; ".join(fixes)

    if config.backend == "ray" and importlib.util.find_spec("ray") is None:
        raise UserError(f"--backend ray needs Ray, which is not installed; {install_extra('ray')}")
    if config.track and importlib.util.find_spec("wandb") is None:
        raise UserError(
            f"--track needs Weights & Biases (wandb), which is not installed; {install_extra('wandb')}, or drop --track"
        )
    # the user's kwargs, checked on a new run (a resumed run keeps what it was made with)
    new_kwargs = sources is None or sources.get("env_kwargs") != CHECKPOINT
    if new_kwargs and is_atari(config.env):
        check_new_run_kwargs(config.env_kwargs)
    # the user's kwargs are stepped once where the env is made: here, or in the preset choice (a new run's, made with
    # these kwargs: presets set none), which stepped them there
    spec = spec or describe_env(config.env, config.env_kwargs, first_step=new_kwargs)
    if config.env_backend == "ale-vector":
        from a3c.spec.atari_vector import check_vector_env

        check_vector_env(config.env, config.env_kwargs)
    # a setting a resumed run's checkpoint carries is left alone: its model was built with it (a run of an a3c that
    # ignored it); what is typed or a preset sets is refused
    changed = [
        name
        for name in (*BOX_ONLY_SETTINGS, "hidden_sizes")
        if getattr(config, name) != getattr(defaults, name) and (sources is None or sources.get(name) != CHECKPOINT)
    ]
    gaussian = [name for name in BOX_ONLY_SETTINGS if name in changed]
    if gaussian and not isinstance(spec.action_space, gym.spaces.Box):
        flags = " and ".join(map(flag_name, gaussian))
        raise UserError(
            f"{flags} {'is' if len(gaussian) == 1 else 'are'} for continuous (Box) actions, but {config.env} has "
            f"{spec.action_space} actions; {drop(*gaussian)}"
        )
    if "hidden_sizes" in changed and is_image(spec.observation_space):
        raise UserError(
            f"--hidden-sizes {list(config.hidden_sizes)} is for the MLP torso of vector observations, but "
            f"{config.env} observes images ({spec.observation_space}), which a3c's CNN torso takes; "
            f"{drop('hidden_sizes')}"
        )
    # (a preset's --bf16 that this CPU turned off is refused too: one command, one outcome on every machine)
    if (config.bf16 or (sources is not None and sources.get("bf16") == CPU)) and not is_image(spec.observation_space):
        raise UserError(
            f"--bf16 is for image observations (the CNN torso), but {config.env} observes {spec.observation_space}, "
            f"which an MLP takes in float32; {drop('bf16')}"
        )
    if config.stop_when_solved and config.stop_threshold(spec.reward_threshold) is None:
        raise UserError(
            f"--stop-when-solved: {config.env} has no reward threshold (its spec sets none); give --stop-at RETURN, "
            "the 100-episode mean return to stop at, or drop --stop-when-solved"
        )
    check_port(config.tensorboard)  # --tensorboard PORT: in use is a user error, before the run dir exists
    if config.resume is None and config.run_dir:
        check_new_run_dir(Path(config.run_dir))
    return spec


def new_wandb_id() -> str:
    """A fresh W&B run id (recorded in config.json and the checkpoints: a resume logs to the same W&B run)."""
    return secrets.token_hex(8)


def check_resume_fits(payload: dict[str, Any], spec: EnvSpec, config: Config) -> None:
    """UserError if the checkpoint of a resumed run does not fit the env (its spaces) and the model ``config``
    builds for it (parameter count, policy head)."""
    from a3c.learn.model import model_shape
    from a3c.record.checkpoint import LATEST
    from a3c.record.resume import check_compatible, check_restorable

    n_params, param_dim = model_shape(spec, config)
    source = f"{config.resume}/checkpoints/{LATEST}"
    check_compatible(payload, spec, n_params, source, param_dim)
    check_restorable(payload, config, spec.obs_shape, source)


def start_fork_server(config: Config) -> None:
    """Start the fork server now, with a3c.run.preload as its preload, if the run will use it: not under the serial
    backend, whose workers and evaluator run in this process (no-op then; also when it runs already). Call after the
    input checks: a run whose input is wrong starts no process."""
    if config.resolved_start_method() != "forkserver" or config.backend == "serial":
        return
    multiprocessing.get_context("forkserver").set_forkserver_preload(preload_modules(config))
    # The server is made with SIGINT and SIGTERM blocked (a3c.run.child_signals), and every child it forks begins with
    # the server's mask: blocked until the child has its own handling (SIGTERM to the group no longer kills the
    # server while workers start). Started with SIGINT live, a worker ran with Python's
    # KeyboardInterrupt handler until it ignored SIGINT itself, and a Ctrl-C in that window printed its traceback.
    with children_begin_with_stop_signals_blocked("forkserver"):
        multiprocessing.forkserver.ensure_running()


# Packages whose env modules the fork server may import ahead of the workers: importing them only defines and
# registers envs. A user's own env module is left to each worker (its import could start a thread or open a
# connection, which a fork must not share).
ENV_PACKAGES_TO_PRELOAD = ("gymnasium", "ale_py", "envs")


def preload_modules(config: Config) -> list[str]:
    """What the fork server imports before it forks: a3c.run.preload (what every worker needs), the main module of
    ``python -m a3c.train`` and the env's own module (gymnasium's, ale-py's or this project's envs), each of which
    every child would otherwise import again after the fork (see a3c.run.preload). Call it after the env was made
    here (preflight), so that an `envs/` or `module:` id is registered."""
    # ("envs": this project's namespace, which making any env imports first, a3c.spec.environment)
    return ["a3c.run.preload", "envs", *_main_module_to_preload(), *_env_module_to_preload(config.env)]


def _env_module_to_preload(env_id: str) -> list[str]:
    """The module of the env's entry point (e.g. gymnasium.envs.classic_control.cartpole), if it is one of
    ENV_PACKAGES_TO_PRELOAD's; [] otherwise, or when the id is not registered (yet) in this process."""
    try:
        entry_point = gym.spec(env_id).entry_point
    except gym.error.Error:
        return []
    if not isinstance(entry_point, str):
        return []
    module = entry_point.split(":", 1)[0]
    return [module] if module.split(".", 1)[0] in ENV_PACKAGES_TO_PRELOAD else []


def _main_module_to_preload() -> list[str]:
    """The main module, when it is one of a3c's run with -m (``python -m a3c.train``): multiprocessing runs it again
    as ``__mp_main__`` in every child it starts, and preloaded in the fork server its imports are there already (see
    a3c.run.preload). Not a user's script or module (the server would run its top-level code), nor a package's
    ``__main__`` (multiprocessing does not run those again; importing one would run its command)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", None)
    if isinstance(name, str) and name.startswith("a3c.") and not name.endswith("__main__"):
        return [name]
    return []
