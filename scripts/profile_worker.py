"""Where a worker's time goes: runs one Worker in this process (serial mode: no other processes) under cProfile for
a fixed number of env steps, then prints the time per phase of the loop (env.step, acting forward, action
sampling, loss + backward, optimizer step, weight pull) and the top functions.

    python -m scripts.profile_worker --envs-per-worker 8 --n-steps 5 --steps 40000
    python -m scripts.profile_worker --env Hopper-v5 --preset env --steps 30720 --breakdown   # as a run of it acts
    python -m scripts.profile_worker --phases     # no profiler: the median time of each phase of the loop
    python -m scripts.profile_worker --env ALE/Pong-v5 --envs-per-worker 4 --n-steps 20 --steps 12000 --phases --bf16
    python -m scripts.profile_worker --env ALE/Pong-v5 --envs-per-worker 4 --n-steps 20 --steps 16000 --breakdown --bf16

The settings are a3c.train's for ``--env ENV --preset NAME`` and the flags given (``--preset none`` unless given: the
objective's plain defaults); the process runs with one thread in every native pool, as a worker does.

``--phases`` times pull, rollout, update and publish with the clock (after 300 untimed iterations) and prints the
median of each in microseconds: the way to compare two checkouts (run it from each with ``PYTHONPATH``, in turn,
several times; on a shared machine take the fastest run of each).

``--breakdown`` times the parts of the loop themselves with the process's CPU clock (no profiler: a wrapper around
each part, a microsecond or so a call): the emulator (ALE's own ``act``, for the gymnasium backend's Atari envs), the
rest of the env step (preprocessing, wrappers), acting's forward passes, action sampling, the update's forward, its loss
gradient, its backward, the optimizer step (push), the weight pull, and the rest of the loop (bookkeeping, publish,
the Python between the parts), each as a share of the loop's time. CPU time, not wall time: on a shared machine a
part's wall time includes the time its process waited for a core, and ale-vector's emulator runs on a thread of its
own, whose CPU time the process's clock counts and a thread's would not. Where the process's clock moves only on the
scheduler's tick (a CPU-time limit, ``ulimit -t``), it times with this thread's clock and says so.
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import cProfile
import itertools
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

from a3c.learn.model import build_model, flatten_parameters
from a3c.learn.optim import make_optimizer
from a3c.run.backends.shared_memory import SharedMemoryCoordinator, SharedRun
from a3c.run.board import EpisodeBoard
from a3c.run.threads import limit_native_threads
from a3c.run.worker import Worker
from a3c.spec.environment import describe_env
from a3c.spec.seeding import WorkerSeeds
from a3c.train import parse_cli
from scripts._common import markdown_table

# phase name -> (file suffix, function name) whose cumulative time makes that phase; where several functions match
# (gymnasium's nested wrappers all define `step`), the outermost, i.e. the largest cumulative time, is the phase
# (the model's forward passes: a3c.learn.update.mlp's for MLP models without a core, a3c.learn.update.cnn's for CNNs
# without one, the model's own for the others)
PHASES = {
    "env.step (gymnasium, with its wrappers)": [("gymnasium/wrappers/common.py", "step")],
    "model forward (update)": [
        ("a3c/learn/model.py", "unroll"),
        ("a3c/learn/update/mlp.py", "unroll"),
        ("a3c/learn/update/cnn.py", "unroll"),
        ("a3c/learn/update/mlp.py", "forward"),
        ("a3c/learn/update/cnn.py", "forward"),
    ],
    "model backward (update, by hand)": [
        ("a3c/learn/update/mlp.py", "backward"),
        ("a3c/learn/update/cnn.py", "backward"),
    ],
    "model forward (acting)": [
        ("a3c/learn/model.py", "policy"),
        ("a3c/learn/update/mlp.py", "policy"),
        ("a3c/learn/update/cnn.py", "policy"),
    ],
    "action sampling": [("a3c/learn/distributions.py", "sample")],
    "update: forward+loss+backward+clip": [("a3c/learn/update/loop.py", "learn_rollout")],
    "optimizer step (push)": [("a3c/run/backends/shared_memory.py", "push")],
    "weight pull": [("a3c/run/backends/shared_memory.py", "pull")],
    "episode bookkeeping": [("a3c/run/worker.py", "finish_episode")],
}


def _matches(key: tuple[str, int, str], functions: list[tuple[str, str]]) -> bool:
    return any(key[0].endswith(suffix) and key[2] == name for suffix, name in functions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--envs-per-worker", type=int, help="a3c.train's (default: the table's)")
    parser.add_argument("--n-steps", type=int, help="a3c.train's (default: the table's)")
    parser.add_argument("--steps", type=int, default=40_000)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--phases", action="store_true", help="time the loop's phases without the profiler")
    parser.add_argument("--bf16", action="store_true", help="an image model's torso in bfloat16 (a3c.train's --bf16)")
    parser.add_argument(
        "--breakdown", action="store_true", help="time each part of the loop with the clock (the module docstring)"
    )
    parser.add_argument("--env-backend", help="a3c.train's --env-backend")
    parser.add_argument("--algo", choices=["a3c", "ppo"], help="a3c.train's --algo (the objective)")
    parser.add_argument("--minibatch-size", type=int, help="with --algo ppo")
    parser.add_argument("--n-epochs", type=int, help="with --algo ppo")
    parser.add_argument(
        "--preset",
        default="none",
        help="a3c.train's --preset: the table the settings start from (default none: the objective's plain defaults; "
        "env: the env's own table, as a run of it takes it, normalisation and all)",
    )
    args = parser.parse_args()
    limit_native_threads()  # one thread in every native pool, as in a worker (a3c.run.threads)
    # the profiler runs the worker to the budget; --phases and --breakdown time their iterations after untimed ones,
    # every one a whole update (past the budget the learn loop stops after a rollout's first minibatch)
    budget = args.steps if not (args.phases or args.breakdown) else 1000 * args.steps
    argv = ["--env", args.env, "--workers", "1", "--total-steps", str(budget)]
    argv += [] if args.preset == "env" else ["--preset", args.preset]
    for name in ("envs_per_worker", "n_steps", "env_backend", "algo", "minibatch_size", "n_epochs"):
        if getattr(args, name) is not None:
            argv += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    argv += ["--bf16"] if args.bf16 else []
    cfg = parse_cli(argv)[0]
    spec = describe_env(cfg.env, cfg.env_kwargs)
    params, _ = flatten_parameters(build_model(spec, cfg)[0], shared=True)
    coordinator = SharedMemoryCoordinator(
        SharedRun(
            params,
            make_optimizer(cfg.optimizer, params, cfg.lr, 1, eps=cfg.optimizer_eps),
            EpisodeBoard(1),
            cfg.total_steps,
        )
    )
    worker = Worker(0, coordinator.channel(0), cfg, spec, time.time(), WorkerSeeds(cfg.seed, 0, 0, 0))
    if args.phases:
        time_phases(worker, args.steps // (cfg.envs_per_worker * cfg.n_steps))
        return
    if args.breakdown:
        time_parts(worker, args.steps // (cfg.envs_per_worker * cfg.n_steps))
        return
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    worker.run()
    profiler.disable()
    wall = time.perf_counter() - start
    stats = pstats.Stats(profiler)
    total = stats.total_tt
    rows = []
    for phase, functions in PHASES.items():
        cum = max((v[3] for k, v in stats.stats.items() if _matches(k, functions)), default=0.0)
        rows.append([phase, cum, f"{cum / total:.0%}"])
    print(
        f"{args.steps} env steps in {wall:.2f} s under the profiler ({args.steps / wall:,.0f} steps/s; "
        f"K={cfg.envs_per_worker}, n={cfg.n_steps})\n"
    )
    print(markdown_table(["phase", "cumulative s", "share"], rows))
    print("\n(update includes the optimizer step; phases overlap where one calls another)\n")
    stats.sort_stats("tottime").print_stats(args.top)


def time_phases(worker: Worker, iterations: int, warm_up: int = 300) -> None:
    """The loop of Worker.step, each phase timed: prints the median of each over ``iterations``, in microseconds."""
    phases: dict[str, list[float]] = {"pull": [], "rollout": [], "update": [], "publish": []}
    clock = time.perf_counter
    for i in range(warm_up + iterations):
        t0 = clock()
        worker.acted_at = worker.channel.pull(worker.params)
        t1 = clock()
        worker.rollout()
        t2 = clock()
        worker.learn()
        t3 = clock()
        worker.publish()
        t4 = clock()
        if i >= warm_up:
            for name, seconds in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                phases[name].append(seconds)
    medians = {name: statistics.median(v) * 1e6 for name, v in phases.items()}
    steps = worker.config.envs_per_worker * worker.config.n_steps
    print(
        "  ".join(f"{name} {us:.1f} us" for name, us in medians.items())
        + f"  | loop {sum(medians.values()):.1f} us per {steps} steps"
    )


def cpu_clock() -> tuple[Callable[[], float], str | None]:
    """The clock ``time_parts`` times with, and a note to print where it is not the usual one: the process's CPU clock
    (every thread's time: ale-vector's emulator thread too), unless it advances only on the scheduler's tick here.
    Linux accounts it that way for a process under a CPU-time limit (``ulimit -t``; SLURM sets one): consecutive reads
    are then equal, and a part of a few microseconds reads 0. There, this thread's CPU clock, exact still."""
    reads = [time.process_time() for _ in range(1000)]
    if sum(a == b for a, b in itertools.pairwise(reads)) < len(reads) // 2:  # (an exact clock moves read to read)
        return time.process_time, None
    return time.thread_time, (
        "note: this process's CPU clock advances only every few milliseconds here (a CPU-time limit: ulimit -t); the "
        "parts are timed with this thread's CPU clock, which leaves out other threads' time (ale-vector's emulator)"
    )


class _TimedEmulator:
    """An ALE interface whose ``act`` (the emulator's frames) adds its time on ``clock`` to ``spent["emulator"]`` and
    whose ``getScreenGrayscale`` (a screen read through the palette) to ``spent["screens"]``."""

    def __init__(self, ale: Any, spent: dict[str, float], clock: Callable[[], float]) -> None:
        self._ale, self._spent, self._clock = ale, spent, clock

    def act(self, *args: Any) -> Any:
        t = self._clock()
        try:
            return self._ale.act(*args)
        finally:
            self._spent["emulator"] += self._clock() - t

    def getScreenGrayscale(self, *args: Any) -> Any:  # noqa: N802  (ALE's name)
        t = self._clock()
        try:
            return self._ale.getScreenGrayscale(*args)
        finally:
            self._spent["screens"] += self._clock() - t

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ale, name)


def time_parts(worker: Worker, iterations: int, warm_up: int = 50) -> dict[str, float]:
    """The loop of Worker.step with each part timed (the module docstring); prints each part's share of the loop and
    its microseconds per agent step, and returns the shares."""
    clock, note = cpu_clock()  # the CPU time of all the process's threads (the module docstring), where exact
    if note:
        print(note)
    names = ["env", "emulator", "acting forward", "sampling", "update forward", "loss gradient", "update backward"]
    spent: dict[str, float] = dict.fromkeys([*names, "screens", "resize", "optimizer step (push)", "pull"], 0.0)

    def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def part(*args: Any, **kwargs: Any) -> Any:
            t = clock()
            try:
                return function(*args, **kwargs)
            finally:
                spent[name] += clock() - t

        return part

    # instance attributes in front of the methods: the loop looks each up as it calls it
    envs: Any = worker.envs
    envs.step = timed("env", envs.step)
    for env in getattr(envs, "envs", []):  # the gymnasium backend's Atari envs: AtariFrames under LifeLossTerminal
        frames = getattr(env, "env", None)
        if hasattr(frames, "ale") and hasattr(frames, "noop_count"):
            frames.ale = _TimedEmulator(frames.ale, spent, clock)
            frames._resize = timed("resize", frames._resize)  # OpenCV's INTER_AREA, 210x160 -> 84x84
    # the learner's parts (a3c.learn.objectives), whichever objective: A3C's bound steps, PPO's network pass and
    # surrogate gradient; acting through the worker's own reference to act
    learner: Any = worker.learner  # (worker.path is the same object: acting goes through it)
    learner.act = timed("acting forward", learner.act)
    network: Any = learner.network
    for name, part in (("unroll", "update forward"), ("forward", "update forward"), ("backward", "update backward")):
        setattr(network, name, timed(part, getattr(network, name)))
    if hasattr(learner, "loss_grads"):  # A3C: its bound steps
        learner.unroll, learner.backward = network.unroll, network.backward
        learner.loss_grads = timed("loss gradient", learner.loss_grads)
    else:  # PPO: the surrogate gradient object
        learner.loss = timed("loss gradient", learner.loss)
    dist: Any = worker.dist
    dist.sample = timed("sampling", dist.sample)
    channel: Any = worker.channel
    channel.push = timed("optimizer step (push)", channel.push)
    channel.pull = timed("pull", channel.pull)
    start = clock()
    for i in range(warm_up + iterations):
        if i == warm_up:
            spent.update(dict.fromkeys(spent, 0.0))
            start = clock()
        worker.step()
    total = clock() - start
    steps = iterations * worker.config.envs_per_worker * worker.config.n_steps
    parts = dict(spent)
    emulator, screens, resize = parts.pop("emulator"), parts.pop("screens"), parts.pop("resize")
    if emulator > 0:  # the env's own parts beside the emulator: preprocessing, wrappers
        parts = {
            "emulator (ALE's act)": emulator,
            "screens (ALE's getScreenGrayscale)": screens,
            "resize (OpenCV)": resize,
            "env's rest (max-pool, stack, wrappers, flags)": parts.pop("env") - emulator - screens - resize,
            **parts,
        }
    parts["rest of the loop"] = total - sum(parts.values())
    rows = [[name, seconds / steps * 1e6, f"{seconds / total:.1%}"] for name, seconds in parts.items()]
    print(f"{steps} agent steps in {total:.2f} CPU s ({steps / total:,.0f} steps per CPU second, one worker)\n")
    print(markdown_table(["part", "us per agent step", "share of the loop"], rows))
    return {name: seconds / total for name, seconds in parts.items()}


if __name__ == "__main__":
    main()
