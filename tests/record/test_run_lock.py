"""a3c.record.run_lock: one process trains a run directory; a second is refused in one line until the first lets go."""

import os

import pytest

from a3c.record.run_lock import RunLock, check_not_training
from a3c.spec.errors import UserError

pytest.importorskip("fcntl")


def test_a_held_directory_refuses_a_second_holder_until_it_is_released(tmp_path):
    first, second = RunLock(tmp_path), RunLock(tmp_path)
    first.hold()
    with pytest.raises(UserError, match="still training in another process") as err:
        second.hold()
    assert str(tmp_path) in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(UserError):
        check_not_training(tmp_path)
    first.release()
    check_not_training(tmp_path)  # (a probe: it lets go again)
    second.hold()
    second.release()


def test_the_lock_adds_no_file_and_a_missing_directory_is_left_to_the_caller(tmp_path):
    lock = RunLock(tmp_path)
    lock.hold()
    assert os.listdir(tmp_path) == []
    lock.release()
    lock.release()  # (twice: nothing held)
    RunLock(tmp_path / "missing").hold()  # the caller's own checks say that it is missing


def test_a_forked_child_keeps_the_directory_held_until_it_ends(tmp_path):
    """Workers started by fork share the lock's open file: an orphaned worker keeps the run held."""
    lock = RunLock(tmp_path)
    lock.hold()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: waits for the parent's word, then exits
        os.close(write)
        os.read(read, 1)
        os._exit(0)
    os.close(read)
    try:
        fd, lock._fd = lock._fd, None  # the parent closes its descriptor without LOCK_UN (as a crash would)
        os.close(fd)
        with pytest.raises(UserError):
            check_not_training(tmp_path)
    finally:
        os.write(write, b"x")
        os.close(write)
        os.waitpid(pid, 0)
    check_not_training(tmp_path)
