"""The run's progress bar on stderr (tqdm): the global step against --total-steps, with the steps per second since
the last update and the mean return of the last 100 episodes. Off where stderr is not a terminal (tqdm's
``disable=None``), so logs and captured output hold only the run's own lines."""

from __future__ import annotations

import time

from tqdm import tqdm


class ProgressBar:
    def __init__(self, total_steps: int, initial: int) -> None:
        """``initial``: the global step the bar starts at (a resumed run's)."""
        self._last = (time.time(), initial)
        self.bar = tqdm(
            total=total_steps,
            unit="step",
            unit_scale=True,
            dynamic_ncols=True,
            disable=None,
            initial=initial,
            mininterval=0.5,
        )

    def update(self, step: int, mean_return: float | None) -> None:
        """The bar at global step ``step``; a step the bar is already at changes nothing."""
        now = time.time()
        last_time, last_step = self._last
        if step == last_step:
            return
        self.bar.update(step - self.bar.n)
        sps = (step - last_step) / max(now - last_time, 1e-9)
        ret100 = "-" if mean_return is None else f"{mean_return:.1f}"
        self.bar.set_postfix(sps=f"{sps:,.0f}", ret100=ret100, refresh=False)
        self._last = (now, step)

    def close(self) -> None:
        self.bar.close()
