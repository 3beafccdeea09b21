"""scripts/policy_entropy.py's pure parts: ALE actions grouped by their name without FIRE, and the entropy split into
the choice between moves and inside the groups, which add up to the policy's entropy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import scripts.policy_entropy as policy_entropy


def test_fire_groups_pair_the_moves_that_differ_only_by_fire():
    pong = ["NOOP", "FIRE", "RIGHT", "LEFT", "RIGHTFIRE", "LEFTFIRE"]
    assert policy_entropy.fire_groups(pong) == [[0, 1], [2, 4], [3, 5]]
    breakout = ["NOOP", "FIRE", "RIGHT", "LEFT"]  # FIRE launches the ball there: the flag is the user's choice
    assert policy_entropy.fire_groups(breakout) == [[0, 1], [2], [3]]


@given(
    logits=st.lists(st.lists(st.floats(-8, 8), min_size=6, max_size=6), min_size=1, max_size=30),
)
def test_the_two_entropies_add_up_to_the_policys(logits):
    z = np.array(logits)
    probs = np.exp(z - z.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    row = policy_entropy.summary(probs, [[0, 1], [2, 4], [3, 5]])
    assert row["steps"] == len(probs)
    assert 0.0 <= row["mean_entropy"] <= np.log(6) + 1e-9
    assert row["between_moves_entropy"] + row["inside_groups_entropy"] == pytest.approx(row["mean_entropy"], abs=1e-9)
    assert 0.0 <= row["between_moves_entropy"] <= np.log(3) + 1e-9
    assert -1e-9 <= row["inside_groups_entropy"] <= np.log(2) + 1e-9  # two actions a group at most
    assert row["top_prob_quantiles"] == sorted(row["top_prob_quantiles"])


def test_a_uniform_policy_has_the_most_entropy_and_a_sure_one_none():
    uniform = policy_entropy.summary(np.full((5, 4), 0.25), None)
    assert uniform["mean_entropy"] == pytest.approx(np.log(4)) and uniform["top_prob_quantiles"][2] == 0.25
    sure = policy_entropy.summary(np.eye(4)[[0, 1, 2, 3, 0]], None)
    assert sure["mean_entropy"] == pytest.approx(0.0, abs=1e-12) and "groups" not in sure
