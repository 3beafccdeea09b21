"""Do exported policies act as the agent does, and does the ONNX file run without torch and a3c?

    python -m scripts.onnx_check export RUN_DIR [RUN_DIR ...] --out DIR [--observations 1000]
    /tmp/onnx-only/bin/python scripts/onnx_check.py compare DIR

``export`` (a3c's environment): for each run, ``--observations`` observations of its env as its agent meets them
(sampled actions from a reset with seed 0, new episodes as they end), ``Agent.act``'s deterministic actions on them,
and the policy exported to ONNX and TorchScript (python -m a3c.export's files); it prints how many of those actions
each file reproduces and saves DIR/<run>.onnx with DIR/<run>.npz (the observations and the actions).
``compare`` imports numpy and onnxruntime only, so it runs in a virtual environment that has neither torch nor a3c
(``python3 -m venv /tmp/onnx-only && /tmp/onnx-only/bin/pip install onnxruntime numpy``): it runs each DIR/*.onnx
on its saved observations and prints the same comparison. Both write DIR/<command>.json; exit code 1 when an action
differs (discrete actions must be equal, continuous ones within 1e-5).
"""

from __future__ import annotations

if not __package__:  # run as a file (python scripts/NAME.py): the repository's root on sys.path
    import _root  # noqa: F401

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

TOLERANCE = 1e-5  # continuous actions: onnxruntime's float kernels round otherwise than torch's


def same_actions(got: np.ndarray, want: np.ndarray) -> int:
    """How many of the observations' actions agree (exactly for integers, within TOLERANCE for floats)."""
    if np.issubdtype(want.dtype, np.integer):
        close = got == want
    else:
        close = np.abs(got.astype(np.float64) - want.astype(np.float64)) <= TOLERANCE
    return int(close.reshape(len(want), -1).all(axis=1).sum())


def line(name: str, fmt: str, got: np.ndarray, want: np.ndarray) -> dict[str, Any]:
    diff = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max())
    row = {"run": name, "format": fmt, "observations": len(want), "same": same_actions(got, want), "max_diff": diff}
    print(f"{name:<24} {fmt:<12} {row['same']:>5} of {len(want)} actions as Agent.act's (max |difference| {diff:.2g})")
    return row


def played(agent: Any, count: int) -> np.ndarray:
    from a3c.spec.environment import make_env

    env = make_env(agent.config.env, agent.config.env_kwargs, training=False)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    seen = []
    for _ in range(count):
        seen.append(np.asarray(obs))
        action, _ = agent.predict(obs)
        obs, _, terminated, truncated, _ = env.step(action if np.ndim(action) else int(action))
        if terminated or truncated:
            obs, _ = env.reset(seed=int(rng.integers(2**31)))
    env.close()
    return np.stack(seen)


def export(runs: list[Path], out: Path, count: int) -> list[dict[str, Any]]:
    import torch

    import a3c
    from a3c.record.policy_export import onnx_refusal
    from a3c.spec.errors import UserError

    agents = [a3c.load(run) for run in runs]  # (every run checked before any file is written)
    for run, agent in zip(runs, agents, strict=True):
        refusal = onnx_refusal(agent)  # (a3c.export's own: said before any run is played or file written)
        if refusal is not None:
            raise UserError(f"{run}: {refusal}: leave it out")
        if agent.model.lstm:
            # its action depends on the state carried from the steps before: one batch of observations is not its
            # episodes (tests/record/test_policy_export.py holds the file to predict step by step, state in and out)
            raise UserError(
                f"{run} is a recurrent policy (--lstm), whose actions depend on the steps before; this check feeds "
                "observations as one batch: leave it out"
            )
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for run, agent in zip(runs, agents, strict=True):
        name = run.name
        obs = played(agent, count)
        actions = agent.act(obs)
        np.savez(out / f"{name}.npz", obs=obs, actions=actions)
        agent.export(out / f"{name}.onnx", "onnx")
        import onnxruntime as ort

        session = ort.InferenceSession(str(out / f"{name}.onnx"), providers=["CPUExecutionProvider"])
        rows.append(line(name, "onnx", session.run(None, {"obs": obs})[0], actions))
        scripted = torch.jit.load(str(agent.export(out / f"{name}.torchscript.pt", "torchscript")))
        rows.append(line(name, "torchscript", scripted(torch.from_numpy(obs))[0].numpy(), actions))
    return rows


def compare(folder: Path) -> list[dict[str, Any]]:
    import onnxruntime as ort

    rows = []
    for model in sorted(folder.glob("*.onnx")):
        saved = np.load(model.with_suffix(".npz"))
        session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        rows.append(line(model.stem, "onnx", session.run(None, {"obs": saved["obs"]})[0], saved["actions"]))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("export", help="export runs' policies and save observations with the agent's actions")
    made.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR")
    made.add_argument("--out", type=Path, required=True, metavar="DIR")
    made.add_argument("--observations", type=int, default=1000)
    checked = commands.add_parser("compare", help="run DIR/*.onnx on the saved observations (numpy, onnxruntime)")
    checked.add_argument("folder", type=Path, metavar="DIR")
    args = parser.parse_args(argv)
    if args.command == "export":
        from a3c.spec.errors import UserError

        try:
            rows, folder = export(args.runs, args.out, args.observations), args.out
        except UserError as err:  # (a run that is no a3c run, an --lstm or a --bf16 agent: one line, exit 2)
            print(f"onnx_check: error: {' '.join(str(err).split())}", file=sys.stderr)
            return 2
    else:
        rows, folder = compare(args.folder), args.folder
    imported = sorted(m for m in ("torch", "a3c") if sys.modules.get(m) is not None)
    print(
        f"({args.command}: python {sys.version.split()[0]}, torch and a3c imported: {', '.join(imported) or 'neither'})"
    )
    command = " ".join([Path(sys.executable).name, *sys.argv])
    (folder / f"{args.command}.json").write_text(json.dumps({"command": command, "rows": rows}, indent=2) + "\n")
    return 0 if all(r["same"] == r["observations"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
