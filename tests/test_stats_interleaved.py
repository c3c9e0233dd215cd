"""The interleaved estimate by seeded simulation: coverage, A/A and false verdicts.

The model of one chunk of K steps of a loop (log scale, 1 = 100%):

    log chunk ms = log(K x 25 ms) + effect x [arm] + run_effect x [arm] + swing(t) + drift(t)
                   + chunk noise

- swing: the host's speed per thread, an Ornstein-Uhlenbeck process with a correlation time
  of one second and an SD of 8% (issue 35: medians of eighths moved 20 -> 28 ms);
- drift: linear over the run, 30% from its start to its end;
- chunk noise: normal (2% a step, over K steps) or Student t with 3 df (heavy tails) plus
  one-sided spikes (a neighbour slows a chunk by an exponential 20% in 5% of chunks);
- run_effect: the arm's cost varies between runs (SD 0.3%), which only runs can show;
- unequal noise: the arm's chunk noise 3x the baseline's, in one condition.

The orders are lightning_impl.interleaved.chunk_order's (AB and ABBA, balanced, random). Each
experiment: RUNS runs of PAIRS pairs; the estimate is compare.interleaved's (the vectorised
form here is checked against run_estimate), the interval its t over runs (through
stats.intervals.mean_interval). Rates come with their Monte Carlo standard error
(tests/stats_sim.py's bounds: 3 SE).
"""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import numpy as np
import pytest

from compare.interleaved import run_estimate, t_interval
from stats_sim import lower_bound, mc_se

pytest.importorskip("lightning")
from lightning_impl.interleaved import chunk_order  # noqa: E402

REPS = 2000
RUNS, PAIRS = 8, 60
STEP_MS = 25.0
AA_BOUND = 0.05 + 3.0 * math.sqrt(0.05 * 0.95 / REPS)  # 0.0647 at 2000


def orders(pairing: str, reps: int, runs: int, pairs: int, seed: int) -> np.ndarray:
    """(reps, runs, 2 x pairs) chunk orders from chunk_order, each from its own seed."""
    out = np.empty((reps, runs, 2 * pairs), dtype=np.int8)
    for e in range(reps):
        for r in range(runs):
            out[e, r] = chunk_order(pairing, pairs, random.Random(f"{seed}:{e}:{r}"))
    return out


def simulate(
    order: np.ndarray,
    k: int,
    effect: float,
    rng: np.random.Generator,
    noise: str = "normal",
    drift: float = 0.0,
    swing_sd: float = 0.08,
    run_sd: float = 0.003,
    arm_scale: float = 1.0,
) -> np.ndarray:
    """Chunk times in ms, shape of `order`, from the model in the module docstring."""
    reps, runs, chunks = order.shape
    dt = k * STEP_MS / 1e3
    phi = math.exp(-dt / 1.0)
    swing = np.empty(order.shape)
    s = rng.normal(0.0, swing_sd, (reps, runs))
    for j in range(chunks):
        s = phi * s + math.sqrt(1 - phi * phi) * swing_sd * rng.normal(size=(reps, runs))
        swing[:, :, j] = s
    trend = drift * np.linspace(0.0, 1.0, chunks)
    step_sd = 0.02 / math.sqrt(k)
    if noise == "normal":
        eps = rng.normal(0.0, step_sd, order.shape)
    elif noise == "heavy":
        eps = step_sd * rng.standard_t(3, order.shape) / math.sqrt(3.0)
    else:
        raise ValueError(noise)
    eps *= np.where(order == 1, arm_scale, 1.0)  # the arm's chunks noisier (arm_scale x)
    if noise == "heavy":  # one-sided interference, alike for both loops
        eps += np.log1p((rng.random(order.shape) < 0.05) * rng.exponential(0.2, order.shape))
    arm_cost = effect + rng.normal(0.0, run_sd, (reps, runs, 1))
    logs = math.log(k * STEP_MS) + order * arm_cost + swing + trend + eps
    return np.exp(logs)


def run_logs(order: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Per run: mean over adjacent pairs of log(arm / baseline), vectorised."""
    o = order.reshape(*order.shape[:-1], -1, 2)
    lt = np.log(times).reshape(o.shape)
    sign = np.where(o[..., 0] == 0, 1.0, -1.0)
    return (sign * (lt[..., 1] - lt[..., 0])).mean(axis=-1)


def rates(per_run: np.ndarray, truth: float) -> tuple[float, float]:
    """(coverage of truth, share of experiments with a verdict of a difference)."""
    covered = verdicts = 0
    for values in per_run:
        iv = t_interval(list(values))
        assert iv.low is not None and iv.high is not None
        covered += iv.low <= truth <= iv.high
        verdicts += iv.low > 0 or iv.high < 0
    return covered / len(per_run), verdicts / len(per_run)


def test_vectorised_estimate_is_run_estimate():
    rng = np.random.default_rng(1)
    order = orders("ABBA", 3, 2, 10, seed=1)
    times = simulate(order, 2, 0.05, rng, noise="heavy", drift=0.3)
    fast = run_logs(order, times)
    for e in range(3):
        for r in range(2):
            run = SimpleNamespace(
                order=list(order[e, r]), chunk_ms=list(times[e, r]), chunk_host_ms=list(times[e, r])
            )
            assert run_estimate(run, 2).log_ratio == pytest.approx(fast[e, r], abs=1e-12)


CONDITIONS = [
    # (pairing, K, noise, drift)
    ("ABBA", 2, "normal", 0.0),
    ("AB", 2, "normal", 0.0),
    ("ABBA", 1, "heavy", 0.3),
    ("AB", 1, "heavy", 0.3),
    ("ABBA", 10, "heavy", 0.3),
]


@pytest.mark.slow
@pytest.mark.parametrize(("pairing", "k", "noise", "drift"), CONDITIONS)
def test_interval_covers_and_a_a_gives_no_verdict(pairing, k, noise, drift):
    """Coverage of a 3% cost >= 95% - 3 SE; A/A false verdicts <= 5% + 3 SE (SE ~0.49%)."""
    order = orders(pairing, REPS, RUNS, PAIRS, seed=k)
    effect = math.log(1.03)
    rng = np.random.default_rng(k * 7 + len(pairing))
    coverage, _ = rates(run_logs(order, simulate(order, k, effect, rng, noise, drift)), effect)
    assert coverage >= lower_bound(0.95, REPS), (coverage, mc_se(0.95, REPS))
    _, false_verdicts = rates(run_logs(order, simulate(order, k, 0.0, rng, noise, drift)), 0.0)
    assert false_verdicts <= AA_BOUND, (false_verdicts, mc_se(0.05, REPS))


@pytest.mark.slow
def test_an_arm_three_times_noisier_keeps_coverage_and_a_a():
    """Unequal noise: the arm's chunk noise 3x the baseline's (heavy tails, drift, K=2)."""
    order = orders("ABBA", REPS, RUNS, PAIRS, seed=21)
    effect = math.log(1.03)
    rng = np.random.default_rng(21)
    sim = {"noise": "heavy", "drift": 0.3, "arm_scale": 3.0}
    coverage, _ = rates(run_logs(order, simulate(order, 2, effect, rng, **sim)), effect)
    assert coverage >= lower_bound(0.95, REPS), (coverage, mc_se(0.95, REPS))
    _, false_verdicts = rates(run_logs(order, simulate(order, 2, 0.0, rng, **sim)), 0.0)
    assert false_verdicts <= AA_BOUND, (false_verdicts, mc_se(0.05, REPS))


def test_both_orders_cancel_linear_drift_and_abba_a_smooth_swing_better():
    """A linear drift cancels exactly in either order (balanced: as many pairs or blocks each
    way round); under a smooth swing (a 2 s sine of 10%, random phase, no other noise) ABBA's
    run estimates spread less than AB's, which only average the local slope out."""
    chunks = 40
    ramp = np.linspace(0.0, 1.0, chunks)
    for pairing in ("ABBA", "AB"):
        order = orders(pairing, 50, 2, chunks // 2, seed=9)
        times = np.exp(np.log(2 * STEP_MS) + order * 0.02 + ramp)
        assert float(np.abs(run_logs(order, times) - 0.02).max()) < 1e-9, pairing
    rng = np.random.default_rng(4)
    t = np.arange(chunks) * 2 * STEP_MS / 1e3
    spread = {}
    for pairing in ("ABBA", "AB"):
        order = orders(pairing, 500, 1, chunks // 2, seed=10)
        phase = rng.uniform(0, 2 * math.pi, (500, 1, 1))
        swing = 0.1 * np.sin(2 * math.pi * t / 2.0 + phase)
        spread[pairing] = float(np.std(run_logs(order, np.exp(order * 0.02 + swing))))
    assert spread["ABBA"] < 0.5 * spread["AB"], spread


def test_host_difference_interval_covers():
    """The host ms per step difference: per run a mean of (arm - baseline) / K; coverage of a
    0.8 ms difference at 9 ms a step under one-second swings (REPS 400: SE ~1.1%)."""
    reps, k = 400, 2
    rng = np.random.default_rng(11)
    order = orders("ABBA", reps, RUNS, PAIRS, seed=3)
    speed = simulate(order, k, 0.0, rng, "heavy", drift=0.3, run_sd=0.0) / (k * STEP_MS)
    host = k * (9.0 * speed + 0.8 * order)
    covered = 0
    for e in range(reps):
        values = [
            run_estimate(
                SimpleNamespace(order=list(o), chunk_ms=[1.0] * len(o), chunk_host_ms=list(h)), k
            ).host_ms_per_step
            for o, h in zip(order[e], host[e])
        ]
        iv = t_interval(values)
        covered += iv.low <= 0.8 <= iv.high
    assert covered / reps >= lower_bound(0.95, reps)
