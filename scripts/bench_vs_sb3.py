"""a3c against Stable-Baselines3's A2C on CartPole-v1, on the same machine, runs alternating (a3c, SB3, a3c, ...):
throughput (env steps/s) and wall time to a 100-episode mean return >= 475, over several seeds each.
SB3 uses rl-zoo3's settings for A2C on CartPole-v1 (8 envs, ent_coef 0.0, SB3's other defaults); a3c its defaults.

    pip install -e ".[bench]"
    python scripts/bench_vs_sb3.py --seeds 1 2 3 --workers 2 --out bench-out

Prints markdown tables; writes OUT/vs_sb3.json, .md and .png.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, run_train, save_results  # noqa: E402

THRESHOLD = 475.0


def sb3_run(seed: int, max_steps: int, stop_when_solved: bool) -> dict:
    """Train SB3 A2C (rl-zoo3 CartPole-v1 settings); returns steps/s and the time/step at which the 100-episode
    mean of the finished episodes first reached 475 (SB3's Monitor buffer holds the last 100 episodes)."""
    import torch
    from stable_baselines3 import A2C
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)  # SB3 steps its 8 envs in one process; one thread is its fastest on a small MLP

    class SolveWatch(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.solved_at_step: int | None = None
            self.solved_at_s: float | None = None

        def _on_step(self) -> bool:
            buf = self.model.ep_info_buffer
            if self.solved_at_step is None and len(buf) == 100:
                if statistics.fmean(e["r"] for e in buf) >= THRESHOLD:
                    self.solved_at_step = self.num_timesteps
                    self.solved_at_s = time.perf_counter() - start
                    return not stop_when_solved
            return True

    start = time.perf_counter()
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = A2C("MlpPolicy", env, ent_coef=0.0, seed=seed, device="cpu", verbose=0)
    watch = SolveWatch()
    learn_start = time.perf_counter()
    model.learn(total_timesteps=max_steps, callback=watch)
    learn_s = time.perf_counter() - learn_start
    return {
        "steps_per_s": model.num_timesteps / learn_s,
        "solved_at_step": watch.solved_at_step,
        "solved_at_s": watch.solved_at_s,
        "steps": model.num_timesteps,
    }


def a3c_run(seed: int, workers: int, max_steps: int, stop_when_solved: bool, tmp: Path) -> dict:
    args = [
        "--env",
        "CartPole-v1",
        "--workers",
        str(workers),
        "--total-steps",
        str(max_steps),
        "--seed",
        str(seed),
        "--checkpoint-every",
        "0",
    ]
    if stop_when_solved:
        args.append("--stop-when-solved")
    s = run_train(args, tmp / f"a3c-{seed}-{stop_when_solved}-{time.time_ns()}")
    return {
        "steps_per_s": s["steps_per_s"],
        "solved_at_step": s["solved_at_step"],
        "solved_at_s": s["solved_at_s"],
        "steps": s["total_steps"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--throughput-steps", type=int, default=100_000)
    parser.add_argument("--max-steps", type=int, default=500_000, help="step budget for the time-to-solve runs")
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="a3c-vs-sb3-"))
    throughput: dict[str, list[float]] = {"a3c": [], "sb3": []}
    solve: dict[str, list[dict]] = {"a3c": [], "sb3": []}
    try:
        for seed in args.seeds:  # alternate, so that drifts in machine load hit both alike
            throughput["a3c"].append(a3c_run(seed, args.workers, args.throughput_steps, False, tmp)["steps_per_s"])
            throughput["sb3"].append(sb3_run(seed, args.throughput_steps, False)["steps_per_s"])
            solve["a3c"].append({"seed": seed, **a3c_run(seed, args.workers, args.max_steps, True, tmp)})
            solve["sb3"].append({"seed": seed, **sb3_run(seed, args.max_steps, True)})
            print(
                f"seed {seed}: a3c {solve['a3c'][-1]['solved_at_s']} s, sb3 {solve['sb3'][-1]['solved_at_s']} s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    tp = {k: statistics.median(v) for k, v in throughput.items()}
    rows = [[name, tp[name], ", ".join(f"{x:,.0f}" for x in throughput[name])] for name in ("a3c", "sb3")]
    table = "Throughput (env steps/s, median of runs)\n\n" + markdown_table(["trainer", "median", "runs"], rows)
    table += f"\n\na3c / SB3 throughput: {tp['a3c'] / tp['sb3']:.2f}x\n\n"

    def med_time(name: str) -> float | None:
        times = [r["solved_at_s"] for r in solve[name]]
        return None if any(t is None for t in times) else statistics.median(times)

    rows = [
        [
            r["seed"],
            solve["a3c"][i]["solved_at_s"],
            solve["a3c"][i]["solved_at_step"],
            r["solved_at_s"],
            r["solved_at_step"],
        ]
        for i, r in enumerate(solve["sb3"])
    ]
    table += "Wall time to a 100-episode mean >= 475 (s; '-' = not within the step budget)\n\n"
    table += markdown_table(["seed", "a3c s", "a3c steps", "SB3 s", "SB3 steps"], rows)
    ma, ms = med_time("a3c"), med_time("sb3")
    if ma is not None and ms is not None:
        table += f"\n\nmedian time to solve: a3c {ma:.1f} s, SB3 {ms:.1f} s, ratio {ma / ms:.2f}"
    else:
        table += "\n\nnot every seed solved: " + ", ".join(
            f"{k}: {[r['solved_at_s'] for r in v]}" for k, v in solve.items()
        )

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5), dpi=80)
    a.bar(["a3c", "SB3 A2C"], [tp["a3c"], tp["sb3"]], color=["tab:blue", "tab:orange"])
    a.set_ylabel("env steps/s (median)")
    a.set_title("throughput")
    for i, name in enumerate(("a3c", "sb3")):
        times = [r["solved_at_s"] for r in solve[name] if r["solved_at_s"] is not None]
        b.scatter([i] * len(times), times, color=["tab:blue", "tab:orange"][i])
    b.set_xticks([0, 1], ["a3c", "SB3 A2C"])
    b.set_ylabel("seconds to mean100 >= 475")
    b.set_title("time to solve, per seed")
    fig.tight_layout()
    save_results(
        args.out,
        "vs_sb3",
        {"throughput": throughput, "solve": solve, "median_throughput": tp, "median_solve_s": {"a3c": ma, "sb3": ms}},
        table,
        fig,
    )


if __name__ == "__main__":
    main()
