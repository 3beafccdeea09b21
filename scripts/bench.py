"""The benchmark driver: envs x arms x seeds x a budget, each finished run appended at once to the results store, a
stored run skipped, a stopped one resumed from its checkpoint by the same command.

    python -m scripts.bench run --queue benchmarks/queue.toml            # the queue: what is not yet stored
    python -m scripts.bench run --queue benchmarks/queue.toml --dry-run  # what would run, and what is stored
    python -m scripts.bench run --env CartPole-v1 --arm a3c= sb3-a2c --seeds 1 2 --budget 30000
    python -m scripts.bench table --env CartPole-v1                      # the table the docs generate
    python -m scripts.bench figure --env CartPole-v1 --out cartpole.png  # returns against steps and wall time
    python -m scripts.bench adopt RUN_DIR --arm NAME=FLAGS --log LOG     # a run a3c.train made by hand, stored

An arm is ``NAME=FLAGS`` (a3c.train's flags; ``a3c=`` is the env's preset) or a peer: sb3-a2c, sb3-ppo (rl-zoo3's
settings), sb3-ppo-cleanrl (CleanRL's). One run at a time by default (--jobs: more), each a3c arm with --workers 2
unless its flags say otherwise. Ctrl-C stops the run under way at a checkpoint and the driver with it; the same
command resumes that run (an SB3 peer starts it again) and goes on with the rest. The runs' directories live under
--work-dir; the store is docs/data/results.jsonl unless --store says otherwise.
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import math
import shlex
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from a3c.record.files import make_folder
from a3c.spec.environment import check_env_id
from a3c.spec.errors import OneLineParser, UserError, run_cli
from scripts.benchmark import arms as arms_
from scripts.benchmark import queue as queue_
from scripts.benchmark.runner import Children, Run, arm_conflict, execute, row_of, score, state
from scripts.benchmark.store import DEFAULT_STORE, REPO, Store, StoreError, code_commit, commit_store

DEFAULT_WORK_DIR = REPO / "runs" / "bench"


PROG = "python -m scripts.bench"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description=(__doc__ or "").split("\n\n")[0],
        epilog=(__doc__ or "").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    store_help = f"the results store (default: {DEFAULT_STORE.relative_to(REPO)})"

    run = sub.add_parser("run", help="run what is not stored yet")
    run.add_argument("--queue", type=Path, help="the runs of this queue file (benchmarks/queue.toml)")
    # a list flag given twice counts every value (action="extend": argparse's default kept the last list alone, so
    # --arm A --arm B ran B without a word)
    run.add_argument(
        "--only", nargs="+", action="extend", metavar="TEXT", help="with --queue: the blocks whose name holds a TEXT"
    )
    run.add_argument("--env", nargs="+", action="extend", default=[], metavar="ID", help="envs (without --queue)")
    run.add_argument("--arm", nargs="+", action="extend", default=[], metavar="ARM", help="NAME=FLAGS or a peer's name")
    run.add_argument("--seeds", nargs="+", action="extend", default=[], metavar="SEED", help="seeds, or FIRST-LAST")
    run.add_argument("--budget", type=_positive, help="env steps of each run")
    run.add_argument("--threshold", type=_finite, help="the return counted as solved (default: the env's)")
    run.add_argument(
        "--workers",
        default=None,
        help="--workers of an a3c arm whose flags name none (default: 2; default: give none, a3c.train's own)",
    )
    run.add_argument(
        "--evaluate",
        type=_count,
        default=0,
        metavar="EPISODES",
        help="a3c arms: a3c.evaluate on the final checkpoint and the best (checkpoints/best.pt)",
    )
    run.add_argument("--store", type=Path, default=DEFAULT_STORE, help=store_help)
    run.add_argument(
        "--work-dir", type=Path, default=DEFAULT_WORK_DIR, help="where the runs' directories live (default: runs/bench)"
    )
    run.add_argument("--any-commit", action="store_true", help="a run stored from any commit counts as done")
    run.add_argument("--dry-run", action="store_true", help="list what would run and what is stored; run nothing")
    run.add_argument("--jobs", type=_positive, default=1, help="runs at a time (default: 1); more: output to log.txt")
    run.add_argument(
        "--commit-results", action="store_true", help="git commit the store (that file alone) after each stored run"
    )

    adopt = sub.add_parser("adopt", help="store a finished run that a3c.train made outside the driver")
    adopt.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run's directory (it has ended)")
    adopt.add_argument(
        "--arm", required=True, metavar="NAME=FLAGS", help="its name and the a3c.train flags it was started with"
    )
    adopt.add_argument("--log", type=Path, help="its output, every session's (for each session's training time)")
    adopt.add_argument(
        "--code", type=Path, default=REPO, help="the checkout whose code ran it, for the row's commit (default: this)"
    )
    adopt.add_argument("--evaluate", type=_count, default=0, metavar="EPISODES", help="a3c.evaluate its final and best")
    adopt.add_argument("--store", type=Path, default=DEFAULT_STORE, help=store_help)
    adopt.add_argument("--work-dir", type=Path, default=DEFAULT_WORK_DIR, help="where its driver folder goes")

    for name, what in (("table", "print the store's table"), ("figure", "draw the store's curves into a PNG")):
        p = sub.add_parser(name, help=what)
        p.add_argument("--store", type=Path, default=DEFAULT_STORE, help=store_help)
        p.add_argument("--env", nargs="+", action="extend", metavar="ID", help="only these envs")
        p.add_argument("--arm", nargs="+", action="extend", metavar="NAME", help="only these arms")
        p.add_argument("--budget", nargs="+", action="extend", type=_positive, help="only these budgets")
        p.add_argument("--seed", nargs="+", action="extend", type=_count, help="only these seeds")
        if name == "table":
            p.add_argument(
                "--view",
                choices=["arms", "seeds", "ratio"],
                default="arms",
                help="env x arm; each run; or two arms' steps/s seed by seed and their ratio (the first --arm over the "
                "second)",
            )
        else:
            p.add_argument("--out", type=Path, required=True, help="the figure to write (.png, .svg or .pdf)")
    return parser


def _positive(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a positive whole number, not {text!r}")
    return int(text)


def _count(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"a whole number, 0 or more, not {text!r}")
    return int(text)


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"a finite number, not {text!r}")
    return value


def _final(value: float | None) -> str:
    """A row's final 100-episode mean as the driver prints it: "-" where no episode ended within the budget."""
    return "-" if value is None else f"{value:.1f}"


def _int(text: str) -> list[int] | str:
    return [int(text)] if text.isdigit() else text  # not a seed: parse_seeds names it


# the run flags a queue file sets itself: flag -> its argparse name
RUN_FLAGS = {
    "--env": "env",
    "--arm": "arm",
    "--seeds": "seeds",
    "--budget": "budget",
    "--threshold": "threshold",
    "--workers": "workers",
    "--evaluate": "evaluate",
}


def plan(args: argparse.Namespace) -> list[Run]:
    """The runs the command names: a queue's, or --env x --arm x --seeds at --budget."""
    if args.queue is not None:
        # the queue names its envs, arms, seeds and budgets: a run flag beside it would be ignored (the whole queue
        # run where one run was meant), so it is refused
        beside = [flag for flag, value in RUN_FLAGS.items() if getattr(args, value) not in (None, [], 0)]
        if beside:
            one = len(beside) == 1
            raise queue_.QueueError(
                f"{' and '.join(beside)} {'does' if one else 'do'} not apply to --queue, whose file names its runs "
                f"(their workers and evaluations too); drop {'it' if one else 'them'}, or --queue (--only TEXT picks "
                "the queue's blocks)"
            )
        runs = queue_.load(args.queue)
        if args.only:
            blocks = sorted({r.group for r in runs})
            unmatched = [text for text in args.only if not any(text in block for block in blocks)]
            if unmatched:
                raise queue_.QueueError(
                    f"--only {' '.join(map(repr, unmatched))} names no block of {args.queue}; its blocks: "
                    f"{', '.join(map(repr, blocks))}"
                )
            runs = [r for r in runs if any(text in r.group for text in args.only)]
        return runs
    if args.only:
        raise queue_.QueueError("--only picks blocks of a --queue file; give --queue FILE, or drop --only")
    if not (args.env and args.arm and args.seeds and args.budget):
        raise queue_.QueueError("give --queue FILE, or --env, --arm, --seeds and --budget")
    workers_given = args.workers or str(arms_.DEFAULT_WORKERS)
    if workers_given not in ("default", "auto") and not (workers_given.isdigit() and int(workers_given) >= 1):
        raise queue_.QueueError(f"--workers must be a positive whole number, auto or default (got {workers_given!r})")
    workers = None if workers_given == "default" else workers_given
    try:
        arms = [arms_.parse_arm(text, workers, args.evaluate) for text in args.arm]
    except ValueError as err:  # shlex: an unclosed quote (ArmError, a ValueError too, says its own)
        if isinstance(err, arms_.ArmError):
            raise
        raise arms_.ArmError(f"--arm: {err}; close the quote") from None
    seeds = [s for text in args.seeds for s in queue_.parse_seeds(text if "-" in text else _int(text), "--seeds")]
    return [Run(env, arm, seed, args.budget, args.threshold) for seed in seeds for env in args.env for arm in arms]


PROVENANCE = ("adopted",)  # arm_spec keys that say where a row came from


def conflicts(asked: dict[str, dict[str, Any]], store: Store, how: str = "asked") -> list[str]:
    """Arm names (``asked``: name -> the spec its rows would record) that the store holds with other settings: one
    name stands for one spec, whether a driver run or ``adopt`` stored it (a changed arm needs a new name, or its
    rows mix). A stored spec may hold more keys than asked (a peer's ``hyperparameters``); those asked must agree,
    but for PROVENANCE: whether adopt stored a run says where its row came from, not what its arm is."""
    stored = {r["arm"]: r["arm_spec"] for r in store.rows()}
    out = []
    for name, spec in asked.items():
        held = stored.get(name)
        if held is not None and any(held.get(k) != v for k, v in spec.items() if k not in PROVENANCE):
            out.append(f"arm {name!r} is stored as {held} and {how} as {spec}: give the changed arm a new name")
    return out


def cmd_run(args: argparse.Namespace) -> int:
    runs = plan(args)
    specs: dict[str, dict[str, Any]] = {}
    for r in runs:  # one name, one arm (its rows and its run folders are keyed by the name)
        held = specs.setdefault(r.arm.name, r.arm.spec())
        if held != r.arm.spec():
            raise queue_.QueueError(
                f"arm {r.arm.name!r} is given twice with other flags ({held} and {r.arm.spec()}): give each a name of "
                "its own"
            )
    # a run named twice (an env or a seed repeated, overlapping queue blocks) is run and stored once
    unique: dict[tuple[str, str, int, int], Run] = {}
    for r in runs:
        unique.setdefault((r.env, r.arm.name, r.seed, r.budget), r)
    runs = list(unique.values())
    store = Store(args.store)
    for line in conflicts({r.arm.name: r.arm.spec() for r in runs}, store):
        raise queue_.QueueError(line)
    commit = code_commit()
    known = arms_.a3c_flags() if any(r.arm.peer is None for r in runs) else set()
    found = [store.find(r.env, r.arm.name, r.seed, r.budget, None if args.any_commit else commit) for r in runs]
    # an env id it cannot make, said before the runs are listed, not when its first run starts (hours into a
    # queue); the envs of stored runs are not made again, so they need not be makeable here
    for env in sorted({run.env for run, stored in zip(runs, found, strict=True) if stored is None}):
        check_env_id(env)
    for run, stored in zip(runs, found, strict=True):  # a folder made with other flags under the arm's name
        conflict = None if stored is not None else arm_conflict(run, args.work_dir, commit)
        if conflict is not None:
            raise queue_.QueueError(conflict)
    todo, waiting, done = [], [], 0
    for run, stored in zip(runs, found, strict=True):
        missing = arms_.unknown_flags(run.arm, known)
        if stored is not None:
            done += 1
            final = _final(stored["final_mean_100"])
            what = f"stored (final {final}, {stored['wall_s']:.0f} s, commit {stored['commit']})"
        elif missing:
            waiting.append(run)
            what = f"waits for a3c.train's {' '.join(missing)}"
        else:
            todo.append(run)
            what = state(run, args.work_dir, commit)
        if args.dry_run or stored is None:
            print(f"{run.env} {run.arm.name} seed {run.seed}, {run.budget:,} steps: {what}", flush=True)
    print(
        f"{len(runs)} runs: {done} stored, {len(todo)} to run, {len(waiting)} waiting for flags; commit {commit}; "
        f"store {args.store}",
        flush=True,
    )
    if args.dry_run or not todo:
        return 0
    store.check_writable()  # (said now, not after the first run's minutes)
    make_folder(args.work_dir, "--work-dir")
    bench_command = shlex.join(["python", "-m", "scripts.bench", *sys.argv[1:]])
    children = Children()
    children.install()
    failed, git = 0, threading.Lock()

    def one(i_run: tuple[int, Run]) -> None:
        nonlocal failed
        i, run = i_run
        if children.stopping is not None:
            return
        head = f"[{i}/{len(todo)}] {run.env} {run.arm.name} seed {run.seed}, {run.budget:,} steps"
        print(f"{head}: {state(run, args.work_dir, commit)}", flush=True)
        outcome, row = execute(run, store, args.work_dir, commit, bench_command, children, quiet=args.jobs > 1)
        if row is not None:
            final = _final(row["final_mean_100"]) + (" (no episode ended)" if row["final_mean_100"] is None else "")
            outcome += f": final {final}, {row['wall_s']:.0f} s, {row['sessions']} session(s)"
            if args.commit_results:
                with git:
                    message = f"results: {run.env} {run.arm.name} seed {run.seed}, {run.budget:,} steps ({commit})"
                    complaint = commit_store(store.path, message)
                outcome += f"; not committed: {complaint}" if complaint else "; committed"
        elif outcome.startswith("failed"):
            failed += 1
            outcome += f"; see {run.folder(args.work_dir, commit)}"
        print(f"{head}: {outcome}", flush=True)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one, enumerate(todo, 1)))
    if children.stopping is not None:
        print("stopped: the same command resumes the run under way and goes on with the rest", flush=True)
        return 128 + children.stopping
    return 1 if failed else 0


def cmd_adopt(args: argparse.Namespace) -> int:
    from scripts.benchmark import adopt

    try:
        arm = arms_.parse_arm(args.arm, workers=None, evaluate=args.evaluate)
    except ValueError as err:  # shlex: an unclosed quote
        raise arms_.ArmError(f"--arm {args.arm}: {err}") from None
    if arm.peer is not None:
        raise queue_.QueueError(f"--arm {args.arm}: adopt takes an a3c run (NAME=FLAGS)")
    missing = arms_.unknown_flags(arm, arms_.a3c_flags())
    if missing:
        raise arms_.ArmError(f"--arm {args.arm}: a3c.train has no {' '.join(missing)}")
    run, entries = adopt.prepare(args.run_dir, arm, args.log)
    commit, store = code_commit(args.code), Store(args.store)
    if commit == "unknown":
        raise queue_.QueueError(f"--code {args.code}: not a git checkout of a3c; give the checkout whose code ran it")
    store.check_writable()
    if store.find(run.env, arm.name, run.seed, run.budget, commit) is not None:
        raise queue_.QueueError(f"{run.env} {arm.name} seed {run.seed} is stored already for commit {commit}")
    spec = {"kind": "a3c", "flags": list(arm.flags), "evaluate": args.evaluate, "adopted": True}
    for line in conflicts({arm.name: spec}, store, how="adopted"):
        raise queue_.QueueError(line)
    make_folder(args.work_dir, "--work-dir")
    folder = adopt.make_folder(run, args.run_dir, entries, args.work_dir.resolve(), commit)
    if args.evaluate:
        children = Children()
        children.install()
        failed = score(run, folder, children, None)
        if failed == "stopped":
            print("stopped: nothing stored; the same command evaluates and stores it", flush=True)
            return 128 + (children.stopping or 0)
        if failed is not None:
            raise queue_.QueueError(f"{failed}; nothing stored")
    bench_command = shlex.join(["python", "-m", "scripts.bench", *sys.argv[1:]])
    row = {**row_of(run, folder, commit, bench_command), "arm_spec": spec}
    store.append(row)
    print(
        f"stored {run.env} {arm.name} seed {run.seed}: final {_final(row['final_mean_100'])}, {row['sessions']} "
        f"session(s), commit {commit}"
    )
    return 0


def _stored_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The store's rows that table and figure draw from (a store that is not there: a typo, not an empty table)."""
    from docsgen import results_store

    if not args.store.exists():
        raise queue_.QueueError(f"--store {args.store}: no such file; give the results store (a .jsonl file)")
    return results_store.select(Store(args.store).rows(), args.env, args.arm, args.budget, args.seed)


def cmd_table(args: argparse.Namespace) -> int:
    from docsgen import results_store

    rows = _stored_rows(args)
    if not rows:
        raise queue_.QueueError(f"no stored run in {args.store} matches")
    try:
        print(results_store.table_of(rows, args.view, args.arm))
    except results_store.TwoArmsNeeded as err:
        raise queue_.QueueError(f"--view ratio: {err.what}; give --arm A B") from None
    return 0


FIGURE_FORMATS = (".png", ".svg", ".pdf")


def cmd_figure(args: argparse.Namespace) -> int:
    from docsgen import results_store

    if args.out.suffix.lower() not in FIGURE_FORMATS:  # (matplotlib would add .png to a bare name, or refuse .txt)
        raise queue_.QueueError(f"--out {args.out}: give a file name ending in {', '.join(FIGURE_FORMATS)}")
    rows = _stored_rows(args)
    if not rows:
        raise queue_.QueueError(f"no stored run in {args.store} matches")
    fig = results_store.figure(rows)
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.out)
    except OSError as err:
        raise queue_.QueueError(f"--out {args.out}: cannot write it ({err.strerror or err})") from None
    print(f"wrote {args.out}")
    return 0


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        commands = {"run": cmd_run, "adopt": cmd_adopt, "table": cmd_table, "figure": cmd_figure}
        return commands[args.command](args)
    except (queue_.QueueError, arms_.ArmError, StoreError) as err:
        raise UserError(str(err)) from None


def main(argv: Sequence[str] | None = None) -> int:
    """The command: a usage error or a refused run is one line on stderr and exit code 2 (run_cli)."""
    return run_cli(_main, argv, prog=PROG)


if __name__ == "__main__":
    sys.exit(main())
