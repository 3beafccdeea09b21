"""A real TensorBoard server over HTTP: ``--tensorboard`` serves a run that is still training and its scalar
points grow while the run lives; the server is gone when the run ends; a server started on the finished run serves
every worker's tags, the custom-scalars layout, the hparams and the loss-history image. Also: the flag's parsing,
a port in use as a user error, and no orphan TensorBoard when its parent is killed.

This module doubles as the slow environment of the training run: the run's worker processes import it through the
``module:Env-id`` form of --env (PYTHONPATH=tests), and each env step sleeps STEP_S, so the run leaves the server the
CPU it needs."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import gymnasium
import pytest
from gymnasium.envs.classic_control import CartPoleEnv
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from a3c.record.tensorboard_server import TensorBoardServer, check_port, named_logdir, remove_named_logdir, run_name
from a3c.spec.errors import UserError
from a3c.train import parse_config

STEP_S = 0.002
# out of reach: the run trains until the test has seen its points grow, then Ctrl-C ends it. (A budget of 10,000 steps,
# 5 s of training asleep, could end first: TensorBoard, started beside the workers, imports and loads for seconds of
# CPU on a busy machine, then needs two more reloads of RELOAD_INTERVAL_S to show growth.)
TOTAL_STEPS = 100_000_000
ENV_ID = f"{__name__}:SlowCartPoleTB-v0"
HERE = Path(__file__).resolve().parent


class SleepyCartPole(CartPoleEnv):
    def step(self, action):
        time.sleep(STEP_S)
        return super().step(action)


if "SlowCartPoleTB-v0" not in gymnasium.registry:
    gymnasium.register("SlowCartPoleTB-v0", entry_point=f"{__name__}:SleepyCartPole", max_episode_steps=500)


def get(url: str, path: str, params: dict | None = None, body: dict | None = None, raw: bool = False):
    from procs import PATIENCE  # (here, not at the top: worker processes import this module as their env's)

    full = url.rstrip("/") + path + ("?" + urllib.parse.urlencode(params) if params else "")
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(full, data=data, headers={"Content-Type": "application/json"} if body else {})
    with urllib.request.urlopen(request, timeout=10 * PATIENCE) as response:  # (a reply: an event, however slow)
        payload = response.read()
    return payload if raw else json.loads(payload)


RUN = "run"  # the run directory's name: TensorBoard shows the run under it (not "."), each worker as RUN/workers/<r>


def episodic_return_points(url: str) -> int:
    try:
        return len(get(url, "/data/plugin/scalars/scalars", {"run": RUN, "tag": "charts/episodic_return"}))
    except urllib.error.HTTPError:  # 400 until the tag exists in the loaded data
        return 0


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def tensorboard_processes(logdir: Path) -> list[int]:
    """Pids of a3c.record.tensorboard_server processes serving ``logdir`` (from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"a3c.record.tensorboard_server" in args and str(logdir).encode() in args:
            pids.append(int(entry.name))
    return pids


def wait_for(predicate, timeout: float, interval: float = 0.5):
    """``predicate()``'s first true value within ``timeout`` seconds on an idle machine (times procs.PATIENCE)."""
    from procs import PATIENCE  # (here, not at the top: worker processes import this module as their env's)

    deadline = time.time() + timeout * PATIENCE
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to look for orphan servers")
def test_live_run_is_served_and_everything_is_served_after_it(tmp_path):
    run_dir = tmp_path / RUN
    log = tmp_path / "train.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    cmd = [
        sys.executable,
        "-m",
        "a3c.train",
        "--env",
        ENV_ID,
        "--workers",
        "2",
        "--envs-per-worker",
        "2",
        "--total-steps",
        str(TOTAL_STEPS),
        "--checkpoint-every",
        "0",
        "--run-dir",
        str(run_dir),
        "--tensorboard",
    ]
    server = None
    with open(log, "w") as stderr:
        train = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, env=env, cwd=HERE.parents[1])
    try:
        # 1. the run announces its server; the server's point count grows while the run is alive
        announced = re.compile(r"TensorBoard at (http://127\.0\.0\.1:(\d+)/)")
        # (the wait ends too when the run exits: a run that failed to start fails the test at once, not in 600 s)
        wait_for(lambda: announced.search(log.read_text()) or train.poll() is not None, 60)
        found = announced.search(log.read_text())
        assert found, log.read_text()
        url, port = found.group(1), int(found.group(2))
        from procs import PATIENCE

        counts, deadline = [], time.time() + 60 * PATIENCE
        while train.poll() is None and len(set(c for c in counts if c > 0)) < 3 and time.time() < deadline:
            counts.append(episodic_return_points(url))
            time.sleep(0.5)
        alive_at_last_count = train.poll() is None
        print("charts/episodic_return points seen while training:", sorted(set(counts)))
        assert alive_at_last_count, f"the run ended: {counts}\n{log.read_text()}"
        grown = [c for c in counts if c > 0]
        assert len(set(grown)) >= 3 and grown == sorted(grown), counts

        # 2. the run ends cleanly (Ctrl-C: the orderly end, its final files written) and takes its server with it
        train.send_signal(signal.SIGINT)
        assert train.wait(timeout=150) == 128 + signal.SIGINT, log.read_text()
        assert not port_open(port)
        assert wait_for(lambda: not tensorboard_processes(run_dir), 10), tensorboard_processes(run_dir)
        assert (run_dir / "plots" / "loss_history.png").is_file()
        summary = json.loads((run_dir / "summary.json").read_text())
        print("run:", {k: summary[k] for k in ("total_steps", "wall_time_s", "startup_s", "episodes")})

        # 3. a server on the finished run serves every worker's tags, the layout, the hparams and the image
        server = TensorBoardServer(run_dir, 0, reload_interval=1).start()
        url = server.wait_ready(timeout=60)
        # the run under its directory's name; each worker a run (a colour) of its own with its own tags
        want = {"charts/episodic_return", "charts/SPS", "losses/loss", "perf/policy_lag", "perf/policy_lag_max"}
        want |= {"perf/updates_per_s", "perf/grad_norm", "perf/skipped_updates", "perf/restarts"}
        want |= {"charts/episodic_return_mean", "charts/episodic_return_min", "charts/episodic_return_max"}
        want_by_run = {RUN: want}
        for r in (0, 1):
            want_by_run[f"{RUN}/workers/{r}"] = {f"workers/{r}/{m}" for m in ("episodic_return", "episode_loss")}

        def missing() -> dict:
            tags = get(url, "/data/plugin/scalars/tags")
            return {
                run: want - set(tags.get(run, {})) for run, want in want_by_run.items() if want - set(tags.get(run, {}))
            }

        assert wait_for(lambda: not missing(), 30), missing()
        assert set(get(url, "/data/runs")) == set(want_by_run)
        # what TensorBoard serves is what the event file holds (rate-limited: far fewer points than episodes)
        on_disk = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
        on_disk.Reload()
        written = len(on_disk.Scalars("charts/episodic_return"))
        assert 0 < written < summary["episodes"]
        assert wait_for(lambda: episodic_return_points(url) == written, 30), (episodic_return_points(url), written)

        layout = get(url, "/data/plugin/custom_scalars/layout")
        charts = {c["title"]: {ch["title"]: ch["multiline"]["tag"] for ch in c["chart"]} for c in layout["category"]}
        assert charts["return"]["every worker"] == [r"^workers/\d+/episodic_return$"]
        assert charts["loss"]["every worker (episode mean)"] == [r"^workers/\d+/episode_loss$"]
        for r in (0, 1):  # the multi-line chart's regex finds each worker's line in that worker's run
            multi = get(
                url,
                "/data/plugin/custom_scalars/scalars",
                {"run": f"{RUN}/workers/{r}", "tag": r"^workers/\d+/episodic_return$"},
            )
            assert multi["regex_valid"] and set(multi["tag_to_events"]) == {f"workers/{r}/episodic_return"}

        experiment = get(url, "/data/plugin/hparams/experiment", body={"experimentName": ""})
        hparam_names = {h["name"] for h in experiment["hparamInfos"]}
        assert {"lr", "workers", "env", "n_steps", "gamma", "total_steps"} <= hparam_names
        assert {m["name"]["tag"] for m in experiment["metricInfos"]} >= {"final/mean_return_100", "final/steps_per_s"}
        groups = get(
            url,
            "/data/plugin/hparams/session_groups",
            body={
                "experimentName": "",
                "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
                "colParams": [],
                "startIndex": 0,
                "sliceSize": 10,
            },
        )["sessionGroups"]
        assert len(groups) == 1 and groups[0]["hparams"]["env"] == ENV_ID and groups[0]["hparams"]["workers"] == 2
        metrics = {m["name"]["tag"]: m["value"] for m in groups[0]["metricValues"]}
        assert metrics["final/mean_return_100"] == pytest.approx(summary["mean_return_100"], rel=1e-5)

        images = get(url, "/data/plugin/images/images", {"run": RUN, "tag": "plots/loss_history", "sample": 0})
        assert images and images[-1]["step"] == summary["total_steps"]
        png = get(url, "/data/plugin/images/individualImage?" + images[-1]["query"], raw=True)
        assert png == (run_dir / "plots" / "loss_history.png").read_bytes()
    finally:
        if train.poll() is None:
            train.send_signal(signal.SIGINT)
            try:
                train.wait(timeout=20)
            except subprocess.TimeoutExpired:
                train.kill()
                train.wait()
        if server is not None:
            server.stop()
    assert not server.alive()


def test_tensorboard_flag_takes_an_optional_port():
    assert parse_config([]).tensorboard is None
    assert parse_config(["--tensorboard"]).tensorboard == 0
    assert parse_config(["--tensorboard", "6007", "--workers", "1"]).tensorboard == 6007
    assert parse_config(["--tensorboard", "--workers", "1"]).tensorboard == 0
    with pytest.raises(UserError, match="0..65535"):
        parse_config(["--tensorboard", "70000"])


def test_a_port_in_use_is_a_user_error_before_the_run_starts(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(UserError, match=f"port {port} on 127.0.0.1 is in use"):
            check_port(port)
        run_dir = tmp_path / "run"
        cmd = [sys.executable, "-m", "a3c.train", "--run-dir", str(run_dir), "--tensorboard", str(port)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and f"port {port} on 127.0.0.1 is in use" in proc.stderr
    assert not run_dir.exists()  # nothing was created: the same command works once the port is free
    check_port(0)
    check_port(None)


PARENT = """
import sys, time
from a3c.record.tensorboard_server import TensorBoardServer
server = TensorBoardServer(sys.argv[1], 0).start()
print(server.pid, server.wait_ready(60), flush=True)
time.sleep(600)
"""


def test_no_orphan_when_the_parent_is_killed(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        pid, url = parent.stdout.readline().split()
        port = int(urllib.parse.urlparse(url).port)
        assert port_open(port) and get(url, "/data/runs") == []
        parent.kill()  # SIGKILL: no finally, no atexit; only the closed pipe tells the child
        parent.wait()
        assert wait_for(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid), 15), f"TensorBoard {pid} orphaned"
        assert not port_open(port)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in tensorboard_processes(tmp_path):
            os.kill(pid, signal.SIGKILL)


def _zombie(pid: str) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def test_the_run_is_named_after_its_directory(tmp_path):
    run = tmp_path / "CartPole-v1__a3c__1__17"
    (run / "workers" / "0").mkdir(parents=True)
    assert run_name(run) == "CartPole-v1__a3c__1__17"
    top = named_logdir(run)
    try:
        link = top / "CartPole-v1__a3c__1__17"
        assert [p.name for p in top.iterdir()] == [link.name] and link.resolve() == run.resolve()
        assert (link / "workers" / "0").is_dir()  # TensorBoard's walk follows it: NAME/workers/0 is a run
    finally:
        remove_named_logdir(top)
    assert not top.exists() and (run / "workers" / "0").is_dir()  # the link went, the run stays


class _SlowToListen(TensorBoardServer):
    """A server child that never listens (it waits on its stdin, as the real one does once up): a run over before
    its TensorBoard came up."""

    def command(self) -> list[str]:
        return [sys.executable, "-c", "import sys; sys.stdin.read()"]


class _Crashing(TensorBoardServer):
    """A server child that fails as it starts."""

    def command(self) -> list[str]:
        return [sys.executable, "-c", "import sys; sys.exit('no such port')"]


def test_a_run_over_before_its_server_listened_says_how_to_see_it(tmp_path, capsys):
    """The URL line came from the reader thread whenever the server was up: a run that ended first said nothing of
    the --tensorboard it was given, and one whose server came up while it stopped could print a URL already dead.
    Now the end says how to see the run, and a URL after the stop is not printed."""
    server = _SlowToListen.start_for(tmp_path, 0)
    assert server is not None and server.alive()
    server.stop(say_if_unseen=True)
    assert not server.alive()
    err = capsys.readouterr().err
    assert err == f"a3c: TensorBoard was not up when the run ended; to see the run: tensorboard --logdir {tmp_path}\n"
    server.url = "http://127.0.0.1:1/"
    server._announce()  # (what the reader thread calls once the URL comes)
    assert capsys.readouterr().err == ""
    crashed = _Crashing.start_for(tmp_path, 0)
    assert crashed is not None and crashed.ready.wait(60)  # (end of file on its stdout: it exited)
    crashed.process.wait()
    crashed.stop(say_if_unseen=True)
    err = capsys.readouterr().err
    assert err.startswith("a3c: TensorBoard exited before it served the run (") and err.count("\n") == 1, err
    assert "no such port" in err and err.endswith(f"; to see the run: tensorboard --logdir {tmp_path}\n")
    quiet = _SlowToListen.start_for(tmp_path, 0)
    assert quiet is not None
    quiet.stop()  # (a run refused before it started: its one error line is all it says)
    assert capsys.readouterr().err == ""
