"""Before the trainer: every check a user's input can fail that needs no torch (settings, env id and spaces, the
TensorBoard port, the run directory), and the early start of the fork server.

Kept free of torch so that the command can check its input and start the fork server within a fraction of a second:
the server then imports torch, gymnasium and the rest of a3c.run.preload (about 2 s) while the main process imports its
own (about 2 s more) instead of after it. That halves the start-up of a run with many workers.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import multiprocessing.forkserver
import signal
from pathlib import Path

import gymnasium as gym

from a3c.record.run_dir import check_new_run_dir
from a3c.record.tensorboard_server import check_port
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec, describe_env
from a3c.spec.errors import UserError


def preflight(config: Config) -> EnvSpec:
    """Validate everything that can be validated without torch; return the env's spec. Raises UserError."""
    config.validate()
    if config.backend == "ray" and importlib.util.find_spec("ray") is None:
        raise UserError("--backend ray needs Ray, which is not installed; pip install 'a3c[ray]' (or 'ray>=2.40')")
    spec = describe_env(config.env, config.env_kwargs)
    if config.gsde and not isinstance(spec.action_space, gym.spaces.Box):
        raise UserError(
            f"--gsde is for continuous (Box) actions, but {config.env} has {spec.action_space} actions; drop --gsde"
        )
    check_port(config.tensorboard)  # --tensorboard PORT: in use is a user error, before the run dir exists
    if config.resume is None and config.run_dir:
        check_new_run_dir(Path(config.run_dir))
    return spec


def start_fork_server(config: Config) -> None:
    """Start the fork server now, with a3c.run.preload as its preload, if the run will use it (no-op otherwise).
    Call after preflight: a run whose input is wrong starts no process."""
    if config.resolved_start_method() != "forkserver":
        return
    multiprocessing.get_context("forkserver").set_forkserver_preload(["a3c.run.preload"])
    # The server is started with SIGINT ignored. It inherits SIG_IGN through exec, Python then leaves SIGINT ignored,
    # and every child it forks restores the server's own startup handler: SIG_IGN. Started with SIGINT live, a
    # worker would run with Python's KeyboardInterrupt handler until it ignores SIGINT itself, and a Ctrl-C in that
    # window printed its traceback.
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: signals cannot be changed here
        previous = None
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
