"""Evaluation during training (``--eval-every STEPS``, ``--eval-episodes N``): the deterministic policy scored on
envs of its own, apart from the workers, as the A3C paper's and pytorch-a3c's test process does.

Every ``eval_every`` global steps the main process takes a snapshot of the run (``Coordinator.snapshot()``: the
weights, at one instant, with the global step they belong to), copies its weights into the evaluation channel and
asks for an evaluation. The evaluator, a process of its own under the shared-memory backend (supervised like the
workers: restarted if it dies or stops beating, under --max-restarts) or a call in the main process under the
serial backend, loads them, plays N episodes with the deterministic policy (``a3c.record.agent.run_episodes``, the same
code as ``python -m a3c.evaluate`` and ``a3c.load``) and publishes the result. It never pushes a gradient and its
env steps are not counted in the global step. The main process, which owns every writer, then logs ``eval/*`` at the
snapshot's step, appends eval.csv, and writes checkpoints/best.pt (the snapshot, with the result under "eval") when
the mean return beats every earlier one. A request made while the previous evaluation still runs waits for the next
multiple of ``eval_every``: evaluations never queue up behind a slow evaluator.

The episodes of every evaluation start from the same env seeds (``a3c.record.agent.eval_seeds``): evaluations differ by
the weights alone, so a better mean is a better policy, not easier start states.

Channel protocol (shared tensors; one writer each, as the episode board's): the main process writes the weights,
then bumps ``control[REQUESTED]``, and writes nothing more until ``done`` reaches that number; the evaluator writes
``result``, then sets ``done``. A restarted evaluator finds an unfinished request (REQUESTED > done) and runs it.
"""

from __future__ import annotations

import csv
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch

from a3c.learn.model import build_model, flatten_parameters
from a3c.record.agent import BEST, Agent, eval_seeds, make_eval_envs, normalisation, run_episodes
from a3c.record.checkpoint import save_checkpoint
from a3c.record.run_dir import CsvLog, RunDirWriteError, writing
from a3c.run.board import Stat
from a3c.run.supervisor import Supervisor
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec

RESULT_FIELDS = ("mean_return", "std_return", "mean_length", "min_return", "max_return", "episodes", "eval_s")
CSV_COLUMNS = ("global_step", *RESULT_FIELDS, "wall_time")
TAGS = {"mean_return": "eval/mean_return", "std_return": "eval/std_return", "mean_length": "eval/mean_length"}
REQUESTED, STOP = 0, 1  # slots of the control tensor (written by the main process only)
POLL_S = 0.05  # how often an idle evaluator looks for a request (and beats)


class EvalChannel:
    """The shared tensors between the main process and the evaluator (picklable: torch passes them as shared
    memory)."""

    def __init__(
        self, n_params: int, dtype: torch.dtype = torch.float32, stats_shapes: dict[str, tuple[int, ...]] | None = None
    ) -> None:
        self.params = torch.zeros(n_params, dtype=dtype).share_memory_()  # the weights to evaluate
        # the normalisation statistics that go with the weights (key: "obs_stats"/"reward_stats" -> their shape);
        # written with the weights, applied frozen by the evaluator
        self.norm_stats = {
            key: {
                "count": torch.zeros((), dtype=torch.float64).share_memory_(),
                "mean": torch.zeros(shape, dtype=torch.float64).share_memory_(),
                "var": torch.zeros(shape, dtype=torch.float64).share_memory_(),
            }
            for key, shape in (stats_shapes or {}).items()
        }
        self.control = torch.zeros(2, dtype=torch.int64).share_memory_()  # [REQUESTED, STOP]: main writes
        self.done = torch.zeros(1, dtype=torch.int64).share_memory_()  # the last request finished: evaluator writes
        self.result = torch.zeros(len(RESULT_FIELDS), dtype=torch.float64).share_memory_()  # evaluator writes
        self.stats = torch.zeros(1, len(Stat), dtype=torch.float64).share_memory_()  # its heartbeat (Supervisor)


class _Abandon(Exception):
    """The run is stopping: the evaluation in hand is dropped (its result would come after the run's end)."""


class Evaluator:
    """The evaluator's side: its own model, envs and episode seeds; evaluates each request of the channel."""

    def __init__(self, channel: EvalChannel, config: Config, spec: EnvSpec) -> None:
        self.channel, self.config = channel, config
        model, dist = build_model(spec, config)
        self.params, _ = flatten_parameters(model)
        self.agent = Agent(model, dist, spec, config)
        self.envs = make_eval_envs(config, config.eval_episodes)
        self.seeds = eval_seeds(config.seed, config.eval_episodes)
        self.heartbeat = channel.stats.numpy()[0, Stat.HEARTBEAT :]  # a view: one float write per beat
        self.control = channel.control.numpy()
        self.terminate: Callable[[], bool] = lambda: False
        self.beat()

    def beat(self) -> None:
        self.heartbeat[0] = time.time()

    def stopping(self) -> bool:
        return bool(self.control[STOP]) or self.terminate()

    def _step_done(self) -> None:
        """After every env step of an evaluation: the heartbeat, and a stop ends the evaluation at once (the run is
        over; a long evaluation must not hold up its shutdown)."""
        self.beat()
        if self.stopping():
            raise _Abandon

    def pending(self) -> int:
        """The request to run (0: none)."""
        requested = int(self.channel.control[REQUESTED])
        return requested if requested > int(self.channel.done[0]) else 0

    def evaluate(self, request: int) -> None:
        self.params.copy_(self.channel.params)
        norm = self.channel.norm_stats
        self.agent.obs_transform, self.agent.value_scale = normalisation(
            norm.get("obs_stats"), norm.get("reward_stats"), self.config
        )
        self.agent.obs_transform = self.agent.obs_transform or (lambda obs: obs)
        stats = run_episodes(self.agent, self.envs, self.seeds, deterministic=True, on_step=self._step_done)
        summary = stats.summary()
        self.channel.result.copy_(torch.tensor([summary[f] for f in RESULT_FIELDS], dtype=torch.float64))
        self.channel.done[0] = request  # publishes the result written above
        self.beat()

    def run(self, terminate: Callable[[], bool] = lambda: False) -> None:
        self.terminate = terminate
        try:
            while not self.stopping():
                request = self.pending()
                if request:
                    try:
                        self.evaluate(request)
                    except _Abandon:
                        return
                else:
                    self.beat()
                    time.sleep(POLL_S)
        finally:
            self.close()

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []


def evaluator_main(
    channel: EvalChannel, config: Config, spec: EnvSpec, incarnation: int = 0, errors: Connection | None = None
) -> None:
    """Process entry point (started by a ProcessLauncher, as the workers are, and set up the same way:
    a3c.run.worker.run_as_process)."""
    from a3c.run.worker import run_as_process

    run_as_process(lambda terminate: Evaluator(channel, config, spec).run(terminate), errors)


# -- the main process's side ---------------------------------------------------------------------------------------
@dataclass
class EvalResult:
    step: int  # the global step of the weights evaluated
    values: dict[str, float]  # RESULT_FIELDS

    def row(self, wall_time: float) -> dict[str, float]:
        return {"global_step": self.step, **self.values, "wall_time": wall_time}


class EvalLog(CsvLog):
    """eval.csv: one row per evaluation (CSV_COLUMNS)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, CSV_COLUMNS)

    def append(self, row: dict[str, float]) -> None:
        self.write_rows(
            [[int(row[c]) if c in ("global_step", "episodes") else repr(float(row[c])) for c in CSV_COLUMNS]]
        )


def read_eval_log(path: Path, max_step: int | None = None) -> list[dict[str, float]]:
    """The rows of eval.csv; with ``max_step``, only those at or below it, and the file rewritten to hold just them
    (a resume: rows from after the checkpoint are evaluated again, like the TensorBoard events purged from there)."""
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    kept = []
    for row in rows:
        try:
            values = {c: float(row[c]) for c in CSV_COLUMNS}
        except (KeyError, TypeError, ValueError):
            continue  # a row cut by a crash
        if max_step is None or values["global_step"] <= max_step:
            kept.append(values)
    if max_step is not None:
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(CSV_COLUMNS)
            for values in kept:
                writer.writerow(
                    [int(values[c]) if c in ("global_step", "episodes") else repr(values[c]) for c in CSV_COLUMNS]
                )
        tmp.replace(path)
    return kept


class Evaluation:
    """The main process's side of evaluation during training: when to ask (``tick``), the channel to the evaluator
    (a supervised process, or an ``Evaluator`` called right here under the serial backend), and what to do with a
    result: eval.csv, the ``eval/*`` tags (through ``log``, the dashboard's ``add_scalars``), best.pt, the summary."""

    def __init__(
        self,
        config: Config,
        channel: EvalChannel,
        checkpoints: Path,
        eval_csv: Path,
        start_step: int,
        run_start: float,
        supervisor: Supervisor | None = None,
        inline: Evaluator | None = None,
        resumed: bool = False,
        print_line: Callable[[str], None] | None = None,
    ) -> None:
        self.config, self.channel, self.checkpoints, self.run_start = config, channel, checkpoints, run_start
        self.supervisor, self.inline = supervisor, inline
        self.print_line = print_line or (lambda line: print(line, file=sys.stderr))
        every = config.eval_every
        self.next_step = (start_step // every + 1) * every
        self.requests = 0
        self.pending: tuple[int, dict[str, Any]] | None = None  # (request, the snapshot being evaluated)
        self.failed = False
        # a resumed run goes on from the evaluations its checkpoint covers (and from best.pt, which may be newer)
        with writing(eval_csv.name):
            kept = read_eval_log(eval_csv, start_step) if resumed else []
        self.last: dict[str, float] | None = kept[-1] if kept else None
        self.best: dict[str, float] | None = max(kept, key=lambda r: r["mean_return"]) if kept else None
        self.evaluations = len(kept)
        if resumed and (checkpoints / BEST).is_file():
            from a3c.record.checkpoint import load_checkpoint

            saved = load_checkpoint(checkpoints / BEST).get("eval")
            if isinstance(saved, dict) and (self.best is None or saved["mean_return"] > self.best["mean_return"]):
                self.best = {k: float(v) for k, v in saved.items()}
        self.log_file = EvalLog(eval_csv)
        if supervisor is not None:
            supervisor.start_all()

    @property
    def busy(self) -> bool:
        return self.pending is not None

    def tick(
        self, step: int, snapshot: Callable[[], dict[str, Any]], log: Callable[[int, dict[str, float]], None]
    ) -> None:
        """Every main-loop tick: record a finished evaluation; ask for the next one once ``step`` has reached it."""
        self.poll(log, stopping=False)
        if self.failed or step < self.next_step:
            return
        every = self.config.eval_every
        self.next_step = (step // every + 1) * every
        if self.pending is None:
            payload = snapshot()
            # the snapshot is taken after ``step`` was read, and the workers ran on in between: it may already be past
            # the next multiple (a fast env near the end of a run), and the next tick would evaluate the same weights
            # at the same step again. The next evaluation is due after the multiple the snapshot reached.
            self.next_step = (max(step, int(payload["global_step"])) // every + 1) * every
            self.request(payload)
            self.poll(log, stopping=False)  # the serial backend's evaluation has run already

    def request(self, payload: dict[str, Any]) -> None:
        self.requests += 1
        self.pending = (self.requests, payload)
        self.channel.params.copy_(payload["model"])
        for key, tensors in self.channel.norm_stats.items():  # the statistics the weights were trained with
            for name, tensor in tensors.items():
                tensor.copy_(payload[key][name])
        self.channel.control[REQUESTED] = self.requests  # after the weights: this publishes them
        if self.inline is not None:
            try:
                self.inline.evaluate(self.requests)
            except Exception:
                self._fail(f"the evaluator raised an exception:\n{traceback.format_exc().rstrip()}")

    def poll(self, log: Callable[[int, dict[str, float]], None], stopping: bool) -> EvalResult | None:
        if self.supervisor is not None and not self.failed:
            failure = self.supervisor.poll(stopping=stopping)
            if failure is not None:
                detail = f"; its traceback:\n{failure.traceback.rstrip()}" if failure.traceback else ""
                self._fail(f"{failure.describe()}, and it has used its {self.config.max_restarts} restarts{detail}")
        if self.pending is None or int(self.channel.done[0]) < self.pending[0]:
            return None
        values = dict(zip(RESULT_FIELDS, self.channel.result.tolist(), strict=True))
        payload, self.pending = self.pending[1], None
        result = EvalResult(int(payload["global_step"]), values)
        self._record(result, payload, log)
        return result

    def _fail(self, why: str) -> None:
        self.failed, self.pending = True, None
        self.print_line(f"a3c: error: {why}; evaluation is off for the rest of the run (training goes on)")

    def _record(
        self, result: EvalResult, payload: dict[str, Any], log: Callable[[int, dict[str, float]], None]
    ) -> None:
        row = result.row(time.time() - self.run_start)
        self.log_file.append(row)
        log(result.step, {tag: result.values[key] for key, tag in TAGS.items()})
        self.last, self.evaluations = row, self.evaluations + 1
        v = result.values
        new_best = self.best is None or v["mean_return"] > self.best["mean_return"]
        line = (
            f"a3c: eval at step {result.step:,}: return {v['mean_return']:.2f} ± {v['std_return']:.2f}, "
            f"length {v['mean_length']:.1f} ({int(v['episodes'])} episodes)"
        )
        if new_best:
            try:
                save_checkpoint(self.checkpoints / BEST, {**payload, "eval": row})
            except OSError as err:  # the previous best.pt stays; the run stops (a3c.run.trainer)
                self.print_line(line)
                raise RunDirWriteError(f"checkpoints/{BEST}", err) from err
            self.best = row
            line += f"; new best: checkpoints/{BEST}"
        self.print_line(line)

    def finish(self, log: Callable[[int, dict[str, float]], None], wait: bool) -> None:
        """At the end of the run: record the evaluation in flight (``wait``: wait for it while the evaluator lives),
        then stop the evaluator."""
        while wait and self.pending is not None and not self.failed:
            if self.poll(log, stopping=True) is not None:
                break
            if self.supervisor is not None and self.supervisor.all_done():
                break  # the evaluator died while the run was stopping: nothing will come
            time.sleep(POLL_S / 5)
        self.request_stop()
        if self.supervisor is not None:
            self.supervisor.join(5.0)
        if self.inline is not None:
            self.inline.close()
        self.log_file.close()

    def request_stop(self) -> None:
        """The evaluator ends at its next env step (an evaluation in hand is dropped) or idle poll."""
        self.channel.control[STOP] = 1

    def kill_all(self) -> None:
        if self.supervisor is not None:
            self.supervisor.kill_all()

    @staticmethod
    def empty_summary() -> dict[str, Any]:
        """summary.json's evaluation entries for a run that evaluated nothing."""
        return {"evaluations": 0, **dict.fromkeys(("eval_last_mean_return", "eval_last_step"), None)} | dict.fromkeys(
            ("eval_best_mean_return", "eval_best_step"), None
        )

    def summary(self) -> dict[str, Any]:
        def get(row: dict[str, float] | None, key: str) -> Any:
            return None if row is None else (int(row[key]) if key == "global_step" else row[key])

        return {
            "evaluations": self.evaluations,
            "eval_last_mean_return": get(self.last, "mean_return"),
            "eval_last_step": get(self.last, "global_step"),
            "eval_best_mean_return": get(self.best, "mean_return"),
            "eval_best_step": get(self.best, "global_step"),
        }
