"""a3c.spec.wording: how a line to the user counts things."""

from hypothesis import given
from hypothesis import strategies as st

from a3c.spec.wording import count


def test_count_says_one_thing_or_many():
    assert count(1, "core") == "1 core"
    assert count(0, "episode") == "0 episodes"
    assert count(2, "worker") == "2 workers"
    assert count(10_000, "step") == "10,000 steps"


@given(st.integers(min_value=0, max_value=10**12))
def test_count_is_plural_unless_one(n):
    words = count(n, "worker").split(" ")
    assert words == [f"{n:,}", "worker" if n == 1 else "workers"]
