"""A full disk, for real: a tmpfs of 1 MiB mounted in a mount namespace of the test's own (``unshare``), where a
checkpoint of a 512x512 MLP (about 3 MB with its optimizer's moments) cannot fit. torch's zip writer, when its writes
fail, raised from its close a RuntimeError of its own ("unexpected pos") that escaped as a traceback; the checkpoint
is now serialised in memory and written in one plain write, whose OSError the trainer turns into one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

MIB = 1024 * 1024


def _in_full_disk(tmp_path: Path, command: str, size: int = MIB) -> subprocess.CompletedProcess[str]:
    """``command`` (a shell line) with a fresh tmpfs of ``size`` bytes mounted at ``$DISK``, in a mount namespace of
    its own (as root: ``unshare -m``; otherwise a user namespace: ``unshare -rm``)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    namespace = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]
    script = f"mount -t tmpfs -o size={size} none {disk} && DISK={disk} && export DISK && cd {tmp_path} && {command}"
    return subprocess.run([*namespace, "sh", "-c", script], capture_output=True, text=True)


@pytest.fixture(autouse=True)
def _needs_namespaces(tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    (tmp_path / "probe").mkdir()
    probe = _in_full_disk(tmp_path / "probe", "true")
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a mount namespace here: {probe.stderr.strip()}")


SAVE = textwrap.dedent(
    """
    import errno, os, sys
    from pathlib import Path
    import torch
    from a3c.record.checkpoint import save_checkpoint

    path = Path(os.environ["DISK"]) / "latest.pt"
    save_checkpoint(path, {"model": torch.zeros(10)})
    before = path.read_bytes()
    try:
        save_checkpoint(path, {"model": torch.zeros(1_000_000)})  # 4 MB on a 1 MiB disk
    except OSError as err:
        assert err.errno == errno.ENOSPC, err
        assert path.read_bytes() == before  # the previous checkpoint stays
        assert sorted(p.name for p in path.parent.iterdir()) == ["latest.pt"]  # no temporary file left
        print("ENOSPC")
    """
)


def test_a_checkpoint_that_does_not_fit_raises_oserror_and_keeps_the_previous(tmp_path):
    out = _in_full_disk(tmp_path, f"{sys.executable} -c '{SAVE}'")
    assert out.returncode == 0 and out.stdout.strip() == "ENOSPC", out.stderr


def test_a_periodic_checkpoint_on_a_full_disk_ends_the_run_in_one_line(tmp_path):
    train = (
        f"{sys.executable} -m a3c.train --env CartPole-v1 --workers 1 --total-steps 200000 --checkpoint-every 2000 "
        "--eval-every 0 --hidden-sizes 512 512 --start-method fork --run-dir $DISK/run"
    )
    out = _in_full_disk(tmp_path, train)
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("a3c: error: the disk of ") and "is full" in last and "free space" in last, out.stderr
