"""Experiment tracking (``--track``): the run's scalars, its config (the hparams) and its final summary go to
Weights & Biases as well as to TensorBoard. The dashboard (a3c/record/dashboard.py) owns the one ``WandbTracker`` of a
run and hands it what it writes to TensorBoard, at the same moment and with the same values.

Design choice: log directly, not by syncing the TensorBoard events (``wandb.init(sync_tensorboard=True)``, CleanRL's
way). Syncing patches TensorBoard's writers and tails the event files in a thread of wandb's, which fits this run's
record badly: a3c writes its events itself, batched (a3c/record/tensorboard_writer.py), in one stream for the run and
one per worker (workers/<rank>/, which W&B would show as separate prefixed namespaces), and a resume purges the
events written after the checkpoint (TensorBoard drops them, a tailer has sent them already). Logged directly, the
x axis is the global env step as in TensorBoard (``define_metric(..., step_metric="global_step")``, so that an
evaluation stamped with a step earlier than the newest point is kept, where W&B's own step would drop it), the tags
are docs/design.md's, the config is the resolved Config (config.json) and the summary is summary.json.

Where it goes: W&B's files in RUN_DIR/wandb/ (with ``WANDB_MODE=offline`` nothing leaves the machine; ``wandb sync
RUN_DIR/wandb/offline-run-*`` uploads it later). The W&B run id is the run's (``Config.wandb_id``, chosen by
a3c/run/resolve.py and kept in the checkpoints), so a resumed run goes on in the same W&B run (online; an offline
session is a directory of its own, synced into that run). The points a resume repeats (those after the checkpoint,
before a crash) are logged again: W&B keeps both, TensorBoard only the second.

Console capture is off: the progress bar would fill W&B's log with carriage returns. wandb is imported here only, when
a run has --track (a3c/run/resolve.py checks that it is installed before anything starts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from a3c.spec.config import Config
from a3c.spec.errors import UserError

STEP = "global_step"  # the x axis of every W&B chart, as TensorBoard's
# summary.json's stop reasons of a run that ended as planned (pruned: stopped at its caller's request, a3c.tune's
# pruner; a3c.run.trainer's on_eval)
OK_STOPS = ("total_steps", "solved", "pruned")


class WandbTracker:
    """One W&B run, logged to alongside TensorBoard: ``log`` (scalars at a global step, the run's or a worker's),
    ``summarize`` (summary.json at the end) and ``finish``."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self._finished = False
        self._exit_code = 1  # until summarize() sees a run that ended as planned

    @classmethod
    def start(cls, config: Config, run_dir: Path) -> WandbTracker:
        """Start (or, for a resumed run, go on with) the run's W&B run; files in ``run_dir``/wandb. A W&B run that
        cannot start (online without a login, an entity that does not exist) is a UserError naming the fix."""
        import wandb

        try:
            run = wandb.init(
                project=config.wandb_project,
                entity=config.wandb_entity,
                group=config.wandb_group,
                name=run_dir.name,
                id=config.wandb_id,
                resume="allow",
                dir=str(run_dir),
                config=wandb_config(config),
                settings=wandb.Settings(console="off"),
            )
        except Exception as err:  # wandb's own errors (UsageError, CommError, ...) have no common public base
            message = " ".join(str(err).split()) or type(err).__name__
            raise UserError(
                f"--track: W&B could not start the run ({message}); run `wandb login`, or set WANDB_MODE=offline "
                "to log on this machine only"
            ) from None
        run.define_metric(STEP)
        run.define_metric("*", step_metric=STEP)
        return cls(run)

    def log(self, step: int, values: Mapping[str, float]) -> None:
        """Scalars at global step ``step``, tagged as in TensorBoard (a worker's tags are workers/<rank>/...: in W&B
        its own section, as its own event stream is in TensorBoard); a value that is not finite is left out."""
        data = {tag: float(v) for tag, v in values.items() if math.isfinite(float(v))}
        if data:
            self.run.log({STEP: int(step), **data})

    def image(self, step: int, tag: str, png: Path) -> None:
        """A figure of the run directory (plots/loss_history.png) as the image ``tag`` at ``step``."""
        import wandb

        self.run.log({STEP: int(step), tag: wandb.Image(str(png))})

    def summarize(self, summary: Mapping[str, Any]) -> None:
        """summary.json's entries as the W&B run's summary (those without a value, e.g. not solved, left out)."""
        self.run.summary.update({k: v for k, v in summary.items() if v is not None})
        self._exit_code = 0 if summary.get("stop_reason") in OK_STOPS else 1

    def finish(self) -> None:
        """End the W&B run (once); a run that did not end as planned (interrupted, failed) is marked failed."""
        if self._finished:
            return
        self._finished = True
        self.run.finish(exit_code=self._exit_code)


def wandb_config(config: Config) -> dict[str, Any]:
    """The W&B run's config: every setting of config.json but the internal ones' bookkeeping (the W&B id itself)."""
    data = config.to_dict()
    data.pop("wandb_id", None)
    return data
