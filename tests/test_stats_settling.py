"""Host settling (stats.settling.host_settled) tells drift from noise, and waits for a GPU
that is still warming, proven by simulation.

Each simulated experiment adds warm-up runs of the baseline (20-26 s each, as real runs of the
suite take) and asks the rule after each, as experiment/run.py does, until it says "settled" or
the 3-minute bound (--settle-minutes, default) is spent. REPS = 2000 experiments a condition,
seeded. A rate p from REPS experiments has a Monte Carlo SE of sqrt(p(1-p)/REPS): at most 0.5
points near 5%, so a bound of 5% is checked against the estimate plus 2 SE (as stats_sim's
AA_BOUND does for A/A rates).

The audit (issue 32) found the old rule, the last two run medians within 1.5%, said "settled"
on a stationary host with 20% run noise 25% of the time within 3 minutes, and on a host
drifting -10% over 3 minutes at 0.5% noise in every experiment while it still drifted.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from conftest import repetitions

from common.errors import UsageError
from stats.settling import (
    MINUTE_S,
    SETTLE_BETWEEN_RUNS,
    WarmupRun,
    bound_advice,
    host_settled,
    lookback_for,
)

# Monte Carlo: a quarter of the repetitions on every run, all (the numbers above) under
# make test-exhaustive (tests/conftest.py's repetitions)
pytestmark = pytest.mark.exhaustive

REPS = repetitions(2000, 500)
BOUND = 0.05
MC_SE = math.sqrt(BOUND * (1 - BOUND) / REPS)  # 0.0049


def experiment(
    rng: np.random.Generator, noise: float, drift: float, drift_s: float, horizon_s: float = 180.0
) -> tuple[bool, float, str]:
    """(said settled, at what time, what the rule saw last): warm-up runs until settled or
    `horizon_s`. The host's log level moves by `drift` over the first `drift_s` seconds, then
    stays; each run's median has log-normal noise `noise`; its halves differ by 0.2% noise."""
    runs: list[WarmupRun] = []
    t, seen = 0.0, "too-few"
    while t < horizon_s:
        t += 20.0 + 6.0 * rng.random()
        level = drift * min(t, drift_s) / drift_s if drift_s else 0.0
        median = 100.0 * math.exp(level + rng.normal(0.0, noise))
        h1, h2 = rng.normal(0.0, 0.002, 2)
        runs.append(WarmupRun(median, median * (1 + h1), median * (1 + h2), t))
        state = host_settled(runs)
        seen = state.seen
        if state.settled:
            return True, t, seen
    return False, t, seen


def rates(noise: float, drift: float, drift_s: float, seed: int, horizon_s: float = 180.0):
    rng = np.random.default_rng(seed)
    return [experiment(rng, noise, drift, drift_s, horizon_s) for _ in range(REPS)]


def test_a_stationary_noisy_host_is_never_called_settled_and_is_called_noise() -> None:
    out = rates(0.20, 0.0, 0.0, seed=3201)
    settled = np.mean([s for s, _, _ in out])
    assert settled + 2 * MC_SE <= BOUND, settled  # simulated: 0.000 (old rule 0.25)
    seen = Counter(last for _, _, last in out)
    # it says what it saw: noise, not drift (a drift call here is a 5%-level false alarm)
    assert seen["noise"] / REPS >= 0.90 and seen["drift"] / REPS <= BOUND + 2 * MC_SE, seen


def test_a_drifting_host_is_not_called_settled_while_it_drifts() -> None:
    # -10% over 3 minutes at 0.5% run noise, then stable; asked for up to 6 minutes
    out = rates(0.005, math.log(0.9), 180.0, seed=3202, horizon_s=360.0)
    early = np.mean([s and t < 180.0 for s, t, _ in out])
    assert early + 2 * MC_SE <= BOUND, early  # simulated: 0.000 (old rule 1.00)
    # ... and it says it saw drift, then settles once the drift has stopped
    late = [t for s, t, _ in out if s]
    assert len(late) / REPS >= 0.95 and min(late) >= 180.0
    during = rates(0.005, math.log(0.9), 180.0, seed=3203)
    assert Counter(last for _, _, last in during)["drift"] / REPS >= 0.95


def test_a_quiet_stationary_host_settles_within_the_bound() -> None:
    out = rates(0.005, 0.0, 0.0, seed=3204)
    settled = np.mean([s for s, _, _ in out])
    assert settled >= 0.95, settled  # simulated: 0.99, after about 110 s


def test_settling_needs_runs_that_span_the_lookback() -> None:
    quick = [WarmupRun(100.0, 100.0, 100.0, float(t)) for t in range(5)]  # 5 runs in 4 s
    state = host_settled(quick)
    assert not state.settled and state.seen == "too-few" and "drift shows over time" in state.reason
    steady = [WarmupRun(100.0 * (1 + 0.001 * (-1) ** k), 100.0, 100.0, 20.0 * k) for k in range(7)]
    state = host_settled(steady)
    assert state.settled and state.seen == "settled" and "settled after 7" in state.reason
    drifting = [*steady[:-1], WarmupRun(100.0, 100.0, 104.0, 120.0)]
    state = host_settled(drifting)
    assert not state.settled and state.seen == "drift" and "+4.0%" in state.reason


def warming(
    rng: np.random.Generator, tau_s: float, horizon_s: float = 400.0
) -> tuple[bool, float, str]:
    """(said settled, when, what the rule saw last) for a quiet host (0.5% run noise) whose GPU
    warms from 40 C towards 65 C with time constant tau_s (0: already warm), read at each run's
    end in whole degrees with 0.5 C of jitter, as NVML reports it."""
    runs: list[WarmupRun] = []
    t, seen = 0.0, "too-few"
    while t < horizon_s:
        t += 20.0 + 6.0 * rng.random()
        median = 100.0 * math.exp(rng.normal(0.0, 0.005))
        warm = 65.0 - (25.0 * math.exp(-t / tau_s) if tau_s else 0.0)
        temperature = float(round(warm + rng.normal(0.0, 0.5)))
        runs.append(WarmupRun(median, median, median, t, temperature))
        state = host_settled(runs)
        seen = state.seen
        if state.settled:
            return True, t, seen
    return False, t, seen


def test_a_warming_gpu_is_not_called_settled_while_it_warms() -> None:
    # tau 90 s: the true rise per minute is 12.2 x exp(-t / 90) C, over 1.5 C until t = 188 s
    rng = np.random.default_rng(3205)
    out = [warming(rng, 90.0) for _ in range(REPS)]
    early = np.mean([s and t < 188.0 for s, t, _ in out])
    assert early + 2 * MC_SE <= BOUND, early
    late = [t for s, t, _ in out if s]
    assert len(late) / REPS >= 0.95, len(late)  # and it settles once the GPU is warm
    rng = np.random.default_rng(3206)
    during = Counter(seen for _, _, seen in (warming(rng, 90.0, 150.0) for _ in range(REPS)))
    # it says why: the GPU heating (the rest: the host's own noise not yet told from drift)
    assert during["heating"] / REPS >= 0.90 and during["settled"] == 0, during


def test_a_warm_gpu_does_not_hold_a_quiet_host_back() -> None:
    rng = np.random.default_rng(3207)
    out = [warming(rng, 0.0, horizon_s=180.0) for _ in range(REPS)]
    assert np.mean([s for s, _, _ in out]) >= 0.95


def test_heating_says_how_fast_the_gpu_warmed_and_settled_says_where_it_stands() -> None:
    heating = [WarmupRun(100.0, 100.0, 100.0, 20.0 * k, 50.0 + 2 * k) for k in range(7)]
    state = host_settled(heating)
    assert not state.settled and state.seen == "heating"
    assert "+6.0 C a minute" in state.reason and "to 62 C" in state.reason
    warm = [WarmupRun(100.0, 100.0, 100.0, 20.0 * k, 62.0) for k in range(7)]
    state = host_settled(warm)
    assert state.settled and "the GPU at 62 C, +0.0 C a minute" in state.reason
    unread = [*warm[:-1], WarmupRun(100.0, 100.0, 100.0, 120.0)]  # one run without a reading
    assert host_settled(unread).settled and " C a minute" not in host_settled(unread).reason


def settle_within(rng: np.random.Generator, run_s: float, minutes: float, arms: int) -> bool:
    """experiment.run's warm-up and settling on a quiet, steady host (0.3% run noise), runs of
    about run_s: one warm-up round of `arms` arms (the baseline first), then baseline runs while
    the bound, counted from the round's start, has room for one more; whether the rule said
    settled."""
    runs: list[WarmupRun] = []
    spent = 0.0
    for arm in range(arms):
        spent += run_s * rng.uniform(0.95, 1.05)
        if arm == 0:
            runs.append(WarmupRun(100.0, 100.0, 100.0, spent))
    while True:
        lookback = lookback_for([run_s] * len(runs), minutes)
        if host_settled(runs, lookback_s=lookback).settled:
            return True
        if spent + run_s > minutes * 60.0:
            return False
        spent += run_s * rng.uniform(0.95, 1.05)
        median_ms = 100.0 * math.exp(rng.normal(0.0, 0.003))
        runs.append(WarmupRun(median_ms, median_ms, median_ms, spent))


@pytest.mark.parametrize(("arms", "advised"), [(1, 2.5), (3, 3.0)])
def test_a_bound_too_short_for_the_runs_is_said_with_one_that_holds_them(
    arms: int, advised: float
) -> None:
    warmup_s = 20.0 * arms
    assert bound_advice([], 0.5, 0.0) == "" and bound_advice([20.0], advised, warmup_s) == ""
    advice = bound_advice([20.0, 21.0, 19.0], 1.0, warmup_s)
    room = (60.0 - warmup_s) / 20.0
    assert advice == (
        f"--settle-minutes 1 left room for about {room:.1f} settling runs of 20 s after the"
        f" warm-up runs' {warmup_s:.0f} s, and the rule needs 3 or more spanning its lookback:"
        f" give it {advised:g} or more (the warm-up runs and 6 settling runs)"
    )
    # the advised bound lets the rule answer for a quiet host; the 1-minute one seldom does
    rng = np.random.default_rng(3208 + arms)
    assert np.mean([settle_within(rng, 20.0, advised, arms) for _ in range(REPS)]) >= 0.95
    assert np.mean([settle_within(rng, 20.0, 1.0, arms) for _ in range(REPS)]) <= 0.5


def linear(
    rng: np.random.Generator, run_s: float, percent: float, celsius: float, noise: float = 0.005
) -> bool:
    """experiment.run's settling on a host whose run medians drift `percent` a minute and whose
    GPU warms `celsius` a minute (read in whole degrees, 0.5 C of jitter), runs of about run_s,
    the lookback lookback_for's, the default bound of 3 minutes: whether it said settled."""
    runs: list[WarmupRun] = []
    t = 0.0
    while t + run_s <= 180.0:
        t += run_s * rng.uniform(0.9, 1.1)
        median = 100.0 * math.exp(percent / 100 * t / 60 + rng.normal(0.0, noise))
        temperature = float(round(40.0 + celsius * t / 60 + rng.normal(0.0, 0.5)))
        runs.append(WarmupRun(median, median, median, t, temperature))
        lookback = lookback_for([run_s] * len(runs), 3.0)
        if host_settled(runs, lookback_s=lookback).settled:
            return True
    return False


def old_rule(rng: np.random.Generator, run_s: float, percent: float, celsius: float) -> bool:
    """`linear` under the rule as it was: the tolerances per lookback (4 runs' time for 8 s
    runs), i.e. 1.5% and 1 C scaled by a minute over the lookback."""
    lookback = lookback_for([run_s], 3.0)
    per = MINUTE_S / lookback
    runs: list[WarmupRun] = []
    t = 0.0
    while t + run_s <= 180.0:
        t += run_s * rng.uniform(0.9, 1.1)
        median = 100.0 * math.exp(percent / 100 * t / 60 + rng.normal(0.0, 0.005))
        temperature = float(round(40.0 + celsius * t / 60 + rng.normal(0.0, 0.5)))
        runs.append(WarmupRun(median, median, median, t, temperature))
        state = host_settled(
            runs, between=SETTLE_BETWEEN_RUNS * per, gpu_rise_c=per, lookback_s=lookback
        )
        if state.settled:
            return True
    return False


# (run seconds, drift % a minute, GPU warming C a minute), each over its tolerance (1.5% and
# 1 C a minute) by enough that the rule, which looks after every run, catches it
RATES = [(8.0, 2.5, 0.0), (20.0, 2.5, 0.0), (8.0, 0.0, 3.0), (20.0, 0.0, 3.0)]


@pytest.mark.parametrize(("run_s", "percent", "celsius"), RATES)
def test_the_tolerances_are_rates_a_minute_for_short_and_long_runs(run_s, percent, celsius):
    """Issue 45: held per lookback of 4 runs, 8-10 s runs were allowed 2.3-2.8% and 1.5-1.9 C a
    minute. Now, for runs of 8 s and 20 s, a host drifting 2.5% a minute or a GPU warming 3 C a
    minute is called settled within the 3-minute bound in at most 5% (+2 SE) of experiments
    (simulated: 0.8% and 1.6% at 8 s, 0.1% and 0% at 20 s), where the old rule did so in 78%
    and 39% at 8 s (checked, so that the test can fail); a quiet host with a warm GPU settles
    in 95% or more. Just over the tolerance the rule is looser than a single look's 5%: it
    judges after every run, and the GPU by a point estimate from whole-degree readings (2% a
    minute: 8% at 8 s, 0.6% at 20 s; 2 C a minute: 34% and 4%; the old rule 99% and 100% at
    8 s)."""
    rng = np.random.default_rng(3300 + int(run_s) + int(10 * celsius))
    early = np.mean([linear(rng, run_s, percent, celsius) for _ in range(REPS)])
    assert early + 2 * MC_SE <= BOUND, early
    quiet = np.mean([linear(rng, run_s, 0.0, 0.0, noise=0.003) for _ in range(REPS // 4)])
    assert quiet >= 0.95, quiet
    if run_s == 8.0:
        before = np.mean([old_rule(rng, run_s, percent, celsius) for _ in range(REPS // 4)])
        assert before > 0.3, before


@pytest.mark.parametrize(
    "bad",
    [
        WarmupRun(math.nan, 100.0, 100.0, 40.0),
        WarmupRun(100.0, 0.0, 100.0, 40.0),
        WarmupRun(100.0, 100.0, math.nan, 40.0),
        WarmupRun(-1.0, 100.0, 100.0, 40.0),
        WarmupRun(100.0, 100.0, 100.0, math.inf),
    ],
)
def test_settling_refuses_a_median_or_half_that_is_no_time(bad: WarmupRun) -> None:
    # NaN said "settled" and a half of 0 divided by zero (issue 32)
    runs = [WarmupRun(100.0, 100.0, 100.0, 0.0), WarmupRun(100.0, 100.0, 100.0, 20.0), bad]
    with pytest.raises(UsageError, match="positive, finite time"):
        host_settled(runs)
