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
