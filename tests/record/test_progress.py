"""The progress bar (a3c/record/progress.py) as a terminal shows it: it stops at --total-steps (the workers' last
rollouts run past it, and tqdm drew a second, total-less bar after 100%), and its closing steps/s is the session's,
not the rate of the last update, which spans the shutdown (issue 27)."""

import io
import re

from a3c.record.progress import ProgressBar


def _frames(out: io.StringIO) -> list[str]:
    return [f for f in re.split(r"[\r\n]", out.getvalue()) if f.strip()]


def test_the_bar_stops_at_total_steps_and_closes_with_the_sessions_steps_per_s():
    out = io.StringIO()
    bar = ProgressBar(30_000, initial=0, file=out)
    bar.update(15_000, 20.0)
    bar.update(30_040, 214.0)  # the last rollouts ran 40 steps past the total
    bar.close(steps_per_s=3_681.4)
    frames = _frames(out)
    assert bar.bar.n == 30_000
    assert all("/30.0k" in f for f in frames), frames  # every frame is the bar with its total: none without it
    assert "3,681 steps/s (the session's mean)" in frames[-1] and "ret100=214.0" in frames[-1], frames[-1]


def test_a_resumed_bar_starts_where_the_run_is():
    out = io.StringIO()
    bar = ProgressBar(1_000, initial=600, file=out)
    bar.update(600, None)  # no step yet: nothing changes
    bar.update(800, None)
    assert bar.bar.n == 800
    bar.close()
    assert "ret100=-" in _frames(out)[-1]


def test_the_bar_shows_one_rate_and_says_which():
    """Before: tqdm's own rate and the postfix's beside it (``25.3kstep/s`` and ``sps=13,964``)."""
    out = io.StringIO()
    bar = ProgressBar(30_000, initial=0, file=out)
    bar.update(15_000, 20.0)
    assert bar.bar.postfix.endswith(" steps/s now, ret100=20.0"), bar.bar.postfix
    bar.bar.refresh()
    bar.close(steps_per_s=3_681.4)
    frames = _frames(out)
    assert any(" steps/s now" in f for f in frames), frames
    for frame in frames:
        assert re.search(r"\dstep/s|\?step/s", frame) is None, frame  # (tqdm's own rate: "25.3kstep/s", "?step/s")
        assert frame.count("steps/s") <= 1, frame
    assert "3,681 steps/s (the session's mean)" in frames[-1], frames[-1]
