"""The one rolling mean (scripts/benchmark/curves.py), held to a plain computation; the downsampling keeps the ends."""

import csv
import random

import pytest

from scripts.benchmark import curves
from scripts.benchmark.curves import Episode


def episodes(n, seed=0):
    rng = random.Random(seed)
    return [Episode(10 * i, 0.5 * i, rng.uniform(-100, 100)) for i in range(1, n + 1)]


def test_the_rolling_mean_is_the_mean_of_the_last_100_returns_or_of_all_before():
    eps = episodes(250)
    points = curves.rolling_mean(eps)
    for i, p in enumerate(points):
        window = [e.ret for e in eps[max(0, i - 99) : i + 1]]
        assert abs(p.mean - sum(window) / len(window)) < 1e-9
        assert (p.step, p.wall_s) == (eps[i].step, eps[i].wall_s)
    assert curves.final_mean(eps) == pytest.approx(points[-1].mean)
    assert curves.best_mean(eps) == max(p.mean for p in points[99:])
    assert curves.best_mean(eps[:99]) is None and curves.final_mean([]) is None


def test_first_reach_needs_a_full_window():
    eps = [Episode(i, float(i), 500.0) for i in range(1, 151)]
    assert curves.first_reach(eps, 475.0) == (100, 100.0)
    assert curves.first_reach(eps, 501.0) is None


def test_downsample_keeps_the_first_and_last_points_and_at_most_n():
    points = curves.rolling_mean(episodes(1234))
    kept = curves.downsample(points, 200)
    assert len(kept) == 200 and kept[0] == points[0] and kept[-1] == points[-1]
    assert [p.step for p in kept] == sorted(p.step for p in kept)
    assert curves.downsample(points[:50], 200) == points[:50]


def test_read_episodes_orders_by_step(tmp_path):
    with open(tmp_path / "episodes.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["worker", "index", "return", "global_step", "wall_time"])
        out.writerows([[1, 0, 3.0, 30, 0.3], [0, 0, 1.0, 10, 0.1], [0, 1, 2.0, 20, 0.2]])
    assert curves.read_episodes(tmp_path) == [Episode(10, 0.1, 1.0), Episode(20, 0.2, 2.0), Episode(30, 0.3, 3.0)]
    assert curves.read_episodes(tmp_path / "nothing") == []
