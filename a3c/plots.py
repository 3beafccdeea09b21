"""Matplotlib figures of a run: the tutorial's loss-history figure (each worker's curve on the left, all workers'
losses in time order on the right). Uses the Agg backend: no display needed."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def loss_history_figure(losses: dict[int, list[float]], times: dict[int, list[float]], title: str = "") -> plt.Figure:
    """losses[rank] is worker rank's per-episode loss, in its episode order; times[rank] the matching wall times."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), dpi=80)
    for rank in sorted(losses):
        left.plot(np.arange(len(losses[rank])), losses[rank], lw=0.8, label=f"worker {rank}")
    left.set_xlabel("episode of the worker")
    left.set_ylabel("loss")
    left.set_title("loss history of each worker")
    if 0 < len(losses) <= 16:
        left.legend(fontsize=6, ncol=2)
    all_t = np.concatenate([np.asarray(times[r], dtype=float) for r in losses]) if losses else np.zeros(0)
    all_l = np.concatenate([np.asarray(losses[r], dtype=float) for r in losses]) if losses else np.zeros(0)
    order = np.argsort(all_t, kind="stable")
    right.plot(np.arange(len(order)), all_l[order], lw=0.6, color="black")
    right.set_xlabel("episode (all workers, in time order)")
    right.set_title("all workers' losses")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def save_figure(fig: plt.Figure, path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)
