"""TensorBoard served from inside a training run (``--tensorboard [PORT]``), on 127.0.0.1 only.

The server runs in a child process, ``python -m a3c.record.tensorboard_server RUN_DIR --port P``, which launches
TensorBoard's own server (``tensorboard.program``) in a thread, prints its URL on stdout and then blocks reading its
stdin. The parent keeps the write end of that pipe: closing it (``stop()``) or dying in any way (Ctrl-C, a crash,
SIGKILL) gives the child end-of-file, and it exits. No orphan TensorBoard outlives its run, whatever ends the run.

TensorBoard runs with the pure-Python event loader (``--load_fast=false``): the Rust data server would be one more
process to account for, and a single run directory is small.

Run names: TensorBoard names runs by their path below --logdir, so serving the run directory itself would name its own
event stream ".". The child serves a temporary directory holding one symlink, NAME -> the run directory (NAME: the run
directory's name; removed when the child exits), so the run shows as NAME and each worker's stream (``workers/<rank>/``,
see a3c/record/tensorboard_writer.py) as NAME/workers/<rank>; TensorBoard gives every run, so every worker, a colour of
its own. (``--logdir_spec NAME:PATH`` would name the run itself "NAME/.".)
"""

from __future__ import annotations

import argparse
import errno
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import weakref
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from a3c.spec.errors import UserError, run_cli

HOST = "127.0.0.1"
RELOAD_INTERVAL_S = 2.0  # how often TensorBoard rereads the event files
STOP_TIMEOUT_S = 5.0


def check_port(port: int | None) -> None:
    """Raise UserError if ``port`` cannot be bound on 127.0.0.1 right now (None: no server; 0: any free port)."""
    if not port:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError as err:
            why = "is in use" if err.errno == errno.EADDRINUSE else f"cannot be used ({err.strerror})"
            raise UserError(
                f"--tensorboard: port {port} on {HOST} {why}; pass another port, or --tensorboard alone for a free one"
            ) from None


class TensorBoardServer:
    """A TensorBoard child process serving ``logdir`` on 127.0.0.1. ``url`` is set once it is listening."""

    def __init__(self, logdir: Path, port: int = 0, reload_interval: float = RELOAD_INTERVAL_S) -> None:
        self.logdir, self.port, self.reload_interval = Path(logdir), port, reload_interval
        self.url: str | None = None
        self.ready = threading.Event()  # set when the URL is known or the child has exited
        self.stderr_tail: deque[str] = deque(maxlen=20)
        self.process: subprocess.Popen[str] | None = None
        self._on_ready: list = []
        # the URL line and the stop, which may meet (a server up as the run ends): one or the other speaks
        self._lock = threading.Lock()
        self._stopped = self._announced = False

    @classmethod
    def start_for(cls, logdir: Path, port: int | None, announce: bool = True) -> TensorBoardServer | None:
        """Start a server for a run when ``port`` is not None (the ``--tensorboard`` flag); print its URL to stderr
        as soon as it is up (without waiting for it here). Returns None when the flag is off."""
        if port is None:
            return None
        server = cls(logdir, port)
        if announce:
            server._on_ready.append(server._announce)
        return server.start()

    def command(self) -> list[str]:
        """The child's command line."""
        return [
            sys.executable,
            "-m",
            "a3c.record.tensorboard_server",
            str(self.logdir),
            "--port",
            str(self.port),
            "--reload-interval",
            str(self.reload_interval),
        ]

    def start(self) -> TensorBoardServer:
        check_port(self.port)
        self.process = subprocess.Popen(
            self.command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        # stop the child when this object is collected or the interpreter exits without stop() being called
        self._finalizer = weakref.finalize(self, _stop_process, self.process, STOP_TIMEOUT_S)
        threading.Thread(target=self._read_stdout, name="a3c-tensorboard-stdout", daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, name="a3c-tensorboard-stderr", daemon=True)
        self._stderr_reader.start()
        return self

    def _read_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("URL ") and self.url is None:
                self.url = line[4:].strip()
                self.ready.set()
                for callback in self._on_ready:
                    callback()
        self.ready.set()  # end of file: the child exited (or never started)

    def _read_stderr(self) -> None:  # drained so that TensorBoard never blocks on a full pipe
        assert self.process is not None and self.process.stderr is not None
        for line in self.process.stderr:
            if line.strip():
                self.stderr_tail.append(line.rstrip())

    def _announce(self) -> None:
        with self._lock:
            if self._stopped:  # (up as the run stopped: the URL would be dead by the time it is read)
                return
            self._announced = True
            print(f"a3c: TensorBoard at {self.url} (serving {self.logdir}; stops when the run ends)", file=sys.stderr)

    def wait_ready(self, timeout: float = 60.0) -> str:
        """Block until the server listens; returns its URL. RuntimeError if it exited or did not start in time."""
        if not self.ready.wait(timeout) or self.url is None:
            tail = " | ".join(list(self.stderr_tail)[-3:]) or "no output"
            state = "did not start in time" if self.alive() else "exited"
            raise RuntimeError(f"TensorBoard {state}: {tail}")
        return self.url

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def stop(self, say_if_unseen: bool = False) -> None:
        """Close the child's stdin (it exits on end-of-file); terminate, then kill it if it does not.
        ``say_if_unseen`` (the run's end): where its URL was never printed, say how to see the run instead."""
        with self._lock:
            self._stopped, unseen = True, not self._announced
        crashed = self.process is not None and self.process.poll() not in (None, 0)
        if self.process is not None:
            self._finalizer()
        if say_if_unseen and unseen and self._announce in self._on_ready:
            see = f"to see the run: tensorboard --logdir {shlex.quote(str(self.logdir))}"
            if crashed:
                self._stderr_reader.join(STOP_TIMEOUT_S)  # (its last lines: the pipe ends as the child exited)
                tail = " | ".join(list(self.stderr_tail)[-2:]) or "no output"
                print(f"a3c: TensorBoard exited before it served the run ({tail}); {see}", file=sys.stderr)
            else:
                print(f"a3c: TensorBoard was not up when the run ended; {see}", file=sys.stderr)


def _stop_process(process: subprocess.Popen, timeout: float) -> None:
    if process.poll() is None and process.stdin is not None:
        try:
            process.stdin.close()
        except OSError:
            pass
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_name(logdir: Path) -> str:
    """The name TensorBoard shows for the run: the run directory's name."""
    return Path(logdir).resolve().name or "run"


def named_logdir(logdir: Path) -> Path:
    """A new temporary directory holding the symlink ``run_name(logdir)`` -> ``logdir``: serve it as --logdir."""
    top = Path(tempfile.mkdtemp(prefix="a3c-tensorboard-"))
    (top / run_name(logdir)).symlink_to(Path(logdir).resolve(), target_is_directory=True)
    return top


def remove_named_logdir(top: Path) -> None:
    for link in top.iterdir():
        link.unlink()  # the symlink only, never what it points to
    top.rmdir()


def serve(logdir: Path, port: int, reload_interval: float) -> int:
    """The child: launch TensorBoard in a thread, print ``URL <url>``, exit when stdin reaches end-of-file."""
    from tensorboard import program

    top = named_logdir(logdir)
    try:
        return _serve(top, port, reload_interval, program)
    finally:
        remove_named_logdir(top)


def _serve(top: Path, port: int, reload_interval: float, program) -> int:
    tb = program.TensorBoard()
    tb.configure(
        argv=[
            "tensorboard",
            "--logdir",
            str(top),
            "--host",
            HOST,
            "--port",
            str(port),
            "--reload_interval",
            str(reload_interval),
            "--load_fast",
            "false",
        ]
    )
    try:
        url = tb.launch()
    except program.TensorBoardServerException as err:
        print(f"a3c.record.tensorboard_server: {err.msg}", file=sys.stderr)
        return 1
    print(f"URL {url}", flush=True)
    while sys.stdin.read(4096):  # returns '' only at end-of-file: the parent closed the pipe or died
        pass
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m a3c.record.tensorboard_server", description=__doc__.splitlines()[0]
    )
    parser.add_argument("logdir", type=Path)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--reload-interval", type=float, default=RELOAD_INTERVAL_S)
    args = parser.parse_args(argv)
    if not args.logdir.is_dir():
        raise UserError(f"{args.logdir} is not a directory; pass a run directory")
    return serve(args.logdir, args.port, args.reload_interval)


if __name__ == "__main__":
    sys.exit(run_cli(main, prog="a3c.record.tensorboard_server"))
