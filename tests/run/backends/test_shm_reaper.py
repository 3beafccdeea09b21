"""a3c.run.backends.ray.shm_reaper: the Ray driver's reaper removes the names it was given once the driver dies, even by
SIGKILL (it runs in its own session: no signal to the run's process group reaches it), and leaves them alone (exits)
once the driver says it removed them itself. No Ray: the driver here is a small Python process that starts a reaper
and hands it a name, as RayBackend.start does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
from procs import alive, wait_for

_posixshmem = pytest.importorskip("_posixshmem", reason="POSIX shared memory only")

DRIVER = """
import json, sys
from a3c.run.backends.ray.shm_reaper import ShmReaper
reaper = ShmReaper.start()
reaper.add([sys.argv[1]])
print(json.dumps({"reaper": reaper.process.pid}), flush=True)
if sys.argv[2] == "close":
    reaper.close()  # the driver removed the names itself (here: it did not, to see that the reaper leaves them)
    print(json.dumps({"exited": reaper.process.returncode}), flush=True)
else:
    sys.stdin.read()  # until the test kills it
"""


def _shm(name: str) -> str:
    """Create named shared memory (as torch's file_system strategy does for the parameter server); its path."""
    os.close(_posixshmem.shm_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600))
    return "/dev/shm/" + name.lstrip("/")


def _start_driver(name: str, mode: str) -> tuple[subprocess.Popen, dict]:
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, name, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    return driver, json.loads(driver.stdout.readline())


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm to look at")
def test_the_reaper_removes_the_names_when_the_driver_is_sigkilled():
    name = f"/a3c_reaper_test_{uuid.uuid4().hex}"
    path = _shm(name)
    driver, started = _start_driver(name, "wait")
    try:
        assert os.path.exists(path)
        # in its own session: a terminal's Ctrl-C (or any signal to the run's process group) does not reach it
        assert os.getsid(started["reaper"]) != os.getsid(driver.pid)
        driver.kill()  # SIGKILL: the driver runs nothing more
        driver.wait(timeout=10)
        assert wait_for(lambda: not os.path.exists(path), timeout=10), "the name outlived the driver"
        assert wait_for(lambda: not alive({started["reaper"]}), timeout=10), "the reaper did not exit"
    finally:
        driver.kill()
        _posixshmem_unlink_quietly(name)


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm to look at")
def test_the_reaper_exits_when_the_driver_closes_it_and_leaves_the_names_to_the_driver():
    name = f"/a3c_reaper_test_{uuid.uuid4().hex}"
    path = _shm(name)
    driver, _ = _start_driver(name, "close")
    try:
        done = json.loads(driver.stdout.readline())
        assert done["exited"] == 0  # close() waited for it
        assert driver.wait(timeout=10) == 0
        assert os.path.exists(path)  # the driver's to remove (RayBackend.close removes them, then closes the reaper)
    finally:
        driver.kill()
        _posixshmem_unlink_quietly(name)


def _posixshmem_unlink_quietly(name: str) -> None:
    try:
        _posixshmem.shm_unlink(name)
    except FileNotFoundError:
        pass
