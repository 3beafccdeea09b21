"""a3c.spec.environment's check of an env id without making the env (check_env_id, the benchmark driver's up-front
check): an env whose library is missing is refused in make_env's words, and an id without a version is taken as
gymnasium.make takes it."""

import sys

import pytest

from a3c.spec.environment import check_env_id, make_env
from a3c.spec.errors import UserError, install_extra


def _without(monkeypatch, library, family):
    """As on a machine without ``library``: its import fails, and gymnasium's ``family`` of envs is imported afresh
    (it imports the library as it is imported)."""
    monkeypatch.setitem(sys.modules, library, None)  # (an import of a module set to None raises ImportError)
    for name in [m for m in sys.modules if m == family or m.startswith(family + ".")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.parametrize(
    ("env_id", "library", "family", "needs", "extra"),
    [
        ("LunarLander-v3", "Box2D", "gymnasium.envs.box2d", "Box2D", "box2d"),
        ("Hopper-v5", "mujoco", "gymnasium.envs.mujoco", "MuJoCo", "mujoco"),
    ],
)
def test_an_env_whose_library_is_missing_is_refused_in_make_envs_words(
    monkeypatch, env_id, library, family, needs, extra
):
    """Found reading the driver: its up-front check passed LunarLander-v3 on a machine without Box2D (the id is
    registered), so each run of the env failed as it started, maybe hours into a queue."""
    _without(monkeypatch, library, family)
    with pytest.raises(UserError) as checked:
        check_env_id(env_id)
    line = f"{env_id} needs {needs}, which is not installed; install the extra: {install_extra(extra)}"
    assert str(checked.value) == line
    with pytest.raises(UserError) as made:
        make_env(env_id)
    assert str(made.value) == line


def test_an_id_without_a_version_is_checked_as_gymnasium_make_takes_it():
    """Found reading the code: gymnasium.spec has no version for "CartPole" (a bare gymnasium.error.Error, a
    traceback from the driver) where gymnasium.make takes its highest version."""
    check_env_id("CartPole")
    with pytest.raises(UserError, match="unknown env id 'NoSuchThing'"):
        check_env_id("NoSuchThing")


def test_a_deprecated_version_and_an_unparsable_id_are_one_line_as_make_env_says_them():
    """Found by review: gymnasium's DeprecatedEnv (LunarLander-v2, the tutorials' version) and its bare Error for an
    id it cannot parse were tracebacks from the driver's check, where make_env says one line."""
    for env_id, words in (("LunarLander-v2", "LunarLander-v3"), ("Cart Pole!", "Malformed environment ID")):
        with pytest.raises(UserError, match=f"cannot make env {env_id!r}: .*{words}"):
            check_env_id(env_id)


def test_a_registration_whose_entry_point_does_not_load_is_one_line():
    """Found by review: loading the entry point (to find a missing library) raised the module's ImportError or the
    missing class's AttributeError as they were."""
    import gymnasium as gym

    gym.register("A3cTestNoModule-v0", entry_point="a3c_no_such_module:Env")
    gym.register("A3cTestNoClass-v0", entry_point="envs:NoSuchEnvClass")
    try:
        for env_id, kind in (("A3cTestNoModule-v0", "ModuleNotFoundError"), ("A3cTestNoClass-v0", "AttributeError")):
            with pytest.raises(UserError, match=f"its entry point .* does not load \\({kind}: .*fix its registration"):
                check_env_id(env_id)
    finally:
        for env_id in ("A3cTestNoModule-v0", "A3cTestNoClass-v0"):
            gym.registry.pop(env_id, None)


def test_an_atari_game_without_opencv_is_refused_in_make_envs_words(monkeypatch):
    """Found by review: the check took ale-py alone for Atari, where make_env needs OpenCV as well (the extra
    installs both): every Atari run of a queue would have failed as it started."""
    pytest.importorskip("ale_py")
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cv2" else real(name, *a))
    with pytest.raises(UserError) as checked:
        check_env_id("ALE/Pong-v5")
    assert str(checked.value) == f"ALE/Pong-v5 needs OpenCV; install the extra: {install_extra('atari')}"
