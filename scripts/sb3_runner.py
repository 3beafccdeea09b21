"""Stable-Baselines3's A2C and PPO as the benchmarks' peers, with rl-zoo3's settings or CleanRL's.

``settings="rl-zoo3"``: the entry for the env in the installed rl-zoo3's hyperparams/a2c.yml or ppo.yml, read from the
package (nothing copied here): the env's own entry, else the same env's entry of another version (Hopper-v5 takes
Hopper-v4's, InvertedPendulum-v5 InvertedPendulum-v2's: the newest version rl-zoo3 has), the ``atari`` entry for an
ALE id; an env it has no entry for is refused. As rl-zoo3 reads them: ``normalize`` wraps the envs in VecNormalize
(with the agent's gamma), ``lin_X`` is a schedule falling linearly from X to 0 over the run, ``policy_kwargs`` is
evaluated with ``nn`` (torch.nn) and ``RMSpropTFLike`` in scope.

``settings="cleanrl"`` (PPO only): CleanRL's ``ppo.py`` for a discrete action space (4 envs x 128 steps, 4 minibatches,
4 epochs, lr 2.5e-4 annealed, entropy 0.01) or ``ppo_continuous_action.py`` for a continuous one (1 env x 2048 steps,
32 minibatches of 64, 10 epochs, lr 3e-4 annealed, entropy 0, observations and rewards normalised and clipped at 10);
both gamma 0.99, GAE 0.95, clip 0.2, advantages normalised, value coefficient 0.5, gradient norm 0.5, Adam eps 1e-5,
separate 64-64 tanh networks with orthogonal initialisation (SB3's MlpPolicy defaults). One difference is SB3's: its
``clip_range_vf`` clips the value prediction, where CleanRL takes the larger of the clipped and unclipped errors.

``sb3_run`` trains in this process and returns every finished episode (Monitor's raw return, whatever VecNormalize does
to the rewards). Run as a command it leaves a run directory the benchmark driver reads like an a3c run's:

    python -m scripts.sb3_runner --algo ppo --settings cleanrl --env Hopper-v5 --seed 1 --steps 1000000 --run-dir DIR

DIR/episodes.csv (worker, index, return, length, global_step, wall_time) and DIR/summary.json (total_steps,
steps_per_s, wall_time_s, training_time_s, episodes, stop_reason, hyperparameters), written at the end: a run stopped
before it is started again from the beginning (saving SB3's model and VecNormalize mid-run would resume it, but the
rollout buffer and the episodes under way would be lost, and an SB3 peer is run once per env and seed).
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import csv
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scripts.benchmark.curves import Episode

ALGOS = ("a2c", "ppo")
SETTINGS = ("rl-zoo3", "cleanrl")
_DROPPED = ("n_timesteps",)  # rl-zoo3's own budget: the benchmark gives one
_LINEAR = re.compile(r"lin_([-+0-9.eE]+)")

# CleanRL's cleanrl/ppo.py and cleanrl/ppo_continuous_action.py defaults, as SB3's PPO arguments
CLEANRL: dict[str, dict[str, Any]] = {
    "discrete": {
        "n_envs": 4,
        "n_steps": 128,
        "batch_size": 128,  # 4 x 128 samples in 4 minibatches
        "n_epochs": 4,
        "learning_rate": "lin_2.5e-4",
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "clip_range": 0.2,
        "clip_range_vf": 0.2,
        "ent_coef": 0.01,
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
        "normalize_advantage": True,
    },
    "continuous": {
        "n_envs": 1,
        "n_steps": 2048,
        "batch_size": 64,  # 2048 samples in 32 minibatches
        "n_epochs": 10,
        "learning_rate": "lin_3e-4",
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "clip_range": 0.2,
        "clip_range_vf": 0.2,
        "ent_coef": 0.0,
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
        "normalize_advantage": True,
        "normalize": {"norm_obs": True, "norm_reward": True, "clip_obs": 10.0, "clip_reward": 10.0},
    },
}


def zoo_file(algo: str) -> Path:
    import rl_zoo3

    return Path(rl_zoo3.__file__).parent / "hyperparams" / f"{algo}.yml"


def zoo_entry(algo: str, env_id: str) -> tuple[str, dict[str, Any]]:
    """(the entry's name, its settings) of rl-zoo3's ``algo``.yml for ``env_id``; ValueError if it has none."""
    import yaml

    entries = yaml.safe_load(zoo_file(algo).read_text())
    if env_id in entries:
        return env_id, dict(entries[env_id])
    if env_id.startswith("ALE/"):
        return "atari", dict(entries["atari"])
    name, _, version = env_id.rpartition("-v")
    others = sorted(
        (int(k.rpartition("-v")[2]), k) for k in entries if k.rpartition("-v")[0] == name and k[-1].isdigit()
    )
    if name and version.isdigit() and others:
        return others[-1][1], dict(entries[others[-1][1]])
    raise ValueError(f"rl-zoo3's {algo}.yml has no entry for {env_id}; give the peer CleanRL's settings instead")


def is_discrete(env_id: str) -> bool:
    import gymnasium as gym

    env = gym.make(env_id)
    try:
        return isinstance(env.action_space, gym.spaces.Discrete)
    finally:
        env.close()


def hyperparameters(algo: str, env_id: str, settings: str = "rl-zoo3") -> dict[str, Any]:
    """The settings of SB3's ``algo`` for ``env_id`` as plain data (what a results row records): SB3's keyword
    arguments, with ``n_envs``, ``normalize`` (False, True or VecNormalize's arguments), ``policy``, ``frame_stack``,
    ``lin_X`` schedules and ``policy_kwargs`` as rl-zoo3 writes them, and ``entry`` (rl-zoo3's entry, or CleanRL's
    script)."""
    if algo not in ALGOS:
        raise ValueError(f"algo {algo!r}: one of {ALGOS}")
    if settings == "cleanrl":
        if algo != "ppo":
            raise ValueError("CleanRL's settings are PPO's (cleanrl/ppo.py, ppo_continuous_action.py)")
        family = "discrete" if is_discrete(env_id) else "continuous"
        script = "ppo.py" if family == "discrete" else "ppo_continuous_action.py"
        return {"entry": f"cleanrl/{script}", "policy": "MlpPolicy", **json.loads(json.dumps(CLEANRL[family]))}
    if settings != "rl-zoo3":
        raise ValueError(f"settings {settings!r}: one of {SETTINGS}")
    entry, hp = zoo_entry(algo, env_id)
    for key in _DROPPED:
        hp.pop(key, None)
    unknown = {"callback", "vec_env_wrapper", "env_wrapper"} & set(hp)
    if unknown and entry != "atari":  # the atari entry's env_wrapper is AtariWrapper: make_envs applies it
        raise ValueError(f"rl-zoo3's {algo}.yml entry {entry} sets {sorted(unknown)}, which this runner does not apply")
    hp.pop("env_wrapper", None)
    return {"entry": entry, "n_envs": hp.pop("n_envs", 1), **hp}


def _schedule(value: Any) -> Any:
    """rl-zoo3's "lin_X": a function of SB3's progress_remaining (1 -> 0) falling linearly from X to 0."""
    if isinstance(value, str) and (m := _LINEAR.fullmatch(value)):
        start = float(m[1])
        return lambda progress_remaining: progress_remaining * start
    return value


def _policy_kwargs(text: str | dict[str, Any]) -> dict[str, Any]:
    """rl-zoo3's policy_kwargs: a Python expression naming nn.* and RMSpropTFLike, evaluated as rl-zoo3 does."""
    if isinstance(text, dict):
        return dict(text)
    import torch
    from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

    scope = {"__builtins__": {}, "dict": dict, "nn": torch.nn, "RMSpropTFLike": RMSpropTFLike}
    value = eval(text, scope)  # noqa: S307  (rl-zoo3's own files, read as rl-zoo3 reads them)
    if not isinstance(value, dict):
        raise ValueError(f"policy_kwargs {text!r} is not a dict")
    return value


def make_envs(env_id: str, n_envs: int, seed: int, normalize: bool | dict[str, Any], gamma: float, frame_stack: int):
    """The vector env the settings train on: make_vec_env (a Monitor in each), VecNormalize where ``normalize`` says
    (its arguments, the agent's gamma); for an ALE id make_atari_env's preprocessing (84x84 grey, frame skip 4 by
    AtariWrapper, so the ALE env skips none) and ``frame_stack`` stacked frames."""
    from stable_baselines3.common.env_util import make_atari_env, make_vec_env
    from stable_baselines3.common.vec_env import VecFrameStack, VecNormalize

    if env_id.startswith("ALE/"):
        import ale_py
        import gymnasium

        gymnasium.register_envs(ale_py)  # the ALE/ ids (a3c registers them itself)
        env = make_atari_env(env_id, n_envs=n_envs, seed=seed, env_kwargs={"frameskip": 1})
        return VecFrameStack(env, n_stack=frame_stack or 4)
    env = make_vec_env(env_id, n_envs=n_envs, seed=seed)
    if frame_stack:
        env = VecFrameStack(env, n_stack=frame_stack)
    if normalize:
        kwargs = {"gamma": gamma, **(normalize if isinstance(normalize, dict) else {})}
        if isinstance(normalize, str):  # rl-zoo3 writes "dict(norm_obs=..., norm_reward=...)"
            kwargs.update(_policy_kwargs(normalize))
        return VecNormalize(env, **kwargs)
    return env


def build(algo: str, env_id: str, seed: int, n_envs: int | None = None, settings: str = "rl-zoo3") -> tuple[Any, Any]:
    """(env, model): SB3's ``algo`` with ``settings`` for ``env_id`` (``n_envs``: another env count), untrained, on
    the CPU."""
    from stable_baselines3 import A2C, PPO

    hp = hyperparameters(algo, env_id, settings)
    hp.pop("entry")
    zoo_envs, normalize = hp.pop("n_envs"), hp.pop("normalize", False)
    policy, frame_stack = hp.pop("policy", "MlpPolicy"), hp.pop("frame_stack", 0)
    for key in ("learning_rate", "clip_range", "clip_range_vf"):
        if key in hp:
            hp[key] = _schedule(hp[key])
    if "policy_kwargs" in hp:
        hp["policy_kwargs"] = _policy_kwargs(hp["policy_kwargs"])
    env = make_envs(env_id, n_envs or zoo_envs, seed, normalize, hp.get("gamma", 0.99), frame_stack)
    return env, (A2C if algo == "a2c" else PPO)(policy, env, seed=seed, device="cpu", verbose=0, **hp)


def sb3_run(
    algo: str,
    env_id: str,
    seed: int,
    steps: int,
    threads: int = 1,
    stop: Callable[[list[Episode]], bool] | None = None,
    n_envs: int | None = None,
    settings: str = "rl-zoo3",
) -> dict[str, Any]:
    """Train SB3's ``algo`` on ``env_id`` for ``steps`` env steps (fewer where ``stop(episodes)`` turns true after an
    episode ends), with ``threads`` torch threads (one: SB3 steps its envs in one process, and one thread is its
    fastest on a small MLP; its CNN gains from a thread per core). Returns {"episodes", "steps", "steps_per_s" (of
    model.learn: envs and model are built before its clock starts), "train_s" (model.learn's time), "wall_s" (from
    building the envs)}."""
    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(threads)
    episodes: list[Episode] = []

    class Record(BaseCallback):
        def _on_step(self) -> bool:
            ended = False
            for info in self.locals["infos"]:
                if "episode" in info:  # Monitor's raw return, whatever VecNormalize does to the rewards
                    wall = time.perf_counter() - start
                    episodes.append(Episode(self.num_timesteps, wall, float(info["episode"]["r"])))
                    ended = True
            return not (ended and stop is not None and stop(episodes))

    start = time.perf_counter()
    env, model = build(algo, env_id, seed, n_envs, settings)
    learn_start = time.perf_counter()
    model.learn(total_timesteps=steps, callback=Record())
    learn_s = time.perf_counter() - learn_start
    env.close()
    return {
        "episodes": episodes,
        "steps": model.num_timesteps,
        "steps_per_s": model.num_timesteps / learn_s,
        "train_s": learn_s,
        "wall_s": time.perf_counter() - start,
    }


def write_run(run_dir: Path, result: dict[str, Any], hyperparameters: dict[str, Any]) -> None:
    """RUN_DIR/episodes.csv and summary.json of a finished ``sb3_run`` (the columns and keys an a3c run has)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "episodes.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["worker", "index", "return", "global_step", "wall_time"])
        for i, e in enumerate(result["episodes"]):
            out.writerow([0, i, e.ret, e.step, f"{e.wall_s:.3f}"])
    summary = {
        "total_steps": result["steps"],
        "steps_per_s": result["steps_per_s"],
        "training_time_s": result["train_s"],
        "wall_time_s": result["wall_s"],
        "episodes": len(result["episodes"]),
        "stop_reason": "total_steps",
        "hyperparameters": hyperparameters,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.sb3_runner", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--algo", choices=ALGOS, required=True)
    parser.add_argument("--settings", choices=SETTINGS, default="rl-zoo3")
    parser.add_argument("--env", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True, help="env steps (model.learn's total_timesteps)")
    parser.add_argument("--run-dir", type=Path, required=True, help="where episodes.csv and summary.json go")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args(argv)
    try:
        hp = hyperparameters(args.algo, args.env, args.settings)
    except ValueError as err:
        print(f"sb3_runner: error: {err}", file=sys.stderr)
        return 2
    try:
        result = sb3_run(args.algo, args.env, args.seed, args.steps, threads=args.threads, settings=args.settings)
    except KeyboardInterrupt:  # the driver forwards a terminal's Ctrl-C: it may land anywhere, an import included
        print(f"sb3_runner: stopped before the end: nothing written to {args.run_dir}", file=sys.stderr)
        return 130
    write_run(args.run_dir, result, hp)
    print(
        f"sb3_runner: {args.algo} ({hp['entry']}) {args.env} seed {args.seed}: {result['steps']:,} steps in "
        f"{result['wall_s']:.1f} s, {len(result['episodes'])} episodes; {args.run_dir}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
