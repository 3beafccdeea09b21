"""scripts/bench_atari_learning.py's plot: several a3c runs on one figure, each labelled from its config.json, with
the training mean and the frames at which it first reached each threshold computed from its episodes.csv."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

import scripts.bench_atari_learning as bench  # (the repository's root is on pytest's pythonpath: pyproject.toml)


def _fake_run(folder: Path, seed: int, env_kwargs: dict, returns: list[float], algo: str = "a3c") -> Path:
    """A run directory as a3c.train leaves it, as far as the plot reads: config.json and episodes.csv, one game
    every 10,000 agent steps (40,000 frames), one a second."""
    folder.mkdir(parents=True)
    config = {"env": "ALE/Pong-v5", "workers": 2, "seed": seed, "env_kwargs": env_kwargs, "algo": algo}
    (folder / "config.json").write_text(json.dumps(config))
    with (folder / "episodes.csv").open("w", newline="") as f:
        rows = csv.writer(f)
        rows.writerow(["worker", "index", "return", "length", "global_step", "wall_time"])
        for i, score in enumerate(returns):
            rows.writerow([i % 2, i // 2, score, 1000, (i + 1) * 10_000, float(i + 1)])
    return folder


def test_plot_draws_every_a3c_run_labelled_from_its_config(tmp_path):
    climbing = [-21.0] * 100 + [19.0] * 100  # the 100-game mean reaches 18 at the 198th game
    sticky = _fake_run(tmp_path / "s1", 1, {}, [-21.0] * 150 + [5.0] * 50)
    plain = _fake_run(tmp_path / "n1", 1, {"repeat_action_probability": 0.0}, climbing)
    twin = _fake_run(tmp_path / "n1-again", 1, {"repeat_action_probability": 0.0}, climbing)
    ppo = _fake_run(tmp_path / "p1", 1, {}, climbing, algo="ppo")  # the preset's objective since PPO's table
    out = tmp_path / "out"
    bench.plot(out, "ALE/Pong-v5", [sticky, plain, twin, ppo, tmp_path / "missing"], tmp_path / "no-sb3")
    data = json.loads((out / "atari_learning.json").read_text())
    labels = list(data["summaries"])
    assert labels == [
        "a3c (2 workers, seed 1)",
        "a3c (2 workers, seed 1, repeat_action_probability=0.0)",
        "a3c (2 workers, seed 1, repeat_action_probability=0.0, n1-again)",
        "a3c PPO (2 workers, seed 1)",
    ]
    assert (out / "atari_learning.png").stat().st_size > 0 and "| a3c (2 workers, seed 1) |" in (
        out / "atari_learning.md"
    ).read_text()
    s = data["summaries"][labels[0]]
    assert s["final_mean"] == pytest.approx((50 * -21.0 + 50 * 5.0) / 100)
    assert s["reached"]["18"] is None and s["frames"] == 200 * 40_000
    n = data["summaries"][labels[1]]
    # the mean of the last 100 games first reaches 18 once 98 of them are 19s: (98 * 19 - 2 * 21) / 100 = 18.2
    assert n["reached"]["18"] == {"frames": 198 * 40_000, "wall_s": 198.0}
    assert n["final_mean"] == 19.0 and n["best_mean"] == 19.0


def test_plot_without_any_run_says_so(tmp_path):
    with pytest.raises(SystemExit, match="no episodes.csv in"):
        bench.plot(tmp_path / "out", "ALE/Pong-v5", [tmp_path / "a"], tmp_path / "b")


def test_flags_after_a_double_dash_go_to_a3c_train(monkeypatch):
    """`a3c --frames N --out OUT -- FLAGS`: the FLAGS reach a3c.train whole, after this script's own options (a
    trailing argparse positional got nothing once options came between: the flags were refused)."""
    seen = {}
    monkeypatch.setattr(bench, "run_a3c", lambda game, frames, run_dir, extra: seen.update(f=frames, x=extra) or 0)
    flags = ["--seed", "3", "--env-kwargs", "repeat_action_probability=0"]
    monkeypatch.setattr(sys, "argv", ["bench_atari_learning.py", "a3c", "--frames", "400", "--out", "o", "--", *flags])
    with pytest.raises(SystemExit) as stop:
        bench.main()
    assert stop.value.code == 0 and seen == {"f": 400, "x": flags}
    assert bench.split_a3c_flags(["plot", "--out", "o"]) == (["plot", "--out", "o"], [])
