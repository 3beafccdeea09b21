"""Arms: what one column of a benchmark runs. An arm is a name and either a3c.train's flags (``NAME=FLAGS`` on the
command line, or a queue's [arms] table) or a peer, SB3 with rl-zoo3's or CleanRL's settings (scripts/sb3_runner.py):

    sb3-a2c          SB3's A2C, rl-zoo3's settings for the env
    sb3-ppo          SB3's PPO, rl-zoo3's settings for the env
    sb3-ppo-cleanrl  SB3's PPO, CleanRL's ppo.py (discrete actions) or ppo_continuous_action.py (continuous) settings

``command`` turns (arm, env, seed, budget, run directory) into the command that runs it. An a3c arm gets the driver's
``--workers`` (2 unless the arm names its own, or says ``workers = "default"``: the command as a user types it, with
a3c's own default) and ``--checkpoint-every-s`` (so that a run stopped mid-way loses little; the arm's own value if it
names one); ``resume`` continues a run directory that holds a checkpoint (``--resume RUN_DIR``)."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.benchmark.store import REPO

PEERS: dict[str, tuple[str, str]] = {  # name: (SB3 algorithm, settings)
    "sb3-a2c": ("a2c", "rl-zoo3"),
    "sb3-ppo": ("ppo", "rl-zoo3"),
    "sb3-ppo-cleanrl": ("ppo", "cleanrl"),
}
DEFAULT_WORKERS = 2
CHECKPOINT_EVERY_S = 60.0
# what the driver gives every a3c run (``command``): an arm's own would come after and win, and the run would not be
# the one its row names (another env, seed or budget) or would not be where the driver looks for it
DRIVER_FLAGS = ("--env", "--seed", "--total-steps", "--run-dir", "--resume")


class ArmError(ValueError):
    """An arm that cannot be (a bad NAME=FLAGS, an unknown peer): the driver prints it in one line."""


@dataclass(frozen=True)
class Arm:
    name: str
    flags: tuple[str, ...] = ()  # a3c.train's flags (an a3c arm)
    peer: str | None = None  # one of PEERS (a peer arm)
    workers: int | str | None = DEFAULT_WORKERS  # --workers given to an a3c arm; None: none (a3c's default)
    evaluate: int = 0  # episodes of a3c.evaluate on the final and best checkpoints (0: none)

    def __post_init__(self) -> None:
        for flag in self.flags:
            name = flag.split("=")[0]
            if name in DRIVER_FLAGS:
                raise ArmError(
                    f"arm {self.name!r} sets {name}, which the driver sets for every run (the env, seed, budget "
                    "and run directory it runs); drop it from the arm"
                )

    @property
    def kind(self) -> str:
        return self.peer or "a3c"

    def spec(self) -> dict[str, Any]:
        """The arm as a results row records it (``arm_spec``); two runs of one arm name must agree on it."""
        if self.peer is not None:
            algo, settings = PEERS[self.peer]
            return {"kind": self.peer, "algo": algo, "settings": settings}
        return {"kind": "a3c", "flags": list(self.effective_flags()), "evaluate": self.evaluate}

    def effective_flags(self) -> tuple[str, ...]:
        """The arm's flags with the driver's --workers and --checkpoint-every-s where the arm names neither."""
        flags = list(self.flags)
        named = {f.split("=")[0] for f in flags if f.startswith("--")}
        if "--workers" not in named and self.workers is not None:
            flags += ["--workers", str(self.workers)]
        if not named & {"--checkpoint-every", "--checkpoint-every-s"}:
            flags += ["--checkpoint-every-s", f"{CHECKPOINT_EVERY_S:g}"]
        return tuple(flags)


def peer(name: str) -> Arm:
    if name not in PEERS:
        raise ArmError(f"unknown peer {name!r}: one of {', '.join(PEERS)} (an a3c arm is NAME=FLAGS)")
    return Arm(name, peer=name, workers=None)


def parse_arm(text: str, workers: int | str | None = DEFAULT_WORKERS, evaluate: int = 0) -> Arm:
    """``NAME=FLAGS`` (an a3c arm: ``ppo=--algo ppo``, ``a3c=`` for the env's preset) or a peer's name."""
    name, sep, flags = text.partition("=")
    if not sep:
        return peer(text)
    if not name or any(c in name for c in " /") or name in PEERS:
        raise ArmError(f"arm {text!r}: NAME=FLAGS with a NAME of its own (no spaces or /, not a peer's name)")
    return Arm(name, tuple(shlex.split(flags)), workers=workers, evaluate=evaluate)


def command(arm: Arm, env: str, seed: int, budget: int, run_dir: Path, resume: bool = False) -> list[str]:
    """The argv that runs ``arm`` on ``env`` with ``seed`` for ``budget`` env steps into ``run_dir`` (an a3c run that
    holds a checkpoint goes on from it with ``resume``)."""
    if arm.peer is not None:
        algo, settings = PEERS[arm.peer]
        args = ["--algo", algo, "--settings", settings, "--env", env, "--seed", str(seed), "--steps", str(budget)]
        return [sys.executable, "-m", "scripts.sb3_runner", *args, "--run-dir", str(run_dir)]
    args = ["--env", env, "--seed", str(seed), "--total-steps", str(budget), *arm.effective_flags()]
    where = ["--resume", str(run_dir)] if resume else ["--run-dir", str(run_dir)]
    return [sys.executable, "-m", "a3c.train", *args, *where]


def shown(argv: list[str]) -> str:
    """An argv as a user types it: ``python`` for this interpreter, paths under the repository relative to it."""
    words = ["python" if i == 0 else a for i, a in enumerate(argv)]
    return shlex.join(words).replace(f"{REPO}/", "")


def unknown_flags(arm: Arm, known: set[str]) -> list[str]:
    """The flags of an a3c arm that a3c.train's parser does not know (``known``: its option strings): an arm written
    for a flag still being built waits in the queue until it exists."""
    if arm.peer is not None:
        return []
    return sorted({f.split("=")[0] for f in arm.flags if f.startswith("--")} - known)


def a3c_flags() -> set[str]:
    """Every option string of this checkout's ``python -m a3c.train``."""
    from a3c.train import build_parser

    return {s for action in build_parser()._actions for s in action.option_strings}
