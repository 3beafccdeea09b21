"""Atari throughput: frames/s of a3c against Stable-Baselines3 on ALE/Pong-v5, same machine, same run, runs
alternating (a3c, SB3, a3c, ...). Both train from pixels with the standard preprocessing: 84x84 grey, frame skip 4
(one agent step = 4 frames), 4 stacked frames, reward sign; a3c with its `atari` preset (Nature CNN shared by actor
and critic; PPO's objective with CleanRL's settings, or A3C's table with --a3c-variant="--algo a3c": RMSprop, 20-step
rollouts), SB3 with rl-zoo3's Atari settings for the same objective (PPO; for A3C's, A2C: CnnPolicy, 16 envs,
RMSpropTFLike), or --sb3-algo's. Learning is not measured here (a game needs ~10M frames): this is the cost per frame.

    pip install -e ".[atari,bench]"
    python -m scripts.bench_atari --steps 20000 --repeats 1 --out bench-out
    python -m scripts.bench_atari --steps 20000 --repeats 3 --a3c-variant="--algo a3c" --out bench-out   # against A2C
    python -m scripts.bench_atari --steps 20000 --repeats 2 --a3c-variant= --a3c-variant=--bf16 --out bench-out
    python -m scripts.bench_atari --steps 20000 --repeats 3 --a3c-variant="--algo a3c" \
        --a3c-variant="--algo a3c --env-backend ale-vector" --out bench-out   # the env backends (docs/atari_speed.md)

a3c's steps/s is its summary.json's (from the workers' common first step; start-up excluded, in its own column);
SB3's is its agent steps over the time of model.learn (envs and model built before the clock starts), with torch's
default thread count (a thread per core: SB3 is one process and its CNN uses them; --sb3-threads to set it). Prints a
markdown table; writes OUT/atari.json, .md and .png.
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import shlex
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scripts._common import alternate, markdown_table, run_train, save_results
from scripts.sb3_runner import ALGOS, hyperparameters, sb3_run

FRAME_SKIP = 4  # frames per agent step, for both trainers
AUTO = "auto"
PEER_OF = {"a3c": "a2c", "ppo": "ppo"}  # a3c's objective -> SB3's algorithm with the same loss


def sb3_steps_per_s(algo: str, env_id: str, steps: int, n_envs: int, seed: int, threads: int) -> float:
    # SB3 is one process: by default torch gives it a thread per core, and its CNN's forward and backward use them
    # (2 threads on the 2-core machine: 2,823-3,068 frames/s against 2,339-2,456 with one; 2026-12-03). a3c's
    # workers take one thread each because there is a process per core; SB3 gets the same cores its own way.
    return sb3_run(algo, env_id, seed, steps, threads=threads, n_envs=n_envs)["steps_per_s"]


def peer_algo(env: str, variants: list[list[str]], error: Callable[[str], Any]) -> str:
    """SB3's algorithm for the a3c variants (--sb3-algo auto): A2C for A3C's objective, PPO for PPO's, the objective
    each variant's flags and preset give; ``error`` (a one-line exit 2) where the variants run both."""
    from a3c.spec.errors import UserError
    from a3c.train import parse_config

    objectives = set()
    for flags in variants:
        try:
            objectives.add(parse_config(["--env", env, *flags]).algo)
        except UserError as err:
            error(f"--a3c-variant={shlex.quote(shlex.join(flags))}: {err}")
    if len(objectives) > 1:
        error("the a3c variants run both objectives; give --sb3-algo a2c or ppo, or time each objective on its own")
    return PEER_OF[objectives.pop()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--env", default="ALE/Pong-v5", help="an ALE id")
    parser.add_argument("--steps", type=int, default=20_000, help="agent steps (x4 frames) of each run")
    parser.add_argument("--repeats", type=int, default=1, help="runs per trainer")
    parser.add_argument("--workers", type=int, default=2, help="a3c's --workers")
    parser.add_argument(
        "--sb3-algo",
        choices=(AUTO, *ALGOS),
        default=AUTO,
        help="SB3's algorithm (rl-zoo3's settings); auto: the a3c variants' objective's (ppo for PPO, a2c for A3C)",
    )
    parser.add_argument("--sb3-envs", type=int, default=None, help="SB3's n_envs (default: rl-zoo3's, A2C 16, PPO 8)")
    parser.add_argument(
        "--sb3-threads",
        type=int,
        default=None,
        help="SB3's torch threads (default: torch's own default, a thread per core, as a user runs it)",
    )
    parser.add_argument("--out", type=Path, default=Path("bench-out"), help="folder for the JSON, table and PNG")
    parser.add_argument(
        "--a3c-variant",
        action="append",
        metavar="FLAGS",
        help="an a3c configuration to time, as more flags for a3c.train in one string (--a3c-variant=--bf16); "
        "give it again for another (--a3c-variant= is the plain preset); default: the plain preset alone",
    )
    args = parser.parse_args()
    if args.sb3_threads is None:
        import torch

        args.sb3_threads = torch.get_num_threads()
    variants = [shlex.split(v) for v in (args.a3c_variant or [""])]
    names = [" ".join(v) or "preset" for v in variants]
    if args.sb3_algo == AUTO:
        args.sb3_algo = peer_algo(args.env, variants, parser.error)

    with tempfile.TemporaryDirectory() as tmp:

        def a3c(name: str, extra: list[str]) -> Callable[[int], dict[str, Any]]:
            def trial(r: int) -> dict[str, Any]:
                flags = ["--env", args.env, "--workers", str(args.workers), "--total-steps", str(args.steps), *extra]
                s = run_train([*flags, "--eval-every", "0", "--seed", str(r + 1)], Path(tmp) / f"a3c-{r}-{name}")
                print(f"a3c ({name}) run {r + 1}: {s['steps_per_s'] * FRAME_SKIP:,.0f} frames/s", flush=True)
                return s

            return trial

        def sb3(r: int) -> float:
            sps = sb3_steps_per_s(args.sb3_algo, args.env, args.steps, args.sb3_envs, r + 1, args.sb3_threads)
            print(f"SB3 run {r + 1}: {sps * FRAME_SKIP:,.0f} frames/s", flush=True)
            return sps

        # each round: every a3c variant, then SB3 (alternating, as the load drifts)
        trials: dict[str, Callable[[int], Any]] = {
            name: a3c(name, extra) for name, extra in zip(names, variants, strict=True)
        }
        runs = alternate(args.repeats, {**trials, " sb3": sb3})
    a3c_sps = {name: [s["steps_per_s"] for s in runs[name]] for name in names}
    a3c_startup = {name: [s["startup_s"] or 0.0 for s in runs[name]] for name in names}
    sb3_sps: list[float] = runs[" sb3"]

    sb3 = statistics.median(sb3_sps) * FRAME_SKIP
    sb3_envs = args.sb3_envs or hyperparameters(args.sb3_algo, args.env)["n_envs"]
    medians = {name: statistics.median(v) * FRAME_SKIP for name, v in a3c_sps.items()}
    rows = [
        [
            f"a3c ({args.workers} workers, atari preset{'' if name == 'preset' else ' ' + name})",
            medians[name],
            ", ".join(f"{v * FRAME_SKIP:,.0f}" for v in a3c_sps[name]),
            f"{medians[name] / sb3:.2f}x",
        ]
        for name in names
    ]
    rows.append(
        [
            f"SB3 {args.sb3_algo.upper()} ({sb3_envs} envs, {args.sb3_threads} torch threads)",
            sb3,
            ", ".join(f"{v * FRAME_SKIP:,.0f}" for v in sb3_sps),
            "",
        ]
    )
    table = markdown_table(["trainer", "median frames/s", "runs", "a3c / SB3"], rows)
    table += f"\n\n{args.env}, {args.steps:,} agent steps per run, {args.repeats} run(s) of each, alternating"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.6 * (len(names) + 1) + 2, 3.5), dpi=100)
    ax.bar([f"a3c\n{name}" for name in names] + [f"SB3 {args.sb3_algo.upper()}"], [*medians.values(), sb3])
    ax.set_ylabel("frames/s (agent steps x 4)")
    ax.set_title(f"{args.env}: training throughput, same machine")
    fig.tight_layout()
    data = {
        "env": args.env,
        "steps": args.steps,
        "variants": dict(zip(names, variants, strict=True)),
        "a3c_steps_per_s": a3c_sps,
        "a3c_startup_s": a3c_startup,
        "sb3_steps_per_s": sb3_sps,
        "sb3_threads": args.sb3_threads,
        "sb3_algo": args.sb3_algo,
        "ratio": {name: medians[name] / sb3 for name in names},
    }
    save_results(args.out, "atari", data, table, fig)


if __name__ == "__main__":
    main()
