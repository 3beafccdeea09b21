"""Shared bits of the benchmark scripts: the machine description, running a3c.train in a subprocess, runs repeated
in alternation, and writing the table / JSON / PNG triple every benchmark produces. (The learning benchmarks' episodes
and 100-episode means: scripts/benchmark/curves.py.) Run a script from the repository's root as ``python -m
scripts.NAME``, or as a file, ``python scripts/NAME.py`` (scripts/_root.py)."""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from a3c.spec.cpu import native_bf16

REPO = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo's), else what platform knows of it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host() -> dict[str, Any]:
    """The machine as the benchmark store's rows name it (scripts/benchmark/store.py's "machine"): its cores, CPU,
    Python, whether it has bfloat16 instructions, and the 1-minute load average now. Light: no torch, no gymnasium
    (the driver writes it as each run starts)."""
    return {
        "cores": os.cpu_count(),
        "cpu": cpu_name(),
        "python": platform.python_version(),
        "bf16_instructions": native_bf16(),
        "loadavg_1m_at_start": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


def machine() -> dict[str, Any]:
    """``host()`` with the versions of torch, gymnasium and numpy and the platform, for a benchmark's JSON."""
    import gymnasium
    import numpy
    import torch

    light = host()
    versions = {
        "torch": torch.__version__,
        "gymnasium": gymnasium.__version__,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
    }
    # the keys in the order the JSON files have them: the versions after python
    first = ("cores", "cpu", "python")
    return {
        **{k: light[k] for k in first},
        **versions,
        **{k: v for k, v in light.items() if k not in first},
    }


def command_line() -> str:
    """How this script was run: ``python -m scripts.NAME ARGS``."""
    script = Path(sys.argv[0]).resolve() if sys.argv[0] else None
    if script is not None and script.parent == REPO / "scripts":
        head = ["python", "-m", f"scripts.{script.stem}"]
    else:
        head = ["python", sys.argv[0] or "-"]
    return " ".join([*head, *(shlex.quote(a) for a in sys.argv[1:])])


def run_train(
    args: list[str],
    run_dir: Path,
    timeout: float = 3600,
    env: dict[str, str] | None = None,
    repo: Path = REPO,
) -> dict[str, Any]:
    """Run ``python -m a3c.train ARGS --run-dir RUN_DIR`` in a fresh process, on the a3c of the checkout ``repo``
    (default: this repository's; from its root, on PYTHONPATH), in the environment ``env`` (default: this
    process's); return its summary.json, with ``command`` and the run's resolved ``config`` (every setting, defaults
    resolved) added. Raises RuntimeError with the trainer's stderr if it fails."""
    cmd = [sys.executable, "-m", "a3c.train", *args, "--run-dir", str(run_dir)]
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), base.get("PYTHONPATH")]))
    proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=timeout, env=base)
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["command"] = " ".join(["python", "-m", "a3c.train", *args, "--run-dir", str(run_dir)])
    summary["config"] = json.loads((run_dir / "config.json").read_text())
    return summary


def train_seconds(summary: dict[str, Any]) -> float:
    """The trainer's measured training time: total_steps / steps_per_s, i.e. from the first env step of any worker
    to the end of the run (start-up excluded, everything after the first step included)."""
    return summary["total_steps"] / summary["steps_per_s"]


def alternate(rounds: int, trials: dict[str, Callable[[int], T]]) -> dict[str, list[T]]:
    """Each trial once a round, in turn, for ``rounds`` rounds (``trial(round)``): drifts in the machine's load then
    hit every trial alike. The results by trial name, in round order."""
    results: dict[str, list[T]] = {name: [] for name in trials}
    for r in range(rounds):
        for name, trial in trials.items():
            results[name].append(trial(r))
    return results


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.1f}" if abs(v) >= 100 else f"{v:.3g}"
        return "-" if v is None else str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def save_results(out: Path, name: str, data: dict[str, Any], table: str, fig: Any) -> None:
    """Write OUT/NAME.json (data + command + machine), OUT/NAME.md (the table) and OUT/NAME.png (the figure)."""
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / f"{name}.png")
    data = {"command": command_line(), "machine": machine(), **data}
    (out / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
    (out / f"{name}.md").write_text(f"{table}\n\nMade by: `{data['command']}`\n")
    print(table)
    print(f"\nMade by: {data['command']}\nWrote {out / name}.json, .md and .png")
