"""The order of the arms in each block: balanced for position and for carry-over.

    order = block_order(3, block)    # (0, 1, 2), (2, 0, 1), ...: arm indices, 0 the baseline
    first = warmup_order(3)          # the warm-up rounds' order: it ends with the baseline

A run can leave the machine slower (or faster) for the run after it: a carry-over. If arm X
does, every arm that often follows X looks slower. Blocks like [N F L][L F N] put Fabric always
in the middle, so N and L follow it and it never follows itself: with a carry-over c from
Fabric, each comparison with it is biased by c/2 (issue 45: A/A 0.07-0.16 at c = 0.3%).

The orders here make every arm follow every arm, itself included, equally often over the
counted runs, so a carry-over from any one arm falls on all alike:
- within a block every arm runs once, and over a cycle of blocks each ordered pair of
  different arms is adjacent equally often (a Williams design: one square for 2 arms, two for
  more, the second its mirror for an odd count, its symbols relabelled for an even one);
- each block starts with the arm the block before ended with, so every boundary is an arm
  following itself, and over the cycle each arm follows itself as often as it follows each
  other arm;
- block 1 starts with the baseline, and the cycle ends with it; the warm-up rounds end with it
  too (and so do the settling runs, the baseline's), so the first counted run follows itself.
For two arms this is ABBA: AB, BA, AB, ... The cycle is 2 blocks for 2 arms and 2 x arms
blocks for more; each arm takes each position equally often over a cycle, so the block-paired
estimate's position gaps sum to zero there (stats.blocks reads the positions a manifest
records, whatever they are). tests/test_stats_orders.py checks the counts and simulates a
carry-over of 0.3% in 3-arm A/A experiments.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

from stats.distributions import t_quantile, t_sf


def williams_sequence(t: int) -> list[int]:
    """0, 1, t-1, 2, t-2, ...: its successive differences mod t take every value once for an
    even t (the first row of a cyclic Williams square)."""
    out, low, high = [0], 1, t - 1
    while len(out) < t:
        out.append(low)
        low += 1
        if len(out) < t:
            out.append(high)
            high -= 1
    return out


def _squares(t: int) -> list[tuple[int, ...]]:
    """The rows of one or two Williams squares over 0..t-1 whose blocks, chained first -> last,
    reach every arm: each ordered pair of different arms adjacent in the rows equally often."""
    seq = williams_sequence(t)
    square = [tuple((s + x) % t for x in seq) for s in range(t)]
    if t <= 2:
        return square
    if t % 2:  # odd: the square and its mirror together balance every pair
        return square + [row[::-1] for row in square]
    # even: one square pairs each arm's first with the arm t/2 away; relabel a copy so that
    # the two pairings together join every arm (the upper half rotated by one)
    h = t // 2
    relabel = [x if x < h else h + (x - h + 1) % h for x in range(t)]
    return square + [tuple(relabel[x] for x in row) for row in square]


def transitions_of(
    blocks: Sequence[Sequence[int]], t: int, before: int | None = 0
) -> list[list[int]]:
    """How often arm j ran right after arm i (counts[i][j]) in these blocks run in turn, the
    first run after `before` (the warm-up's last arm; None: after no run)."""
    runs = [arm for block in blocks for arm in block]
    counts = transitions(runs, t)
    if before is not None and runs:
        counts[before][runs[0]] += 1
    return counts


def imbalance(counts: Sequence[Sequence[int]]) -> tuple[int, int]:
    """(the largest, and the sum of the squares of) the differences between two arms in how
    often each ran right after one arm: the carry-over from that arm's runs biases their
    comparison by that many runs' worth (over the blocks), 0 in a whole cycle."""
    t = len(counts)
    worst, total = 0, 0
    for a in range(t):
        for b in range(a + 1, t):
            for x in range(t):
                d = abs(counts[x][a] - counts[x][b])
                worst, total = max(worst, d), total + d * d
    return worst, total


# The carry-over the prefixes are balanced against, in standard deviations of a block's log
# ratio: 0.3% from a run to the next at 0.5% run noise (issue 45's audit), 0.3 / (0.5 x sqrt 2).
CARRY_OVER_SDS = 0.3 / (0.5 * math.sqrt(2.0))


def false_verdict_rate(worst: int, blocks: int) -> float:
    """The A/A false-verdict rate of a 95% t test over `blocks` blocks (df one less) whose two
    arms differ by `worst` in how often they ran right after one arm, under CARRY_OVER_SDS:
    the bias, worst x carry-over / blocks, in standard errors is worst x CARRY_OVER_SDS /
    sqrt(blocks)."""
    if blocks < 2:
        return 0.0
    df = float(blocks - 1)
    bar = t_quantile(0.975, df)
    shift = worst * CARRY_OVER_SDS / math.sqrt(blocks)
    return t_sf(bar - shift, df) + t_sf(bar + shift, df)


def _circuits(rows: Sequence[tuple[int, ...]]) -> list[list[int]]:
    """Every order of the rows as blocks where each starts with the last arm of the one before,
    from arm 0 back to arm 0 (the Eulerian circuits, rows as edges first -> last): every arm
    starts two rows, so there are few (2 x arms)."""
    found: list[list[int]] = []
    path: list[int] = []

    def walk(end: int) -> None:
        if len(path) == len(rows):
            if end == 0:
                found.append(list(path))
            return
        for i, row in enumerate(rows):
            if i not in path and row[0] == end:
                path.append(i)
                walk(row[-1])
                path.pop()

    walk(0)
    return found


def _circuit(rows: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The rows as blocks in the chained order (_circuits) whose prefixes are best balanced
    for carry-over: the least worst false_verdict_rate over its prefixes of 2 or more blocks,
    then the least sum of them (ties: the lower rows). An experiment that stops within a cycle
    (--repeats, Stein's rule, the budget) then ran the best-balanced blocks it could: for 3
    arms [0 1 2][2 0 1][1 0 2], where after 3 blocks no pair differs by more than one run
    (issue 53's audit: A/A 0.047 at a carry-over of 0.3%, against 0.074-0.082 for the blocks
    that began the cycle before), though no 3 chained blocks balance every pair."""
    t = 1 + max(max(row) for row in rows)

    def score(path: list[int]) -> tuple[float, float, list[int]]:
        rates = [
            false_verdict_rate(imbalance(transitions_of([rows[i] for i in path[:k]], t))[0], k)
            for k in range(2, len(path) + 1)
        ]
        return max(rates, default=0.0), math.fsum(rates), path

    found = _circuits(rows)
    if not found:
        raise ValueError("the rows do not chain into one cycle")  # never: _squares joins them
    return [rows[i] for i in min(score(p) for p in found)[2]]


@cache
def cycle(t: int) -> tuple[tuple[int, ...], ...]:
    """The blocks of one cycle for t arms (0 the baseline): 1 block for 1 arm, ABBA's 2 for 2,
    2t for more (module docstring)."""
    if t < 1:
        raise ValueError(f"a block needs an arm, got {t}")
    return tuple(_circuit(_squares(t)))


def block_order(t: int, block: int) -> tuple[int, ...]:
    """The arms' order in block `block` (from 1): indices into the arms, 0 the baseline."""
    blocks = cycle(t)
    return blocks[(block - 1) % len(blocks)]


def warmup_order(t: int) -> tuple[int, ...]:
    """The warm-up rounds' order: the cycle's last block, which ends with the baseline, so
    block 1 (which starts with it) follows it as every block follows the one before."""
    return cycle(t)[-1]


def transitions(sequence: Sequence[int], t: int) -> list[list[int]]:
    """How often arm j ran right after arm i (counts[i][j]) in a sequence of runs."""
    counts = [[0] * t for _ in range(t)]
    for a, b in zip(sequence, sequence[1:]):
        counts[a][b] += 1
    return counts
