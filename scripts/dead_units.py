"""How much of a CNN agent's network is dead: for each ReLU layer of the torso, the share of its units (a convolution's
channels, the dense layer's units) that are never positive over a batch of the env's own frames. A dead unit passes
no gradient and does not come back.

    python -m scripts.dead_units RUN_DIR_OR_CHECKPOINT [...] [--steps 600] [--json OUT.json]

The frames: the run's env as a user plays it (a3c.spec.environment.make_env, training=False), ``--steps`` random
actions from a reset with seed 0, every third frame stack kept. docs/benchmarks/atari.md ("The background level") has
what it
found on Pong and Breakout.
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import json
from pathlib import Path

import numpy as np
import torch

import a3c
from a3c.learn.model import CnnTorso
from a3c.spec.environment import make_env


def frames(env_id: str, steps: int) -> torch.Tensor:
    env = make_env(env_id, training=False)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    kept = [obs]
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        if terminated or truncated:
            obs, _ = env.reset()
        kept.append(obs)
    env.close()
    return torch.from_numpy(np.stack(kept[::3]))


def dead_shares(torso: CnnTorso, x: torch.Tensor) -> list[float]:
    """Per ReLU layer (each convolution, then the dense layer), the share of units never positive on ``x``."""
    with torch.no_grad():
        h = x.float() * torso.scale - torso.shift  # (what CnnTorso.forward feeds its convolutions, in float32)
        if torso.add_channel:
            h = h.unsqueeze(1)
        elif torso.channels_last:
            h = h.permute(0, 3, 1, 2)
        shares = []
        for module in torso.convs:
            h = module(h)
            if isinstance(module, torch.nn.ReLU):
                shares.append(float((h.amax(dim=(0, 2, 3)) <= 0).float().mean()))
        features = torso.fc(h)
        shares.append(float((features.amax(dim=0) <= 0).float().mean()))
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="run directories (their latest.pt) or checkpoint files")
    parser.add_argument("--steps", type=int, default=600, help="random actions played for the frames")
    parser.add_argument("--json", type=Path, help="also write the table here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows, cache = [], {}
    for path in args.paths:
        agent = a3c.load(path)
        torso = agent.model.actor
        if not isinstance(torso, CnnTorso):
            raise SystemExit(f"{path}: not a CNN agent")
        env_id = agent.config.env
        if env_id not in cache:
            cache[env_id] = frames(env_id, args.steps)
        shares = dead_shares(torso, cache[env_id])
        rows.append({"path": str(path), "env": env_id, "step": agent.global_step, "dead": shares})
    print("| checkpoint | env | step | dead share per layer (conv1, conv2, ..., dense) |")
    print("|---|---|---|---|")
    for r in rows:
        step = "?" if r["step"] is None else f"{r['step']:,}"
        print(f"| {r['path']} | {r['env']} | {step} | {', '.join(f'{d:.2f}' for d in r['dead'])} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
