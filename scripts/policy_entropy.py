"""Where a discrete policy is decisive and where it is near uniform: play the run's env with actions sampled from the
policy (as the workers do in training) and report, over the steps, the entropy of the policy (of ln n at most) and
the probability of its most likely action, as quantiles.

    python -m scripts.policy_entropy RUN_DIR_OR_CHECKPOINT [...] [--steps 3000] [--seed 11] [--merge-fire]
        [--json OUT.json]

One game from a reset with ``--seed`` (the env as a user plays it: a3c.spec.environment.make_env, training=False),
at most ``--steps`` steps. ``--merge-fire`` (Atari) also splits the entropy into the choice between moves and the
choice inside groups of actions whose names differ only by FIRE (Pong's NOOP/FIRE, RIGHT/RIGHTFIRE, LEFT/LEFTFIRE,
which move the paddle alike): the mean policy entropy is the sum of the two. docs/benchmarks/atari.md ("Where the
sampled
policy is random") has what it found on Pong.
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

import a3c
from a3c.spec.environment import make_env

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def entropy(probs: np.ndarray) -> np.ndarray:
    """The entropy (nats) of each row of ``probs``."""
    return -(probs * np.log(np.clip(probs, 1e-300, None))).sum(-1)


def fire_groups(meanings: list[str]) -> list[list[int]]:
    """Action indices grouped by their ALE name without FIRE ("RIGHTFIRE" with "RIGHT", "FIRE" with "NOOP")."""
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(meanings):
        move = name.replace("FIRE", "") or "NOOP"
        groups.setdefault(move, []).append(i)
    return list(groups.values())


def play(path: str, steps: int, seed: int) -> tuple[np.ndarray, Any]:
    """The policy's probabilities at each step of one sampled game: [T, n], and the env's unwrapped env."""
    agent = a3c.load(path)
    env = make_env(agent.config.env, agent.config.env_kwargs, training=False)
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    agent.reset()
    rows = []
    for _ in range(steps):
        probs = agent.action_probs(obs)
        rows.append(probs)
        action = int(rng.choice(len(probs), p=probs / probs.sum())) + int(env.action_space.start)
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    env.close()
    return np.stack(rows), env.unwrapped


def summary(probs: np.ndarray, groups: list[list[int]] | None) -> dict[str, Any]:
    """The table's numbers for one game's [T, n] probabilities."""
    h = entropy(probs)
    row: dict[str, Any] = {
        "steps": len(probs),
        "max_entropy": float(np.log(probs.shape[1])),
        "mean_entropy": float(h.mean()),
        "entropy_quantiles": [float(q) for q in np.quantile(h, QUANTILES)],
        "top_prob_quantiles": [float(q) for q in np.quantile(probs.max(-1), QUANTILES)],
        "mean_probs": [float(p) for p in probs.mean(0)],
    }
    if groups is not None:
        moves = np.stack([probs[:, g].sum(-1) for g in groups], axis=-1)
        between = entropy(moves)
        row["groups"] = groups
        row["between_moves_entropy"] = float(between.mean())
        row["inside_groups_entropy"] = float((h - between).mean())
        row["top_move_prob_quantiles"] = [float(q) for q in np.quantile(moves.max(-1), QUANTILES)]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="run directories (their latest.pt) or checkpoint files")
    parser.add_argument("--steps", type=int, default=3000, help="at most this many steps of the game")
    parser.add_argument("--seed", type=int, default=11, help="the env's reset and the sampler")
    parser.add_argument("--merge-fire", action="store_true", help="group Atari actions that differ only by FIRE")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for path in args.paths:
        probs, env = play(path, args.steps, args.seed)
        groups = fire_groups(env.get_action_meanings()) if args.merge_fire else None
        rows.append({"path": str(path), **summary(probs, groups)})
    quantiles = "/".join(f"{q:g}" for q in QUANTILES)
    print(f"| checkpoint | steps | mean entropy (of max) | entropy at {quantiles} | top action's probability |")
    print("|---|---|---|---|---|")
    for r in rows:
        ent = ", ".join(f"{q:.2f}" for q in r["entropy_quantiles"])
        top = ", ".join(f"{q:.2f}" for q in r["top_prob_quantiles"])
        mean = f"{r['mean_entropy']:.2f} (of {r['max_entropy']:.2f})"
        print(f"| {r['path']} | {r['steps']} | {mean} | {ent} | {top} |")
    for r in rows:
        if "groups" in r:
            top = ", ".join(f"{q:.2f}" for q in r["top_move_prob_quantiles"])
            print(
                f"{r['path']}: between moves {r['between_moves_entropy']:.2f}, inside FIRE groups "
                f"{r['inside_groups_entropy']:.2f} (groups {r['groups']}); the top move's probability {top}"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
