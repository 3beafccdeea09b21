"""Writing a whole file atomically (``atomic_write``): every file a3c writes in one piece goes through it (checkpoints,
config.json and summary.json, the loss-history figure, episodes.csv and eval.csv rewritten on resume), so that a
reader, or a run resumed after a crash, sees the old file or the new one, never half of one, and a write that fails
(a full disk) leaves no temporary file behind. And making a folder the user named (``make_folder``), or saying in
one line why it cannot be made, and why a file the user named could not be written (``unwritable_reason``), said
before the work whose result it holds. Its own module, importing nothing of a3c but its errors, so that the light
modules (a3c.record.figures, which ``python -m a3c.plot`` imports without torch) and the benchmark driver can use it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from a3c.spec.errors import UserError


def atomic_write(path: Path, write: Callable[[IO[Any]], object], *, binary: bool = False, durable: bool = True) -> Path:
    """Write the file at ``path`` by calling ``write(f)`` on a temporary file beside it (NAME.tmp, opened as text
    (UTF-8, newlines untranslated, as csv wants) or, ``binary``, as bytes), then rename it over ``path``.
    ``durable``: the temporary file is fsynced before the rename and the directory after it, so that the new file,
    once this returns, survives a crash of the machine too (a figure redrawn every 30 s does without). Whatever stops
    the write (an OSError such as ENOSPC, or anything else) removes the temporary file, its space given back, and is
    raised again; the previous file stays as it was. Returns ``path``."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") if binary else open(tmp, "w", encoding="utf-8", newline="") as f:
            write(f)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)  # readers see the old file or the new one, never half of one
    except BaseException:
        with contextlib.suppress(OSError):  # (a directory gone read-only: the original error is the one to see)
            tmp.unlink(missing_ok=True)
        raise
    if durable:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return path


def make_folder(path: Path, flag: str) -> None:
    """Make the folder ``path`` that ``flag`` names (and the missing ones above it); a UserError naming the flag and
    the reason where it cannot be made (a file in the way, no permission), in place of makedirs' traceback."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"{flag} {path}: cannot make the folder ({err.strerror or err}); give a writable one") from None


IS_A_FOLDER = os.strerror(errno.EISDIR)  # unwritable_reason's reason where a folder stands at the path


def unwritable_reason(path: Path, *, folders_made: bool) -> str | None:
    """Why a file could not be written at ``path`` (strerror's words: a folder in its place, a missing folder, no
    permission, a read-only disk, a name too long), or None where it could. Tried, and nothing left: an existing file
    is opened to append and closed; a new one is made and removed. ``folders_made``: the writer makes the missing
    folders above the file, so a file is made and removed in the nearest folder that exists (the one they go in)."""
    path = Path(path)
    try:  # (is_dir and exists raise too, on a name too long)
        if path.is_dir():
            return IS_A_FOLDER
        folder = path.parent
        while folders_made and not folder.exists():
            folder = folder.parent
        if not folder.exists():
            return f"no folder {folder}"
        if not folder.is_dir():
            return os.strerror(errno.ENOTDIR)
        if path.exists():
            with open(path, "a"):
                pass
        elif folder == path.parent:
            with open(path, "x"):
                pass
            path.unlink()
        else:
            with tempfile.TemporaryFile(dir=folder):
                pass
    except OSError as err:
        return err.strerror or str(err)
    return None
