"""Whether the parts explain the total (compare.decomposition), by simulation of the
`responsibilities` plan's experiments on one GPU.

Each experiment runs the plan's 7 arms (native, Fabric, the Trainer, its services and the
stream, precision and wrapper ablations) in the schedule's blocks (stats.orders.block_order),
every cost adding milliseconds to native's 100 ms (the wrapper 1.5, precision 4.0, the step's
wrappers 1.0, the Trainer's loop 1.0, its services 4.0) and RESIDUAL ms of Fabric's that no
ablation removes (the residual's truth, in points of native's step). A run's number has
log-normal noise (RUN_NOISE, 0.2%: a quiet GPU), a block effect shared by a block's runs (1%)
and a drift of 0.2% a run. Then the decision the report states: "the parts explain the total"
when the residual's 90% interval lies within +-1 pp (two one-sided tests at 5%, TOST:
decomposition.explains), from the blocks that hold every arm.

The issue's goals (REPS = 4000 experiments a condition, Monte Carlo SE 0.0035 near 5%, 0.006
near 80%): at 8 blocks and a true 0, "explained" >= 0.80 (0.99); at a true +-1 pp at most
5% + 3 SE (the TOST's level: 0.05); one lost run (a random arm in a random block) changes
neither rate by more than 0.05, because the schedule makes the block up (a block in the lost
block's order after the planned ones: experiment.schedules). The old decision and the old
schedule are shown failing: the 95% interval within +-1 pp said "explained" at a true 0 in 55%
of experiments at 5 blocks; a lost run at 5 blocks left 4, no time term, and "explained" 0.
Runtimes: about 6-10 s a condition on one core; the blocks-needed table is `slow`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from compare import decomposition
from experiment import plans
from stats import intervals, orders
from stats_sim import lower_bound, mc_se

REPS = 4000
RUN_NOISE = 0.002
ARMS = [a.label for a in plans.find("responsibilities").arms]
LAYOUT = decomposition.layout_of(ARMS, "native", 1)
COST = {"wrapper": 1.5, "precision": 4.0, "step": 1.0, "loop": 1.0, "services": 4.0}


def levels(residual: float) -> dict[str, float]:
    """Each arm's step in ms: native 100 ms plus what it does Lightning's way (and `residual`
    ms of Fabric's that no ablation removes)."""
    fabric = 100.0 + COST["wrapper"] + COST["precision"] + COST["step"] + residual
    return {
        "native": 100.0,
        "fabric": fabric,
        "lightning": fabric + COST["loop"],
        "lightning-services": fabric + COST["loop"] + COST["services"],
        "fabric-current-stream": fabric - COST["wrapper"],
        "fabric-torch-autocast": fabric - COST["precision"],
        "fabric-raw-step": fabric - COST["step"],
    }


def experiment(
    rng: np.random.Generator,
    blocks: int,
    residual: float = 0.0,
    noise: float = RUN_NOISE,
    lose: bool = False,
    makeup: bool = True,
    spikes: float = 0.0,
) -> list[intervals.RunPoint]:
    """One experiment's counted runs. `lose`: one run (a random arm of a random block) fails;
    `makeup`: the schedule then runs that block's order again after the planned blocks.
    `spikes`: the share of runs 10% slower (a neighbour's job)."""
    level, t = levels(residual), len(ARMS)
    design = [(b, orders.block_order(t, b)) for b in range(1, blocks + 1)]
    lost = (int(rng.integers(1, blocks + 1)), int(rng.integers(0, t))) if lose else None
    if lost is not None and makeup:
        design.append((blocks + 1, orders.block_order(t, lost[0])))
    points, slot = [], 0
    for block, order in design:
        shared = rng.normal(0.0, 0.01)
        for position, i in enumerate(order, 1):
            slot += 1
            log_ms = shared + 0.002 * slot + rng.normal(0.0, noise)
            log_ms += math.log(1.1) * (rng.random() < spikes)
            if (block, i) != lost:
                ms = level[ARMS[i]] * math.exp(log_ms)
                points.append(intervals.RunPoint(ARMS[i], ms, block, position))
    return points


def residual_interval(points: list[intervals.RunPoint], confidence: float) -> tuple[float, float]:
    """The residual's interval in points of native's step, as the report computes it."""
    assert LAYOUT is not None
    found = decomposition.complete(LAYOUT, points)
    assert found is not None
    weights = decomposition.residual_weights(LAYOUT)
    iv = decomposition.share_test(weights, found, None, "the residual")(confidence)
    low, high = decomposition.as_share(iv.ci_low), decomposition.as_share(iv.ci_high)
    return (math.inf, math.inf) if low is None or high is None else (low, high)


def explained(points: list[intervals.RunPoint]) -> bool:
    """The report's decision: the 90% interval within +-1 pp (decomposition.explains)."""
    return decomposition.explains(residual_interval(points, 0.90))


def old_explained(points: list[intervals.RunPoint]) -> bool:
    """The decision before: the 95% interval within +-1 pp."""
    low, high = residual_interval(points, 0.95)
    return -1.0 <= low and high <= 1.0


def rate(seed: int, blocks: int, decide=explained, reps: int = REPS, **kw) -> float:
    rng = np.random.default_rng(seed)
    return float(np.mean([decide(experiment(rng, blocks, **kw)) for _ in range(reps)]))


_cache: dict[tuple, float] = {}


def cached(*key, **kw) -> float:
    """rate(*key, **kw), computed once per test session."""
    k = (key, tuple(sorted(kw.items())))
    if k not in _cache:
        _cache[k] = rate(*key, **kw)
    return _cache[k]


def test_the_decision_is_the_reports() -> None:
    """The simulation's decision is the sentence's: decompose on one experiment says "the parts
    explain the total" exactly when explained() does."""
    assert LAYOUT is not None
    rng = np.random.default_rng(5301)
    for residual in (0.0, 0.9, 1.2):
        points = experiment(rng, 8, residual)
        said = decomposition.decompose(LAYOUT, points, {}, None).residual_sentence
        assert said.startswith("the parts explain the total") == (
            explained(points) and "remains" not in said
        ), said


def test_at_eight_blocks_a_true_zero_is_explained_and_one_point_is_not() -> None:
    """At a true +-1 pp TOST says "explained" in 5% (its level) of experiments: both signs
    pooled, 8,000 experiments, at most 5% + 3 MC SE (0.0024)."""
    zero = cached(5310, 8)
    assert lower_bound(zero, REPS) >= 0.80, zero  # simulated 0.99
    boundary = (cached(5311, 8, residual=1.0) + cached(5312, 8, residual=-1.0)) / 2
    assert boundary <= 0.05 + 3 * mc_se(0.05, 2 * REPS), boundary  # simulated 0.048-0.056


def test_one_lost_run_is_made_up_and_changes_neither_rate() -> None:
    for seed, truth in ((5310, 0.0), (5311, 1.0), (5312, -1.0)):
        whole = cached(seed, 8, residual=truth)
        lost = cached(seed + 10, 8, residual=truth, lose=True)
        assert abs(lost - whole) <= 0.05, (truth, whole, lost)


def test_the_old_decision_and_schedule_fail() -> None:
    """At the plan's old 5 blocks: the 95% interval said "explained" at a true 0 far less often
    than TOST (the audit: 0.55 against 0.77), and a lost run without a make-up block left 4
    complete blocks, no time term, and "explained" never (the audit: +-0.77 pp became +-4.7 pp
    under a drift of 0.2% a run)."""
    old = cached(5320, 5, decide=old_explained)
    new = cached(5320, 5)  # simulated 0.53 and 0.76 (the same experiments)
    assert old + 3 * mc_se(old, REPS) < 0.6 < new - 3 * mc_se(new, REPS), (old, new)
    lost_old = cached(5321, 5, lose=True, makeup=False)
    lost_new = cached(5321, 5, lose=True)
    assert lost_old < 0.05 and abs(lost_new - new) <= 0.05, (lost_old, lost_new, new)


def test_disturbed_runs_are_left_out_of_the_residual() -> None:
    """5% of runs 10% slower: one such run of Fabric moves its block's residual by 20 points
    (Fabric's weight in it is -2). The block is left out (stats.blocks.outlying_blocks), so
    at 14 blocks (a cycle) the parts still explain the total in most experiments (simulated
    0.91), where keeping every block did in 0.07-0.23 (the audit: 0.11)."""
    kept = cached(5330, 14, reps=1000, spikes=0.05)
    assert kept >= 0.85, kept
    boundary = cached(5331, 14, reps=1000, residual=1.0, spikes=0.05)
    assert boundary <= 0.05 + 3 * mc_se(0.05, 1000), boundary


@pytest.mark.slow
@pytest.mark.parametrize(
    ("noise", "needed"), [(0.002, 6), (0.005, 22), (0.01, 80)], ids=["0.2%", "0.5%", "1%"]
)
def test_blocks_needed_for_explained(noise: float, needed: int) -> None:
    """The blocks at which the parts explain a true 0 in 80% of experiments (docs/experiments.md
    quotes them): 6 at 0.2% run noise, 22 at 0.5%, 80 at 1% (about a thousand experiments each;
    the audit said 8, 28 and 100). One block fewer falls short."""
    reps = 1000 if noise < 0.01 else 400
    at = rate(5340, needed, reps=reps, noise=noise)
    assert at >= 0.80 - 3 * mc_se(0.8, reps), at
    below = rate(5341, needed - (1 if noise < 0.005 else needed // 10), reps=reps, noise=noise)
    assert below < 0.80 + 3 * mc_se(0.8, reps), below
