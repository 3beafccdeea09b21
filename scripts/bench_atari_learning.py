"""Atari learning curves: a3c against Stable-Baselines3's A2C with rl-zoo3's Atari settings, the same game
(ALE/Pong-v5 by default: sticky actions 0.25, as both trainers make it), the same machine, return against frames and
against wall time on one figure. a3c runs the game's preset (PPO's table; `-- --algo a3c` for A3C's, the objective
SB3's A2C shares; the labels say which). Long runs, each resumable: start a trainer, stop it (Ctrl-C, a session's
end), run the same command again and it goes on from its last checkpoint.

    pip install -e ".[atari,bench]"
    python -m scripts.bench_atari_learning a3c --frames 10000000 --out runs/atari-pong -- --algo a3c   # ~1-3 h
    python -m scripts.bench_atari_learning a3c --out runs/pong-s2 -- --algo a3c --seed 2 \
        --env-kwargs repeat_action_probability=0
    python -m scripts.bench_atari_learning sb3 --frames 2000000 --out runs/atari-pong
    python -m scripts.bench_atari_learning plot --out runs/atari-pong [--a3c-run RUN ...]   # table, JSON, PNG

`a3c` runs `python -m a3c.train --env GAME --total-steps FRAMES/4 --run-dir OUT/a3c` (or `--resume OUT/a3c`): its
episodes.csv holds each game's return with its global step and wall time. `sb3` trains A2C("CnnPolicy") on
make_atari_env (16 envs, AtariWrapper: noop starts, frame skip 4 with max-pooling, 84x84 grey, a lost life ends the
learner's episode, reward sign) + VecFrameStack(4), with ent_coef 0.01, vf_coef 0.25 and RMSpropTFLike(eps=1e-5)
(rl-zoo3's hyperparams/a2c.yml, `atari`), the rest A2C's defaults (lr 7e-4, 5 steps, gamma 0.99); it writes each
finished game (Monitor's whole-game return) to OUT/sb3/episodes.csv and saves the model and its clock every
--save-every-s seconds. `plot` reads both (several a3c runs with ``--a3c-run RUN ...``: seeds, sticky actions on and
off, each labelled from its config.json) and writes OUT/atari_learning.json, .md and .png: the 100-game training
mean at each million frames, the frames and the wall time at which it first reached each of -15, 0, 10 and 18.
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from scripts._common import markdown_table, save_results
from scripts.benchmark.curves import Episode, rolling_mean
from scripts.sb3_runner import build

FRAME_SKIP = 4  # emulator frames per agent step, for both trainers
WINDOW = 100  # games in the training mean
THRESHOLDS = (-15.0, 0.0, 10.0, 18.0)
EPISODE_FIELDS = ("agent_steps", "frames", "wall_s", "return", "length")


def run_a3c(game: str, frames: int, run_dir: Path, extra: list[str]) -> int:
    """Train (or go on training) a3c in RUN_DIR with the game's preset; returns the trainer's exit code."""
    if (run_dir / "checkpoints" / "latest.pt").is_file():
        cmd = [sys.executable, "-m", "a3c.train", "--resume", str(run_dir), *extra]
    else:
        cmd = [sys.executable, "-m", "a3c.train", "--env", game, "--total-steps", str(frames // FRAME_SKIP)]
        cmd += ["--run-dir", str(run_dir), *extra]
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd).returncode


def run_sb3(game: str, frames: int, out: Path, seed: int, save_every_s: float, threads: int | None) -> None:
    """Train (or go on training) SB3's A2C with rl-zoo3's Atari settings, recording every finished game."""
    import torch
    from stable_baselines3 import A2C
    from stable_baselines3.common.callbacks import BaseCallback

    if threads is not None:  # (else torch's default: a thread per core, as bench_atari.py's SB3 runs)
        torch.set_num_threads(threads)
    out.mkdir(parents=True, exist_ok=True)
    model_path, clock_path, episodes_path = out / "model.zip", out / "clock.json", out / "episodes.csv"
    env, model = build("a2c", game, seed, n_envs=16)
    wall_before = 0.0
    if model_path.is_file() and clock_path.is_file():
        model = A2C.load(model_path, env=env, device="cpu")  # (the fresh model above: only its env is kept)
        wall_before = float(json.loads(clock_path.read_text())["wall_s"])
        _drop_games_after(episodes_path, model.num_timesteps)
        print(f"sb3: resuming at {model.num_timesteps:,} agent steps, {wall_before:,.0f} s", flush=True)
    else:
        with episodes_path.open("w", newline="") as f:
            csv.writer(f).writerow(EPISODE_FIELDS)
    start = time.monotonic()

    def save() -> None:
        model.save(model_path)  # (the model first: a clock never runs ahead of the model it goes with)
        clock = {"wall_s": wall_before + time.monotonic() - start, "agent_steps": model.num_timesteps}
        clock_path.write_text(json.dumps(clock) + "\n")

    class Record(BaseCallback):
        """Appends each finished game (Monitor's info["episode"]: the whole game, all lives) to episodes.csv, and
        saves the model every ``save_every_s`` seconds."""

        def __init__(self) -> None:
            super().__init__()
            self.file = episodes_path.open("a", newline="")
            self.rows = csv.writer(self.file)
            self.saved_at = time.monotonic()

        def _on_step(self) -> bool:
            steps = self.num_timesteps
            for info in self.locals["infos"]:
                game = info.get("episode")
                if game is not None:
                    wall = wall_before + time.monotonic() - start
                    self.rows.writerow([steps, steps * FRAME_SKIP, f"{wall:.1f}", game["r"], game["l"]])
                    self.file.flush()
            if time.monotonic() - self.saved_at >= save_every_s:
                save()
                self.saved_at = time.monotonic()
            return True

        def _on_training_end(self) -> None:
            self.file.close()

    left = frames // FRAME_SKIP - model.num_timesteps
    # SIGTERM (a session's end, `kill`) saves as Ctrl-C does: a background job started by a shell ignores SIGINT
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    stopped = False
    if left > 0:
        try:
            model.learn(total_timesteps=left, callback=Record(), reset_num_timesteps=False)
        except KeyboardInterrupt:
            stopped = True
        finally:
            save()
    env.close()
    how = "stopped; the same command goes on from here" if stopped else "done"
    print(f"sb3: {model.num_timesteps:,} agent steps, {how}; {out}", flush=True)


def _drop_games_after(episodes_path: Path, agent_steps: int) -> None:
    """Keep the games recorded up to the saved model's step: those after it were played by a model that is gone
    (the process stopped between two saves), and the resumed run plays that stretch again."""
    with episodes_path.open(newline="") as f:
        rows = list(csv.reader(f))
    kept = [rows[0], *(r for r in rows[1:] if int(float(r[0])) <= agent_steps)]
    if len(kept) < len(rows):
        with episodes_path.open("w", newline="") as f:
            csv.writer(f).writerows(kept)
        print(f"sb3: {len(rows) - len(kept)} games after the saved step {agent_steps:,} dropped", flush=True)


def a3c_episodes(run_dir: Path) -> list[dict[str, float]]:
    """a3c's games in the order of the global step: agent steps, frames, wall time (s), return."""
    rows = []
    with (run_dir / "episodes.csv").open() as f:
        for row in csv.DictReader(f):
            step, wall, score = float(row["global_step"]), float(row["wall_time"]), float(row["return"])
            rows.append({"agent_steps": step, "frames": step * FRAME_SKIP, "wall_s": wall, "return": score})
    return sorted(rows, key=lambda r: r["agent_steps"])


def sb3_episodes(out: Path) -> list[dict[str, float]]:
    with (out / "episodes.csv").open() as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def rolling(episodes: list[dict[str, float]]) -> list[tuple[float, float, float]]:
    """(frames, wall s, mean of the last WINDOW returns) after each game (the first games: the mean of those so far):
    the benchmarks' one rolling mean (scripts/benchmark/curves.py), by frames."""
    games = [Episode(int(e["frames"]), e["wall_s"], e["return"]) for e in episodes]
    return [(float(p.step), p.wall_s, p.mean) for p in rolling_mean(games, WINDOW)]


def summarize(points: list[tuple[float, float, float]]) -> dict[str, Any]:
    """The curve's last point, its best mean, its mean at each million frames and where it first reached each
    threshold (None: not within the run)."""
    at_million: dict[str, float] = {}
    for frames, _, mean in points:
        at_million[f"{int(frames // 1_000_000) + 1}M"] = mean  # "@3M": the last mean before 3M frames
    reached: dict[str, dict[str, float] | None] = {}
    for threshold in THRESHOLDS:
        hit = next(((f, w) for f, w, m in points if m >= threshold), None)
        reached[f"{threshold:g}"] = None if hit is None else {"frames": hit[0], "wall_s": hit[1]}
    return {
        "frames": points[-1][0],
        "wall_s": points[-1][1],
        "final_mean": points[-1][2],
        "best_mean": max(m for _, _, m in points),
        "at_million": at_million,
        "reached": reached,
    }


def a3c_label(run_dir: Path) -> str:
    """A run's legend and table label from its config.json: the objective where it is not A3C's, workers, seed, and
    the env's keyword arguments (sticky actions switched off show as repeat_action_probability=0.0)."""
    config_file = run_dir / "config.json"
    config = json.loads(config_file.read_text()) if config_file.is_file() else {}
    parts = [f"{config.get('workers', '?')} workers", f"seed {config.get('seed', '?')}"]
    parts += [f"{key}={value}" for key, value in sorted((config.get("env_kwargs") or {}).items())]
    objective = "" if config.get("algo", "a3c") == "a3c" else f" {str(config['algo']).upper()}"
    return f"a3c{objective} ({', '.join(parts)})"


def plot(out: Path, game: str, a3c_runs: list[Path], sb3_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = {}
    for a3c_run in a3c_runs:
        if (a3c_run / "episodes.csv").is_file():
            label = a3c_label(a3c_run)
            if label in curves:  # two runs of the same settings: told apart by their folders
                label = f"{label[:-1]}, {a3c_run.name})"
            curves[label] = rolling(a3c_episodes(a3c_run))
    if (sb3_dir / "episodes.csv").is_file():
        curves["SB3 A2C (rl-zoo3, 16 envs)"] = rolling(sb3_episodes(sb3_dir))
    curves = {label: points for label, points in curves.items() if points}  # (a run with no finished game yet)
    if not curves:
        where = ", ".join(str(run) for run in [*a3c_runs, sb3_dir])
        raise SystemExit(f"no episodes.csv in {where}: run `a3c` or `sb3` first")
    fig, (by_frames, by_time) = plt.subplots(1, 2, figsize=(11, 4), dpi=100, sharey=True)
    for label, points in curves.items():
        by_frames.plot([p[0] / 1e6 for p in points], [p[2] for p in points], label=label)
        by_time.plot([p[1] / 60 for p in points], [p[2] for p in points], label=label)
    by_frames.set_xlabel("frames (millions; agent steps x 4)")
    by_time.set_xlabel("wall time (minutes)")
    by_frames.set_ylabel(f"training mean of the last {WINDOW} games")
    for ax in (by_frames, by_time):
        ax.axhline(18, color="grey", lw=0.8, ls="--")
        ax.grid(alpha=0.3)
    # (lower right of the wall-time panel: empty once every curve has left the floor, and the frames panel stays clear)
    by_time.legend(loc="lower right", fontsize=7)
    fig.suptitle(f"{game}: return against frames and wall time, same machine")
    fig.tight_layout()

    summaries = {label: summarize(points) for label, points in curves.items()}
    millions = sorted({k for s in summaries.values() for k in s["at_million"]}, key=lambda k: int(k[:-1]))
    headers = ["trainer", "frames", "wall (min)", *[f"mean @{k}" for k in millions]]
    headers += [f"frames to {t:g}" for t in THRESHOLDS]
    rows = []
    for label, s in summaries.items():
        row: list[Any] = [label, f"{s['frames'] / 1e6:.1f}M", s["wall_s"] / 60]
        row += [s["at_million"].get(k) for k in millions]
        for t in THRESHOLDS:
            hit = s["reached"][f"{t:g}"]
            row.append("-" if hit is None else f"{hit['frames'] / 1e6:.1f}M ({hit['wall_s'] / 60:.0f} min)")
        rows.append(row)
    table = markdown_table(headers, rows)
    data = {"game": game, "a3c_runs": [str(run) for run in a3c_runs], "sb3_dir": str(sb3_dir), "summaries": summaries}
    save_results(out, "atari_learning", data, table, fig)


def split_a3c_flags(argv: list[str]) -> tuple[list[str], list[str]]:
    """This script's arguments and, after a ``--``, the flags passed on to a3c.train (`a3c` only): split by hand,
    since argparse would give a trailing positional nothing once the options come between it and the command."""
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1 :]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="a3c: flags after -- go to a3c.train (e.g. -- --seed 3 --env-kwargs repeat_action_probability=0)",
    )
    parser.add_argument("what", choices=("a3c", "sb3", "plot"), help="train one trainer (resumable), or draw both")
    parser.add_argument("--game", default="ALE/Pong-v5", help="an ALE id")
    parser.add_argument("--frames", type=int, default=10_000_000, help="emulator frames (agent steps x 4)")
    parser.add_argument("--out", type=Path, default=Path("runs/atari-pong"), help="folder for both runs and results")
    parser.add_argument("--seed", type=int, default=1, help="SB3's seed (a3c's: pass --seed after --)")
    parser.add_argument("--save-every-s", type=float, default=600.0, help="SB3's model save interval")
    parser.add_argument("--sb3-threads", type=int, help="SB3's torch threads (default: torch's, one per core)")
    parser.add_argument(
        "--a3c-run", type=Path, nargs="+", help="plot: a3c's run directories, one curve each (default OUT/a3c)"
    )
    own, a3c_flags = split_a3c_flags(sys.argv[1:])
    args = parser.parse_args(own)
    if args.what == "a3c":
        raise SystemExit(run_a3c(args.game, args.frames, args.out / "a3c", a3c_flags))
    if args.what == "sb3":
        run_sb3(args.game, args.frames, args.out / "sb3", args.seed, args.save_every_s, args.sb3_threads)
    else:
        plot(args.out, args.game, args.a3c_run or [args.out / "a3c"], args.out / "sb3")


if __name__ == "__main__":
    main()
