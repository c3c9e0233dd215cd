"""Simulated experiments for tests/test_stats_*.py: one log number per run, vectorised (numpy).

Model of a run's number (its median step time, log scale, in units of 1 = 100%):

    log ms = log 100 + effect x [arm] + drift_per_run x (run's time slot) + noise

noise: "normal" (sd NOISE), "t3" (Student t with 3 df scaled to sd NOISE: heavy tails) or
"spikes" (normal plus, in SPIKE_P of runs, a positive-only exponential slow-down of mean
SPIKE_MEAN: a neighbour's job slows runs, never speeds them) or "rare" (normal plus, in RARE_P
of runs, a slow-down of RARE_SPIKE: 10% of runs +30%) or "huge" (normal plus, in HUGE_P of
runs, a slow-down of HUGE_SPIKE: 5% of runs +50%, issue 45). `arm_scale` multiplies the arm's
noise (3: one arm 3x noisier). Drift is per block (two runs), so per run it is half of it.

Orders (time slots of the runs, blocks numbered from 1):
    ABBA  block b runs baseline then arm when b is odd, arm then baseline when b is even
    ABAB  every block runs baseline then arm
    AABB  all the baseline's runs, then all the arm's (block b pairs the b-th of each)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from stats import blocks, distributions, intervals, run_level

NOISE = 0.005  # run-to-run sd of the log median (0.5%)
SPIKE_P, SPIKE_MEAN = 0.3, 0.03
RARE_P, RARE_SPIKE = 0.1, 0.3  # "rare": 10% of runs 30% slower
HUGE_P, HUGE_SPIKE = 0.05, 0.5  # "huge": 5% of runs 50% slower
REPS = 4000  # experiments per condition
# A/A: a true 5% rate measured from REPS experiments stays under this (3 MC standard errors).
AA_BOUND = 0.05 + 3.0 * math.sqrt(0.05 * 0.95 / REPS)  # 0.0603 at 4000


def lower_bound(p: float, n: int) -> float:
    """p minus 3 Monte Carlo standard errors: the true rate is above this (99.9%, one-sided)."""
    return p - 3.0 * math.sqrt(p * (1.0 - p) / n)


def mc_se(p: float, reps: int = REPS) -> float:
    """Monte Carlo standard error of a proportion near p from `reps` experiments."""
    return math.sqrt(p * (1.0 - p) / reps)


def noise(
    rng: np.random.Generator, kind: str, shape: tuple[int, ...], scale: float = 1.0
) -> np.ndarray:
    """Run-level noise on the log scale."""
    if kind == "normal":
        return rng.normal(0.0, NOISE * scale, shape)
    if kind == "t3":
        return NOISE * scale * rng.standard_t(3, shape) / math.sqrt(3.0)
    if kind == "rare":  # rare large spikes: 10% of runs +30% (issue 32's audit)
        return rng.normal(0.0, NOISE * scale, shape) + math.log(1.0 + RARE_SPIKE) * (
            rng.random(shape) < RARE_P
        )
    if kind == "huge":  # rare, larger spikes: 5% of runs +50% (issue 45's audit)
        return rng.normal(0.0, NOISE * scale, shape) + math.log(1.0 + HUGE_SPIKE) * (
            rng.random(shape) < HUGE_P
        )
    if kind == "spikes":
        hit = rng.random(shape) < SPIKE_P
        return rng.normal(0.0, NOISE * scale, shape) + np.log1p(
            hit * rng.exponential(SPIKE_MEAN * scale, shape)
        )
    raise ValueError(kind)


def slots(order: str, blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """Time slots (0, 1, ...) of the baseline's and the arm's run in each block."""
    b = np.arange(blocks)
    if order == "ABBA":
        first = b % 2 == 0
        return np.where(first, 2 * b, 2 * b + 1), np.where(first, 2 * b + 1, 2 * b)
    if order == "ABAB":
        return 2 * b, 2 * b + 1
    if order == "AABB":
        return b, blocks + b
    raise ValueError(order)


@dataclass
class Sim:
    """`reps` simulated experiments: log numbers and time slots, (reps, runs) per side."""

    base: np.ndarray
    arm: np.ndarray
    base_slot: np.ndarray  # (runs,) time slot of each baseline run
    arm_slot: np.ndarray
    order: str

    def points(self, e: int, manifest: bool = True) -> list[intervals.RunPoint]:
        """Experiment e as RunPoints with start times (60 s a slot); with blocks and positions
        when `manifest` (and the counts are equal), else as a plain file list."""
        out = []
        blocks = manifest and len(self.base_slot) == len(self.arm_slot)
        for label, values, slot, other in (
            ("native", self.base[e], self.base_slot, self.arm_slot),
            ("fabric", self.arm[e], self.arm_slot, self.base_slot),
        ):
            for k, (v, s) in enumerate(zip(values, slot)):
                position = (1 if s < other[k] else 2) if blocks else None
                out.append(
                    intervals.RunPoint(
                        label,
                        float(100.0 * math.exp(v)),
                        block=k + 1 if blocks else None,
                        position=position,
                        started_s=60.0 * float(s),
                        name=f"{label}-r{k + 1}",
                    )
                )
        return out


def simulate(
    seed: int,
    runs: int,
    effect: float = 0.0,
    kind: str = "normal",
    arm_scale: float = 1.0,
    drift: float = 0.0,
    order: str = "ABBA",
    arm_runs: int | None = None,
    reps: int = REPS,
) -> Sim:
    """`reps` experiments of `runs` baseline runs and `arm_runs` (default: as many) arm runs.
    effect: the arm's true overhead in percent; drift: per block, in percent."""
    rng = np.random.default_rng(seed)
    n_arm = runs if arm_runs is None else arm_runs
    if n_arm == runs:
        base_slot, arm_slot = slots(order, runs)
    else:  # unequal counts: the smaller side's runs spread evenly among the larger side's
        total = runs + n_arm
        few = np.round(np.linspace(0, total - 1, min(runs, n_arm) + 2)[1:-1]).astype(int)
        many = np.setdiff1d(np.arange(total), few)
        base_slot, arm_slot = (few, many) if runs < n_arm else (many, few)
    per_run = drift / 100.0 / 2.0
    base = noise(rng, kind, (reps, runs)) + per_run * base_slot
    arm = (
        math.log1p(effect / 100.0) + noise(rng, kind, (reps, n_arm), arm_scale) + per_run * arm_slot
    )
    return Sim(base, arm, base_slot, arm_slot, order)


def rates(ivs: list[intervals.ArmInterval], truth: float) -> tuple[float, float, float]:
    """(coverage of the true overhead, verdict rate, share with an interval) of intervals."""
    given = [iv for iv in ivs if iv.verdict_possible]
    if not given:
        return math.nan, 0.0, 0.0
    cover = float(np.mean([iv.ci_low <= truth <= iv.ci_high for iv in given]))
    verdict = float(np.mean([iv.significant for iv in ivs]))
    return cover, verdict, len(given) / len(ivs)


def paired(sim: Sim) -> list[intervals.ArmInterval]:
    """The block-paired core on every experiment (log ratio per block, and the gaps a manifest
    records: +1 where the arm ran second, -1 where first; from 5 blocks the time term)."""
    gaps = np.where(sim.arm_slot > sim.base_slot, 1, -1).tolist()
    return [blocks.blocks_log_interval(row.tolist(), gaps) for row in sim.arm - sim.base]


def welch(sim: Sim) -> list[intervals.ArmInterval]:
    """The run-level Welch-Hsu core on every experiment."""
    return [
        run_level.welch_hsu_interval(np.exp(b).tolist(), np.exp(a).tolist())
        for b, a in zip(sim.base, sim.arm)
    ]


# --- the audited method, kept here as the reference the audit tests show failing --------------


@dataclass(frozen=True)
class OldInterval:
    """What compare reported before the block-aware methods: Welch-Satterthwaite over runs,
    blocks ignored."""

    percent: float
    ci_low: float
    ci_high: float
    half_width: float
    min_detectable_percent: float  # claimed 80% power
    min_percent: float  # called "the robust estimate"
    arm_runs: int
    baseline_runs: int

    @property
    def significant(self) -> bool:
        return self.ci_low > 0 or self.ci_high < 0


def old_run_level(base: list[float], arm: list[float]) -> OldInterval:
    """The removed stats.run_level_interval (2 runs a side or more), for the audit tests."""
    lb, la = np.log(np.asarray(base, dtype=float)), np.log(np.asarray(arm, dtype=float))
    diff = float(la.mean() - lb.mean())
    vb, va = float(lb.var(ddof=1)) / len(lb), float(la.var(ddof=1)) / len(la)
    se = math.sqrt(vb + va)
    df = (
        float(len(lb) + len(la) - 2)
        if se == 0.0
        else (vb + va) ** 2 / (vb**2 / (len(lb) - 1) + va**2 / (len(la) - 1))
    )
    t = distributions.t_quantile(0.975, df)
    low, high = math.expm1(diff - t * se) * 100, math.expm1(diff + t * se) * 100
    return OldInterval(
        math.expm1(diff) * 100,
        low,
        high,
        (high - low) / 2,
        math.expm1((t + distributions.t_quantile(0.8, df)) * se) * 100,
        (min(arm) / min(base) - 1.0) * 100.0,
        len(arm),
        len(base),
    )


def old_enough_runs(iv: OldInterval, target_half_width: float, min_runs: int = 5) -> bool:
    """The removed stats.enough_runs: stop once min_runs a side and the half-width <= target."""
    return min(iv.arm_runs, iv.baseline_runs) >= min_runs and iv.half_width <= target_half_width
