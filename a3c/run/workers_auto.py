"""`--workers auto`: choose the number of worker processes from a measurement taken at start-up.

A worker alternates between the env (K envs stepped one after the other, n_steps times) and the model (one batched
forward per step, one update per rollout). Per rollout it uses

    cpu   = n_steps * (K * env_cpu + act) + update            (seconds of a core)
    wall  = cpu + n_steps * K * env_blocked                   (seconds of the clock)

where env_blocked is the time an env step waits off the CPU on its own account (sleeping on I/O, a feed, a remote
simulator). One worker keeps ``busy = cpu / wall`` of a core occupied, so ``cores / busy`` workers keep every core
busy: one per core for a CPU-bound env (busy ~ 1), many per core for a slow I/O-bound one (a 10 ms sleep per step
keeps a worker's core about 1% busy). More workers than that only add start-up time and switching.

The measurement takes a fraction of a second in the main process, without starting any process: K envs stepped with
random actions for up to ``ENV_BUDGET_S`` (a fast env stops after ``ENOUGH_ENV_STEPS``: it is start-up time), and the
model's acting passes and its update by the update path the workers will take (a3c.learn.paths), with the clip and the
shared optimizer's step, with torch limited to one thread, as in a worker. A step's off-CPU time is its wall time less
its CPU time less the time it waited for a core (the scheduler's run-queue delay, /proc/self/task/TID/schedstat on
Linux): so a busy machine, where a CPU-bound step waits for a core, does not make the env look I/O-bound. Where that
counter is missing, the wall time is used as is.

The count is capped by memory (half of the available memory over an estimate of one worker's footprint, from
scripts/bench_memory.py, plus what making the envs cost here) and by the open-file limit (each worker holds a few
pipes). See docs/benchmarks/slow-data.md for how the choice compares with the best fixed count
(scripts/bench_workers_auto.py).
"""

from __future__ import annotations

import dataclasses
import os
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec

ENV_BUDGET_S = 0.4  # wall time spent stepping the envs at most (at least MIN_ENV_STEPS steps are taken) ...
MIN_ENV_STEPS = 8
ENOUGH_ENV_STEPS, ENV_MIN_S = 2000, 0.05  # ... and no more once this many steps took at least this long (fast envs)
MODEL_REPEATS = 20  # rollouts' acting passes and updates timed (after a warm-up one)
# PSS of one worker measured by scripts/bench_memory.py (CartPole-v1, 8 envs, 64x64 MLP): 27 MB under fork and
# forkserver, 187 MB under spawn (each worker imports torch itself); rounded up
WORKER_MB = {"fork": 32, "forkserver": 32, "spawn": 200}
MEMORY_SHARE = 0.5  # of the available memory the workers may take together
FDS_PER_WORKER = 8  # pipes and sentinels per worker in the main process and the fork server, with margin
WAITING_HEADROOM = 2.0  # the extra workers (beyond one per core) a waiting env gets, over the estimate (see choose)
HINT_RATIO = 1.5  # a user-given count this many times above the choice (and above the core count) gets a hint


@dataclass
class Timings:
    """Per env step and per model call, in seconds."""

    env_cpu_s: float  # CPU time of the median env step (a reset counts in the step that ended the episode)
    env_blocked_s: float  # time one env step spends off the CPU on its own account (sleep, I/O)
    act_s: float  # one acting forward pass over K observations plus the action sampling
    update_s: float  # one update, by the path the workers take, with the clip and the optimizer's step


@dataclass
class Choice:
    """The chosen count, why, and the numbers behind it (recorded in config.json as ``workers_auto``)."""

    workers: int
    reason: str
    busy: float  # fraction of a core one worker keeps busy
    cores: int
    wanted: int  # the count the cost model asks for (with its headroom), before the caps
    cap: int
    timings: Timings

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["timings"] = {k: round(v, 9) for k, v in data["timings"].items()}
        data["busy"] = round(self.busy, 4)
        return data


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, e.g. a container's share), else os.cpu_count()."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def choose(timings: Timings, cores: int, n_steps: int, envs_per_worker: int, cap: int) -> Choice:
    """The worker count that keeps ``cores`` cores busy under the cost model of the module docstring, capped."""
    T, K = n_steps, envs_per_worker
    cpu = T * (K * timings.env_cpu_s + timings.act_s) + timings.update_s
    wall = cpu + T * K * timings.env_blocked_s
    busy = min(1.0, cpu / wall) if wall > 0 else 1.0
    # Workers beyond one per core are there to fill the time others wait; ``cores / busy`` of them would keep the
    # cores busy only if their waits never overlapped, and the estimate undercounts what a waiting worker costs in
    # the run (waking up, the publish path, the main process reading, switching among many processes): the best
    # fixed count in bench_workers_auto's sweeps lies above it for sleeping envs, with throughput falling steeply
    # below the best count and slowly above it. So the extra workers get WAITING_HEADROOM times the estimate,
    # calibrated on those sweeps (docs/benchmarks/slow-data.md). round, not ceil: a CPU-bound env measured at busy 0.95
    # (noise) still gets one worker per core.
    wanted = cores + max(0, round((cores / busy - cores) * WAITING_HEADROOM))
    workers = max(1, min(wanted, cap))
    per_step_ms = (timings.env_cpu_s + timings.env_blocked_s) * 1e3
    if wanted <= cores:
        why = f"one per core: the env is CPU-bound ({per_step_ms:.3g} ms a step, a worker keeps a core busy)"
    else:
        why = (
            f"{per_step_ms:.3g} ms an env step, {timings.env_blocked_s / (per_step_ms / 1e3):.0%} of it off the CPU: "
            f"a worker keeps {busy:.0%} of a core busy, so {cores / busy:.0f} would keep {cores} cores busy by the "
            f"estimate; {wanted} leave room for what it misses"
        )
        if workers < wanted:
            why += f" (capped at {workers} by memory and the open-file limit)"
    return Choice(workers, f"{workers} workers on {cores} cores: {why}", busy, cores, wanted, cap, timings)


def memory_cap(start_method: str, env_mb: float = 0.0, available_mb: float | None = None) -> int:
    """How many workers fit in MEMORY_SHARE of the available memory, and under the open-file limit."""
    if available_mb is None:
        available_mb = _available_mb()
    by_memory = int(available_mb * MEMORY_SHARE / (WORKER_MB.get(start_method, 200) + env_mb))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    by_files = (soft - 64) // FDS_PER_WORKER if soft != resource.RLIM_INFINITY else by_memory
    return max(1, min(by_memory, by_files))


def _available_mb() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 4096.0  # unknown: assume a small machine


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def _enough(steps: int, elapsed: float) -> bool:
    """Whether the env timing may stop: past the budget, or enough steps of a fast env."""
    return elapsed >= ENV_BUDGET_S or (steps >= ENOUGH_ENV_STEPS and elapsed >= ENV_MIN_S)


def _run_queue_s() -> float:
    """Seconds this thread has waited for a core so far (Linux schedstat); 0.0 where unavailable."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def measure(config: Config, spec: EnvSpec) -> tuple[Timings, float]:
    """Time the env and the model in this process (see the module docstring); returns the timings and the memory
    making the K envs took here (MB)."""
    from a3c.run.threads import one_native_thread
    from a3c.spec.environment import make_env

    K = config.envs_per_worker
    rss = _rss_mb()
    envs = [make_env(config.env, config.env_kwargs) for _ in range(K)]
    env_mb = max(0.0, _rss_mb() - rss)  # a worker holds the same K envs
    try:
        for k, env in enumerate(envs):
            env.action_space.seed(k)
            env.reset(seed=config.seed + k)
            # untimed: a first step does one-off work (gymnasium's env checker)
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
        step_cpu: list[float] = []
        wall0, cpu0, queue0 = time.perf_counter(), time.thread_time(), _run_queue_s()
        # a slow env gets the budget (40 steps of 10 ms); a fast one stops after enough steps, since the
        # measurement is on start-up's critical path (CartPole: 2,000 steps in ~0.05 s instead of 0.4 s)
        while len(step_cpu) < MIN_ENV_STEPS or not _enough(len(step_cpu), time.perf_counter() - wall0):
            for env in envs:  # as a worker does: each env in turn, reset at the end of an episode
                t0 = time.thread_time()
                _, _, terminated, truncated, _ = env.step(env.action_space.sample())
                if terminated or truncated:
                    env.reset()
                step_cpu.append(time.thread_time() - t0)
        wall = time.perf_counter() - wall0
        cpu = time.thread_time() - cpu0
        queued = _run_queue_s() - queue0
    finally:
        for env in envs:
            env.close()
    steps = len(step_cpu)
    # the median step: a slow env takes few steps in ENV_BUDGET_S (15 at 10 ms), and the CPU time of a step that
    # sleeps is noisy and grows with the sleep (here: a median of 30-60 us at 0.2 ms, 150-270 us at 10 ms; caches
    # gone cold during the sleep, we think)
    env_cpu = statistics.median(step_cpu)
    env_blocked = max(0.0, wall - cpu - queued) / steps

    with one_native_thread():  # as in a worker: torch's, the BLAS's and OpenMP's pools at one thread
        act_s, update_s = _time_model(config, spec)
    return Timings(env_cpu, env_blocked, act_s, update_s), env_mb


def _time_model(config: Config, spec: EnvSpec) -> tuple[float, float]:
    """CPU seconds of one acting pass (with the action sampling) and of one update, as a worker runs them: its
    update path (a3c.learn.paths, chosen as the worker chooses it) over a rollout of the worker's shape, acted step by
    step first (a fast path's update reuses what acting recorded), then the learning side's clip and lr and the
    shared optimizer's step. The medians over MODEL_REPEATS rollouts, after a warm-up one."""
    import numpy as np

    from a3c.learn.model import build_model, flatten_parameters
    from a3c.learn.optim import make_optimizer
    from a3c.learn.paths import choose
    from a3c.learn.ppo import ClippedSurrogate
    from a3c.learn.step import GradientStep
    from a3c.learn.update import Rollout

    T, K = config.n_steps, config.envs_per_worker
    model, dist = build_model(spec, config)
    params, grads = flatten_parameters(model)
    optimizer = make_optimizer(config.optimizer, params.detach().clone(), config.lr, slots=1)
    path = choose(config, model, dist).path.build(model, dist, config, grads)
    gradient_step = GradientStep(config)
    rng = np.random.default_rng(0)
    obs_dtype = np.float32 if config.normalize_obs else spec.obs_dtype
    rollout = Rollout.allocate(T, K, spec.obs_shape, obs_dtype, dist)
    # observations of the buffer's dtype (any values: timing only; no episode ends inside the timed rollout)
    rollout.obs_np[...] = rng.random(rollout.obs_np.shape) * (255 if np.issubdtype(obs_dtype, np.integer) else 1)
    grads_np = grads.numpy()
    ppo = ClippedSurrogate(model, dist, config, grads) if config.algo == "ppo" else None
    act_times, update_times = [], []
    for _ in range(MODEL_REPEATS + 1):
        rollout.start_state = state = model.initial_state(K)
        behaviour = []
        t0 = time.thread_time()
        for t in range(T):
            step_params, state = path.act(rollout, t, state)
            rollout.actions_np[t] = dist.sample(step_params, rng)
            behaviour.append(step_params)
        t1 = time.thread_time()
        if ppo is None:
            unrolled = path.unroll(rollout)
            loss_values, dparams, dvalues = path.loss_grads(rollout, unrolled)
            path.backward(unrolled, dparams, dvalues)
            gradient_step.clip(grads_np, loss_values)
            optimizer.step(grads, 0, gradient_step.lr(0))
            t2 = time.thread_time()
        else:  # --algo ppo: the targets, then one minibatch's gradient and step, times the minibatches pushed
            targets = ppo.targets(rollout, behaviour)
            minibatches = ppo.minibatches(rollout, rng)
            t_mb = time.thread_time()
            loss_values = ppo.gradient(rollout, targets, minibatches[0])
            gradient_step.clip(grads_np, loss_values)
            optimizer.step(grads, 0, gradient_step.lr(0))
            t_end = time.thread_time()
            t2 = t_end + (t_end - t_mb) * (config.n_epochs * len(minibatches) - 1)
        act_times.append((t1 - t0) / T)
        update_times.append(t2 - t1)
    return statistics.median(act_times[1:]), statistics.median(update_times[1:])


def auto_choice(config: Config, spec: EnvSpec, cores: int | None = None) -> Choice:
    """Measure and choose (config.workers is ignored)."""
    timings, env_mb = measure(config, spec)
    cap = memory_cap(config.resolved_start_method(), env_mb)
    return choose(timings, cores or usable_cores(), config.n_steps, config.envs_per_worker, cap)


def hint(workers: int, choice: Choice) -> str | None:
    """A one-line hint when a user-given count is well above what keeps the cores busy; None otherwise."""
    if workers > choice.cores and workers > HINT_RATIO * choice.workers:
        return (
            f"a3c: hint: --workers {workers} is more than this env needs: {choice.workers} keep the {choice.cores} "
            f"cores busy (one worker keeps {choice.busy:.0%} of a core busy); more only add start-up time and "
            "switching. Leave --workers out (auto) to let a3c choose"
        )
    return None


def resolve_workers(config: Config, spec: EnvSpec, log: Callable[[str], None] | None = None) -> Config:
    """``--workers auto``: the config with the measured count and ``workers_auto`` (the choice and its reason) set,
    the choice printed as one line. A user-given count is kept; one above what helps gets a one-line hint."""
    log = log or (lambda line: print(line, file=sys.stderr))
    if config.workers == "auto":
        choice = auto_choice(config, spec)
        if config.backend == "serial":  # one process: the count worker processes would get, taking turns here
            log(
                f"a3c: --workers auto: {choice.workers} worker{'s' if choice.workers != 1 else ''} taking turns in "
                f"this one process (--backend serial: as many as worker processes would get on {choice.cores} cores)"
            )
        else:
            log(f"a3c: --workers auto: {choice.reason}")
        return dataclasses.replace(config, workers=choice.workers, workers_auto=choice.to_dict())
    if config.backend == "ray" and config.ray_address is not None:
        return config  # a cluster's cores, not this machine's, are what a count given there is for
    cores = usable_cores()
    if isinstance(config.workers, int) and config.workers > cores and config.workers > HINT_RATIO * cores:
        message = hint(config.workers, auto_choice(config, spec, cores))
        if message:
            log(message)
    return config
