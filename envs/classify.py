"""`envs/Classify-v0`: the tutorial's classification task as a contextual bandit, and the numpy generator of its data
set (in the spirit of scikit-learn's make_classification, written from its description, no scikit-learn needed).

The env's data set: 10,000 samples, 8 features (4 informative, 2 redundant, 2 noise), 2 classes, one Gaussian cluster
per class by default. ``clusters_per_class=2`` (scikit-learn's default) puts each class on two random corners of the
hypercube, often not linearly separable: measured with the trainer's defaults and one worker, a bandit learner reaches
about 60% accuracy after 1,600 samples there, against about 84% with one cluster per class.

Each step shows one sample of a fixed labelled data set; the action is the predicted class; the reward is 1 when the
prediction is right, else 0. The data set depends only on ``data_seed``, so every worker of a run (and every run)
classifies the same data; ``reset(seed=...)`` seeds which samples are drawn. An episode is ``episode_length`` samples
and ends *truncated*, not terminated: the task has no end, the episode is only a unit of reporting, so the learner
bootstraps from the value of the next sample. A ``latency`` > 0 puts the env behind `envs.slow.SlowEnv` (slow data).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from envs.slow import SlowEnv


def make_classification_data(
    n_samples: int = 10_000,
    n_features: int = 8,
    n_informative: int = 4,
    n_redundant: int = 2,
    n_classes: int = 2,
    n_clusters_per_class: int = 2,
    class_sep: float = 1.0,
    flip_y: float = 0.01,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """A labelled data set: X float32 [n_samples, n_features], y int64 [n_samples] in [0, n_classes).

    Each class is a mixture of ``n_clusters_per_class`` Gaussian clusters in an ``n_informative``-dimensional space,
    centred on distinct corners of a hypercube of side ``2 * class_sep`` and each stretched by its own random linear
    map; ``n_redundant`` features are random linear combinations of the informative ones, the rest are N(0, 1) noise;
    a fraction ``flip_y`` of the labels is replaced by a random class; rows and columns are shuffled.
    """
    n_clusters = n_classes * n_clusters_per_class
    if n_informative + n_redundant > n_features:
        raise ValueError(f"n_informative + n_redundant ({n_informative + n_redundant}) > n_features ({n_features})")
    if n_clusters > 2**n_informative:
        raise ValueError(f"{n_clusters} clusters need n_informative >= {int(np.ceil(np.log2(n_clusters)))}")
    rng = np.random.default_rng(seed)
    corners = rng.choice(2**n_informative, size=n_clusters, replace=False)
    bits = (corners[:, None] >> np.arange(n_informative)[None, :]) & 1  # [n_clusters, n_informative] of 0/1
    centroids = (2.0 * bits - 1.0) * class_sep
    cluster = np.arange(n_samples) % n_clusters  # as even a split as n_samples allows
    y = cluster % n_classes
    informative = rng.standard_normal((n_samples, n_informative))
    for c in range(n_clusters):
        rows = cluster == c
        stretch = rng.uniform(-1.0, 1.0, size=(n_informative, n_informative))
        informative[rows] = informative[rows] @ stretch + centroids[c]
    redundant = informative @ rng.uniform(-1.0, 1.0, size=(n_informative, n_redundant))
    noise = rng.standard_normal((n_samples, n_features - n_informative - n_redundant))
    X = np.concatenate([informative, redundant, noise], axis=1)
    flip = rng.random(n_samples) < flip_y
    y = np.where(flip, rng.integers(0, n_classes, size=n_samples), y)
    rows, cols = rng.permutation(n_samples), rng.permutation(n_features)
    return X[rows][:, cols].astype(np.float32), y[rows].astype(np.int64)


class ClassifyEnv(gym.Env):
    """One sample per step; action = predicted class; reward 1.0 if right, else 0.0; truncated after
    ``episode_length`` steps. ``info["label"]`` is the true class of the sample just classified.

    Keyword arguments (also through --env-kwargs): episode_length, n_samples, n_features, data_seed (the data set),
    clusters_per_class, class_sep; and, via make_classify, latency, reset_latency, jitter, mode (see SlowEnv)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        episode_length: int = 20,
        n_samples: int = 10_000,
        n_features: int = 8,
        data_seed: int = 0,
        clusters_per_class: int = 1,
        class_sep: float = 1.0,
    ) -> None:
        for name, value, low in (("episode_length", episode_length, 1), ("n_samples", n_samples, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low} (got {value!r}); e.g. --env-kwargs {name}=20")
        if isinstance(n_features, bool) or not isinstance(n_features, int) or n_features < 6:
            raise ValueError(f"n_features must be an integer >= 6 (got {n_features!r}); e.g. --env-kwargs n_features=8")
        self.episode_length = episode_length
        if clusters_per_class not in (1, 2, 3, 4) or isinstance(clusters_per_class, bool):
            raise ValueError(f"clusters_per_class must be 1, 2, 3 or 4 (got {clusters_per_class!r})")
        self.X, self.y = make_classification_data(
            n_samples=n_samples,
            n_features=n_features,
            n_clusters_per_class=clusters_per_class,
            class_sep=float(class_sep),
            seed=data_seed,
        )
        bound = float(np.ceil(np.abs(self.X).max()))  # finite bounds that hold every sample of the data set
        self.observation_space = gym.spaces.Box(-bound, bound, shape=(n_features,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._index = 0
        self._t = 0

    def _next_obs(self) -> np.ndarray:
        self._index = int(self.np_random.integers(len(self.y)))
        return self.X[self._index].copy()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._t = 0
        return self._next_obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        label = int(self.y[self._index])
        reward = 1.0 if int(action) == label else 0.0
        self._t += 1
        return self._next_obs(), reward, False, self._t >= self.episode_length, {"label": label}


def make_classify(
    episode_length: int = 20,
    latency: float = 0.0,
    reset_latency: float | None = None,
    jitter: float = 0.0,
    mode: str = "sleep",
    n_samples: int = 10_000,
    n_features: int = 8,
    data_seed: int = 0,
    clusters_per_class: int = 1,
    class_sep: float = 1.0,
) -> gym.Env:
    """Entry point of envs/Classify-v0: the bandit, behind SlowEnv when any latency is set."""
    env: gym.Env = ClassifyEnv(episode_length, n_samples, n_features, data_seed, clusters_per_class, class_sep)
    if latency > 0 or (reset_latency or 0) > 0 or jitter > 0:
        env = SlowEnv(env, latency, reset_latency, jitter, mode)
    return env
