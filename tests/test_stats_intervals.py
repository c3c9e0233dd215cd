"""The fixed-design intervals, proven by simulation (tests/stats_sim.py).

Every condition runs REPS = 4000 seeded experiments through the real functions: the cores
(blocks.blocks_log_interval, run_level.welch_hsu_interval) on all of them, and the entry compare
calls (comparison.compare_arms, with blocks, positions and start times) on a subset, which must give
the same interval or refuse. Wherever a verdict is given:

- coverage of the true overhead >= 93%, proven: observed coverage minus 3 Monte Carlo standard
  errors (sqrt(p(1-p)/n), about 0.34 points at 95% and 4000 experiments) is at least 0.93;
- A/A verdicts <= 5%: the observed rate is at most AA_BOUND = 0.05 + 3 x 0.0034 = 0.0603 (a
  true 5% exceeds it with probability 0.1%); pooled over conditions, at most 5% + 3 pooled SEs.

Where a condition cannot be held (the arms not interleaved in time, blocks whose orders are all
alike) the tests assert the refusal and its reason. Run this file as a script to print the table.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from stats import blocks, comparison, intervals
from stats_sim import AA_BOUND, REPS, lower_bound, paired, rates, simulate, welch

RUNS = (2, 3, 5, 10)
TRUTHS = (0.0, 2.0)
KINDS = ("normal", "t3", "spikes")
SUBSET = 200  # experiments that also go through comparison.compare_arms

# (method, noise, arm noise scale, drift %/block, order, baseline runs, arm runs, truth %)
PAIRED = [
    ("paired", "normal", 1.0, d, "ABBA", n, n, t)
    for d, n, t in itertools.product((0.2, 1.0), RUNS, TRUTHS)
] + [
    ("paired", k, s, 0.0, "ABBA", n, n, t)
    for k, s, n, t in itertools.product(KINDS, (1.0, 3.0), RUNS, TRUTHS)
]
WELCH = (
    [
        ("welch", "normal", 1.0, d, o, n, n, t)
        for o, d, n, t in itertools.product(("ABBA", "ABAB"), (0.2, 1.0), RUNS, TRUTHS)
    ]
    + [
        ("welch", k, s, 0.0, "ABBA", n, n, t)
        for k, s, n, t in itertools.product(KINDS, (1.0, 3.0), RUNS, TRUTHS)
    ]
    # unequal counts, the smaller side 3x noisier (arm_scale is the arm's relative noise)
    + [
        ("welch", k, s, 0.0, "ABBA", nb, na, t)
        for k, (nb, na, s), t in itertools.product(
            KINDS, ((10, 2, 3.0), (2, 10, 1 / 3), (10, 3, 3.0)), TRUTHS
        )
    ]
)
# Blocks dropped by failed runs (30% of runs fail): the complete blocks' orders can be left
# unbalanced, which blocks_log_interval adjusts for (or refuses, when one order is left).
DROPPED = [
    ("paired-fail", "normal", 1.0, d, "ABBA", n, n, t)
    for d, n, t in itertools.product((0.2, 1.0), (5, 10, 20), TRUTHS)
]
CONDITIONS = PAIRED + WELCH + DROPPED
FAIL = 0.3


def _seed(condition: tuple) -> int:
    return CONDITIONS.index(condition) + 2100


def _sim(condition: tuple):
    _, kind, scale, drift, order, nb, na, truth = condition
    return simulate(_seed(condition), nb, truth, kind, scale, drift, order, arm_runs=na)


_cache: dict[tuple, tuple[float, float, float, int]] = {}


def measure(condition: tuple) -> tuple[float, float, float, int]:
    """(coverage, verdict rate, share with an interval, experiments with an interval)."""
    if condition not in _cache:
        sim = _sim(condition)
        if condition[0] == "paired-fail":
            ivs = dropped(sim, np.random.default_rng(_seed(condition)))
        else:
            ivs = paired(sim) if condition[0] == "paired" else welch(sim)
        cover, verdict, given = rates(ivs, condition[-1])
        _cache[condition] = (cover, verdict, given, sum(iv.verdict_possible for iv in ivs))
    return _cache[condition]


def dropped(sim, rng: np.random.Generator) -> list[intervals.ArmInterval]:
    """The block core on the complete blocks left when each run fails with probability FAIL."""
    d = sim.arm - sim.base
    gaps = np.where(sim.arm_slot > sim.base_slot, 1, -1)
    ok = (rng.random(d.shape) >= FAIL) & (rng.random(d.shape) >= FAIL)
    out = []
    for row, keep in zip(d, ok):
        iv = blocks.blocks_log_interval(row[keep].tolist(), gaps[keep].tolist())
        reason = iv.no_verdict_reason or ""
        assert iv.verdict_possible or "unbalanced" in reason or "needs 2" in reason
        out.append(iv)
    return out


def _name(c: tuple) -> str:
    method, kind, scale, drift, order, nb, na, truth = c
    return f"{method}-{kind}-x{scale:.2g}-drift{drift}-{order}-{nb}v{na}-true{truth:g}"


@pytest.mark.parametrize("condition", CONDITIONS, ids=_name)
def test_coverage_and_a_to_a_wherever_a_verdict_is_given(condition: tuple) -> None:
    cover, verdict, given, n = measure(condition)
    if condition[0] == "paired-fail":  # refused: fewer than 2 complete blocks, or one order
        assert given >= {5: 0.6, 10: 0.9, 20: 0.99}[condition[5]]  # measured 0.63, 0.92, 0.998
    else:  # every one of these conditions can be held: an interval each time
        assert given == 1.0
    assert lower_bound(cover, n) >= 0.93, (
        f"coverage {cover:.4f} (MC SE {math.sqrt(cover * (1 - cover) / n):.4f}) under 0.93"
    )
    if condition[-1] == 0.0:
        assert verdict <= AA_BOUND, f"A/A verdict rate {verdict:.4f} over {AA_BOUND:.4f}"


def test_pooled_a_to_a_rate_is_at_most_five_percent() -> None:
    aa = [measure(c)[1] for c in CONDITIONS if c[-1] == 0.0]
    pooled = float(np.mean(aa))
    se = math.sqrt(0.05 * 0.95 / (REPS * len(aa)))
    assert pooled <= 0.05 + 3 * se, f"pooled A/A {pooled:.4f} (SE {se:.4f})"


@pytest.mark.parametrize(
    "condition",
    [c for c in PAIRED if c[3] == 1.0 and c[-1] == 2.0]
    + [c for c in WELCH if c[0] == "welch" and c[4] == "ABAB" and c[-1] == 2.0][:4],
    ids=_name,
)
def test_compare_arms_gives_the_cores_interval(condition: tuple) -> None:
    """The entry compare calls: a manifest in ABBA order is paired by block; a manifest whose
    blocks all ran the baseline first falls back to the run-level interval, with a warning."""
    sim = _sim(condition)
    cores = paired(sim) if condition[0] == "paired" else welch(sim)
    for e in range(SUBSET):
        iv = comparison.compare_arms(sim.points(e), "fabric", "native")
        assert (iv.ci_low, iv.ci_high) == pytest.approx((cores[e].ci_low, cores[e].ci_high))
        assert iv.method.startswith(  # from 5 blocks: "; with a time term ..."
            intervals.METHOD_BLOCKS if condition[0] == "paired" else intervals.METHOD_WELCH
        )
        if condition[4] == "ABAB":
            assert any("orders are unbalanced" in w for w in iv.warnings)


@pytest.mark.parametrize(("runs", "drift"), list(itertools.product(RUNS, (0.0, 0.2, 1.0))))
def test_arms_not_interleaved_get_no_verdict(runs: int, drift: float) -> None:
    """AAAA BBBB: as a file list (start times only) and as a manifest (blocks pair the k-th
    runs, every block 'baseline first'), every experiment is refused, with the reason."""
    sim = simulate(2900 + runs, runs, 2.0, drift=drift, order="AABB", reps=SUBSET)
    for e in range(SUBSET):
        for manifest in (False, True):
            iv = comparison.compare_arms(sim.points(e, manifest), "fabric", "native")
            assert not iv.verdict_possible and not iv.significant
            assert "not interleaved" in (iv.no_verdict_reason or "")


@pytest.mark.parametrize("runs", RUNS)
def test_block_pairing_refuses_blocks_all_in_one_order(runs: int) -> None:
    sim = simulate(2950 + runs, runs, 2.0, drift=1.0, order="ABAB", reps=20)
    iv = blocks.block_paired_interval(sim.points(0), "fabric", "native")
    assert not iv.verdict_possible and "orders are unbalanced" in (iv.no_verdict_reason or "")


def table() -> list[str]:
    """The results, one line per condition (run this file as a script)."""
    lines = [f"{'condition':55s} {'coverage':>8s} {'A/A':>6s} {'MC SE':>6s} {'interval':>8s}"]
    for c in CONDITIONS:
        cover, verdict, given, n = measure(c)
        aa = f"{verdict:.4f}" if c[-1] == 0.0 else "-"
        lines.append(
            f"{_name(c):55s} {cover:8.4f} {aa:>6s}"
            f" {math.sqrt(cover * (1 - cover) / n):6.4f} {given:8.4f}"
        )
    return lines


if __name__ == "__main__":
    print("\n".join(table()))
