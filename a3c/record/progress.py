"""The run's progress bar on stderr (tqdm): the global step against --total-steps, with one rate, the steps per
second since the bar's last update ("steps/s now"; at the end the session's mean, summary.json's), and the mean
return of the last 100 episodes. tqdm's own rate (its smoothed "step/s") is left out, so that one rate shows, and
says which. Off where stderr is not a terminal (tqdm's ``disable=None``), so logs and captured output hold only the
run's own lines."""

from __future__ import annotations

import time
from typing import TextIO

from tqdm import tqdm

# tqdm's default format without its rate ({rate_fmt}): the postfix holds the one rate shown
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"


class ProgressBar:
    def __init__(self, total_steps: int, initial: int, file: TextIO | None = None) -> None:
        """``initial``: the global step the bar starts at (a resumed run's); ``file``: where it is drawn (default:
        stderr, where a terminal)."""
        self._last = (time.time(), initial)
        self.total, self.ret100 = total_steps, "-"
        self.bar = tqdm(
            total=total_steps,
            unit="step",
            unit_scale=True,
            dynamic_ncols=True,
            bar_format=BAR_FORMAT,
            disable=None if file is None else False,
            file=file,
            initial=min(initial, total_steps),
            mininterval=0.5,
        )

    def update(self, step: int, mean_return: float | None) -> None:
        """The bar at global step ``step``; a step the bar is already at changes nothing. The bar stops at
        --total-steps: the workers' last rollouts run a little past it, and tqdm redraws a bar past its total as one
        with no total (a second line after 100%)."""
        now = time.time()
        last_time, last_step = self._last
        if step == last_step:
            return
        self.bar.update(min(step, self.total) - self.bar.n)
        sps = (step - last_step) / max(now - last_time, 1e-9)
        self.ret100 = "-" if mean_return is None else f"{mean_return:.1f}"
        self.bar.set_postfix_str(f"{sps:,.0f} steps/s now, ret100={self.ret100}", refresh=False)
        self._last = (now, step)

    def close(self, steps_per_s: float | None = None) -> None:
        """``steps_per_s``: the session's steps/s (summary.json's), shown last in place of the steps/s since the
        previous update, which at the end spans the workers' shutdown and so drops."""
        if steps_per_s is not None:
            self.bar.set_postfix_str(
                f"{steps_per_s:,.0f} steps/s (the session's mean), ret100={self.ret100}", refresh=False
            )
        self.bar.close()
