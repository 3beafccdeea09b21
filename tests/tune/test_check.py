"""The search space checked against the flags given (a3c/tune/check.py): a value is judged with the fixed flags and the
other searched settings, not against the defaults alone; a value or a space no combination makes acceptable is one
line naming it; the default space of each objective passes with that objective's flags."""

from __future__ import annotations

import pytest

from a3c.spec.errors import UserError
from a3c.train import parse_flags
from a3c.tune.check import check_space
from a3c.tune.space import DEFAULT_SPACES, load_space

pytest.importorskip("optuna")


def _check(tmp_path, space_text: str | None, *flags: str):
    values, given, _ = parse_flags(["--env", "CartPole-v1", *flags])
    path = None
    if space_text is not None:
        path = tmp_path / "space.toml"
        path.write_text(space_text + "\n")
    space = load_space(path, algo=str(values["algo"])).without(set(given))
    return check_space(space, values, given)


@pytest.mark.parametrize(
    ("space", "flags"),
    [
        # the cases: each value judged with the flags given and the other searched settings
        ("push-every = { choices = [1, 4] }", ["--backend", "ray", "--ray-same-node", "ray"]),
        (
            'algo = { choices = ["ppo"] }\nn-steps = { choices = [64, 128] }\nminibatch-size = { choices = [32, 64] }',
            [],
        ),
        # a value good with only some values of another searched setting: kept (a trial drawing the others is refused)
        ('algo = { choices = ["a3c", "ppo"] }\nn-steps = { choices = [5, 64] }', []),
        (
            'push-every = { choices = [1, 4] }\nbackend = { choices = ["shared-memory", "ray"] }\n'
            'ray-same-node = { choices = ["shared-memory", "ray"] }',
            [],
        ),
    ],
)
def test_a_value_is_judged_with_the_flags_given_and_the_other_searched_settings(tmp_path, space, flags):
    """The first two were refused before: "push-every: 4 is out of the setting's range (... add --backend ray)", and
    "algo: 'ppo' is out of the setting's range (--minibatch-size 64 is more than a worker's rollout ...)"."""
    checked = _check(tmp_path, space, *flags)
    assert checked.accepted >= 1


@pytest.mark.parametrize(
    ("space", "flags", "message"),
    [
        ("push-every = { choices = [1, 4] }", [], "push-every: 4 is refused with the flags given in every combination"),
        # a local Ray's workers all use shared memory: --push-every does nothing there
        (
            "push-every = { choices = [1, 4] }",
            ["--backend", "ray"],
            "push-every: 4 is refused with the flags given in every combination",
        ),
        (
            'algo = { choices = ["ppo"] }\nn-steps = { choices = [5] }\nminibatch-size = { choices = [64] }',
            [],
            "--minibatch-size 64 is more than a worker's rollout",
        ),
        # out of a setting's range whatever the rest: refused before any trial, naming the entry
        ("gamma = { low = 0.9, high = 1.03 }", [], "gamma: 1.03 is refused with the flags given"),
        ("hidden-sizes = { choices = [[0], [64]] }", [], "hidden-sizes: '0' is refused with the flags given"),
        ("lstm = { choices = [0, -3] }", [], "lstm: -3 is refused"),
        # the flags alone are what is wrong: their own message
        ("gamma = { choices = [0.9, 0.99] }", ["--lr", "-1"], "--lr must be a positive number"),
        # the env's checks (preflight) on every accepted combination: --bf16 is for image observations
        ("bf16 = { choices = [true] }", [], "--bf16 is for image observations"),
    ],
)
def test_a_value_or_a_space_no_combination_accepts_is_one_user_error(tmp_path, space, flags, message):
    with pytest.raises(UserError) as err:
        _check(tmp_path, space, *flags)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_space_with_refused_combinations_says_how_many_draws_were_accepted(tmp_path):
    checked = _check(tmp_path, 'algo = { choices = ["a3c", "ppo"] }\nn-steps = { choices = [5, 64] }')
    assert 0 < checked.accepted < checked.draws
    line = checked.line()
    assert line is not None and f"{checked.accepted} of {checked.draws} combinations" in line
    assert "is more than a worker's rollout" in line and "\n" not in line  # (PPO's minibatch from its defaults)


@pytest.mark.parametrize("algo", sorted(DEFAULT_SPACES))
def test_each_objective_s_default_space_passes_with_its_objective(tmp_path, algo):
    """Issue 55: `--algo ppo` with the default space failed before the first trial (A3C's n-steps 5 x 8 envs is
    less than PPO's minibatch of 64); --algo ppo searches PPO's own default space."""
    checked = _check(tmp_path, None, "--algo", algo)
    fields = {d.field for d in load_space(None, algo).dimensions}
    assert ("minibatch_size" in fields) == (algo == "ppo")
    assert checked.accepted >= checked.draws // 2
    # with one env a worker, PPO's smallest n-steps still has minibatches that fit
    assert _check(tmp_path, None, "--algo", algo, "--envs-per-worker", "1").accepted >= 1
