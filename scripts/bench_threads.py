"""Workers' steps/s at larger network widths and rollouts, for two checkouts of a3c in turn: what one thread in every
native pool (a3c.run.threads) buys where numpy's BLAS used to start threads of its own in every worker.

    python -m scripts.bench_threads --checkout before=/tmp/a3c-before --checkout after=. --out bench-out

For each shape (--widths x --rollouts: ``--hidden-sizes W W --n-steps T``) it runs ``python -m a3c.train --env
CartPole-v1 --workers 2 --total-steps N --lr-schedule constant --eval-every 0`` once per checkout, alternating (the
checkout's a3c imported from its root, through PYTHONPATH: _common.run_train's ``repo``), and reads summary.json's
steps_per_s. Prints a markdown table (steps/s of each checkout and their ratio); writes OUT/threads.json, .md, .png.
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import tempfile
from pathlib import Path

from scripts._common import markdown_table, run_train, save_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", action="append", required=True, help="NAME=PATH of an a3c checkout (2 or more)")
    parser.add_argument("--widths", type=int, nargs="+", default=[64, 256, 512])
    parser.add_argument("--rollouts", type=int, nargs="+", default=[5, 32, 64])
    parser.add_argument("--total-steps", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    args = parser.parse_args()
    checkouts = dict(item.split("=", 1) for item in args.checkout)
    names = list(checkouts)
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for width in args.widths:
            for rollout in args.rollouts:
                row: dict[str, object] = {"width": width, "n_steps": rollout}
                for name in names:
                    run_dir = Path(tmp) / f"{name}-{width}-{rollout}"
                    flags = ["--env", "CartPole-v1", "--workers", str(args.workers), "--total-steps"]
                    flags += [str(args.total_steps), "--lr-schedule", "constant", "--eval-every", "0"]
                    flags += ["--hidden-sizes", str(width), str(width), "--n-steps", str(rollout)]
                    summary = run_train(flags, run_dir, repo=Path(checkouts[name]).resolve())
                    row[name] = summary["steps_per_s"]
                    sps = summary["steps_per_s"]
                    print(f"width {width}, n_steps {rollout}, {name}: {sps:,.0f} steps/s", flush=True)
                results.append(row)
    first, last = names[0], names[-1]
    table = markdown_table(
        ["width", "n_steps", *(f"{n} steps/s" for n in names), f"{last} / {first}"],
        [[r["width"], r["n_steps"], *(r[n] for n in names), r[last] / r[first]] for r in results],  # type: ignore[operator]
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [f"{r['width']}x{r['width']}\nn={r['n_steps']}" for r in results]
    x = range(len(results))
    bar = 0.8 / len(names)
    for i, name in enumerate(names):
        ax.bar([j + i * bar for j in x], [r[name] for r in results], bar, label=name)  # type: ignore[misc]
    ax.set_xticks([j + bar * (len(names) - 1) / 2 for j in x], labels, fontsize=7)
    ax.set_ylabel("steps/s (summary.json)")
    ax.set_title(f"CartPole-v1, {args.workers} workers: hidden sizes x rollout length")
    ax.legend()
    fig.tight_layout()
    save_results(args.out, "threads", {"checkouts": checkouts, "results": results}, table, fig)


if __name__ == "__main__":
    main()
