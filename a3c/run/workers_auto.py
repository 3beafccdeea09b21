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
model's acting passes and its update by the update path the workers will take (a3c.learn.update.paths), with the clip
and the
shared optimizer's step, with torch limited to one thread, as in a worker. A step's off-CPU time is its wall time less
its CPU time less the time it waited for a core (the scheduler's run-queue delay, /proc/self/task/TID/schedstat on
Linux): so a busy machine, where a CPU-bound step waits for a core, does not make the env look I/O-bound. Where that
counter is missing, the wall time is used as is.

That is what the env asks for (the throughput bound). Three more bounds hold, and the count is the smallest of the
four; the line it prints names the one that held:

- **the run's budget**: every worker costs the run its start-up before its first step, ``start_s``, the larger of
  the main process's launch of it (the workers are launched one after another: fork ~0.07 s, the fork server ~0.1 s,
  measured here with 16 and 64 workers) and the CPU the new process spends before its first step over the cores (fork
  ~0.03 s, the fork server ~0.07 s, spawn ~1.8 s: it imports torch itself; measured from /proc). With w workers of
  ``rate`` steps/s each, the run's N = --total-steps take about ``w * start_s + N / (w * rate)``: the w-th worker
  saves ``N / (rate * w * (w - 1))`` of training and costs ``start_s``, so it is added only while
  ``w * (w - 1) <= N / (rate * start_s)``. A run of 30,000 steps of a 10 ms env cannot repay 359 start-ups (440 s
  against 21 s for 16 workers); 50 million steps can. A resumed run counts its whole --total-steps (more than it has
  left: a little more generous than the rest of the run repays).
- **a fixed ceiling** of MAX_WORKERS_PER_CORE workers a core: past it the workers' wake-ups and the main process's
  reading of them, not the env, fill the cores (2 cores, the 10 ms env: 64 workers made 5,664 steps/s and started in
  10 s, 128 made 6,584 and took 31 s to start, at a load of 28).
- **the cap**: memory (half of the available memory over an estimate of one worker's footprint, from
  scripts/bench_memory.py, plus what making the envs cost here) and the open-file limit (each worker holds a few
  pipes).

See docs/benchmarks/slow-data.md for how the choice compares with the best fixed count (scripts/bench_workers_auto.py).
"""

from __future__ import annotations

import dataclasses
import math
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
from a3c.spec.wording import count

ENV_BUDGET_S = 0.4  # wall time spent stepping the envs at most (at least MIN_ENV_STEPS steps are taken) ...
MIN_ENV_STEPS = 8
ENOUGH_ENV_STEPS, ENV_MIN_S = 2000, 0.05  # ... and no more once this many steps took at least this long (fast envs)
MODEL_REPEATS = 20  # rollouts' acting passes and updates timed (after a warm-up one)
MODEL_ACT_STEPS = 32  # of each timed rollout's steps, acted (the rest keep their observations: an acting pass's cost)
# PSS of one worker measured by scripts/bench_memory.py (CartPole-v1, 8 envs, 64x64 MLP): 27 MB under fork and
# forkserver, 187 MB under spawn (each worker imports torch itself); rounded up
WORKER_MB = {"fork": 32, "forkserver": 32, "spawn": 200}
MEMORY_SHARE = 0.5  # of the available memory the workers may take together
FDS_PER_WORKER = 8  # pipes and sentinels per worker in the main process and the fork server, with margin
WAITING_HEADROOM = 2.0  # the extra workers (beyond one per core) a waiting env gets, over the estimate (see choose)
HINT_RATIO = 1.5  # a user-given count this many times above the choice (and above the core count) gets a hint
# a worker's start-up (the module docstring): the main process's launch of it (wall seconds, one launch after the
# other), and the new process's own CPU seconds before its first step; measured on a 2-core machine (fork and the
# fork server: 16 and 64 workers of envs/SlowCartPole-v1, the launch from the start-up's growth, the CPU from /proc;
# spawn: its CPU from /proc, its launch taken as fork's, which it is before the exec)
LAUNCH_S = {"fork": 0.07, "forkserver": 0.10, "spawn": 0.07}
START_CPU_S = {"fork": 0.03, "forkserver": 0.07, "spawn": 1.8}
MAX_WORKERS_PER_CORE = 64  # the fixed ceiling (the module docstring)
BOUNDS = ("env", "budget", "ceiling", "cap")  # what may hold the count, in the order a tie is named


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
    wanted: int  # the count the cost model asks for (with its headroom), before the other bounds
    cap: int  # memory and the open-file limit
    timings: Timings
    budget: int | None = None  # the most workers the run's --total-steps repay (None: no budget given)
    ceiling: int | None = None  # MAX_WORKERS_PER_CORE x cores (None: no budget given, the choice of the env alone)
    binding: str = "env"  # which bound held: one of BOUNDS
    start_s: float = 0.0  # a worker's start-up, seconds of the run
    worker_steps_per_s: float = 0.0  # one worker's steps/s by the cost model

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["timings"] = {k: round(v, 9) for k, v in data["timings"].items()}
        data["busy"] = round(self.busy, 4)
        data["worker_steps_per_s"] = round(self.worker_steps_per_s, 2)
        return data


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, e.g. a container's share), else os.cpu_count()."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def choose(
    timings: Timings,
    cores: int,
    n_steps: int,
    envs_per_worker: int,
    cap: int,
    total_steps: int | None = None,
    start_s: float = 0.0,
) -> Choice:
    """The worker count: the smallest of what keeps ``cores`` cores busy under the cost model of the module
    docstring, what a run of ``total_steps`` repays of workers that cost ``start_s`` each to start (no budget when
    ``total_steps`` is None), the ceiling of MAX_WORKERS_PER_CORE a core (with a budget), and ``cap``."""
    T, K = n_steps, envs_per_worker
    cpu = T * (K * timings.env_cpu_s + timings.act_s) + timings.update_s
    wall = cpu + T * K * timings.env_blocked_s
    busy = min(1.0, cpu / wall) if wall > 0 else 1.0
    rate = T * K / wall if wall > 0 else math.inf  # one worker's steps/s
    # Workers beyond one per core are there to fill the time others wait; ``cores / busy`` of them would keep the
    # cores busy only if their waits never overlapped, and the estimate undercounts what a waiting worker costs in
    # the run (waking up, the publish path, the main process reading, switching among many processes): the best
    # fixed count in bench_workers_auto's sweeps lies above it for sleeping envs, with throughput falling steeply
    # below the best count and slowly above it. So the extra workers get WAITING_HEADROOM times the estimate,
    # calibrated on those sweeps (docs/benchmarks/slow-data.md). round, not ceil: a CPU-bound env measured at busy 0.95
    # (noise) still gets one worker per core.
    wanted = cores + max(0, round((cores / busy - cores) * WAITING_HEADROOM))
    budget = ceiling = None
    if total_steps is not None:
        budget = budget_bound(total_steps, rate, start_s)
        ceiling = MAX_WORKERS_PER_CORE * cores
    bounds = {"env": wanted, "budget": budget, "ceiling": ceiling, "cap": cap}
    binding = min((n, BOUNDS.index(name), name) for name, n in bounds.items() if n is not None)[2]
    workers = max(1, min(n for n in bounds.values() if n is not None))
    per_step_ms = (timings.env_cpu_s + timings.env_blocked_s) * 1e3
    if wanted <= cores:
        env = f"one per core: the env is CPU-bound ({per_step_ms:.3g} ms a step, a worker keeps a core busy)"
    else:
        env = (
            f"{per_step_ms:.3g} ms an env step, {timings.env_blocked_s / (per_step_ms / 1e3):.0%} of it off the CPU: "
            f"a worker keeps {busy:.0%} of a core busy, so {cores / busy:.0f} would keep {cores} cores busy by the "
            f"estimate; {wanted} leave room for what it misses"
        )
    if binding == "env":
        why = env
    else:
        if binding == "budget":
            held = (
                f"the run's budget: {total_steps:,} steps to run at ~{rate:,.0f} steps/s a worker repay no more "
                f"start-ups of {start_s:.2g} s each (another worker would save less time than its start-up costs)"
            )
        elif binding == "ceiling":
            held = f"the ceiling of {MAX_WORKERS_PER_CORE} workers a core"
        else:
            held = f"capped at {workers} by memory and the open-file limit"
        why = f"{held}; the env alone asks for {wanted} ({env})"
    return Choice(
        workers,
        f"{count(workers, 'worker')} on {count(cores, 'core')}: {why}",
        busy,
        cores,
        wanted,
        cap,
        timings,
        budget=budget,
        ceiling=ceiling,
        binding=binding,
        start_s=start_s,
        worker_steps_per_s=rate if math.isfinite(rate) else 0.0,
    )


def budget_bound(total_steps: int, rate: float, start_s: float) -> int:
    """The most workers a run of ``total_steps`` repays, at ``rate`` steps/s a worker and ``start_s`` seconds of
    start-up each: the largest w with ``w * (w - 1) <= total_steps / (rate * start_s)`` (the module docstring); at
    least 1."""
    if start_s <= 0 or not math.isfinite(rate):
        return max(1, int(total_steps))  # (start-up free, or no rate to weigh it against: the budget holds nothing)
    room = total_steps / (rate * start_s)
    w = max(1, int((1 + math.sqrt(1 + 4 * room)) / 2))
    while w > 1 and w * (w - 1) > room:  # (the float root, made exact)
        w -= 1
    while (w + 1) * w <= room:
        w += 1
    return w


def start_up_s(start_method: str, cores: int) -> float:
    """Seconds of the run one worker's start-up costs: its launch by the main process (one after another) or its own
    CPU before its first step spread over the cores, whichever is longer (LAUNCH_S, START_CPU_S)."""
    return max(LAUNCH_S.get(start_method, LAUNCH_S["spawn"]), START_CPU_S.get(start_method, 1.8) / max(1, cores))


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
    from a3c.spec.environment import kwargs_blamed_for_first_step, make_env

    K = config.envs_per_worker
    rss = _rss_mb()
    envs = [make_env(config.env, config.env_kwargs) for _ in range(K)]
    env_mb = max(0.0, _rss_mb() - rss)  # a worker holds the same K envs
    try:
        # an env made with the user's kwargs that fails as it steps: theirs to mend, if the env steps without them
        # (a3c.run.resolve.preflight checked this already; a resumed run's kwargs come from its checkpoint)
        with kwargs_blamed_for_first_step(config.env, config.env_kwargs):
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
            for env in envs:  # gymnasium's envs one at a time, reset at an episode's end (as a worker's default
                # backend; --env-backend ale-vector steps its envs in one C++ call, timed here through
                # gymnasium's env all the same)
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
    """CPU seconds of one acting pass (with the action sampling) and of one rollout's update, as a worker runs them:
    the objective's learner on its update path (a3c.learn.update.paths, chosen as the worker chooses it) through the
    worker's own learn loop (a3c.learn.update.loop.learn_rollout) on a stand-in for the channel whose push is a
    local shared-optimizer step. A rollout of the worker's shape, its first MODEL_ACT_STEPS steps acted (the acting
    pass's cost does not depend on the rollout's length). A plan of several minibatches (PPO's epochs) is cut after
    its second: its cost is the targets and the first minibatch, plus the second's time for each one after it. The
    medians over MODEL_REPEATS rollouts, after a warm-up one."""
    import numpy as np

    from a3c.learn.model import build_model, flatten_parameters
    from a3c.learn.optim import make_optimizer
    from a3c.learn.update.loop import learn_rollout
    from a3c.learn.update.paths import choose
    from a3c.learn.update.protocol import Rollout
    from a3c.learn.update.step import GradientStep

    T, K = config.n_steps, config.envs_per_worker
    model, dist = build_model(spec, config)
    params, grads = flatten_parameters(model)
    optimizer = make_optimizer(config.optimizer, params.detach().clone(), config.lr, slots=1, eps=config.optimizer_eps)
    learner = choose(config, model, dist).path.build(model, dist, config, grads)
    gradient_step = GradientStep(config)
    rng = np.random.default_rng(0)
    obs_dtype = np.float32 if config.normalize_obs else spec.obs_dtype
    rollout = Rollout.allocate(T, K, spec.obs_shape, obs_dtype, dist)
    # observations of the buffer's dtype (any values: timing only; no episode ends inside the timed rollout)
    rollout.obs_np[...] = rng.random(rollout.obs_np.shape) * (255 if np.issubdtype(obs_dtype, np.integer) else 1)
    acted_steps = min(T, MODEL_ACT_STEPS)
    rollout.start_state = model.initial_state(K)
    minibatches = len(learner.plan(rollout, rng))  # (its length only: the same for every rollout of this shape)
    act_times, update_times = [], []
    for _ in range(MODEL_REPEATS + 1):
        rollout.start_state = state = model.initial_state(K)
        t0 = time.thread_time()
        for t in range(acted_steps):
            step_params, state = learner.act(rollout, t, state)
            rollout.actions_np[t] = dist.sample(step_params, rng)
        t1 = time.thread_time()
        timer = _TimedExchange(optimizer, grads, t1)
        learn_rollout(learner, rollout, rng, gradient_step, grads.numpy(), timer, 0)
        act_times.append((t1 - t0) / acted_steps)
        update_times.append(timer.total(minibatches))
    return statistics.median(act_times[1:]), statistics.median(update_times[1:])


class _TimedExchange:
    """The learn loop's exchange for ``_time_model``: each push a step of a local shared optimizer, each minibatch's
    end timed on the thread's CPU clock; the loop is stopped before its third minibatch."""

    def __init__(self, optimizer: Any, grads: Any, start: float) -> None:
        self.optimizer, self.grads, self.start = optimizer, grads, start
        self.ends: list[float] = []
        self.cut = False

    def alive(self) -> bool:
        self.ends.append(time.thread_time())
        self.cut = len(self.ends) >= 2
        return not self.cut

    def pull(self) -> int:
        return 0

    def push(self, pulled_at: int, lr: float) -> int:
        self.optimizer.step(self.grads, 0, lr)
        return 0

    def global_step(self) -> int:
        return 0

    def record(self, terms: Any, grad_norm: float, lag: int) -> None:
        return None

    def skipped(self) -> None:
        return None

    def dropped(self, minibatches: int) -> None:
        return None

    def total(self, minibatches: int) -> float:
        """The update's CPU seconds: to the first minibatch's end, plus the second's time for each one after it."""
        if not self.cut:
            return time.thread_time() - self.start
        first, second = self.ends[0] - self.start, self.ends[1] - self.ends[0]
        return first + second * (minibatches - 1)


def auto_choice(config: Config, spec: EnvSpec, cores: int | None = None, steps_done: int = 0) -> Choice:
    """Measure and choose (config.workers is ignored), for the steps the run has left: --total-steps less
    ``steps_done`` (a resumed run's step: only what is left repays the workers' start-ups)."""
    timings, env_mb = measure(config, spec)
    start_method = "spawn" if config.backend == "ray" else config.resolved_start_method()  # (Ray's: new processes)
    cap = memory_cap(start_method, env_mb)
    cores = cores or usable_cores()
    start_s = start_up_s(start_method, cores)
    left = max(1, config.total_steps - steps_done)
    return choose(timings, cores, config.n_steps, config.envs_per_worker, cap, left, start_s)


def hint(workers: int, choice: Choice) -> str | None:
    """A one-line hint when a user-given count is well above what helps (what --workers auto would choose, and
    why); None otherwise."""
    if workers > choice.cores and workers > HINT_RATIO * choice.workers:
        if choice.binding == "env":
            helps = (
                f"this env needs: {choice.workers} keep the {choice.cores} cores busy (one worker keeps "
                f"{choice.busy:.0%} of a core busy)"
            )
        else:
            helps = f"this run can use: --workers auto would take {choice.reason}"
        return (
            f"a3c: hint: --workers {workers} is more than {helps}; more only add start-up time and switching. "
            "Leave --workers out (auto) to let a3c choose"
        )
    return None


def resolve_workers(
    config: Config, spec: EnvSpec, log: Callable[[str], None] | None = None, steps_done: int = 0
) -> Config:
    """``--workers auto``: the config with the measured count and ``workers_auto`` (the choice and its reason) set,
    the choice printed as one line; ``steps_done``: a resumed run's step (its budget is what is left). A user-given
    count is kept; one above what helps gets a one-line hint."""
    log = log or (lambda line: print(line, file=sys.stderr))
    if config.workers == "auto":
        choice = auto_choice(config, spec, steps_done=steps_done)
        if config.backend == "serial":  # one process: the count worker processes would get, taking turns here
            log(
                f"a3c: --workers auto: {count(choice.workers, 'worker')} taking turns in "
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
