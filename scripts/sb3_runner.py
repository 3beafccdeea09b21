"""Stable-Baselines3's A2C and PPO with rl-zoo3's hyperparameters, written once for every benchmark that runs them
beside a3c (bench_vs_sb3, bench_suite, bench_atari).

``sb3_run("a2c" | "ppo", env_id, seed, steps)`` builds the envs as rl-zoo3 does (``make_vec_env``; VecNormalize where
rl-zoo3 says normalize; ``make_atari_env`` and 4 stacked frames for ALE ids), trains, and returns every finished
episode as it ended (wall seconds since the envs were built, global step, Monitor's raw return) and the steps/s of
``model.learn``. ``stop`` ends the run early (e.g. once solved).

The hyperparameters (``ZOO``) are DLR-RM/rl-baselines3-zoo's hyperparams/a2c.yml and ppo.yml: ``normalize``:
VecNormalize with its defaults (observations and rewards, clipped at 10, gamma of the agent); ``lr_linear`` /
``clip_linear``: the learning rate / PPO's clip range falling linearly from this value to 0 over the run (rl-zoo3's
lin_X). An env with no entry of its own takes SB3's defaults (rl-zoo3's ``mujoco-defaults``: VecNormalize, one env).
The new gymnasium versions take the old ids' entries (LunarLander-v3 rl-zoo3's LunarLander-v2, MuJoCo -v5 its -v3).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from scripts._common import Episodes

ALGOS = ("a2c", "ppo")

# rl-zoo3's A2C with gSDE (Pendulum, LunarLanderContinuous): RMSprop, lin_7e-4, gSDE from log-std -2
_SDE_A2C: dict[str, Any] = {
    "normalize": True,
    "ent_coef": 0.0,
    "max_grad_norm": 0.5,
    "n_steps": 8,
    "gae_lambda": 0.9,
    "vf_coef": 0.4,
    "use_rms_prop": True,
    "normalize_advantage": False,
    "lr_linear": 7e-4,
    "use_sde": True,
    "policy_kwargs": {"log_std_init": -2.0, "ortho_init": False},
}
_MUJOCO_DEFAULTS: dict[str, Any] = {"n_envs": 1, "normalize": True}
_MUJOCO_PPO_NET: dict[str, Any] = {
    "log_std_init": -2.0,
    "ortho_init": False,
    "activation_fn": "relu",
    "net_arch": {"pi": [256, 256], "vf": [256, 256]},
}

ZOO: dict[str, dict[str, dict[str, Any]]] = {
    "a2c": {
        "CartPole-v1": {"n_envs": 8, "ent_coef": 0.0},
        "Acrobot-v1": {"n_envs": 16, "ent_coef": 0.0, "normalize": True},
        "MountainCar-v0": {"n_envs": 16, "ent_coef": 0.0, "normalize": True},
        "LunarLander-v3": {"n_envs": 8, "gamma": 0.995, "n_steps": 5, "lr_linear": 0.00083, "ent_coef": 0.00001},
        "Pendulum-v1": {**_SDE_A2C, "n_envs": 8, "gamma": 0.9},
        "MountainCarContinuous-v0": {
            "n_envs": 4,
            "normalize": True,
            "n_steps": 100,
            "ent_coef": 0.0,
            "use_sde": True,
            "sde_sample_freq": 16,
            "policy_kwargs": {"log_std_init": 0.0, "ortho_init": False},
        },
        "LunarLanderContinuous-v3": {**_SDE_A2C, "n_envs": 4, "gamma": 0.99},
        # the `atari` entry: CnnPolicy, 16 envs, RMSpropTFLike (eps 1e-5); A2C's defaults otherwise (lr 7e-4, 5 steps)
        "atari": {
            "n_envs": 16,
            "ent_coef": 0.01,
            "vf_coef": 0.25,
            "policy_kwargs": {"optimizer_class": "rmsprop_tf_like", "optimizer_kwargs": {"eps": 1e-5}},
        },
    },
    "ppo": {
        "CartPole-v1": {
            "n_envs": 8,
            "n_steps": 32,
            "batch_size": 256,
            "gae_lambda": 0.8,
            "gamma": 0.98,
            "n_epochs": 20,
            "ent_coef": 0.0,
            "lr_linear": 0.001,
            "clip_linear": 0.2,
        },
        "Acrobot-v1": {
            "normalize": True,
            "n_envs": 16,
            "n_steps": 256,
            "gae_lambda": 0.94,
            "gamma": 0.99,
            "n_epochs": 4,
            "ent_coef": 0.0,
        },
        "MountainCar-v0": {
            "normalize": True,
            "n_envs": 16,
            "n_steps": 16,
            "gae_lambda": 0.98,
            "gamma": 0.99,
            "n_epochs": 4,
            "ent_coef": 0.0,
        },
        "LunarLander-v3": {
            "n_envs": 16,
            "n_steps": 1024,
            "batch_size": 64,
            "gae_lambda": 0.98,
            "gamma": 0.999,
            "n_epochs": 4,
            "ent_coef": 0.01,
        },
        "Pendulum-v1": {
            "n_envs": 4,
            "n_steps": 1024,
            "gae_lambda": 0.95,
            "gamma": 0.9,
            "n_epochs": 10,
            "ent_coef": 0.0,
            "learning_rate": 1e-3,
            "clip_range": 0.2,
            "use_sde": True,
            "sde_sample_freq": 4,
        },
        "MountainCarContinuous-v0": {
            "normalize": True,
            "n_envs": 1,
            "batch_size": 256,
            "n_steps": 8,
            "gamma": 0.9999,
            "learning_rate": 7.77e-05,
            "ent_coef": 0.00429,
            "clip_range": 0.1,
            "n_epochs": 10,
            "gae_lambda": 0.9,
            "max_grad_norm": 5.0,
            "vf_coef": 0.19,
            "use_sde": True,
            "policy_kwargs": {"log_std_init": -3.29, "ortho_init": False},
        },
        "LunarLanderContinuous-v3": {
            "n_envs": 16,
            "n_steps": 1024,
            "batch_size": 64,
            "gae_lambda": 0.98,
            "gamma": 0.999,
            "n_epochs": 4,
            "ent_coef": 0.01,
        },
        "HalfCheetah-v5": {
            **_MUJOCO_DEFAULTS,
            "batch_size": 64,
            "n_steps": 512,
            "gamma": 0.98,
            "learning_rate": 2.0633e-05,
            "ent_coef": 0.000401762,
            "clip_range": 0.1,
            "n_epochs": 20,
            "gae_lambda": 0.92,
            "max_grad_norm": 0.8,
            "vf_coef": 0.58096,
            "policy_kwargs": _MUJOCO_PPO_NET,
        },
        "Hopper-v5": {
            **_MUJOCO_DEFAULTS,
            "batch_size": 32,
            "n_steps": 512,
            "gamma": 0.999,
            "learning_rate": 9.80828e-05,
            "ent_coef": 0.00229519,
            "clip_range": 0.2,
            "n_epochs": 5,
            "gae_lambda": 0.99,
            "max_grad_norm": 0.7,
            "vf_coef": 0.835671,
            "policy_kwargs": _MUJOCO_PPO_NET,
        },
        "Walker2d-v5": {
            **_MUJOCO_DEFAULTS,
            "batch_size": 32,
            "n_steps": 512,
            "gamma": 0.99,
            "learning_rate": 5.05041e-05,
            "ent_coef": 0.000585045,
            "clip_range": 0.1,
            "n_epochs": 20,
            "gae_lambda": 0.95,
            "max_grad_norm": 1.0,
            "vf_coef": 0.871923,
            "policy_kwargs": _MUJOCO_PPO_NET,
        },
        "atari": {
            "n_envs": 8,
            "n_steps": 128,
            "n_epochs": 4,
            "batch_size": 256,
            "lr_linear": 2.5e-4,
            "clip_linear": 0.1,
            "vf_coef": 0.5,
            "ent_coef": 0.01,
        },
    },
}


def hyperparameters(algo: str, env_id: str) -> dict[str, Any]:
    """rl-zoo3's settings of ``algo`` for ``env_id`` (a copy): its own entry, the ``atari`` one for an ALE id, else
    the MuJoCo defaults (VecNormalize, one env, SB3's defaults)."""
    if algo not in ALGOS:
        raise ValueError(f"algo {algo!r}: one of {ALGOS}")
    key = "atari" if env_id.startswith("ALE/") else env_id
    entry = ZOO[algo].get(key, _MUJOCO_DEFAULTS)
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in entry.items()}


def _policy_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The names in ZOO's policy_kwargs (kept as plain data) as the objects SB3 takes."""
    import torch
    from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

    named = {"relu": torch.nn.ReLU, "rmsprop_tf_like": RMSpropTFLike}
    out = {k: named.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    if "net_arch" in out and isinstance(out["net_arch"], dict):
        out["net_arch"] = dict(out["net_arch"])
    return out


def make_envs(env_id: str, n_envs: int, seed: int, normalize: bool, gamma: float) -> Any:
    """The vector env rl-zoo3 trains on: make_vec_env (Monitor in each), VecNormalize where ``normalize``; for an ALE
    id make_atari_env's preprocessing (84x84 grey, frame skip 4 by AtariWrapper, so the ALE env skips none) and 4
    stacked frames."""
    from stable_baselines3.common.env_util import make_atari_env, make_vec_env
    from stable_baselines3.common.vec_env import VecFrameStack, VecNormalize

    if env_id.startswith("ALE/"):
        import ale_py
        import gymnasium

        gymnasium.register_envs(ale_py)  # the ALE/ ids (a3c registers them itself)
        return VecFrameStack(make_atari_env(env_id, n_envs=n_envs, seed=seed, env_kwargs={"frameskip": 1}), n_stack=4)
    env = make_vec_env(env_id, n_envs=n_envs, seed=seed)
    return VecNormalize(env, gamma=gamma) if normalize else env


def build(algo: str, env_id: str, seed: int, n_envs: int | None = None) -> tuple[Any, Any]:
    """(env, model): SB3's ``algo`` with rl-zoo3's settings for ``env_id`` (``n_envs``: another env count), untrained,
    on the CPU."""
    from stable_baselines3 import A2C, PPO

    hp = hyperparameters(algo, env_id)
    zoo_envs, normalize = hp.pop("n_envs"), hp.pop("normalize", False)
    for key, name in (("lr_linear", "learning_rate"), ("clip_linear", "clip_range")):
        if key in hp:
            value = hp.pop(key)
            hp[name] = lambda progress_remaining, value=value: progress_remaining * value
    if "policy_kwargs" in hp:
        hp["policy_kwargs"] = _policy_kwargs(hp["policy_kwargs"])
    env = make_envs(env_id, n_envs or zoo_envs, seed, normalize, hp.get("gamma", 0.99))
    policy = "CnnPolicy" if env_id.startswith("ALE/") else "MlpPolicy"
    return env, (A2C if algo == "a2c" else PPO)(policy, env, seed=seed, device="cpu", verbose=0, **hp)


def sb3_run(
    algo: str,
    env_id: str,
    seed: int,
    steps: int,
    threads: int = 1,
    stop: Callable[[Episodes], bool] | None = None,
    n_envs: int | None = None,
) -> dict[str, Any]:
    """Train SB3's ``algo`` on ``env_id`` for ``steps`` env steps (fewer where ``stop(episodes)`` turns true after an
    episode ends), with ``threads`` torch threads (one: SB3 steps its envs in one process, and one thread is its
    fastest on a small MLP; its CNN gains from a thread per core). Returns {"episodes", "steps", "steps_per_s" (of
    model.learn: envs and model are built before its clock starts), "wall_s" (from building the envs)}."""
    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(threads)
    episodes: Episodes = []

    class Record(BaseCallback):
        def _on_step(self) -> bool:
            ended = False
            for info in self.locals["infos"]:
                if "episode" in info:  # Monitor's raw return, whatever VecNormalize does to the rewards
                    episodes.append((time.perf_counter() - start, self.num_timesteps, float(info["episode"]["r"])))
                    ended = True
            return not (ended and stop is not None and stop(episodes))

    start = time.perf_counter()
    env, model = build(algo, env_id, seed, n_envs)
    learn_start = time.perf_counter()
    model.learn(total_timesteps=steps, callback=Record())
    learn_s = time.perf_counter() - learn_start
    env.close()
    return {
        "episodes": episodes,
        "steps": model.num_timesteps,
        "steps_per_s": model.num_timesteps / learn_s,
        "wall_s": time.perf_counter() - start,
    }
