"""Steps/s of --backend ray against the shared-memory backend, on this machine, in one run of this script: CartPole-v1
(a fast env: the round trip to the parameter server per update is what limits Ray) and envs/SlowCartPole-v1 at
10 ms per step (a slow data source: the env limits both), with 2 and 16 workers. The slow env runs with 1 env per
worker (an update every 5 env steps: the most round trips per env step) and with the default 8 envs per worker.
Ray runs both ways a worker can reach the parameter server: as workers on its node do by default (shared memory,
`--ray-same-node shared-memory`), and by actor calls, as workers on other nodes do (`--ray-same-node ray`, here on
one machine: the per-update cost of a cluster worker, without the network), with each `--push-every` given.
Runs alternate (shared-memory, ray, ray by calls, shared-memory, ...) so that load on the machine hits all alike;
the ratio is of medians.

    pip install -e ".[ray]"
    python -m scripts.bench_ray --repeats 2 --out bench-out

steps/s is the trainer's own (summary.json: from the first env step to the end of the last update; start-up, which
for Ray includes starting a local Ray instance, is the startup column). Prints a markdown table; writes
OUT/ray.json, .md and .png.
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from a3c.spec.config import Config
from scripts._common import markdown_table, run_train, save_results

ENVS = {
    "CartPole-v1": ["--env", "CartPole-v1"],
    "slow 10 ms": ["--env", "envs/SlowCartPole-v1", "--env-kwargs", "latency=0.01", "mode=sleep"],
}


def push_costs(calls: int) -> dict[str, float]:
    """What one update costs the Ray backend beyond the shared-memory one, on CartPole-v1's default model: the
    round trip of ``ParameterServer.push`` (the gradient out, the weights and control back) called from this process
    through Ray, against the same method called in-process (applying the update, copying the weights)."""
    import pickle

    import numpy as np
    import ray

    from a3c.run.backends.ray.backend import connect, remove_shared_memory
    from a3c.run.backends.ray.server import ParameterServer
    from a3c.spec.environment import describe_env

    config = Config(workers=2, eval_every=0)
    names: list[str] = []
    spec = describe_env(config.env, {})
    local = ParameterServer(spec, config)
    grad = np.zeros(local.coordinator.params.numel(), dtype=np.float32)

    def per_call(call) -> float:
        call()  # warm
        start = time.perf_counter()
        for _ in range(calls):
            call()
        return (time.perf_counter() - start) / calls

    message = pickle.dumps((0, grad.tobytes(), 0, 1e-3, None), protocol=pickle.HIGHEST_PROTOCOL)  # as RayChannel.push's
    in_process = per_call(lambda: local.push(message))
    connect(config)
    try:
        server = ray.remote(ParameterServer).options(num_cpus=0).remote(spec, config)
        names = ray.get(server.shared_memory_names.remote())
        round_trip = per_call(lambda: ray.get(server.push.remote(message)))
        stats_row = local.load_stats(0)
        publish = per_call(lambda: server.publish.remote(0, 40, None, stats_row))
        ray.get(server.control.remote())
    finally:
        ray.shutdown()
        remove_shared_memory(names)
    return {
        "push_in_process_ms": in_process * 1e3,
        "push_round_trip_ms": round_trip * 1e3,
        "publish_submit_ms": publish * 1e3,
        "parameters": int(grad.size),
    }


def figure(results: list[dict]) -> Any:
    """A bar per Ray run: its steps/s over the shared-memory backend's (blue: workers by shared memory; orange: by
    actor calls)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(12, 4.5), dpi=100)
    labels = [
        f"{r['env'].replace('CartPole-v1', 'CartPole')} x{r['envs_per_worker']}\n{r['workers']} workers\n"
        + ("shared mem." if r["push_every"] is None else f"calls, push {r['push_every']}")
        for r in results
    ]
    colours = ["tab:blue" if r["push_every"] is None else "tab:orange" for r in results]
    ax.bar(range(len(results)), [r["ratio"] for r in results], color=colours)
    ax.set_xticks(range(len(results)), labels, fontsize=7)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_ylabel("Ray steps/s over shared-memory steps/s")
    ax.set_title(
        "--backend ray against shared memory, same machine, same run\n"
        "blue: Ray workers by shared memory (the server's node); orange: by actor calls (as on other nodes)",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 16], help="worker counts")
    parser.add_argument("--repeats", type=int, default=2, help="runs per backend and setting")
    parser.add_argument("--fast-steps", type=int, default=200_000, help="env steps of each CartPole-v1 run")
    parser.add_argument("--slow-steps-per-worker", type=int, default=1500, help="env steps per worker, slow env")
    parser.add_argument(
        "--slow-envs-per-worker", type=int, nargs="+", default=[1, 8], help="--envs-per-worker values, slow env"
    )
    parser.add_argument(
        "--push-every",
        type=int,
        nargs="+",
        default=[1, 4],
        help="--push-every values of the Ray runs by actor calls (CartPole-v1; the slow env: the first)",
    )
    parser.add_argument("--calls", type=int, default=2000, help="calls timed for the per-update cost")
    parser.add_argument("--out", type=Path, default=Path("bench-out"), help="folder for the JSON, table and PNG")
    args = parser.parse_args()

    costs = push_costs(args.calls)
    print(
        f"per update, CartPole-v1 model ({costs['parameters']:,} parameters): push in-process "
        f"{costs['push_in_process_ms']:.3f} ms, push through Ray {costs['push_round_trip_ms']:.3f} ms, "
        f"publish (no wait) {costs['publish_submit_ms']:.3f} ms",
        flush=True,
    )
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = [("CartPole-v1", ENVS["CartPole-v1"], Config().envs_per_worker)]  # the default
        settings += [("slow 10 ms", ENVS["slow 10 ms"], k) for k in args.slow_envs_per_worker]
        for env, env_flags, envs_per_worker in settings:
            for workers in args.workers:
                if env == "CartPole-v1":
                    steps = args.fast_steps
                else:  # the same work per worker whatever the count
                    steps = args.slow_steps_per_worker * workers
                flags = [*env_flags, "--envs-per-worker", str(envs_per_worker), "--total-steps", str(steps)]
                flags += ["--workers", str(workers), "--eval-every", "0", "--preset", "none"]
                # the Ray runs by actor calls: CartPole-v1 with each --push-every given; the slow env the first one
                pushes = args.push_every if env == "CartPole-v1" else args.push_every[:1]
                # each Ray run: (how its workers reach the server, --push-every or None)
                ray_runs = {"ray": ("shared memory", None), **{f"ray-calls-{n}": ("actor calls", n) for n in pushes}}
                backends = ["shared-memory", *ray_runs]
                sps: dict[str, list[float]] = {b: [] for b in backends}
                startup: dict[str, list[float]] = {b: [] for b in backends}
                for r in range(args.repeats):
                    for backend in backends:
                        extra = ["--backend", "shared-memory" if backend == "shared-memory" else "ray"]
                        if backend.startswith("ray-calls"):
                            extra += ["--ray-same-node", "ray", "--push-every", str(ray_runs[backend][1])]
                        run_dir = Path(tmp) / f"{env.split()[0]}-{envs_per_worker}-{workers}-{backend}-{r}"
                        s = run_train([*flags, *extra], run_dir)
                        sps[backend].append(s["steps_per_s"])
                        startup[backend].append(s["startup_s"] or 0.0)
                        print(
                            f"{env}, {envs_per_worker} envs/worker, {workers} workers, {backend}: "
                            f"{s['steps_per_s']:,.0f} steps/s",
                            flush=True,
                        )
                shm = statistics.median(sps["shared-memory"])
                for backend in backends[1:]:
                    ray = statistics.median(sps[backend])
                    results.append(
                        {
                            "env": env,
                            "envs_per_worker": envs_per_worker,
                            "workers": workers,
                            "reaches_server_by": ray_runs[backend][0],
                            "push_every": ray_runs[backend][1],
                            "shared_memory_sps": sps["shared-memory"],
                            "ray_sps": sps[backend],
                            "ratio": ray / shm,
                            "startup_s": {
                                "shared-memory": statistics.median(startup["shared-memory"]),
                                "ray": statistics.median(startup[backend]),
                            },
                        }
                    )

    rows = [
        [
            r["env"],
            r["envs_per_worker"],
            r["workers"],
            r["reaches_server_by"],
            r["push_every"] or "",
            statistics.median(r["shared_memory_sps"]),
            statistics.median(r["ray_sps"]),
            f"{r['ratio']:.2f}x",
            r["startup_s"]["shared-memory"],
            r["startup_s"]["ray"],
        ]
        for r in results
    ]
    table = markdown_table(
        [
            "env",
            "envs/worker",
            "workers",
            "ray: workers reach the server by",
            "push every",
            "shared-memory steps/s",
            "ray steps/s",
            "ray / shared-memory",
            "startup s (shm)",
            "startup s (ray)",
        ],
        rows,
    )
    fig = figure(results)
    table += (
        f"\n\nPer update (CartPole-v1's model, {costs['parameters']:,} parameters, {args.calls} calls): the server's "
        f"push in-process {costs['push_in_process_ms']:.3f} ms; through Ray (gradient out, weights back) "
        f"{costs['push_round_trip_ms']:.3f} ms; submitting a publish {costs['publish_submit_ms']:.3f} ms."
    )
    save_results(args.out, "ray", {"results": results, "per_update": costs}, table, fig)


if __name__ == "__main__":
    main()
