"""A run a3c.train made outside the driver, stored as the driver would have (scripts/benchmark/adopt.py): its
sessions read from its output, its flags held to its config, and a run that has not ended refused."""

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from a3c.record.run_dir import final_line
from scripts import bench
from scripts.benchmark import adopt
from scripts.benchmark.queue import QueueError
from scripts.benchmark.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_store import row  # noqa: E402


def _summary(total, resumed=None, train=10.0, reason="total_steps", wall=None):
    return {
        "total_steps": total,
        "resumed_from_step": resumed,
        "wall_time_s": wall or train + 1.0,
        "session_wall_time_s": train + 1.0,
        "steps_per_s": (total - (resumed or 0)) / train,
        "training_time_s": train,
        "episodes": 10,
        "mean_return_100": 9.5,
        "stop_reason": reason,
        "final_checkpoint_step": total,
    }


def _log(tmp_path):
    """An output as a3c leaves it, sessions appended: a first session killed (no end line), one stopped, one that
    ended; a3c's own lines mark each start (a resumer's marker lines are ignored)."""
    stopped = final_line(_summary(3_000, resumed=1_000, train=20.0, reason="interrupted"), tmp_path)
    ended = final_line(_summary(5_120, resumed=3_000, train=30.0, wall=80.0), tmp_path, budget=5_000)
    return "\n".join(
        [
            "a3c: preset ...",
            f"a3c: run directory {tmp_path}",
            "a3c: eval at step 500: ...",
            "=== resume Sat Dec  5 11:11:00 UTC 2026 ===",
            f"a3c: resuming {tmp_path} at step 1,000 with 2 workers",
            stopped,
            f"a3c: resuming {tmp_path} at step 3,000 with 2 workers",
            "a3c: eval at step 4,000: ...",
            ended,
        ]
    )


def test_each_session_of_the_output_with_the_steps_and_time_its_end_line_gives(tmp_path):
    sessions = adopt.sessions_from_log(_log(tmp_path), "python -m a3c.train ...")
    assert [s["summary"] for s in sessions][0] is None  # killed: counted, without steps or time
    assert [(s["summary"]["resumed_from_step"], s["summary"]["total_steps"]) for s in sessions[1:]] == [
        (1_000, 3_000),
        (3_000, 5_120),
    ]
    assert [s["summary"]["training_time_s"] for s in sessions[1:]] == [20.0, 30.0]
    one = final_line(_summary(2_048, train=4.0), tmp_path, budget=2_000)
    only = adopt.sessions_from_log(f"a3c: run directory {tmp_path}\n{one}\n", "cmd")
    assert only[0]["summary"]["total_steps"] == 2_048 and only[0]["summary"]["resumed_from_step"] is None
    with pytest.raises(QueueError, match="no session"):
        adopt.sessions_from_log("nothing here\n", "cmd")


def _run_dir(tmp_path, reason="total_steps", total=5_120):
    """A run directory as a3c.train writes it: config.json by RunDirectory.write_config from a resolved run (the
    start method resolved, --workers auto's count and how it was chosen, the fields the start-up fills in)."""
    from a3c.record.run_dir import RunDirectory
    from a3c.train import parse_config

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    made = parse_config(["--env", "CartPole-v1", "--seed", "7", "--total-steps", "5000", "--n-steps", "16"])
    made = dataclasses.replace(made, workers=2, workers_auto={"workers": 2, "why": "one per core"}, input_scale=1.0)
    RunDirectory(run).write_config(made)
    summary = {**_summary(total, resumed=3_000, train=30.0, wall=80.0), "stop_reason": reason}
    (run / "summary.json").write_text(json.dumps(summary))
    lines = ["worker,index,return,length,loss,policy_loss,value_loss,entropy,global_step,wall_time"]
    lines += [f"0,{i},{i},{10},0,0,0,0,{(i + 1) * 40},{i * 0.5}" for i in range(120)]
    (run / "episodes.csv").write_text("\n".join(lines) + "\n")
    return run


def test_adopt_stores_the_row_the_driver_would_have(tmp_path, capsys):
    run = _run_dir(tmp_path)
    log = tmp_path / "run.log"
    log.write_text(_log(run))
    store = tmp_path / "store.jsonl"
    argv = ["adopt", str(run), "--arm", "n16=--n-steps 16", "--log", str(log), "--store", str(store)]
    assert bench.main([*argv, "--work-dir", str(tmp_path / "work")]) == 0
    (row,) = Store(store).rows()
    assert (row["env"], row["arm"], row["seed"], row["budget"]) == ("CartPole-v1", "n16", 7, 5_000)
    assert row["sessions"] == 3 and row["wall_s"] == 80.0
    assert row["train_s"] == 50.0 and row["steps_per_s"] == pytest.approx((2_000 + 2_120) / 50.0)
    assert row["arm_spec"] == {"kind": "a3c", "flags": ["--n-steps", "16"], "evaluate": 0, "adopted": True}
    assert row["command"].startswith("python -m a3c.train --env CartPole-v1 --seed 7 --total-steps 5000 --n-steps 16")
    assert row["final_mean_100"] == pytest.approx(sum(range(20, 120)) / 100)
    # the same run again: refused, the store unchanged
    assert bench.main([*argv, "--work-dir", str(tmp_path / "work")]) == 2
    assert "stored already" in capsys.readouterr().err and len(Store(store).rows()) == 1


def test_adopt_refuses_flags_that_do_not_give_the_runs_settings(tmp_path, capsys):
    run = _run_dir(tmp_path)
    argv = ["adopt", str(run), "--arm", "n8=--n-steps 8", "--store", str(tmp_path / "s.jsonl")]
    assert bench.main([*argv, "--work-dir", str(tmp_path / "work")]) == 2
    err = capsys.readouterr().err
    assert "n_steps 16 in the run, 8 from the flags" in err and err.count("\n") == 1
    assert not (tmp_path / "s.jsonl").exists()


def test_adopt_refuses_a_run_that_has_not_ended(tmp_path, capsys):
    run = _run_dir(tmp_path, reason="interrupted", total=3_000)
    argv = ["adopt", str(run), "--arm", "n16=--n-steps 16", "--store", str(tmp_path / "s.jsonl")]
    assert bench.main([*argv, "--work-dir", str(tmp_path / "work")]) == 2
    assert f"go on with python -m a3c.train --resume {run.resolve()}" in capsys.readouterr().err


def test_adopt_says_in_one_line_what_it_cannot_take(tmp_path, capsys):
    run = _run_dir(tmp_path)
    store = tmp_path / "s.jsonl"
    base = ["adopt", str(run), "--store", str(store), "--work-dir", str(tmp_path / "work")]
    cases = [
        (["--arm", "x=--n-steps 16", "--log", str(tmp_path / "missing.log")], "cannot read it"),
        (["--arm", "x=--n-steps '16"], "closing quotation"),
        (["--arm", "x=--n-steps 16 --no-such-flag"], "a3c.train has no --no-such-flag"),
        (["--arm", "sb3-ppo"], "adopt takes an a3c run"),
        # found by probing: the row was stored with commit "unknown"
        (["--arm", "x=--n-steps 16", "--code", str(tmp_path / "nowhere")], "not a git checkout"),
    ]
    for extra, said in cases:
        assert bench.main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1, err
    assert not store.exists() and not (tmp_path / "work").exists()  # nothing written before the checks


def test_adopt_leaves_a_driver_run_of_the_same_key_alone(tmp_path, capsys):
    run = _run_dir(tmp_path)
    argv = ["adopt", str(run), "--arm", "n16=--n-steps 16", "--store", str(tmp_path / "s.jsonl")]
    assert bench.main([*argv, "--work-dir", str(tmp_path / "work")]) == 0
    (folder,) = (tmp_path / "work").iterdir()
    assert (folder / "run").is_symlink() and (folder / "run").resolve() == run.resolve()
    (folder / "run").unlink()
    (folder / "run").mkdir()  # the driver's own run of this key
    assert bench.main([*argv[:-1], str(tmp_path / "other.jsonl"), "--work-dir", str(tmp_path / "work")]) == 2
    assert "holds a run of the driver's own" in capsys.readouterr().err


def test_adopt_refuses_an_arm_name_the_store_holds_with_other_settings(tmp_path, capsys):
    """The name check `run` makes: an arm name stands for one spec in a store, a driver run's or an adopted one's."""
    run = _run_dir(tmp_path)
    store = Store(tmp_path / "s.jsonl")
    store.append(
        row(env="Acrobot-v1", arm="n16", arm_spec={"kind": "a3c", "flags": ["--n-steps", "32"], "evaluate": 0})
    )
    argv = ["adopt", str(run), "--arm", "n16=--n-steps 16", "--store", str(store.path)]
    assert bench.main([*argv, "--work-dir", str(tmp_path / "work")]) == 2
    err = capsys.readouterr().err
    assert "arm 'n16' is stored as" in err and "a new name" in err and err.count("\n") == 1
    assert len(store.rows()) == 1 and not (tmp_path / "work").exists()


def test_an_adopted_run_and_a_driver_run_of_the_same_arm_share_its_name(tmp_path):
    """Whether the driver ran it or adopt stored it is where a row came from, not what its arm is: a run adopted with
    the flags a driver arm of that name stores (its own --checkpoint-every-s, no --workers) goes beside its rows."""
    run = _run_dir(tmp_path)
    store = Store(tmp_path / "s.jsonl")
    flags = ["--n-steps", "16", "--checkpoint-every-s", "300"]
    store.append(row(env="Acrobot-v1", arm="n16", arm_spec={"kind": "a3c", "flags": flags, "evaluate": 0}))
    argv = ["adopt", str(run), "--arm", "n16=--n-steps 16 --checkpoint-every-s 300", "--store", str(store.path)]
    assert bench.main([*argv, "--work-dir", str(tmp_path / "work")]) == 0
    assert [r["arm"] for r in store.rows()] == ["n16", "n16"]
    again = ["run", "--env", "Acrobot-v1", "--arm", "n16=--n-steps 16 --checkpoint-every-s 300", "--seeds", "1"]
    again += ["--budget", "1000", "--workers", "default", "--store", str(store.path), "--dry-run"]
    assert bench.main(again) == 0
