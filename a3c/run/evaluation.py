"""The main process's side of evaluation during training (a3c/run/evaluator.py has the design and the evaluator's
side): ``Evaluation`` decides when to ask (every ``eval_every`` global steps, never queueing behind a slow
evaluator), hands the evaluator a snapshot's weights through the channel, supervises the evaluator process (or calls
the serial backend's inline evaluator), and records each result: a row of eval.csv (a3c/record/eval_log.py), the
``eval/*`` tags, checkpoints/best.pt when the mean return beats every earlier one, and summary.json's entries."""

from __future__ import annotations

import math
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a3c.record.checkpoint import BEST, save_checkpoint
from a3c.record.eval_log import RESULT_FIELDS, EvalLog, read_eval_log
from a3c.record.run_dir import RunDirWriteError, writing
from a3c.run.evaluator import POLL_S, REQUESTED, STOP, EvalChannel, Evaluator
from a3c.run.supervisor import Supervisor
from a3c.spec.config import Config
from a3c.spec.wording import count

WAIT_SAID_S = 2.0  # how long the end of a run waits for the evaluation in flight before it says so
TAGS = {"mean_return": "eval/mean_return", "std_return": "eval/std_return", "mean_length": "eval/mean_length"}


@dataclass
class EvalResult:
    step: int  # the global step of the weights evaluated
    values: dict[str, float]  # RESULT_FIELDS

    def row(self, wall_time: float) -> dict[str, float]:
        return {"global_step": self.step, **self.values, "wall_time": wall_time}


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
        on_result: Callable[[EvalResult], None] | None = None,
    ) -> None:
        """``on_result``: called with every result once it is recorded (a3c.run.trainer's on_eval: a3c.tune reports
        it to Optuna's pruner)."""
        self.on_result = on_result
        self.config, self.channel, self.checkpoints, self.run_start = config, channel, checkpoints, run_start
        self.supervisor, self.inline = supervisor, inline
        self.print_line = print_line or (lambda line: print(line, file=sys.stderr))
        every = config.eval_every
        self.next_step = (start_step // every + 1) * every
        self.requests = 0
        self.pending: tuple[int, dict[str, Any]] | None = None  # (request, the snapshot being evaluated)
        self.failed = False
        kept, self.best = past_evaluations(eval_csv, checkpoints, start_step) if resumed else ([], None)
        self.last: dict[str, float] | None = kept[-1] if kept else None
        self.evaluations = len(kept)
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
        new_best = beats(row, self.best)
        line = (
            f"a3c: eval at step {result.step:,}: return {v['mean_return']:.2f} ± {v['std_return']:.2f}, "
            f"length {v['mean_length']:.1f} ({count(int(v['episodes']), 'episode')})"
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
        if self.on_result is not None:
            self.on_result(result)

    def finish(
        self, log: Callable[[int, dict[str, float]], None], wait: bool, stopped: Callable[[], bool] = lambda: False
    ) -> None:
        """At the end of the run: record the evaluation in flight (``wait``: wait for it while the evaluator lives,
        saying so after WAIT_SAID_S, until ``stopped()``: a Ctrl-C drops it), then stop the evaluator. The final
        checkpoint comes after this: a first Ctrl-C must end the wait, not only a second (which exits without it)."""
        try:
            if wait:
                self._wait_for_the_last(log, stopped)
        finally:  # (also where recording it failed: a full disk, a3c.tune's callback) the evaluator ends with the run
            self.request_stop()
            if self.supervisor is not None:
                self.supervisor.join(5.0)
            if self.inline is not None:
                self.inline.close()
            self.log_file.close()

    def _wait_for_the_last(self, log: Callable[[int, dict[str, float]], None], stopped: Callable[[], bool]) -> None:
        waited_from, said = time.monotonic(), False
        while self.pending is not None and not self.failed:
            if self.poll(log, stopping=True) is not None:
                break
            if self.supervisor is not None and self.supervisor.all_done():
                break  # the evaluator died while the run was stopping: nothing will come
            step = int(self.pending[1]["global_step"])
            if stopped():
                self.print_line(f"a3c: the evaluation at step {step:,} was dropped (stopped while it ran)")
                break
            if not said and time.monotonic() - waited_from >= WAIT_SAID_S:
                self.print_line(f"a3c: waiting for the evaluation at step {step:,} to end (Ctrl-C drops it)")
                said = True
            time.sleep(POLL_S / 5)

    def request_stop(self) -> None:
        """The evaluator ends at its next env step (an evaluation in hand is dropped) or idle poll."""
        self.channel.control[STOP] = 1

    def kill_all(self) -> None:
        if self.supervisor is not None:
            self.supervisor.kill_all()

    def summary(self) -> dict[str, Any]:
        return evaluation_summary(self.evaluations, self.last, self.best)


def past_evaluations(
    eval_csv: Path, checkpoints: Path, start_step: int
) -> tuple[list[dict[str, float]], dict[str, float] | None]:
    """A resumed run's evaluations that its checkpoint (at ``start_step``) covers, eval.csv trimmed to them (the
    rows after it are evaluated again, as their TensorBoard events are purged), and the best of them and of best.pt
    (which may be newer). Also for a session that evaluates nothing (--eval-every 0): its summary still has them."""
    with writing(eval_csv.name):
        kept = read_eval_log(eval_csv, start_step)
    best = None
    for row in kept:
        if beats(row, best):
            best = row
    if (checkpoints / BEST).is_file():
        from a3c.record.checkpoint import load_checkpoint

        saved = load_checkpoint(checkpoints / BEST).get("eval")
        if isinstance(saved, dict) and beats(saved, best):
            best = {k: float(v) for k, v in saved.items()}
    return kept, best


def beats(row: dict[str, Any], best: dict[str, Any] | None) -> bool:
    """Whether the evaluation ``row`` is the new best after ``best``: a finite mean return above it (or the first
    finite one). A NaN or infinite mean (an env's non-finite reward) never is: once best, NaN would be beaten by
    nothing (v > NaN is never true) and best.pt would stay that model for the rest of the run."""
    mean = float(row["mean_return"])
    return math.isfinite(mean) and (best is None or mean > float(best["mean_return"]))


def evaluation_summary(
    evaluations: int, last: dict[str, float] | None = None, best: dict[str, float] | None = None
) -> dict[str, Any]:
    """summary.json's evaluation entries (a run that evaluated nothing: ``evaluations`` 0, the rest None)."""

    def get(row: dict[str, float] | None, key: str) -> Any:
        return None if row is None else (int(row[key]) if key == "global_step" else row[key])

    return {
        "evaluations": evaluations,
        "eval_last_mean_return": get(last, "mean_return"),
        "eval_last_step": get(last, "global_step"),
        "eval_best_mean_return": get(best, "mean_return"),
        "eval_best_step": get(best, "global_step"),
    }
