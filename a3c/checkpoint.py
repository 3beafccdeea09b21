"""Checkpoints: written atomically (temp file, fsync, rename, fsync of the directory) and loaded safely
(``torch.load(weights_only=True)``: tensors and plain containers only, never arbitrary pickled objects)."""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from a3c.errors import UserError

FORMAT = 1


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        torch.save({"format": FORMAT, **payload}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # readers see the old file or the new one, never half of one
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint written by save_checkpoint; UserError if missing, corrupt, unsafe or of another format."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint {path} does not exist; give a run directory that holds checkpoints/latest.pt")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else "unsafe content"
        raise UserError(
            f"checkpoint {path} was refused by the safe loader ({first}); only load checkpoints you trust "
            "and that a3c wrote"
        ) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"checkpoint {path} is corrupt or not a torch file ({first}); use another checkpoint") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise UserError(f"checkpoint {path} is not an a3c checkpoint of format {FORMAT}; use one written by this a3c")
    return payload
