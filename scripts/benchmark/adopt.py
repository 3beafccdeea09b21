"""A run that a3c.train made outside the driver (a long run started and resumed by hand, as Atari's 10M-step runs
are) stored as the driver would have stored it: its row in the results store, keyed by the commit of the code that
ran it.

    python -m scripts.bench adopt RUN_DIR --arm NAME=FLAGS [--log FILE] [--code DIR] [--evaluate N]

FLAGS are the a3c.train flags the run was started with, apart from --env, --seed, --total-steps and --run-dir, which
its config.json gives; ``check_flags`` holds them to the run's config (a3c.train resolves them, for the run's env, to
the settings the run has), so that the row's arm says what ran. The run must have ended (its summary's stop_reason
total_steps or solved).

A run resumed by hand has no sessions.jsonl: ``sessions_from_log`` reads its sessions from its output (--log, every
session's appended): each begins with a3c's "a3c: run directory PATH" (the first) or "a3c: resuming PATH at step N"
line, and a session that ended or was stopped printed its steps and training time last ("this session: steps A -> B
(N steps) in X s (training Y s at Z steps/s)", or for a run of one session "N steps in X s (training Y s at Z
steps/s)"). A session that was killed rather than stopped printed no such line: it counts in the row's ``sessions``
and not in its steps/s, which is over the sessions that said theirs (nor does one whose line gives no training
time). Without --log the run counts as one session with its summary's training time. The adopted folder (the
driver's layout: ``run`` a link to RUN_DIR, sessions.jsonl, the evaluations) goes under --work-dir.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from scripts._common import host
from scripts.benchmark.arms import Arm, shown
from scripts.benchmark.queue import QueueError
from scripts.benchmark.runner import FINISHED, Run, read_json, score_path

SESSION_START = re.compile(r"^a3c: (?:run directory |resuming )", re.M)
# the last line of a session that ended by itself or was stopped (a3c.record.run_dir.final_line)
SESSION_END = re.compile(
    r"^a3c: .*?(?:this session: steps (?P<start>[\d,]+) -> (?P<end>[\d,]+) \([\d,]+ steps\)|(?P<steps>[\d,]+) steps)"
    r" in (?P<wall>[\d.]+) s \(training (?P<train>[\d.]+) s at",
    re.M,
)
# settings that say where a run goes or how it is watched, not what it learns: not held to the flags
# (and start_method, which config.json holds resolved: compared only where the flags give it)
NOT_COMPARED = frozenset({"run_dir", "resume", "tensorboard", "exp_name", "checkpoint_every", "checkpoint_every_s"})


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def sessions_from_log(text: str, config_command: str) -> list[dict[str, Any]]:
    """The sessions of a run's output ``text``: one entry per start (the first session's "a3c: run directory" line,
    each resumed one's "a3c: resuming"), each with the summary its end line gives (None where none)."""
    starts = [m.start() for m in SESSION_START.finditer(text)]
    if not starts:
        raise QueueError("the log holds no session of an a3c run (no 'a3c: run directory' line)")
    out = []
    for i, start in enumerate(starts):
        # a session's end line comes before the next session's marker
        chunk = text[start : starts[i + 1] if i + 1 < len(starts) else len(text)]
        end = SESSION_END.search(chunk)
        summary = None
        if end is not None:
            first = 0 if end["start"] is None else _int(end["start"])
            last = _int(end["steps"] if end["end"] is None else end["end"])
            summary = {
                "total_steps": last,
                "resumed_from_step": first or None,
                "training_time_s": float(end["train"]),
                "session_wall_time_s": float(end["wall"]),
            }
        out.append({"command": config_command, "exit_code": None, "summary": summary, "machine": host()})
    return out


def check_flags(config: dict[str, Any], flags: tuple[str, ...]) -> None:
    """QueueError naming each setting where a3c.train given ``flags`` for the run's env, seed and budget would
    resolve otherwise than the run's ``config``. Not compared: a setting this a3c no longer has or did not yet have;
    where the run went; what the program resolves at the start (the fields a flag never sets: --workers auto's
    count, the frames' background level; the start method, unless the flags give it); --bf16 where a preset's was
    turned off for a CPU without bfloat16 instructions (the machine that adopts it need not be the one that ran it).
    This checkout's presets and defaults resolve the flags: adopt a run where they are the code's that ran it."""
    from a3c.spec.config import Config
    from a3c.spec.errors import UserError
    from a3c.spec.preset_choice import CPU, PRESET
    from a3c.train import parse_cli

    argv = ["--env", config["env"], "--seed", str(config["seed"]), "--total-steps", str(config["total_steps"])]
    try:
        made, sources, _ = parse_cli([*argv, *flags])
    except UserError as err:
        raise QueueError(f"the arm's flags: {err}") from None
    internal = {f.name for f in dataclasses.fields(Config) if f.metadata.get("internal")}
    skip = NOT_COMPARED | internal | ({"start_method"} if "--start-method" not in flags else set())
    differ = []
    for name, value in dataclasses.asdict(made).items():
        if name in skip or name not in config or (name == "workers" and value == "auto"):
            continue
        if name == "bf16" and sources.get(name) in (CPU, PRESET):  # the preset's, on or off by the CPU that ran it
            continue
        ran = config[name]
        if isinstance(value, tuple):
            value = list(value)
        if ran != value:
            differ.append(f"{name} {ran!r} in the run, {value!r} from the flags")
    if differ:
        raise QueueError(
            "the arm's flags do not give the run's settings: " + "; ".join(differ) + " (give the flags it was "
            "started with)"
        )


def started_with(arm: Arm, config: dict[str, Any], run_dir: Path) -> list[str]:
    """The command that started the run: a3c.train with the run's env, seed and budget, the arm's flags as given."""
    where = ["--env", config["env"], "--seed", str(config["seed"]), "--total-steps", str(config["total_steps"])]
    return ["python", "-m", "a3c.train", *where, *arm.flags, "--run-dir", str(run_dir)]


def prepare(run_dir: Path, arm: Arm, log: Path | None) -> tuple[Run, list[dict[str, Any]]]:
    """The Run of the finished run at ``run_dir`` (its env, seed and budget from its config.json) and its sessions,
    every check made and nothing written: QueueError for a run that has not ended, flags that disagree with it, or a
    log that cannot be read."""
    run_dir = run_dir.resolve()
    config = read_json(run_dir / "config.json")
    if config is None:
        raise QueueError(f"{run_dir} is not an a3c run directory (no readable config.json)")
    summary = read_json(run_dir / "summary.json") or {}
    budget = int(config["total_steps"])
    if summary.get("stop_reason") not in FINISHED or (
        summary["stop_reason"] == "total_steps" and int(summary.get("total_steps", 0)) < budget
    ):
        raise QueueError(
            f"{run_dir} has not ended (its summary: {summary.get('stop_reason')} at step "
            f"{summary.get('total_steps', 0):,} of {budget:,}); go on with python -m a3c.train --resume {run_dir}"
        )
    check_flags(config, arm.flags)
    first = shown(started_with(arm, config, run_dir))
    if log is None:
        entries = [{"command": first, "exit_code": 0, "summary": summary, "machine": host()}]
    else:
        try:
            text = log.read_text(errors="replace")
        except OSError as err:
            reason = err.strerror or err
            raise QueueError(f"--log {log}: cannot read it ({reason}); give the run's output file") from None
        entries = sessions_from_log(text, first)
    return Run(config["env"], arm, int(config["seed"]), budget), entries


def make_folder(run: Run, run_dir: Path, entries: list[dict[str, Any]], work_dir: Path, commit: str) -> Path:
    """The driver's folder for the adopted run under ``work_dir`` (for the code's ``commit``): ``run`` a link to
    ``run_dir``, its sessions.jsonl, no evaluation left from before. QueueError where the folder holds a run of the
    driver's own (a real directory, not a link)."""
    folder = run.folder(work_dir, commit)
    link = folder / "run"
    if link.exists() and not link.is_symlink():
        raise QueueError(f"{folder} holds a run of the driver's own; store that one with python -m scripts.bench run")
    folder.mkdir(parents=True, exist_ok=True)
    if link.is_symlink():
        link.unlink()
    link.symlink_to(run_dir.resolve(), target_is_directory=True)
    for best in (False, True):
        score_path(folder, best).unlink(missing_ok=True)
    with open(folder / "sessions.jsonl", "w") as f:
        f.writelines(json.dumps(entry) + "\n" for entry in entries)
    return folder
