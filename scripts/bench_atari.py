"""Atari throughput: frames/s of a3c against Stable-Baselines3's A2C on ALE/Pong-v5, same machine, same run, runs
alternating (a3c, SB3, a3c, ...). Both train from pixels with the standard preprocessing: 84x84 grey, frame skip 4
(one agent step = 4 frames), 4 stacked frames, reward sign; a3c with its `atari` preset (Nature CNN shared by actor
and critic, RMSprop, 20-step rollouts), SB3 with rl-zoo3's A2C Atari settings (CnnPolicy, 16 envs, ent_coef 0.01,
vf_coef 0.25, RMSpropTFLike). Learning is not measured here (a game needs ~10M frames): this is the cost per frame.

    pip install -e ".[atari,bench]"
    python scripts/bench_atari.py --steps 20000 --repeats 1 --out bench-out
    python scripts/bench_atari.py --steps 20000 --repeats 2 --a3c-variant= --a3c-variant=--bf16 --out bench-out

a3c's steps/s is its summary.json's (from the workers' common first step; start-up excluded, in its own column);
SB3's is its agent steps over the time of model.learn (envs and model built before the clock starts), with torch's
default thread count (a thread per core: SB3 is one process and its CNN uses them; --sb3-threads to set it). Prints a
markdown table; writes OUT/atari.json, .md and .png.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, run_train, save_results  # noqa: E402

FRAME_SKIP = 4  # frames per agent step, for both trainers


def sb3_atari_a2c(env_id: str, n_envs: int, seed: int) -> tuple[Any, Any]:
    """(env, model): SB3's A2C with rl-zoo3's Atari settings (hyperparams/a2c.yml, `atari`) on make_atari_env's
    preprocessing + 4 stacked frames; the rest A2C's defaults (lr 7e-4, 5 steps, gamma 0.99)."""
    import ale_py
    import gymnasium
    from stable_baselines3 import A2C
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike
    from stable_baselines3.common.vec_env import VecFrameStack

    gymnasium.register_envs(ale_py)  # the ALE/ ids (a3c registers them itself)
    # AtariWrapper skips frames itself: the ALE env must not skip too (frameskip=1), as a3c's make_env does
    env = VecFrameStack(make_atari_env(env_id, n_envs=n_envs, seed=seed, env_kwargs={"frameskip": 1}), n_stack=4)
    model = A2C(
        "CnnPolicy",
        env,
        ent_coef=0.01,
        vf_coef=0.25,
        policy_kwargs={"optimizer_class": RMSpropTFLike, "optimizer_kwargs": {"eps": 1e-5}},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    return env, model


def sb3_steps_per_s(env_id: str, steps: int, n_envs: int, seed: int, threads: int) -> float:
    import torch

    # SB3 is one process: by default torch gives it a thread per core, and its CNN's forward and backward use them
    # (2 threads on the 2-core machine: 2,823-3,068 frames/s against 2,339-2,456 with one; 2026-12-03). a3c's
    # workers take one thread each because there is a process per core; SB3 gets the same cores its own way.
    torch.set_num_threads(threads)
    env, model = sb3_atari_a2c(env_id, n_envs, seed)
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    elapsed = time.perf_counter() - start
    env.close()
    return model.num_timesteps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--env", default="ALE/Pong-v5", help="an ALE id")
    parser.add_argument("--steps", type=int, default=20_000, help="agent steps (x4 frames) of each run")
    parser.add_argument("--repeats", type=int, default=1, help="runs per trainer")
    parser.add_argument("--workers", type=int, default=2, help="a3c's --workers")
    parser.add_argument("--sb3-envs", type=int, default=16, help="SB3's n_envs (rl-zoo3: 16)")
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

    a3c_sps: dict[str, list[float]] = {name: [] for name in names}
    a3c_startup: dict[str, list[float]] = {name: [] for name in names}
    sb3_sps: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):  # each repeat: every a3c variant, then SB3 (alternating, as the load drifts)
            for i, (name, extra) in enumerate(zip(names, variants, strict=True)):
                flags = ["--env", args.env, "--workers", str(args.workers), "--total-steps", str(args.steps), *extra]
                s = run_train([*flags, "--eval-every", "0", "--seed", str(r + 1)], Path(tmp) / f"a3c-{r}-{i}")
                a3c_sps[name].append(s["steps_per_s"])
                a3c_startup[name].append(s["startup_s"] or 0.0)
                print(f"a3c ({name}) run {r + 1}: {s['steps_per_s'] * FRAME_SKIP:,.0f} frames/s", flush=True)
            sb3_sps.append(sb3_steps_per_s(args.env, args.steps, args.sb3_envs, r + 1, args.sb3_threads))
            print(f"SB3 run {r + 1}: {sb3_sps[-1] * FRAME_SKIP:,.0f} frames/s", flush=True)

    sb3 = statistics.median(sb3_sps) * FRAME_SKIP
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
            f"SB3 A2C ({args.sb3_envs} envs, {args.sb3_threads} torch threads)",
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
    ax.bar([f"a3c\n{name}" for name in names] + ["SB3 A2C"], [*medians.values(), sb3])
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
        "ratio": {name: medians[name] / sb3 for name in names},
    }
    save_results(args.out, "atari", data, table, fig)


if __name__ == "__main__":
    main()
