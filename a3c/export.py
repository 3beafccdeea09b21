"""`python -m a3c.export RUN_DIR|CHECKPOINT --format onnx|torchscript`: a trained policy as one file that runs
without a3c (onnxruntime for ONNX, ``torch.jit.load`` for TorchScript).

The file holds the acting path alone: the observation as the env gives it (uint8 frames are scaled inside), the run's
frozen observation normalisation and its clipping, the network, and the deterministic action (``Agent.act``'s); with
--with-dist-params also the policy's parameters (logits, or the Gaussian's mean and log-std). A recurrent policy
(--lstm) takes and returns its state ([S, B, H], zeros at an episode's start). a3c.record.policy_export names the
inputs and outputs; the file carries that description. ONNX needs the ``onnx`` extra (onnx, onnxruntime, onnxscript).
Not exported (one line, exit 2): a --bf16 agent to ONNX (its bfloat16 CNN; TorchScript keeps it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from a3c.spec.errors import OneLineParser, run_cli

FORMATS = ("onnx", "torchscript")
SUFFIXES = {"onnx": ".onnx", "torchscript": ".torchscript.pt"}

if TYPE_CHECKING:
    from a3c.record.agent import Agent


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m a3c.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", metavar="RUN_DIR|CHECKPOINT", help="a run directory (its latest.pt) or a .pt file")
    parser.add_argument(
        "--format", required=True, choices=FORMATS, help="onnx (onnxruntime) or torchscript (torch.jit.load)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="PATH",
        help="the file to write (default: policy-<checkpoint>.onnx or policy-<checkpoint>.torchscript.pt in the run "
        "directory)",
    )
    parser.add_argument("--best", action="store_true", help="export the run's checkpoints/best.pt")
    parser.add_argument(
        "--with-dist-params",
        action="store_true",
        help="also output the policy's parameters: logits (discrete actions), or mean and log_std (Box actions)",
    )
    return parser


def default_out(checkpoint: Path, fmt: str) -> Path:
    """policy-<checkpoint name><suffix> in the checkpoint's run directory (or beside a checkpoint kept elsewhere)."""
    folder = checkpoint.parent
    if folder.name == "checkpoints" and (folder.parent / "config.json").is_file():
        folder = folder.parent
    return folder / f"policy-{checkpoint.stem}{SUFFIXES[fmt]}"


def export(
    path: str | Path, fmt: str, out: str | Path | None = None, best: bool = False, with_dist_params: bool = False
) -> tuple[Path, Agent]:
    """Export the agent of ``path`` (a3c.load's rules: a run directory's newest intact checkpoint) to ``out`` (default:
    ``default_out`` of the checkpoint loaded, which is latest.pt's step-N.pt where latest.pt is missing or damaged);
    returns the file written and the agent."""
    from a3c.record.agent import load

    agent = load(path, best=best)
    assert agent.path is not None  # (a3c.load's agents name their checkpoint file)
    target = Path(out) if out is not None else default_out(agent.path, fmt)
    return agent.export(target, fmt, with_dist_params), agent


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    written, agent = export(args.path, args.format, args.out, args.best, args.with_dist_params)
    print(written)
    step = "?" if agent.global_step is None else f"{agent.global_step:,}"
    print(f"a3c: wrote the {args.format} policy of {agent.path} (step {step}) to {written}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main, prog="a3c.export"))
