"""The raw-loop limit: what a core can do with no learning at all, only env.step plus the acting forward pass (the
workers' own: by hand for an MLP, a3c.learn.update.mlp) and the same cheap action sampling the workers use, K envs
under one batched forward, one process per core. Used by bench_throughput.py as the ceiling a
trainer's throughput is compared against."""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import multiprocessing as mp
import os
import time


def _raw_worker(env_id: str, envs: int, seconds: float, seed: int, out: mp.Queue) -> None:
    import gymnasium as gym
    import numpy as np
    import torch

    from a3c.learn.model import build_model, flatten_parameters
    from a3c.learn.update.mlp import MlpBackprop
    from a3c.spec.config import Config
    from a3c.spec.environment import spec_of

    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    env_list = [gym.make(env_id) for _ in range(envs)]
    obs = np.stack([e.reset(seed=seed + i)[0] for i, e in enumerate(env_list)]).astype(np.float32)
    model, dist = build_model(spec_of(env_list[0], env_id), Config(env=env_id))  # the trainer's default model
    flatten_parameters(model)
    # the acting forward pass the workers use: by hand for an MLP without a core (a3c.learn.update.mlp), else the
    # model's
    backprop = MlpBackprop.of(model)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        with torch.inference_mode():
            x = torch.from_numpy(obs)
            logits = backprop.policy(x) if backprop is not None else model.policy(x)[0]
        actions = dist.sample(logits, rng)
        for k, env in enumerate(env_list):
            o, _, term, trunc, _ = env.step(int(actions[k]))
            if term or trunc:
                o, _ = env.reset()
            obs[k] = o
        steps += envs
    out.put(steps / (time.perf_counter() - start))


def raw_loop_steps_per_s(
    env_id: str = "CartPole-v1", envs: int = 8, seconds: float = 5.0, processes: int | None = None
) -> float:
    """Summed steps/s of ``processes`` (default: one per core) raw loops running side by side."""
    processes = processes or os.cpu_count() or 1
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_raw_worker, args=(env_id, envs, seconds, i * 1000, out)) for i in range(processes)]
    for p in procs:
        p.start()
    rates = [out.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    return float(sum(rates))


if __name__ == "__main__":
    print(f"raw loop: {raw_loop_steps_per_s():,.0f} steps/s")
