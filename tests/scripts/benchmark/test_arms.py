"""Arms (scripts/benchmark/arms.py): NAME=FLAGS or a peer, and the command each runs."""

import pytest

from scripts.benchmark import arms


def test_an_a3c_arm_gets_the_driver_s_workers_and_checkpoints_unless_it_names_its_own(tmp_path):
    arm = arms.parse_arm("ppo=--algo ppo --lr 1e-3")
    assert arm.effective_flags() == ("--algo", "ppo", "--lr", "1e-3", "--workers", "2", "--checkpoint-every-s", "60")
    own = arms.parse_arm("w=--workers 16 --checkpoint-every 5000")
    assert own.effective_flags() == ("--workers", "16", "--checkpoint-every", "5000")
    assert arms.parse_arm("q=--stop-when-solved", workers=None).effective_flags()[:2] == (
        "--stop-when-solved",
        "--checkpoint-every-s",
    )
    argv = arms.command(arm, "CartPole-v1", 3, 1000, tmp_path / "run")
    assert argv[1:3] == ["-m", "a3c.train"] and argv[-2:] == ["--run-dir", str(tmp_path / "run")]
    assert argv[3:9] == ["--env", "CartPole-v1", "--seed", "3", "--total-steps", "1000"]
    resumed = arms.command(arm, "CartPole-v1", 3, 1000, tmp_path / "run", resume=True)
    assert resumed[-2:] == ["--resume", str(tmp_path / "run")] and resumed[:-2] == argv[:-2]
    assert arms.shown(argv).startswith("python -m a3c.train --env CartPole-v1")


def test_a_peer_runs_sb3_runner(tmp_path):
    argv = arms.command(arms.parse_arm("sb3-ppo-cleanrl"), "Hopper-v5", 1, 5000, tmp_path)
    assert argv[1:3] == ["-m", "scripts.sb3_runner"]
    assert argv[3:] == [
        "--algo",
        "ppo",
        "--settings",
        "cleanrl",
        "--env",
        "Hopper-v5",
        "--seed",
        "1",
        "--steps",
        "5000",
        "--run-dir",
        str(tmp_path),
    ]
    assert arms.parse_arm("sb3-a2c").spec() == {"kind": "sb3-a2c", "algo": "a2c", "settings": "rl-zoo3"}


@pytest.mark.parametrize("text", ["nope", "=--algo ppo", "a b=--algo ppo", "sb3-ppo=--algo ppo"])
def test_a_bad_arm_is_named(text):
    with pytest.raises(arms.ArmError):
        arms.parse_arm(text)


def test_flags_this_a3c_does_not_know_are_found():
    known = arms.a3c_flags()
    assert {"--env", "--algo", "--resume", "--workers"} <= known
    arm = arms.parse_arm("x=--algo ppo --no-such-flag 3 --also-not=1")
    assert arms.unknown_flags(arm, known) == ["--also-not", "--no-such-flag"]
    assert arms.unknown_flags(arms.parse_arm("sb3-ppo"), known) == []
