"""--track (a3c/record/tracking.py): a run logged to W&B in offline mode, read back from its offline run file (config,
scalars at the global step, summary); a missing wandb is one line naming the extra, exit 2; the tracker's own rules."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from procs import summary, train_cmd

from a3c.record.tracking import STEP, WandbTracker
from a3c.spec.errors import run_cli

BLOCK, HEADER = 32768, 7  # the offline run file's record log: 32 KiB blocks, a 7-byte header per record


def read_wandb_records(path: Path) -> list:
    """The records of an offline W&B run file (run-<id>.wandb): W&B's LevelDB-style log of protobuf Records."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", "not a W&B run file"
    records, pos, chunks = [], HEADER, b""  # the file header is 7 bytes too
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # the rest of a block too small for a header is padding
            pos += left
            continue
        length, kind = struct.unpack("<HB", data[pos + 4 : pos + 7])
        chunk = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind == 0 and length == 0:
            continue
        chunks += chunk
        if kind in (1, 4):  # FULL or LAST: a whole record
            record = pb.Record()
            record.ParseFromString(chunks)
            records.append(record)
            chunks = b""
    return records


def offline_run(run_dir: Path) -> dict:
    """{"config", "history" (a list of dicts), "summary", "run"} of the one offline W&B run in ``run_dir``/wandb."""
    files = list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1, files
    out: dict = {"config": {}, "history": [], "summary": {}, "run": None}
    for r in read_wandb_records(files[0]):
        kind = r.WhichOneof("record_type")
        if kind == "run":
            out["run"] = r.run
            out["config"].update({i.key: json.loads(i.value_json) for i in r.run.config.update})
        elif kind == "config":
            out["config"].update({i.key: json.loads(i.value_json) for i in r.config.update})
        elif kind == "history":
            out["history"].append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item})
        elif kind == "summary":
            out["summary"].update({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.summary.update})
    return out


def test_a_tracked_run_in_offline_mode_logs_its_config_scalars_and_summary(tmp_path):
    pytest.importorskip("wandb")
    run_dir = tmp_path / "run"
    cmd = train_cmd(
        run_dir,
        "--backend", "serial", "--total-steps", "2000", "--eval-every", "1000", "--eval-episodes", "2",
        "--tb-episode-points-per-s", "0", "--lr", "0.002",
        "--track", "--wandb-project", "a3c-tests", "--wandb-group", "g1",
        workers=1,
    )  # fmt: skip
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DIR": str(tmp_path)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    got = offline_run(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    assert got["run"].project == "a3c-tests" and got["run"].run_group == "g1"
    assert got["run"].run_id == config["wandb_id"] and got["run"].display_name == run_dir.name
    assert got["config"]["lr"] == 0.002 and got["config"]["env"] == "CartPole-v1" and got["config"]["track"] is True
    assert got["config"]["hidden_sizes"] == [64, 64] and "wandb_id" not in got["config"]
    rows = got["history"]
    returns = [r for r in rows if "charts/episodic_return" in r]
    assert returns and all(STEP in r and 0 < r[STEP] <= 2000 for r in returns)
    assert any("workers/0/episodic_return" in r for r in rows)  # the worker's own stream, as in TensorBoard
    evals = [(r[STEP], r["eval/mean_return"]) for r in rows if "eval/mean_return" in r]
    eval_csv = (run_dir / "eval.csv").read_text().splitlines()[1:]
    assert len(evals) == len(eval_csv) >= 1  # every evaluation, at the step of the weights it scored
    assert [int(e[0]) for e in evals] == [int(float(line.split(",")[0])) for line in eval_csv]
    assert any("losses/loss" in r for r in rows) and any("charts/SPS" in r for r in rows)
    final = summary(run_dir)
    assert got["summary"]["total_steps"] == final["total_steps"] == 2000
    assert got["summary"]["mean_return_100"] == pytest.approx(final["mean_return_100"])
    assert got["summary"]["stop_reason"] == "total_steps" and got["summary"]["episodes"] == final["episodes"]


def test_track_without_wandb_is_one_line_naming_the_extra(monkeypatch, capsys, tmp_path):
    import a3c.run.resolve as resolve
    from a3c.train import main

    real = resolve.importlib.util.find_spec
    monkeypatch.setattr(resolve.importlib.util, "find_spec", lambda name: None if name == "wandb" else real(name))
    code = run_cli(main, ["--track", "--run-dir", str(tmp_path / "r"), "--workers", "1"], prog="a3c.train")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert 'needs Weights & Biases (wandb), which is not installed; pip install -e ".[wandb]"' in err
    assert not (tmp_path / "r").exists()  # before the run directory


def test_wandb_settings_need_track():
    from a3c.spec.config import Config
    from a3c.spec.errors import UserError

    with pytest.raises(UserError, match="--wandb-group g is for --track; drop it, or add --track"):
        Config(wandb_group="g").validate()
    Config(track=True, wandb_group="g", wandb_entity="me").validate()


class FakeRun:
    def __init__(self):
        self.logged, self.summary, self.finished = [], {}, []

    def log(self, data):
        self.logged.append(data)

    def finish(self, exit_code):
        self.finished.append(exit_code)


def test_the_tracker_logs_at_the_global_step_drops_non_finite_values_and_marks_failed_runs():
    run = FakeRun()
    tracker = WandbTracker(run)
    tracker.log(10, {"charts/episodic_return": 5.0, "perf/policy_lag": float("nan")})
    tracker.log(12, {"workers/3/episodic_return": 7})
    tracker.log(13, {"perf/grad_norm": float("inf")})  # nothing finite: no point at all
    assert run.logged == [
        {STEP: 10, "charts/episodic_return": 5.0},
        {STEP: 12, "workers/3/episodic_return": 7.0},
    ]
    tracker.summarize({"stop_reason": "interrupted", "solved_at_step": None, "total_steps": 5})
    assert run.summary == {"stop_reason": "interrupted", "total_steps": 5}  # (no value: left out)
    tracker.finish()
    tracker.finish()  # once
    assert run.finished == [1]
    ok = WandbTracker(FakeRun())
    ok.summarize({"stop_reason": "total_steps"})
    ok.finish()
    assert ok.run.finished == [0]


def test_a_wandb_that_cannot_start_is_a_user_error(monkeypatch, tmp_path):
    wandb = pytest.importorskip("wandb")
    from a3c.spec.config import Config
    from a3c.spec.errors import UserError

    def fail(**kwargs):
        raise wandb.errors.UsageError("api_key not configured (no-tty)")

    monkeypatch.setattr(wandb, "init", fail)
    with pytest.raises(UserError, match=r"W&B could not start the run \(api_key not configured.*wandb login"):
        WandbTracker.start(Config(track=True), tmp_path)


def test_a_tracker_that_cannot_start_leaves_no_run_directory_in_the_way(monkeypatch, tmp_path, capsys):
    """W&B refused to start after config.json (and W&B's own folder) were written: the same command then met "is not
    empty ... or --resume" though the directory held no checkpoint. Now what the start wrote goes again."""
    wandb = pytest.importorskip("wandb")
    from a3c.spec.errors import run_cli
    from a3c.train import main

    def fail(**kwargs):
        Path(kwargs["dir"], "wandb").mkdir(parents=True)  # (as wandb.init makes its folder before it fails)
        raise wandb.errors.UsageError("api_key not configured (no-tty)")

    monkeypatch.setattr(wandb, "init", fail)
    for given in (tmp_path / "new" / "run", tmp_path / "empty"):
        if given.name == "empty":
            given.mkdir()  # a directory the user made: it stays, empty
        argv = ["--backend", "serial", "--workers", "1", "--total-steps", "200", "--track", "--run-dir", str(given)]
        for _ in range(2):  # the same command twice: the same error, not "not empty"
            assert run_cli(main, argv, prog="a3c.train") == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) >= 1 and "W&B could not start the run" in err[-1], err
        assert (given.exists() and not any(given.iterdir())) if given.name == "empty" else not given.parent.exists()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
