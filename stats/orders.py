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

from collections.abc import Sequence
from functools import cache


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


def _circuit(rows: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The rows as blocks in an order where each starts with the last arm of the one before,
    from arm 0 back to arm 0 (an Eulerian circuit, Hierholzer's, rows as edges first -> last)."""
    out_edges: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        out_edges.setdefault(row[0], []).append(i)
    for edges in out_edges.values():
        edges.reverse()  # pop() takes the lowest row first: the same cycle every time
    stack: list[tuple[int, int | None]] = [(0, None)]
    path: list[int] = []
    while stack:
        node, via = stack[-1]
        if out_edges.get(node):
            i = out_edges[node].pop()
            stack.append((rows[i][-1], i))
        else:
            stack.pop()
            if via is not None:
                path.append(via)
    if len(path) != len(rows):
        raise ValueError("the rows do not chain into one cycle")  # never: _squares joins them
    return [rows[i] for i in reversed(path)]


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
