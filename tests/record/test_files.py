"""a3c.record.files.atomic_write, and every whole-file writer built on it (checkpoints, config.json/summary.json, the
loss-history figure, episodes.csv trimmed on resume): the new file whole or the old one, never a temporary file left
behind, whatever stopped the write."""

import builtins
import csv
import errno
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from a3c.record import files
from a3c.record.checkpoint import load_checkpoint, save_checkpoint
from a3c.record.figures import write_bytes_atomic
from a3c.record.files import atomic_write
from a3c.record.resume import trim_episode_log
from a3c.record.run_dir import write_json_atomic


class _FullDisk:
    """A file on a disk that fills up after ``room`` bytes: the write that goes past them writes what fits, then
    raises ENOSPC (as a real full disk does)."""

    def __init__(self, file, room: int) -> None:
        self._file, self.room = file, room

    def write(self, data):
        if len(data) > self.room:
            self._file.write(data[: self.room])
            self.room = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self._file.write(data)

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()


def _fill_up(monkeypatch, room: int = 3) -> None:
    """Every file atomic_write opens sits on a disk with ``room`` bytes left."""
    monkeypatch.setattr(files, "open", lambda *a, **k: _FullDisk(builtins.open(*a, **k), room), raising=False)


def test_atomic_write_writes_the_whole_file_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "a.txt"
    assert atomic_write(path, lambda f: f.write("one\ntwo\n")) == path
    assert path.read_text() == "one\ntwo\n"
    atomic_write(path, lambda f: f.write(b"\x00\x01"), binary=True, durable=False)
    assert path.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


@pytest.mark.parametrize("stop", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
def test_a_write_stopped_halfway_leaves_the_old_file_and_no_temporary_file(tmp_path, stop):
    path = tmp_path / "a.txt"
    path.write_text("old")

    def write(f):
        f.write("half of the new")
        raise stop

    with pytest.raises(type(stop)):
        atomic_write(path, write)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_a_durable_write_syncs_the_file_and_its_directory(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.path.isdir(f"/proc/self/fd/{fd}") if os.path.isdir("/proc/self/fd") else None)
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    atomic_write(tmp_path / "a", lambda f: f.write("x"))
    assert len(synced) == 2 and synced[0] in (False, None) and synced[1] in (True, None)  # the file, then its folder
    synced.clear()
    atomic_write(tmp_path / "b", lambda f: f.write("x"), durable=False)
    assert synced == []


def _episodes_csv(path):
    header = ["worker", "index", "return", "length", "global_step", "wall_time"]
    rows = [[w, i, 1.0, 10, 100 * i + w, 0.1 * i] for i in range(40) for w in range(2)]
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([header, *rows])
    return path.read_bytes()


WRITERS = {  # name -> (write the file at path on a full disk, the file's name)
    "checkpoint": (lambda p: save_checkpoint(p, {"model": torch.zeros(1000)}), "latest.pt"),
    "json": (lambda p: write_json_atomic(p, {"key": "value " * 100}), "summary.json"),
    "figure": (lambda p: write_bytes_atomic(b"\x89PNG" + bytes(1000), p), "loss_history.png"),
    "episodes.csv": (lambda p: trim_episode_log(p, np.array([30, 30])), "episodes.csv"),
}


@pytest.mark.parametrize("writer", WRITERS)
def test_every_writer_on_a_full_disk_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path, monkeypatch, writer):
    """Bug (review of issue 22): the figure's write left loss_history.tmp.png behind on a full disk, and
    trim_episode_log's rewrite episodes.csv.tmp; each writer had its own copy of the temp-file logic."""
    write, name = WRITERS[writer]
    path = tmp_path / name
    old = _episodes_csv(path) if writer == "episodes.csv" else b"the previous file"
    path.write_bytes(old)
    _fill_up(monkeypatch)
    with pytest.raises(OSError) as raised:
        write(path)
    assert raised.value.errno == errno.ENOSPC
    assert path.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_the_writers_write_what_they_did_before(tmp_path):
    save_checkpoint(tmp_path / "c.pt", {"model": torch.arange(3.0)})
    assert torch.equal(load_checkpoint(tmp_path / "c.pt")["model"], torch.arange(3.0))
    write_json_atomic(tmp_path / "s.json", {"a": [1, 2]})
    assert (tmp_path / "s.json").read_text() == json.dumps({"a": [1, 2]}, indent=2) + "\n"
    write_bytes_atomic(b"png", tmp_path / "plots" / "f.png")  # (the folder is made)
    assert (tmp_path / "plots" / "f.png").read_bytes() == b"png"
    old = _episodes_csv(tmp_path / "episodes.csv")
    kept = trim_episode_log(tmp_path / "episodes.csv", np.array([40, 40]))
    assert len(kept) == 80 and (tmp_path / "episodes.csv").read_bytes().replace(b"\r\n", b"\n") == old.replace(
        b"\r\n", b"\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt", "episodes.csv", "plots", "s.json"]


def test_unwritable_reason_says_why_and_leaves_nothing_behind(tmp_path):
    """The one "could a file be written here" check (evaluate's --json, the benchmark driver's --store): a reason
    where it could not, None where it could, and the disk as it was either way."""
    from a3c.record.files import unwritable_reason

    existing = tmp_path / "kept.json"
    existing.write_text("{}")
    assert unwritable_reason(existing, folders_made=False) is None and existing.read_text() == "{}"
    assert unwritable_reason(tmp_path / "new.json", folders_made=False) is None
    assert unwritable_reason(tmp_path / "a" / "b" / "new.json", folders_made=True) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"]  # nothing made, nothing left

    assert unwritable_reason(tmp_path, folders_made=True) == files.IS_A_FOLDER == os.strerror(errno.EISDIR)
    assert unwritable_reason(tmp_path / "a" / "new.json", folders_made=False) == f"no folder {tmp_path / 'a'}"
    assert unwritable_reason(existing / "new.json", folders_made=False) == os.strerror(errno.ENOTDIR)
    assert unwritable_reason(existing / "a" / "new.json", folders_made=True) == os.strerror(errno.ENOTDIR)
    assert unwritable_reason(tmp_path / ("x" * 300), folders_made=False) == os.strerror(errno.ENAMETOOLONG)
    # a folder that takes no file, even from root (where permission bits do not refuse)
    assert unwritable_reason(Path("/proc/x.json"), folders_made=False) is not None
    assert unwritable_reason(Path("/proc/a/x.json"), folders_made=True) is not None


def test_json_files_hold_null_where_a_number_is_not_finite(tmp_path):
    """summary.json and evaluate's JSON held NaN and Infinity (Python's json writes them; they are not JSON, and a
    strict parser refuses the file): a number that is not finite is written as null."""
    write_json_atomic(tmp_path / "s.json", {"mean": math.nan, "best": [math.inf, -math.inf, 1.5], "n": {"x": 2}})

    def refuse(constant: str) -> None:
        raise ValueError(constant)

    data = json.loads((tmp_path / "s.json").read_text(), parse_constant=refuse)
    assert data == {"mean": None, "best": [None, None, 1.5], "n": {"x": 2}}
