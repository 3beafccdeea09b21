"""a3c.record.resume's choice of the checkpoint a run goes on from: the newest intact one of checkpoints/latest.pt and
the step-N.pt files, each read and checked, and a line saying which it took when it is not latest.pt. A checkpoint
whose latest.pt write failed (a full disk: step-N.pt is written first) resumes from its step-N.pt, not from the older
latest.pt; end to end, a run whose latest.pt write fails ends in one line (exit 1) and resumes from that step."""

from __future__ import annotations

import errno

import pytest
import torch

import a3c.run.trainer
from a3c.record.checkpoint import LATEST, rng_state, save_checkpoint, step_file
from a3c.record.resume import load_resume
from a3c.spec.config import Config
from a3c.spec.errors import UserError, run_cli


def _payload(step: int) -> dict:
    return {
        "model": torch.full((10,), float(step)),
        "optimizer": {"lr": 1e-3, "steps": torch.tensor([3, 4]), "exp_avg": torch.zeros(10)},
        "global_step": step,
        "worker_steps": torch.tensor([step // 2, step - step // 2]),
        "episodes_written": torch.tensor([5, 7]),
        "worker_stats": torch.zeros(2, 13, dtype=torch.float64),
        "incarnations": torch.tensor([1, 1]),
        "restarts": 0,
        "obs_dim": 4,
        "n_actions": 2,
        "config": Config(workers=2, total_steps=10_000).to_dict(),
        "rng": rng_state(),
        "wall_time_s": step / 1000,
    }


def _run(tmp_path, latest: int | None, steps: tuple[int, ...] = ()):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text("{}")
    for step in steps:
        save_checkpoint(run / "checkpoints" / step_file(step), _payload(step))
    if latest is not None:
        save_checkpoint(run / "checkpoints" / LATEST, _payload(latest))
    return run


def test_a_step_file_newer_than_latest_is_where_the_run_goes_on_and_the_line_says_so(tmp_path, capsys):
    """The full disk of the issue: step-30000.pt written intact, latest.pt's write failed and it stayed at 20,480."""
    run = _run(tmp_path, latest=20_480, steps=(10_240, 20_480, 30_000))
    payload = load_resume(run)
    assert payload["global_step"] == 30_000 and float(payload["model"][0]) == 30_000
    err = capsys.readouterr().err
    assert "a3c: resuming from checkpoints/step-30000.pt (step 30,000), the newest intact checkpoint" in err
    assert "checkpoints/latest.pt is at step 20,480" in err and err.count("\n") == 1


def test_latest_is_taken_when_it_is_the_newest_and_nothing_is_said(tmp_path, capsys):
    run = _run(tmp_path, latest=30_000, steps=(20_000, 30_000))
    assert load_resume(run)["global_step"] == 30_000
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda path: path.write_bytes(path.read_bytes()[:100]), "corrupt"),  # cut short
        (lambda path: path.unlink(), "missing"),  # its first write failed: no latest.pt at all
    ],
)
def test_a_damaged_or_missing_latest_falls_back_to_the_newest_step_file(tmp_path, capsys, damage, why):
    run = _run(tmp_path, latest=20_000, steps=(10_000, 20_000))
    damage(run / "checkpoints" / LATEST)
    assert load_resume(run)["global_step"] == 20_000
    err = capsys.readouterr().err
    assert "a3c: resuming from checkpoints/step-20000.pt (step 20,000)" in err and why in err


def test_a_damaged_newer_step_file_is_passed_over_for_the_next_intact_one(tmp_path, capsys):
    run = _run(tmp_path, latest=10_000, steps=(10_000, 20_000, 30_000))
    path = run / "checkpoints" / step_file(30_000)
    path.write_bytes(path.read_bytes()[:100])
    save_checkpoint(run / "checkpoints" / step_file(20_000), {**_payload(20_000), "optimizer": None})  # incomplete
    assert load_resume(run)["global_step"] == 10_000  # latest.pt: the newest that is intact
    err = capsys.readouterr().err
    assert "step-30000.pt is corrupt" in err and "step-20000.pt has no valid 'optimizer' entry" in err


def test_no_intact_checkpoint_is_the_user_error_of_latest(tmp_path):
    run = _run(tmp_path, latest=10_000, steps=(10_000,))
    for name in (LATEST, step_file(10_000)):
        (run / "checkpoints" / name).write_bytes(b"not a checkpoint")
    with pytest.raises(UserError, match="latest.pt is corrupt or not a torch file"):
        load_resume(run)


FLAGS = ["--backend", "serial", "--workers", "1", "--envs-per-worker", "2", "--eval-every", "0"]
FLAGS += ["--checkpoint-every-s", "0", "--checkpoint-every", "1000"]
NEW = ["--env", "CartPole-v1", "--preset", "none", *FLAGS]


@pytest.mark.parametrize("latest_written", [1, 0])
def test_a_run_whose_latest_write_fails_ends_in_one_line_and_resumes_from_its_step_file(
    tmp_path, monkeypatch, capsys, latest_written
):
    """The writer fails on latest.pt after ``latest_written`` good ones (ENOSPC, as on a full disk), each time after
    step-N.pt was written intact: the run ends (exit 1, one line naming latest.pt and the fix, --resume, with no
    traceback), and --resume goes on from the newest step-N.pt, not from the older latest.pt (or, with none, is not
    refused)."""
    from a3c.train import main

    save = a3c.run.trainer.save_checkpoint
    latest_writes = 0

    def disk_fills_up(path, payload):
        nonlocal latest_writes
        if path.name == LATEST:
            latest_writes += 1
            if latest_writes > latest_written:
                raise OSError(errno.ENOSPC, "No space left on device")
        save(path, payload)

    monkeypatch.setattr(a3c.run.trainer, "save_checkpoint", disk_fills_up)
    run_dir = tmp_path / "run"
    assert run_cli(main, [*NEW, "--run-dir", str(run_dir), "--total-steps", "20000"], prog="a3c.train") == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"a3c: error: the disk of {run_dir} is full (No space left on device) while writing checkpoints/latest.pt; "
        f"free space, then --resume {run_dir}"
    )
    latest = run_dir / "checkpoints" / LATEST
    assert latest.is_file() == (latest_written > 0)
    newest = max(int(p.stem.split("-")[1]) for p in (run_dir / "checkpoints").glob("step-*.pt"))
    assert not latest.is_file() or newest > torch.load(latest, weights_only=True)["global_step"]

    monkeypatch.setattr(a3c.run.trainer, "save_checkpoint", save)  # the disk has room again
    code = run_cli(main, [*FLAGS, "--resume", str(run_dir), "--total-steps", str(newest + 1000)], prog="a3c.train")
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"a3c: resuming from checkpoints/step-{newest}.pt (step {newest:,}), the newest intact checkpoint" in err
    assert f"a3c: resuming {run_dir} at step {newest:,}" in err
