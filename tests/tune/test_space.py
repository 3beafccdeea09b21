"""The search space (a3c/tune/space.py, space.toml, space_ppo.toml): each objective's default space samples valid
settings within its ranges, a setting given on the command line is not searched, the space survives study.json, a
draw without Optuna stays in the space, and a bad space file is one line."""

from __future__ import annotations

import random

import pytest

from a3c.spec.config import Config
from a3c.spec.errors import UserError
from a3c.tune.space import DEFAULT_SPACE, DEFAULT_SPACES, load_space, space_from_data

optuna = pytest.importorskip("optuna")


def sample(space, n: int, seed: int = 0) -> list[dict]:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    out = []
    for _ in range(n):
        trial = study.ask()
        out.append(space.sample(trial))
        study.tell(trial, 0.0)
    return out


def test_the_default_space_covers_every_family_and_samples_valid_settings_within_it():
    space = load_space()
    families = {d.family for d in space.dimensions}
    assert families == {"optimisation", "returns", "loss", "network", "normalisation"}
    fields = {d.field for d in space.dimensions}
    expected = {"lr", "n_steps", "gamma", "gae_lambda", "ent_coef", "vf_coef", "hidden_sizes", "optimizer"}
    assert expected | {"normalize_obs", "normalize_reward"} <= fields
    samples = sample(space, 40)
    for settings in samples:
        Config(**settings).validate()
        assert 1e-5 <= settings["lr"] <= 1e-2 and settings["n_steps"] in (5, 8, 16, 32, 64)
        assert isinstance(settings["hidden_sizes"], tuple) and isinstance(settings["n_steps"], int)
    assert len({s["hidden_sizes"] for s in samples}) > 1 and len({s["optimizer"] for s in samples}) == 2


def test_choices_optuna_cannot_hold_are_stored_as_the_command_line_text():
    space = load_space()
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    trial = study.ask()
    settings = space.sample(trial)
    assert trial.params["hidden-sizes"] == " ".join(map(str, settings["hidden_sizes"]))
    assert space.settings(trial.params) == settings  # a stored trial's params read back as the settings


def test_settings_given_are_not_searched_and_the_space_survives_study_json():
    space = load_space()
    fixed = space.without({"lr", "n_steps"})
    assert {d.field for d in fixed.dimensions} == {d.field for d in space.dimensions} - {"lr", "n_steps"}
    assert space_from_data(space.to_data(), space.source) == space


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[a]\nlearning-rate = { low = 1, high = 2 }", "[a] learning-rate: no such setting"),
        ("seed = { choices = [1, 2] }", "--seed cannot be searched; give it on the command line"),
        ("normalize-obs = { low = 0, high = 1 }", "a range needs low and high, and a number setting"),
        ("lr = { low = 0.0, high = 0.1, log = true }", "a log range needs low > 0"),
        ("lr = { low = 0.1, high = 0.01 }", "needs low < high"),
        ("n-steps = { choices = [5, 8.5] }", "n-steps = 8.5: expected an integer"),
        ("n-steps = { choices = [] }", "choices must be a non-empty list"),
        ("n-steps = { values = [5] }", "give { low = A, high = B }"),
        ("[returns]\nn-steps = { choices = [5] }\n[more]\nn-steps = { choices = [8] }", "n-steps appear more than"),
        ("lr = ", "cannot read it"),
        # (values a run refuses, alone or with the flags given and the other settings: a3c/tune/check.py)
    ],
)
def test_a_bad_space_file_is_one_user_error_naming_the_entry(tmp_path, text, message):
    path = tmp_path / "space.toml"
    path.write_text(text + "\n")
    with pytest.raises(UserError) as err:
        load_space(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_a_space_of_ints_samples_ints_and_a_missing_file_is_a_user_error(tmp_path):
    path = tmp_path / "space.toml"
    path.write_text("[returns]\nn-steps = { low = 4, high = 40, log = true }\ngamma = { low = 0.9, high = 0.99 }\n")
    for settings in sample(load_space(path), 10):
        assert isinstance(settings["n_steps"], int) and 4 <= settings["n_steps"] <= 40
        assert 0.9 <= settings["gamma"] <= 0.99
    with pytest.raises(UserError, match="cannot read it"):
        load_space(tmp_path / "missing.toml")
    assert DEFAULT_SPACE.is_file()


def test_ppo_s_default_space_samples_valid_ppo_settings():
    space = load_space(None, "ppo")
    assert {d.family for d in space.dimensions} >= {"optimisation", "returns", "ppo", "loss", "network"}
    for settings in sample(space, 40):
        config = Config(algo="ppo", **settings).validate()  # (8 envs a worker: every n-steps fits every minibatch)
        assert 32 <= config.n_steps <= 512 and config.n_epochs in (1, 5, 10, 20)
    assert DEFAULT_SPACES["ppo"].is_file() and load_space(None, "a3c") == load_space()


def test_a_draw_without_optuna_stays_in_the_space(tmp_path):
    path = tmp_path / "space.toml"
    path.write_text(
        "n-steps = { low = 4, high = 40, log = true }\nlr = { low = 1e-5, high = 1e-2, log = true }\n"
        "vf-coef = { low = 0.1, high = 1.0 }\nhidden-sizes = { choices = [[64], [64, 64]] }\n"
    )
    space, rng = load_space(path), random.Random(0)
    draws = [space.draw(rng) for _ in range(200)]
    assert all(isinstance(d["n_steps"], int) and 4 <= d["n_steps"] <= 40 for d in draws)
    assert all(1e-5 <= d["lr"] <= 1e-2 and 0.1 <= d["vf_coef"] <= 1.0 for d in draws)
    assert {d["hidden_sizes"] for d in draws} == {(64,), (64, 64)} and 4 in {d["n_steps"] for d in draws}
    assert [d.probes() for d in space.dimensions][0] == (4, 40)
