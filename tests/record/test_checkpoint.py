"""a3c.record.checkpoint and a3c.record.resume: atomic save, safe load (a malicious pickle is refused and does nothing),
clear errors for corrupt, foreign or incomplete files, RNG state round trip, episodes.csv trimming for resume, and the
checkpoint schedule (steps or seconds) with its retention. All in-process, fast."""

import csv
import random
import zipfile

import gymnasium as gym
import numpy as np
import pytest
import torch

from a3c.record.checkpoint import (
    LATEST,
    STEP_FILE,
    CheckpointSchedule,
    load_checkpoint,
    prune_checkpoints,
    rng_state,
    save_checkpoint,
    set_rng_state,
    step_checkpoints,
    step_file,
    unpickling_reason,
)
from a3c.record.resume import (
    check_compatible,
    elapsed_wall_time,
    load_resume,
    reset_when_off,
    resume_config,
    trim_episode_log,
    trim_episode_log_counting,
)
from a3c.spec.config import Config
from a3c.spec.environment import EnvSpec
from a3c.spec.errors import UserError


class _CreatesFile:
    """Unpickling this calls open(path, "w"): it creates a file. A loader that runs pickled code would do that."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _payload(workers=2, params=10):
    return {
        "model": torch.arange(params, dtype=torch.float32),
        "optimizer": {"lr": 1e-3, "steps": torch.tensor([3, 4]), "exp_avg": torch.zeros(params)},
        "global_step": 700,
        "worker_steps": torch.tensor([300, 400]),
        "episodes_written": torch.tensor([5, 7]),
        "worker_stats": torch.zeros(workers, 13, dtype=torch.float64),
        "incarnations": torch.tensor([1, 2]),
        "restarts": 1,
        "obs_dim": 4,
        "n_actions": 2,
        "config": Config(workers=workers, total_steps=1000).to_dict(),
        "rng": rng_state(),
    }


def _run_dir(tmp_path, payload):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text("{}")
    if payload is not None:
        save_checkpoint(run / "checkpoints" / "latest.pt", payload)
    return run


def test_round_trip_and_no_temp_file_left(tmp_path):
    path = tmp_path / "c.pt"
    save_checkpoint(path, _payload())
    loaded = load_checkpoint(path)
    assert torch.equal(loaded["model"], torch.arange(10, dtype=torch.float32))
    assert loaded["global_step"] == 700 and torch.equal(loaded["optimizer"]["steps"], torch.tensor([3, 4]))
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]


def test_a_failed_write_leaves_the_previous_checkpoint_intact(tmp_path, monkeypatch):
    path = tmp_path / "latest.pt"
    save_checkpoint(path, _payload())

    def broken_save(obj, f):
        f.write(b"PK\x03\x04 half a zip file")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError):
        save_checkpoint(path, {**_payload(), "global_step": 9999})
    monkeypatch.undo()
    assert load_checkpoint(path)["global_step"] == 700  # the old one, whole


def test_a_pickle_that_would_create_a_file_is_refused_and_creates_nothing(tmp_path):
    target = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    torch.save({"format": 1, "model": _CreatesFile(str(target))}, evil)
    with pytest.raises(UserError, match="refused by the safe loader"):
        load_checkpoint(evil)
    assert not target.exists()
    # the file really is malicious: the unsafe loader runs it
    torch.load(evil, weights_only=False)
    assert target.exists()


@pytest.mark.parametrize(
    "content, match",
    [
        (b"", "corrupt or not a torch file"),
        (b"\x00\x01garbage" * 100, "corrupt or not a torch file"),
    ],
)
def test_corrupt_files_are_user_errors(tmp_path, content, match):
    path = tmp_path / "c.pt"
    path.write_bytes(content)
    with pytest.raises(UserError, match=match):
        load_checkpoint(path)


def test_truncated_checkpoint_is_a_user_error(tmp_path):
    path = tmp_path / "c.pt"
    save_checkpoint(path, _payload())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="corrupt"):
        load_checkpoint(path)


def test_a_checkpoint_whose_pickle_bytes_are_damaged_is_corrupt_not_unsafe(tmp_path):
    """Found by probing: bytes zeroed inside data.pkl were called "refused by the safe loader (Please file an issue
    ...): may run code"; torch 2.13 puts the reason on a line of its own."""
    path = tmp_path / "c.pt"
    save_checkpoint(path, _payload())
    with zipfile.ZipFile(path) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    pickled = next(name for name in files if name.endswith("data.pkl"))
    files[pickled] = files[pickled][:10] + bytes(20) + files[pickled][30:]
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    with pytest.raises(UserError) as err:
        load_checkpoint(path)
    assert "is corrupt (Unsupported operand" in str(err.value) and "run code" not in str(err.value), err.value


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (
            "Weights only load failed. In PyTorch 2.6, we changed ...\nPlease file an issue with the following so that "
            "we can make `weights_only=True` compatible with your use case: WeightsUnpickler error: Unsupported "
            "global: GLOBAL io.open was not an allowed global by default. Please use ...\n\nCheck the documentation",
            "Unsupported global: GLOBAL io.open was not an allowed global by default",
        ),
        (
            "Weights only load failed. In PyTorch 2.6 ...\n\n\nTrying to load unsupported GLOBAL posix.getcwd whose "
            "module posix is blocked.\n\nCheck the documentation of torch.load to learn more",
            "Trying to load unsupported GLOBAL posix.getcwd whose module posix is blocked",
        ),
        (
            "Weights only load failed.\nPlease file an issue ...: WeightsUnpickler error: \n\nUnsupported operand 0\n",
            "Unsupported operand 0",
        ),
        (
            "Weights only load failed. This file can still be loaded ...\n\t(1) In PyTorch 2.6, we changed ...\n\t(2) "
            "Alternatively, ...\n\tWeightsUnpickler error: Unsupported global: GLOBAL io.open was not an allowed "
            "global by default. Please use ...\n\nCheck the documentation of torch.load",
            "Unsupported global: GLOBAL io.open was not an allowed global by default",
        ),
        ("", ""),
    ],
)
def test_the_reason_of_torchs_refusal_without_its_advice(message, reason):
    assert unpickling_reason(message) == reason


def test_a_torch_file_that_is_not_an_a3c_checkpoint_is_a_user_error(tmp_path):
    path = tmp_path / "c.pt"
    torch.save({"weights": torch.zeros(3)}, path)
    with pytest.raises(UserError, match="not an a3c checkpoint"):
        load_checkpoint(path)


def test_load_resume_checks_the_directory_and_the_entries(tmp_path):
    with pytest.raises(UserError, match="no such directory"):
        load_resume(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="not an a3c run directory"):
        load_resume(tmp_path / "empty")
    run = _run_dir(tmp_path, None)
    with pytest.raises(UserError, match="has no checkpoints/latest.pt"):
        load_resume(run)
    payload = _payload()
    del payload["optimizer"]
    save_checkpoint(run / "checkpoints" / "latest.pt", payload)
    with pytest.raises(UserError, match="no valid 'optimizer' entry"):
        load_resume(run)
    save_checkpoint(run / "checkpoints" / "latest.pt", {**_payload(), "incarnations": torch.tensor([1, 2, 3])})
    with pytest.raises(UserError, match="inconsistent worker counters"):
        load_resume(run)
    save_checkpoint(run / "checkpoints" / "latest.pt", _payload())
    assert load_resume(run)["global_step"] == 700


def test_the_same_env_kwargs_given_again_are_the_same_whatever_nan_they_hold(tmp_path):
    """Found by a probing review: --env-kwargs extra=nan given again on resume "differed from the resumed run's
    {'extra': nan}" (NaN equals nothing, itself included)."""
    payload = _payload()
    payload["config"]["env_kwargs"] = {"extra": float("nan"), "scale": [1.0, float("nan")]}
    again = {"env_kwargs": {"extra": float("nan"), "scale": [1.0, float("nan")]}, "total_steps": 5000}
    assert resume_config(payload, tmp_path, again).total_steps == 5000
    with pytest.raises(UserError, match="--env-kwargs .* differs from the resumed run's"):
        resume_config(payload, tmp_path, {"env_kwargs": {"extra": 1.0, "scale": [1.0, float("nan")]}})


def test_resume_config_takes_the_flags_given_but_keeps_the_model(tmp_path):
    payload = _payload()
    config = resume_config(payload, tmp_path, {"total_steps": 5000, "lr": 5e-4})
    assert config.total_steps == 5000 and config.lr == 5e-4 and config.workers == 2
    assert config.run_dir == str(tmp_path) and config.resume == str(tmp_path)
    with pytest.raises(UserError, match="--env 'Acrobot-v1' differs"):
        resume_config(payload, tmp_path, {"env": "Acrobot-v1", "total_steps": 5000})
    with pytest.raises(UserError, match="--hidden-sizes"):
        resume_config(payload, tmp_path, {"hidden_sizes": (32,), "total_steps": 5000})
    assert resume_config(payload, tmp_path, {"hidden_sizes": (64, 64), "total_steps": 5000})  # same is fine
    # the evaluations' protocol stays; the same value typed again (or --no-eval-stochastic on an older checkpoint, which
    # has no such setting: it evaluated the most likely actions) is fine
    assert not resume_config(payload, tmp_path, {"eval_stochastic": False, "total_steps": 5000}).eval_stochastic
    with pytest.raises(UserError, match="--eval-stochastic differs from the resumed run's --no-eval-stochastic"):
        resume_config(payload, tmp_path, {"eval_stochastic": True, "total_steps": 5000})
    older = {**payload, "config": {k: v for k, v in payload["config"].items() if k != "eval_stochastic"}}
    # (and the initial weights' settings, which a checkpoint from before them lacks: the flags' defaults then were
    # theirs; before ADDED_SETTINGS held them, --ortho-init "differed from the resumed run's None")
    oldest = {
        **payload,
        "config": {k: v for k, v in payload["config"].items() if k not in ("ortho_init", "log_std_init")},
    }
    assert resume_config(oldest, tmp_path, {"ortho_init": True, "log_std_init": 0.0, "total_steps": 5000}).ortho_init
    assert not resume_config(older, tmp_path, {"eval_stochastic": False, "total_steps": 5000}).eval_stochastic
    with pytest.raises(UserError, match="--eval-stochastic differs from the resumed run's --no-eval-stochastic"):
        resume_config(older, tmp_path, {"eval_stochastic": True, "total_steps": 5000})
    with pytest.raises(UserError, match="already at step 700"):
        resume_config(payload, tmp_path, {"total_steps": 700})
    with pytest.raises(UserError, match="--lr"):
        resume_config(payload, tmp_path, {"lr": -1.0, "total_steps": 5000})
    with pytest.raises(UserError, match="--lstm 64 differs"):  # the recurrent core is part of the model
        resume_config(payload, tmp_path, {"lstm": 64, "total_steps": 5000})
    # the initial weights' settings: the checkpoint's weights replace what they would make (they were ignored)
    with pytest.raises(UserError, match="--log-std-init -1.0 differs"):
        resume_config(payload, tmp_path, {"log_std_init": -1.0, "total_steps": 5000})
    with pytest.raises(UserError, match="--no-ortho-init differs from the resumed run's --ortho-init"):
        resume_config(payload, tmp_path, {"ortho_init": False, "total_steps": 5000})


def test_a_ray_run_resumes_under_another_backend_without_its_ray_only_settings(tmp_path):
    payload = _payload()
    payload["config"] = {**payload["config"], "backend": "ray", "push_every": 4, "ray_same_node": "ray"}
    kept = resume_config(payload, tmp_path, {"total_steps": 5000})  # still on Ray: everything kept
    assert (kept.backend, kept.push_every, kept.ray_same_node) == ("ray", 4, "ray")
    moved = resume_config(payload, tmp_path, {"total_steps": 5000, "backend": "shared-memory"})
    assert (moved.backend, moved.push_every, moved.ray_same_node) == ("shared-memory", 1, "shared-memory")
    with pytest.raises(UserError, match="--push-every 4 is for --backend ray"):  # given again: the user's error
        resume_config(payload, tmp_path, {"total_steps": 5000, "backend": "serial", "push_every": 4})


def test_settings_of_a_switch_turned_off_go_back_to_their_defaults_on_resume(tmp_path):
    """A checkpoint whose config holds a setting its switch no longer turns on (--ray-address of a Ray run resumed on
    shared memory; --clip-obs of an older a3c's run without --normalize-obs): the setting goes back to its default
    rather than fail the resume's validation, unless given again."""
    payload = _payload()
    payload["config"] = {
        **payload["config"],
        **{"backend": "ray", "ray_address": "auto", "ray_node_ip": "10.0.0.2", "ray_cpus_per_worker": 0.5},
        **{"normalize_obs": False, "clip_obs": 5.0, "normalize_reward": False, "clip_reward": 1.0},
    }
    moved = resume_config(payload, tmp_path, {"total_steps": 5000, "backend": "shared-memory"})
    assert (moved.ray_address, moved.ray_node_ip, moved.ray_cpus_per_worker) == (None, "127.0.0.1", 1.0)
    assert (moved.clip_obs, moved.clip_reward) == (10.0, 10.0)
    with pytest.raises(UserError, match="--clip-obs 3.0 is for --normalize-obs"):
        resume_config(payload, tmp_path, {"total_steps": 5000, "backend": "serial", "clip_obs": 3.0})


def test_settings_left_with_nothing_to_do_go_back_to_their_defaults_on_resume(tmp_path):
    """--start-method of a run resumed under --backend serial, --push-every of a Ray cluster's run resumed on a local
    Ray (validation.inert_settings): their defaults, rather than a failed resume; given again, refused."""
    payload = _payload()
    payload["config"] = {**payload["config"], "start_method": "spawn", "backend": "ray", "ray_address": "auto"}
    payload["config"]["push_every"] = 4
    kept = resume_config(payload, tmp_path, {"total_steps": 5000})
    assert (kept.start_method, kept.push_every) == ("spawn", 4)
    local = resume_config(payload, tmp_path, {"total_steps": 5000, "ray_address": None})
    assert (local.backend, local.ray_address, local.push_every, local.start_method) == ("ray", None, 1, "spawn")
    serial = resume_config(payload, tmp_path, {"total_steps": 5000, "backend": "serial"})
    assert (serial.start_method, serial.push_every) == (None, 1)
    with pytest.raises(UserError, match="--start-method spawn is how worker processes start"):
        resume_config(payload, tmp_path, {"total_steps": 5000, "backend": "serial", "start_method": "spawn"})
    # said in the resume's note, as the switches' are (the review found them reset without a word)
    reset, note = reset_when_off(payload, local, {"total_steps", "ray_address"})
    assert reset == ["push_every"] and note is not None and "\n" not in note
    assert note.startswith("a3c: note: the run's --push-every 4 count only with workers that reach the server by")
    reset, note = reset_when_off(payload, serial, {"total_steps", "backend"})
    assert reset == ["push_every", "ray_address", "start_method"], reset
    assert "--start-method spawn count only with --backend ray or worker processes (a --backend other than" in note
    assert reset_when_off(payload, kept, {"total_steps"}) == ([], None)


def test_a_ppo_run_resumed_under_a3c_takes_the_defaults_of_ppos_and_vtraces_settings(tmp_path):
    """The objective's settings are reset by the same table as the switches' (RESET_WHEN_OFF): a PPO run with V-trace
    targets resumed under --algo a3c --targets gae takes their defaults, unless given again (then refused)."""
    payload = _payload()
    payload["config"] = {
        **payload["config"],
        **{"algo": "ppo", "n_steps": 64, "minibatch_size": 32, "n_epochs": 3, "clip_range_vf": 0.2},
        **{"targets": "vtrace", "vtrace_rho_bar": 0.5},
    }
    kept = resume_config(payload, tmp_path, {"total_steps": 5000})
    assert (kept.minibatch_size, kept.n_epochs, kept.vtrace_rho_bar) == (32, 3, 0.5)
    moved = resume_config(payload, tmp_path, {"total_steps": 5000, "algo": "a3c", "targets": "gae"})
    defaults = Config()
    assert (moved.algo, moved.targets) == ("a3c", "gae")
    assert (moved.minibatch_size, moved.n_epochs, moved.clip_range_vf, moved.vtrace_rho_bar) == (
        defaults.minibatch_size,
        defaults.n_epochs,
        defaults.clip_range_vf,
        defaults.vtrace_rho_bar,
    )
    with pytest.raises(UserError, match="--n-epochs 5 is for --algo ppo"):
        resume_config(payload, tmp_path, {"total_steps": 5000, "algo": "a3c", "n_epochs": 5})
    # said in one line (found by probing: they were reset without a word, and --show-config called them the
    # checkpoint's), and named for --show-config
    reset, note = reset_when_off(payload, moved, {"total_steps", "algo", "targets"})
    assert set(reset) == {"minibatch_size", "n_epochs", "clip_range_vf", "vtrace_rho_bar"}
    assert note is not None and "\n" not in note
    assert note.startswith("a3c: note: the run's --n-epochs 3 and --minibatch-size 32 and --clip-range-vf 0.2 and ")
    assert "count only with --algo ppo or --targets vtrace, off now" in note
    assert reset_when_off(payload, kept, {"total_steps"}) == ([], None)


def _spec(obs_dim, n_actions):
    return EnvSpec("Test-v0", gym.spaces.Box(-1, 1, (obs_dim,)), gym.spaces.Discrete(n_actions), None, None)


def test_check_compatible_names_the_mismatch():
    payload = _payload()
    check_compatible(payload, _spec(4, 2), 10, "ckpt")
    with pytest.raises(UserError, match="observations of size 4 and 2 actions, but the env now has 6 and 3"):
        check_compatible(payload, _spec(6, 3), 10, "ckpt")
    with pytest.raises(UserError, match="holds 10 parameters but the model has 12"):
        check_compatible(payload, _spec(4, 2), 12, "ckpt")
    # checkpoints that record the spaces are checked against them
    payload["spaces"] = _spec(4, 2).describe()
    check_compatible(payload, _spec(4, 2), 10, "ckpt")
    with pytest.raises(UserError, match=r"trained on Box\(-1.0, 1.0, \(4,\), float32\) observations and Discrete\(2\)"):
        check_compatible(
            payload, EnvSpec("T", gym.spaces.Box(-2, 2, (4,)), gym.spaces.Discrete(2), None, None), 10, "c"
        )


def test_rng_state_round_trip_survives_the_safe_loader(tmp_path):
    torch.manual_seed(5)
    np.random.seed(5)
    random.seed(5)
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"rng": rng_state()})
    expected = (torch.rand(3), np.random.rand(3), random.random())
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    set_rng_state(load_checkpoint(path)["rng"])
    got = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(expected[0], got[0]) and np.array_equal(expected[1], got[1]) and expected[2] == got[2]


def test_trim_episode_log_keeps_what_the_checkpoint_counted(tmp_path):
    path = tmp_path / "episodes.csv"
    header = ["worker", "index", "return", "length", "loss", "policy_loss", "value_loss", "entropy", "global_step"]
    rows = [[w, i, 10.0 + i, 10, 0.1, 0.1, 0.1, 0.5, 100 * i] for i in range(4) for w in range(2)]
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([header, *rows])
    with open(path, "a") as f:
        f.write("1,4,12.0,1")  # half a row: the main process was killed while writing it
    kept, dropped = trim_episode_log_counting(path, np.array([2, 3]))
    assert [(int(r["worker"]), int(r["index"])) for r in kept] == [(0, 0), (1, 0), (0, 1), (1, 1), (1, 2)]
    assert dropped == 3  # (whole rows: the half row is no episode)
    with open(path) as f:
        on_disk = list(csv.reader(f))
    assert on_disk[0] == header and len(on_disk) == 6


def test_episodes_dropped_past_the_checkpoint_are_said():
    """Found by a probing review: a run stopped by --stop-at keeps the solve's weights as its final checkpoint, and
    the episodes its workers finished while stopping were logged after it: a resume dropped and replaced them unsaid."""
    from a3c.record.resume import dropped_episodes_note

    assert dropped_episodes_note(0, 5_120) is None
    note = dropped_episodes_note(2, 5_120)
    assert note == (
        "a3c: note: 2 episodes in episodes.csv came after the checkpoint at step 5,120 (finished while the run "
        "stopped, or before it was killed): dropped, as the run goes on from the checkpoint"
    )


def test_the_run_s_wall_time_goes_on_from_the_checkpoint():
    """The resumed session's wall time goes on from the checkpoint's wall_time_s; a checkpoint of an a3c that did
    not save it goes on from the newest kept episode."""
    kept = [{"global_step": 10.0 * k, "wall_time": wall} for k, wall in enumerate((3.5, 7.25, 6.0))]
    assert elapsed_wall_time({"wall_time_s": 9.0}, kept) == 9.0
    assert elapsed_wall_time({}, kept) == 7.25
    assert elapsed_wall_time({"wall_time_s": float("nan")}, []) == 0.0


def test_retention_keeps_exactly_the_newest_n_step_files_plus_latest_and_best(tmp_path):
    d = tmp_path / "checkpoints"
    d.mkdir()
    for name in ("latest.pt", "best.pt", "notes.txt", "step-x.pt"):
        (d / name).write_bytes(b"keep me")
    schedule = CheckpointSchedule(every_steps=100, every_s=0, keep=3)
    written = []
    for step in range(0, 2001, 50):  # a checkpoint every 100 steps, each step file written as the trainer does
        names = schedule.due(step)
        if names:
            assert names == (step_file(step), LATEST)
            for name in names:
                (d / name).write_bytes(b"x")
            written.append(step)
            deleted = schedule.written(d, step)
            assert all(STEP_FILE.match(p.name) for p in deleted)
    assert written == list(range(100, 2001, 100))
    assert sorted(p.name for p in d.iterdir()) == sorted(
        ["best.pt", "latest.pt", "notes.txt", "step-x.pt", "step-1800.pt", "step-1900.pt", "step-2000.pt"]
    )
    assert [s for s, _ in step_checkpoints(d)] == [1800, 1900, 2000]
    assert prune_checkpoints(d, 1) == [d / "step-1800.pt", d / "step-1900.pt"]
    assert (d / "best.pt").read_bytes() == b"keep me" and (d / "latest.pt").is_file()


def test_keep_zero_writes_only_latest():
    schedule = CheckpointSchedule(every_steps=10, every_s=0, keep=0)
    assert schedule.due(5) == ()
    assert schedule.due(12) == (LATEST,) == schedule.files(17)
    assert CheckpointSchedule(every_steps=10, every_s=0, keep=2).files(17) == (step_file(17), LATEST)


def test_schedule_by_seconds_is_independent_of_the_step_rate(tmp_path):
    now = [0.0]
    schedule = CheckpointSchedule(every_steps=0, every_s=300, keep=2, step=0, clock=lambda: now[0])
    assert schedule.due(10**9) == ()  # a billion steps: no checkpoint before 300 s
    now[0] = 299.9
    assert schedule.due(10**9) == ()
    now[0] = 300.0
    assert schedule.due(10**9) == (step_file(10**9), LATEST)
    schedule.written(tmp_path, 10**9)
    now[0] = 599.0
    assert schedule.due(10**9 + 5) == ()  # the next one 300 s after the last write
    now[0] = 600.5
    assert schedule.due(7) == (step_file(7), LATEST)


def test_schedule_by_steps_or_seconds_whichever_first_and_both_off(tmp_path):
    now = [0.0]
    schedule = CheckpointSchedule(every_steps=1000, every_s=60, keep=5, step=2500, clock=lambda: now[0])
    assert schedule.next_step == 3000  # a resumed run goes on from the next multiple
    assert schedule.due(2999) == ()
    assert schedule.due(3000) == (step_file(3000), LATEST)
    schedule.written(tmp_path, 3000)
    now[0] = 61.0
    assert schedule.due(3001) == (step_file(3001), LATEST)  # by time, before step 4000
    off = CheckpointSchedule(every_steps=0, every_s=0, keep=5, clock=lambda: now[0])
    now[0] = 10**6
    assert off.due(10**12) == ()


def test_checkpoint_flags_are_validated():
    assert Config().checkpoint_every_s > 0 and Config().keep_checkpoints >= 1
    for kwargs, match in (
        ({"keep_checkpoints": -1}, "--keep-checkpoints"),
        ({"checkpoint_every_s": -1.0}, "--checkpoint-every-s"),
        ({"checkpoint_every_s": float("nan")}, "--checkpoint-every-s"),
        ({"tb_episode_points_per_s": -0.5}, "--tb-episode-points-per-s"),
    ):
        with pytest.raises(UserError, match=match):
            Config(**kwargs).validate()


FRAMES = gym.spaces.Box(0, 255, (10, 12, 3), np.uint8)


def _frames_payload(old: bool, spaces_only: bool = False):
    """A --normalize-obs checkpoint of a model of uint8 frames; ``old``: written before the input scale was recorded
    (``spaces_only``: and before the env's description was stored, only the spaces' repr)."""
    spec = EnvSpec("Img-v0", FRAMES, gym.spaces.Discrete(4), None, None)
    payload = {
        **_payload(),
        "config": Config(env="Img-v0", normalize_obs=True, workers=2, total_steps=1000).to_dict(),
        "env_spec": spec.to_data(),
        "spaces": spec.describe(),
    }
    if old:
        payload["config"].pop("input_scale", None)
    if spaces_only:
        del payload["env_spec"]
    return payload, spec


@pytest.mark.parametrize("spaces_only", [False, True], ids=["env_spec", "spaces"])
def test_resume_rebuilds_an_old_checkpoint_with_its_input_scale_and_records_it(tmp_path, spaces_only):
    """Bug (review of issue 22): --resume rebuilt an old --normalize-obs checkpoint of uint8 frames (trained on
    normalised input x 1/255) with scale 1 (create_shared_run -> build_model(spec, config)). The resumed config
    carries the checkpoint's input scale, which build_model (the trainer's, the workers', the evaluator's) uses, and
    the resumed run's checkpoints record it; a new checkpoint resumes with its own."""
    from a3c.run.backends.shared_memory import create_shared_run

    payload, spec = _frames_payload(old=True, spaces_only=spaces_only)
    config = resume_config(payload, tmp_path, {"total_steps": 5000})
    _, model, _ = create_shared_run(spec, config)  # what the trainer builds on --resume
    assert model.actor.scale == pytest.approx(1 / 255) and config.input_scale == pytest.approx(1 / 255)
    path = tmp_path / "latest.pt"
    save_checkpoint(path, {**payload, "config": config.to_dict(), "env_spec": spec.to_data()})  # the next checkpoint
    assert load_checkpoint(path)["input_scale"] == pytest.approx(1 / 255)
    assert resume_config(load_checkpoint(path), tmp_path, {"total_steps": 5000}).input_scale == pytest.approx(1 / 255)

    new, _ = _frames_payload(old=False)
    save_checkpoint(path, new)
    config = resume_config(load_checkpoint(path), tmp_path, {"total_steps": 5000})
    assert config.input_scale == 1.0 and create_shared_run(spec, config)[1].actor.scale == 1.0
    # an old checkpoint of float observations, or without --normalize-obs: the scale it had is today's rule's
    floats = {**_payload(), "config": Config(normalize_obs=True, workers=2, total_steps=1000).to_dict()}
    floats["spaces"] = _spec(4, 2).describe()
    floats["config"].pop("input_scale", None)
    assert resume_config(floats, tmp_path, {"total_steps": 5000}).input_scale == 1.0


COLUMNS = ["worker", "index", "return", "length", "loss", "policy_loss", "value_loss", "entropy", "global_step"]


def _write_episodes(path, rows, cut: str = ""):
    """episodes.csv with ``rows`` of (worker, index, global_step, wall_time), and ``cut`` (half a row) at its end."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*COLUMNS, "wall_time"])
        for w, i, step, wall in rows:
            writer.writerow([w, i, 1.0, 10, 0.1, 0.1, 0.1, 0.5, step, wall])
        f.write(cut)


def _old_run_after_fewer_workers(tmp_path):
    """A run directory as an a3c before per-rank retention left it: session 1 with 2 workers (rank 0's episodes
    0..3, rank 1's 0..2, to step 400), resumed with 1 worker (rank 0's episodes 4..7, to step 800), whose checkpoint
    at step 800 counts rank 0 only (episodes_written [8]: its restore dropped rank 1's counter), and one more
    episode of rank 0 logged after it, before a crash. The checkpoint is a real coordinator's snapshot (CartPole,
    1 worker) with the counters such an a3c wrote, and no wall_time_s (which came with per-rank retention)."""
    from a3c.run.backends.shared_memory import SharedMemoryCoordinator, create_shared_run
    from a3c.spec.environment import describe_env

    spec = describe_env("CartPole-v1")
    config = Config(workers=1, total_steps=2000)
    snapshot = SharedMemoryCoordinator(create_shared_run(spec, config)[0]).snapshot()
    payload = {
        **snapshot,
        "global_step": 800,
        "worker_steps": torch.tensor([800]),
        "episodes_written": torch.tensor([8]),
        "incarnations": torch.tensor([0]),
        "restarts": 0,
        "obs_dim": 4,
        "n_actions": 2,
        "config": config.to_dict(),
        "rng": rng_state(),
    }
    run = _run_dir(tmp_path, payload)
    session_1 = [(0, i, 100 * (i + 1), 1.0 * i) for i in range(4)] + [
        (1, i, 100 * (i + 1) + 50, 1.0 * i + 0.5) for i in range(3)
    ]
    session_2 = [(0, 4 + i, 400 + 100 * (i + 1), 0.5 + i) for i in range(4)]
    _write_episodes(run / "episodes.csv", [*session_1, *session_2, (0, 8, 850, 4.2)], cut="1,3,1.0,1")
    return run, spec, session_1 + session_2


@pytest.mark.parametrize("workers", [2, 1, 3])
def test_an_old_checkpoint_that_forgot_a_rank_keeps_its_rows_and_the_rank_goes_on_after_them(tmp_path, workers):
    """Bug (review of issue 22): a checkpoint of an a3c before per-rank retention, written after a resume with fewer
    workers, counts fewer ranks than episodes.csv holds; the next resume deleted the higher ranks' rows (complete
    rows of an earlier session) and a rank run again would repeat their indexes. load_resume gives such a rank the
    counter its rows show (its last index + 1, from the rows up to the checkpoint's step), so trim_episode_log keeps
    them and the coordinator's restore goes on after them, whatever the resumed session's worker count."""
    from a3c.run.backends.shared_memory import SharedMemoryCoordinator, create_shared_run

    run, spec, counted = _old_run_after_fewer_workers(tmp_path)
    payload = load_resume(run)
    assert payload["episodes_written"].tolist() == [8, 3]
    assert payload["worker_steps"].tolist() == [800, 0] and payload["incarnations"].tolist() == [0, 0]
    assert len(payload["worker_stats"]) == 2 and not payload["worker_stats"][1].any()
    kept = trim_episode_log(run / "episodes.csv", payload["episodes_written"].numpy())
    assert sorted((int(r["worker"]), int(r["index"])) for r in kept) == sorted((w, i) for w, i, _, _ in counted)
    shared, _, _ = create_shared_run(spec, Config(workers=workers, total_steps=2000))
    coordinator = SharedMemoryCoordinator(shared)
    coordinator.restore(payload)
    assert coordinator.snapshot()["episodes_written"].tolist()[:2] == [8, 3]  # ... carried by every later checkpoint
    assert coordinator.global_step() == 800
    if workers >= 2:
        assert shared.board.written.tolist()[:2] == [8, 3]  # rank 1's next episode is its 4th: index 3


def test_rows_of_a_rank_no_checkpoint_counted_yet_are_dropped(tmp_path):
    """The other way to have rows of ranks a checkpoint does not count: a resumed session with more workers (3
    after 2) crashed before its first checkpoint. Its new rank's rows come after the checkpoint's step: they go, as
    every row logged after it does (the resumed run plays them again), and no counter is made up for that rank."""
    payload = {**_payload(), "wall_time_s": 10.0}  # counts ranks 0 and 1 (5 and 7 episodes) at step 700
    run = _run_dir(tmp_path, payload)
    rows = [(0, i, 50 * (i + 1), 0.5 * i) for i in range(5)] + [(1, i, 50 * (i + 1) + 20, 0.5 * i) for i in range(7)]
    _write_episodes(run / "episodes.csv", [*rows, (2, 0, 730, 10.5), (0, 5, 740, 10.6)])
    resumed = load_resume(run)
    assert resumed["episodes_written"].tolist() == [5, 7]
    kept = trim_episode_log(run / "episodes.csv", resumed["episodes_written"].numpy())
    assert sorted((int(r["worker"]), int(r["index"])) for r in kept) == sorted((w, i) for w, i, _, _ in rows)
    old = {k: v for k, v in payload.items() if k != "wall_time_s"}  # the same rows under an old checkpoint
    save_checkpoint(run / "checkpoints" / LATEST, old)
    _write_episodes(run / "episodes.csv", [*rows, (2, 0, 730, 10.5), (0, 5, 740, 10.6)])
    assert load_resume(run)["episodes_written"].tolist() == [5, 7]


def test_the_wall_time_of_an_old_checkpoint_adds_up_its_sessions():
    """Bug (review of issue 22): for a checkpoint without wall_time_s the run's wall time was the newest kept row's
    wall_time; after two resumes by an a3c whose wall time began at 0 in each session, that is the longest session's
    time, not the run's. The rows, in global-step order, are walked adding the time each session reached when the
    next one begins (wall time drops to below half of it); the workers' interleaving within a session (a row a
    little earlier in time than the one before it by step) is no new session."""
    sessions = [(0, [2.0, 1.9, 5.0, 20.0]), (1000, [0.5, 3.0, 2.9, 15.0]), (2000, [1.0, 10.0])]  # 20 + 15 + 10 s
    rows = [
        {"global_step": float(start + 10 * k), "wall_time": wall}
        for start, walls in sessions
        for k, wall in enumerate(walls)
    ]
    shuffled = rows[5:] + rows[:5]  # (the order in the file does not matter: the global step's does)
    assert elapsed_wall_time({}, shuffled) == pytest.approx(45.0)
    assert elapsed_wall_time({}, rows[:4]) == pytest.approx(20.0)  # one session: its newest row
    assert elapsed_wall_time({"wall_time_s": 9.0}, rows) == 9.0  # a checkpoint that has it: its own
    # a run whose wall time already went on across sessions: no drop, its newest row
    assert elapsed_wall_time({}, [{"global_step": 10.0 * k, "wall_time": 1.0 + k} for k in range(5)]) == 5.0


def test_resuming_an_old_run_that_forgot_a_rank_with_2_workers_appends_to_its_record(tmp_path, capfd):
    """The same old run directory resumed for real (the command line, serial backend, 2 workers): no row of the
    first session goes, rank 1 goes on at index 3, and no (worker, index) repeats (rank 0's row logged after the
    checkpoint is dropped and played again)."""
    from procs import indexes_contiguous

    from a3c.spec.errors import run_cli
    from a3c.train import main as train_main

    run, _, counted = _old_run_after_fewer_workers(tmp_path)
    argv = ["--resume", str(run), "--total-steps", "1600", "--backend", "serial", "--workers", "2"]
    argv += ["--envs-per-worker", "2", "--eval-every", "0", "--checkpoint-every-s", "0"]
    assert run_cli(train_main, argv, prog="a3c.train") == 0, capfd.readouterr().err
    with open(run / "episodes.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    pairs = [(int(r["worker"]), int(r["index"])) for r in rows]
    assert pairs[: len(counted)] == [(w, i) for w, i, _, _ in counted]  # the old record, whole and first
    assert indexes_contiguous(rows) and (1, 3) in pairs and (0, 8) in pairs
    assert load_checkpoint(run / "checkpoints" / LATEST)["episodes_written"].tolist() == [
        sum(1 for w, _ in pairs if w == rank) for rank in (0, 1)
    ]
