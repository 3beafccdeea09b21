"""a3c.spec.atari_vector: the K envs of an ALE game in ale-py's vector env against a3c's gymnasium path
(``GymEnvBatch`` over ``make_env``: AtariFrames + LifeLossTerminal), the same seed, the same actions.

What is equal, bit for bit, step for step: the stacked frames (84x84 grey, frame skip 4 with max-pooling, the stack's
padding at a reset), the game's rewards, the terminated and truncated flags, which envs' episodes ended and whether by
a lost life, the episodes' last observations, over lost lives, game ends and the auto-resets that follow, with sticky
actions (v5's 0.25) and the full action space.

What is not, and why (the module's docstring): the no-op start. The vector env draws 0..29 no-op frames from its own
C++ generator, gymnasium's path 1..30 from the env's numpy one, so the two never start a game on the same frame by
themselves. The comparison therefore gives the gymnasium path the vector env's count at each reset (read from the
vector env's episode frame counter, which starts the game at 0 and counts the no-op frames): what it holds equal is
everything a step does from the same emulator state. The seeds are ones whose emulator seed ale-py's gymnasium env
can share (below 2**31: ``emulator_seed``). And the last observation of an episode cut by the frame limit: the same
step is cut, with the same reward where the limit falls on the step's end, but its newest frame differs (the
gymnasium path stops reading screens at the limit's frame, the vector env runs the step out)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ale_py.vector_env", reason="the vector env needs ale-py >= 0.11 (the [atari] extra)")
pytest.importorskip("cv2", reason="Atari needs the [atari] extra (.ci/run installs it)")

from a3c.run.resolve import preflight  # noqa: E402
from a3c.spec.atari_vector import AtariVectorBatch, emulator_seed  # noqa: E402
from a3c.spec.config import Config  # noqa: E402
from a3c.spec.env_batch import GymEnvBatch, make_env_batch  # noqa: E402
from a3c.spec.errors import UserError  # noqa: E402


def shared_seeds(count: int) -> list[int]:
    """Seeds whose emulator seed is the gymnasium env's (ale-py's own derivation below 2**31)."""
    seeds = [s for s in range(1000) if emulator_seed(s) == int(np.random.SeedSequence(s).generate_state(2)[1])]
    return seeds[:count]


def paired(env_id: str, kwargs: dict, envs: int) -> tuple[AtariVectorBatch, GymEnvBatch, list[int]]:
    """The two backends, the gymnasium one's no-op counts taken from the vector env (the module docstring):
    ``counts`` is written with the vector env's episode frame counters after each of its steps, before the gymnasium
    path steps (and resets)."""
    vector, reference = AtariVectorBatch(env_id, kwargs, envs), GymEnvBatch(env_id, kwargs, envs)
    counts = [0] * envs
    for k, env in enumerate(reference.envs):
        frames = env.env  # AtariFrames, under LifeLossTerminal
        # the frames the vector env's game had run at its reset, less those ALE's reset ran (none so far)
        frames.noop_count = lambda k=k, frames=frames: counts[k] - frames.ale.getEpisodeFrameNumber()
    return vector, reference, counts


def compare(env_id: str, steps: int, envs: int = 2, **kwargs) -> dict[str, int]:
    vector, reference, counts = paired(env_id, kwargs, envs)
    seeds = shared_seeds(envs)
    got = vector.reset(seeds, seeds)
    counts[:] = vector.info["episode_frame_number"].tolist()
    want = reference.reset(seeds, seeds)
    assert got.dtype == np.uint8 and np.array_equal(got, np.stack(want))
    rng = np.random.default_rng(0)
    seen = {"lives lost": 0, "games over": 0, "truncated": 0}
    for _ in range(steps):
        actions = rng.integers(vector.single_action_space.n, size=envs).tolist()
        fast = vector.step(actions)
        counts[:] = vector.info["episode_frame_number"].tolist()
        slow = reference.step(actions)
        assert np.array_equal(fast.obs, np.stack(slow.obs))
        assert fast.rewards.dtype == np.float64 and np.array_equal(fast.rewards, slow.rewards)
        assert list(fast.terminated) == list(slow.terminated) and list(fast.truncated) == list(slow.truncated)
        assert [(e.env, e.life_lost) for e in fast.ended] == [(e.env, e.life_lost) for e in slow.ended]
        for mine, theirs in zip(fast.ended, slow.ended, strict=True):
            if fast.truncated[mine.env]:
                # cut by the frame limit: gymnasium's path stops before it reads the step's last screen (it pools
                # the one before with the previous step's), the vector env's limit is checked after the step: the
                # stack's newest frame differs, the three before it not (the module docstring)
                assert np.array_equal(mine.final_obs[:-1], theirs.final_obs[:-1])
                assert not np.array_equal(mine.final_obs[-1], theirs.final_obs[-1])
                seen["truncated"] += 1
            else:
                assert np.array_equal(mine.final_obs, theirs.final_obs)
                seen["lives lost" if mine.life_lost else "games over"] += 1
    vector.close()
    reference.close()
    return seen


def test_pong_with_sticky_actions_is_the_gymnasium_path_step_for_step():
    seen = compare("ALE/Pong-v5", 250)  # points won and lost (rewards +-1) within 250 steps of random play
    assert seen == {"lives lost": 0, "games over": 0, "truncated": 0}


def test_breakout_lives_and_game_ends_are_the_gymnasium_paths():
    seen = compare("ALE/Breakout-v5", 500)
    assert seen["lives lost"] >= 4 and seen["games over"] >= 1  # random play loses a life in ~40 steps


def test_full_action_space():
    compare("ALE/Breakout-v5", 120, full_action_space=True, repeat_action_probability=0.0)


def test_the_frame_limit_where_it_falls_on_a_steps_end():
    """One env (the limit falls on a step's end for its no-op count only): truncated at the same step, with the same
    reward and the same three older frames of its last observation (not the newest: ``compare``), and the game reset
    (the vector env's partial reset) to the same next one."""
    vector, _, _ = paired("ALE/Pong-v5", {}, 1)
    vector.reset(shared_seeds(1), [0])
    limit = int(vector.info["episode_frame_number"][0]) + 4 * 40  # 40 agent steps after the no-op start
    vector.close()
    seen = compare("ALE/Pong-v5", 60, envs=1, max_num_frames_per_episode=limit)
    assert seen["truncated"] == 1


def test_the_default_backend_is_gymnasium():
    """The vector env is not the gymnasium path (its no-op start): it is used only when asked for."""
    assert Config().env_backend == "gymnasium"
    batch = make_env_batch("ALE/Pong-v5", {}, 1, Config(env="ALE/Pong-v5").env_backend)
    assert isinstance(batch, GymEnvBatch)
    batch.close()


def test_user_errors():
    with pytest.raises(UserError, match="does not play --env-kwargs mode"):
        AtariVectorBatch("ALE/Pong-v5", {"mode": 1}, 1)
    with pytest.raises(UserError, match="does not play --env-kwargs difficulty"):  # before any worker starts
        preflight(Config(env="ALE/Pong-v5", env_backend="ale-vector", env_kwargs={"difficulty": 1}).validate())
    with pytest.raises(UserError, match="ALE games"):
        Config(env="CartPole-v1", env_backend="ale-vector").validate()
    with pytest.raises(UserError, match="env-backend must be one of"):
        Config(env="ALE/Pong-v5", env_backend="envpool").validate()
