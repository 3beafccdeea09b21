"""``a3c.train(...)``: training from Python (a script, a notebook, a sweep) with the same settings, checks and run
directory as ``python -m a3c.train``.

The run happens in the calling process, which becomes the main process of a3c.run.trainer: workers are processes of
their own (forkserver on Linux, spawn elsewhere; neither re-runs a notebook's cells, and a script only needs the
usual ``if __name__ == "__main__":`` guard), or, with ``backend="serial"``, loops in this process. Bad input raises
ValueError (a3c.spec.errors.UserError) with the message the command line prints, before any process starts. A Ctrl-C (a
notebook's "interrupt kernel") stops the run as on the command line (final checkpoint, summary.json) and then raises
KeyboardInterrupt.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from a3c.spec.config import Config
from a3c.spec.errors import UserError
from a3c.spec.setting_types import plain, setting_types, type_problem

if TYPE_CHECKING:
    from a3c.record.agent import Agent


@dataclass
class TrainResult:
    """What a finished run left: its directory, its summary.json, and its final policy loaded (``a3c.load``)."""

    run_dir: Path
    summary: dict[str, Any]
    agent: Agent
    exit_code: int = 0

    def best_agent(self) -> Agent:
        """The agent of checkpoints/best.pt (the best evaluation during training)."""
        from a3c.record.agent import load

        return load(self.run_dir, best=True)


def api_settings(config: Config | None = None, **settings: Any) -> tuple[dict[str, Any], set[str]]:
    """a3c.train's arguments as the resolve step takes the command line's (a3c.run.resolve.resolve_run): every
    setting's value (``config``'s, or the defaults, with ``settings`` on top) and the names of those given, as the
    flags typed on a command line: the keyword settings, and the fields of ``config`` that differ from the defaults.
    So ``a3c.train(env="Acrobot-v1")`` and ``a3c.train(Config(env="Acrobot-v1"))`` both train with Acrobot's preset,
    under it what is given, as ``python -m a3c.train --env Acrobot-v1`` does; ``preset="none"`` for the plain
    defaults. With ``resume=RUN_DIR``, the given settings go on top of the run's checkpointed config."""
    if config is not None and not isinstance(config, Config):
        raise UserError(
            f"a3c.train's one positional argument is an a3c.Config (got {type(config).__name__} {config!r}); give "
            'the settings as keywords, e.g. a3c.train(env="CartPole-v1")'
        )
    fields = {f.name: f for f in dataclasses.fields(Config)}
    for name in settings:
        if name in fields and fields[name].metadata["internal"]:
            raise UserError(f"{name!r} is not a setting: a3c records it (config.json); leave it out")
        if name not in fields:
            close = difflib.get_close_matches(name, sorted(fields), n=1)
            hint = f"did you mean {close[0]!r}?" if close else "see a3c.Config for the settings"
            raise UserError(f"unknown setting {name!r}; {hint}")
    base, defaults = config if config is not None else Config(), Config()
    values = {name: getattr(base, name) for name in fields}
    given = {
        name
        for name, f in fields.items()
        if not f.metadata["internal"] and _normal(values[name]) != _normal(getattr(defaults, name))
    } | set(settings)
    values.update(settings)
    hints = setting_types()
    for name in sorted(given):  # (the command line's flags parse into these types; a caller may pass anything)
        # a path as a pathlib.Path (run_dir, resume, preset_file, an env file) is the string a flag would give
        value = os.fspath(values[name]) if isinstance(values[name], os.PathLike) else values[name]
        problem = type_problem(name, value)
        if problem is not None:
            raise UserError(problem)
        values[name] = plain(value, hints[name])  # (numpy's scalars as Python's: config.json is JSON)
    values["hidden_sizes"] = tuple(values["hidden_sizes"])
    return values, given


def _normal(value: Any) -> Any:
    return tuple(value) if isinstance(value, (list, tuple)) else value


def train(config: Config | None = None, /, **settings: Any) -> TrainResult:
    """Train as ``python -m a3c.train`` would, with ``config`` and/or keyword settings named like Config's fields
    (the flags without their leading '--', '_' in place of '-'), e.g. ``a3c.train(env="CartPole-v1", workers=2,
    total_steps=200_000)``. The env's preset applies under the settings given, as on the command line
    (``api_settings``); ``preset="none"`` trains with the plain defaults.

    Each setting takes the type the flag parses into (an integer, a number, a string, True or False, a list of
    integers for ``hidden_sizes``, a dict for ``env_kwargs``; numpy's scalars count; a path may be a pathlib.Path).

    Returns a TrainResult (run_dir, summary, agent). Raises ValueError for bad input (the CLI's message; a setting of
    another type names the type it takes), KeyboardInterrupt after an interrupted run has shut down (also for a
    Ctrl-C that came as the run ended), RuntimeError when the run failed (a worker out of restarts, non-finite
    updates, a file of its run directory that could not be written, e.g. on a full disk; the run directory keeps
    what was done)."""
    started_at = time.time()
    values, given = api_settings(config, **settings)
    from a3c.run.resolve import resolve_run

    run = resolve_run(values, given)  # the same one step as the command line's: checks, fork server, workers
    from a3c.record.agent import load
    from a3c.run.trainer import Trainer

    trainer = Trainer(run, started_at=started_at)
    exit_code = trainer.run()
    run_dir = trainer.run_dir
    if run_dir is None or not (run_dir / "summary.json").is_file():
        raise RuntimeError(f"the run ended before writing summary.json (exit code {exit_code})")
    summary = json.loads((run_dir / "summary.json").read_text())
    if exit_code == 128 + signal.SIGINT:
        raise KeyboardInterrupt(f"training interrupted at step {summary['total_steps']:,}; its run: {run_dir}")
    if exit_code == 0 and trainer.signal_received == signal.SIGINT:
        # a Ctrl-C that came as the run ended (its workers done, its last evaluation or checkpoint in hand): the run
        # completed, and the caller's script must stop all the same, not go on to its next run
        raise KeyboardInterrupt(
            f"training interrupted at step {summary['total_steps']:,}, as it ended (it completed); its run: {run_dir}"
        )
    if exit_code != 0:
        raise RuntimeError(f"training failed ({summary['stop_reason']}); its run directory: {run_dir}")
    return TrainResult(run_dir, summary, load(run_dir), exit_code)
