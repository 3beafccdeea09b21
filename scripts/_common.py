"""Shared bits of the benchmark scripts: the machine description, running a3c.train in a subprocess, and writing
the table / JSON / PNG triple every benchmark produces."""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    import torch

    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
    }


def command_line() -> str:
    return "python " + " ".join(shlex.quote(a) for a in sys.argv)


def run_train(
    args: list[str],
    run_dir: Path,
    timeout: float = 3600,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> dict[str, Any]:
    """Run ``python -m a3c.train ARGS --run-dir RUN_DIR`` (in the environment ``env``: default, this process's; in
    ``cwd``, which ``python -m`` puts first on sys.path: a directory outside any checkout makes PYTHONPATH choose the
    a3c imported) and return its summary.json."""
    cmd = [sys.executable, "-m", "a3c.train", *args, "--run-dir", str(run_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return json.loads((run_dir / "summary.json").read_text())


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
