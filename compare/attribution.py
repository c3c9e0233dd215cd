"""Why an arm's runs spread: what the telemetry recorded that moved with their step times.

    found = noise_attributions(grouping(runs))  # an Attribution per spread (arm, world size)
    one = attribute_noise("native", 1, runs)    # None when the runs do not spread (or too few)
    print(one.sentence)
    # host CPU time per step moved with the step time (r = 0.90); steal 0.0%; GPU SM clock
    # constant (1980 MHz): the host's speed varied

The rule (RULE, stated in every report that uses it):

1. Spread. An arm's runs spread when the standard deviation of their per-run median step times
   (log scale) exceeds SPREAD_FACTOR times what the runs' own step jitter predicts for a median
   (1.2533 x 1.4826 x MAD of the steps / sqrt(steps), root-mean-square over the runs) and
   exceeds SPREAD_FLOOR_PERCENT: below that no interval of a useful width is threatened.
   MIN_RUNS runs at least.
2. Moved. Per covariate recorded for every run (host CPU time per step, GPU SM clock, the share
   of the window the GPU was throttled, CPU steal, involuntary context switches per step), its
   Pearson correlation with the per-run median step time across the runs; it moved with the
   step time when that correlation is significant at ALPHA two-sided after Bonferroni over the
   covariates tested (t test, df = runs - 2) and its range exceeds its resolution (FLOORS);
   below its resolution it is constant.
3. Cause. The GPU's clock or throttling moved -> the GPU's speed varied (the host's CPU time
   follows a GPU-bound step, so it says nothing more). Otherwise, of the host's quantities that
   moved, the one most correlated (|r|) names it: steal -> the hypervisor took the host's CPUs;
   involuntary context switches -> other work preempted the main thread; host CPU time (the GPU's
   clock constant) -> the host's speed varied. Nothing moved -> no cause: the telemetry does not
   explain the spread.

tests/test_energy.py checks the rule by seeded simulation: a host whose speed varies, a GPU
whose clock varies, and pure noise (which must name no cause in at least 95% of experiments).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from compare.model import Run, of_ranks
from compare.pairing import Grouping
from stats import distributions

MIN_RUNS = 5
SPREAD_FACTOR = 3.0
SPREAD_FLOOR_PERCENT = 0.3
ALPHA = 0.05
RULE = (
    f"runs spread when the sd of their median step times exceeds {SPREAD_FACTOR:g}x what their"
    f" step jitter predicts and {SPREAD_FLOOR_PERCENT:g}%; a recorded quantity moved with them"
    f" when its correlation with the runs' step times is significant at {ALPHA:g} (two-sided,"
    " Bonferroni over the quantities) and its range exceeds its resolution; a GPU clock or"
    " throttling that moved names the cause, else the host quantity that moved most closely"
)
# What each covariate is called, how it is read from a run, and its resolution (the range
# below which it is constant), in its own unit.
HOST, CLOCK, THROTTLE, STEAL, PREEMPT = (
    "host CPU time per step",
    "GPU SM clock",
    "GPU throttled share",
    "steal",
    "involuntary context switches per step",
)
FLOORS = {HOST: 0.005, CLOCK: 15.0, THROTTLE: 0.001, STEAL: 0.001, PREEMPT: 0.05}
RELATIVE = (HOST,)  # floors relative to the median (host CPU: 0.5%); the others absolute
CAUSES = {
    CLOCK: "the GPU's speed varied",
    THROTTLE: "the GPU's speed varied (throttled)",
    STEAL: "the hypervisor took the host's CPUs (steal)",
    PREEMPT: "other work preempted the main thread",
    HOST: "the host's speed varied",
}


def _of_ranks(pick: Callable, combine: Callable) -> Callable[[Run], float | None]:
    """A run's value from its ranks' telemetry (None when any rank lacks it)."""
    return lambda run: of_ranks(run.result, pick, combine)


def _throttled(t) -> float | None:
    if t.throttle_seconds is None or t.window_seconds <= 0:
        return None
    held = sum(s for k, s in t.throttle_seconds.items() if k != "low_utilization")
    return held / t.window_seconds


def _preempted(run: Run) -> float | None:
    steps = getattr(run.result, "measured_steps", None)
    read = _of_ranks(lambda t: t.involuntary_context_switches, lambda v: sum(v) / len(v))
    value = read(run)
    return None if value is None or not steps else value / steps


# The slowest rank sets a DDP step's pace: its clock (min) and throttling (max) are what count.
READERS: dict[str, Callable[[Run], float | None]] = {
    HOST: lambda run: run.host_ms_per_step,
    CLOCK: _of_ranks(lambda t: t.sm_clock_mhz_median, min),
    THROTTLE: _of_ranks(_throttled, max),
    STEAL: _of_ranks(lambda t: t.steal_share, max),
    PREEMPT: _preempted,
}


@dataclass(frozen=True)
class Covariate:
    """One recorded quantity across an arm's runs, against their step times."""

    name: str
    values: tuple[float, ...]
    r: float | None  # Pearson with the per-run median step time; None when constant
    p: float | None  # two-sided, before Bonferroni
    moved: bool
    constant: bool

    def words(self) -> str:
        """'steal 0.0%', 'GPU SM clock constant (1980 MHz)', '... moved with ... (r = 0.90)'."""
        level = _level(self.name, distributions.median(self.values))
        if self.moved:
            return f"{self.name} moved with the step time (r = {self.r:.2f})"
        if self.constant:
            return f"{level}" if self.name == STEAL else f"{self.name} constant ({level})"
        return f"{self.name} did not move with it (r = {self.r:.2f})"


def _level(name: str, value: float) -> str:
    if name == STEAL:
        return f"steal {value:.1%}"
    if name == THROTTLE:
        return f"{value:.1%} of the window"
    if name == CLOCK:
        return f"{value:.0f} MHz"
    if name == HOST:
        return f"{value:.2f} ms"
    return f"{value:.2f}"


@dataclass(frozen=True)
class Attribution:
    """What moved with an arm's spread runs, and the cause the rule reads from it."""

    arm: str
    world_size: int
    runs: int
    spread_percent: float  # sd of the runs' log median step times, in %
    expected_percent: float  # what the runs' step jitter predicts for it
    covariates: tuple[Covariate, ...]  # the quantities every run recorded
    cause: str | None  # None: nothing recorded moved with the step time
    sentence: str
    rule: str = RULE


def pearson(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """(r, two-sided p) of Pearson's correlation under the t test with df = n - 2."""
    r = float(np.corrcoef(np.asarray(x, float), np.asarray(y, float))[0, 1])
    n = len(x)
    if not math.isfinite(r):
        return 0.0, 1.0
    if abs(r) >= 1.0:
        return r, 0.0
    t = abs(r) * math.sqrt((n - 2) / (1.0 - r * r))
    return r, 2.0 * distributions.t_sf(t, n - 2)


def _expected_sd(series: Sequence[Sequence[float]]) -> float:
    """The sd of a run's log median that its own step jitter predicts (rms over runs)."""
    variances = []
    for s in series:
        xs = np.asarray(s, float)
        mid = float(np.median(xs))
        mad = float(np.median(np.abs(xs - mid))) * 1.4826
        variances.append((1.2533 * mad / math.sqrt(len(xs)) / mid) ** 2)
    return math.sqrt(sum(variances) / len(variances))


def attribute_noise(arm: str, world: int, runs: Sequence[Run]) -> Attribution | None:
    """The rule on one arm's counted runs at one world size; None when they do not spread (or
    there are fewer than MIN_RUNS, or no step times: original results)."""
    counted = [r for r in runs if r.placement.warmup is None and r.step_series_ms is not None]
    if len(counted) < MIN_RUNS:
        return None
    pace = [r.pace_median_ms for r in counted]
    logs = [math.log(p) for p in pace]
    spread = float(np.std(logs, ddof=1))
    expected = _expected_sd([r.step_series_ms for r in counted])  # type: ignore[misc]
    if spread <= max(SPREAD_FACTOR * expected, SPREAD_FLOOR_PERCENT / 100.0):
        return None
    recorded = {}
    for name, read in READERS.items():
        values = [read(r) for r in counted]
        if all(v is not None for v in values):
            recorded[name] = [float(v) for v in values]  # type: ignore[arg-type]
    varying = {
        name: v
        for name, v in recorded.items()
        if max(v) - min(v) > FLOORS[name] * (distributions.median(v) if name in RELATIVE else 1.0)
    }
    tests = max(len(varying), 1)
    covariates = []
    for name, values in recorded.items():
        if name not in varying:
            covariates.append(Covariate(name, tuple(values), None, None, False, True))
            continue
        r, p = pearson(values, pace)
        covariates.append(Covariate(name, tuple(values), r, p, p < ALPHA / tests, False))
    moved = [c for c in covariates if c.moved]
    gpu = [c for c in moved if c.name in (CLOCK, THROTTLE)]
    host = sorted((c for c in moved if c.name not in (CLOCK, THROTTLE)), key=lambda c: -abs(c.r))
    first = (gpu or host or [None])[0]
    cause = None if first is None else CAUSES[first.name]
    words = "; ".join(c.words() for c in covariates) or "no telemetry recorded"
    ending = (
        cause
        or "nothing recorded moved with the step time; the telemetry does not explain the spread"
    )
    sentence = (
        f"{arm} ({len(counted)} runs) spread {spread * 100:.2f}% (sd of run medians; step jitter"
        f" predicts {expected * 100:.2f}%): {words}: {ending}"
    )
    return Attribution(
        arm, world, len(counted), spread * 100, expected * 100, tuple(covariates), cause, sentence
    )


def noise_attributions(groups: Grouping) -> list[Attribution]:
    """attribute_noise for every (arm, world size) whose runs spread."""
    found = [attribute_noise(arm, world, rs) for (arm, world), rs in groups.cells.items()]
    return [a for a in found if a is not None]
