"""scripts/bench_atari.py: the peer it times a3c against follows the objective a3c runs (the atari preset is PPO's)."""

from __future__ import annotations

import pytest

from scripts.bench_atari import peer_algo

pytest.importorskip("ale_py", reason="Atari needs the [atari] extra (.ci/run installs it)")


class Refused(Exception):
    pass


def refuse(message: str) -> None:
    raise Refused(message)


def test_the_peer_is_sb3_s_algorithm_with_the_same_objective():
    """Before: SB3's A2C whatever a3c ran, so the preset (PPO's since it beat A3C's table on Breakout) was timed
    against the other objective."""
    assert peer_algo("ALE/Pong-v5", [[]], refuse) == "ppo"
    assert peer_algo("ALE/Pong-v5", [["--algo", "a3c"], ["--algo", "a3c", "--no-bf16"]], refuse) == "a2c"
    assert peer_algo("ALE/Breakout-v5", [["--lr", "0.0001"], ["--algo", "ppo"]], refuse) == "ppo"


def test_variants_of_both_objectives_need_the_peer_named():
    with pytest.raises(Refused, match="give --sb3-algo a2c or ppo"):
        peer_algo("ALE/Pong-v5", [[], ["--algo", "a3c"]], refuse)


def test_a_variant_a3c_train_would_refuse_is_one_line_naming_it():
    """Before: a3c.train's refusal came out of the variant's parse as a traceback."""
    with pytest.raises(Refused, match=r"--a3c-variant='--envs-per-worker 1': --minibatch-size 256 is more than"):
        peer_algo("ALE/Pong-v5", [["--envs-per-worker", "1"]], refuse)
