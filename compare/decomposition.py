"""Where the cost comes from: Lightning's total against native, split into what each
responsibility it takes over costs (the arms table, common/arms.py), and a residual.

    layout = layout_of(labels, "native", world)    # which arms measure what (None: no split)
    test = residual_test(layout, points, rule)     # joins the report's Holm family
    cost = decompose(layout, points, stated, rule, test(level))   # CostRows, residual last

A part is one arm against its parent, the arm that does the responsibility Lightning's way
against the one that does not: an ablation that hands it back (fabric against
fabric-current-stream), or a runner's own step (the Trainer's loop: lightning against fabric;
its services: lightning-services against lightning). Fabric's step against native is what its
ablations split. Each part is, per block, a share of that block's native step,
100 x (with - without) / native; the total is the deepest runner that ran against native, the
same way; the residual is, per block, the total minus the sum of the parts: the check that the
parts explain the whole (interactions between them, and work no arm isolates, land there). A
cost that adds milliseconds adds the same share whichever arm it is measured against, so
shares of one block's native step add up (a log ratio would not: it charges a part by the step
it is measured on, and the residual of parts that add milliseconds drifts from 0 by about half
the square of the total). A detail (native-fp32-logits, lightning-no-sigterm) is a piece of a
part, shown beside it, not summed. While a part has no runs here (every run of its ablation
failed, or the experiment ran some ablations only), there is no residual: the total minus the
measured parts would hold that part's cost and blame the interactions; the sentence names the
part instead (a part one rank cannot isolate costs nothing there, and does not count).

Each number is a t interval over the complete blocks (every arm of the decomposition ran) by
stats.blocks (paired by block, the time term from 5 blocks: the block's order of the arms in
it), at the confidence Holm's adjustment gave its comparison; the residual is one more member of
the report's family. Checked by simulation (tests/test_decomposition.py): coverage of every
part and of the residual under noise, drift and heavy tails, and a no-op ablation's A/A; a
carry-over from one arm's run to the next is not balanced by reversed orders. Imports neither
torch nor Lightning.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from common import arms as table
from compare.overheads import rule_of, run_points
from compare.pairing import Grouping
from compare.rows import Overhead
from stats import blocks as block_stats
from stats import distributions, intervals

NATIVE = "native"
# A percentage point of native's step as stats.blocks sees it: small numbers, for which its
# percent conversion (expm1) and as_share's inverse (log1p) are exact to rounding.
SCALE = 1e-4
# The residual within this many points of native's step: the parts explain the total (issue
# 47's goal: the residual within +-1 pp of 0). An equivalence claim, so by two one-sided tests
# at EQUIVALENCE_ALPHA each (TOST): the residual's 1 - 2 x alpha (90%) interval within the
# bounds. The 95% interval asked before said "explained" at a true 0, 8 blocks and 0.2% run
# noise in 55% of experiments; TOST's 90% in 80% or more, and at a true +-1 pp in 5% at most
# (tests/test_stats_residual.py).
EXPLAINED_PP = 1.0
EQUIVALENCE_ALPHA = 0.05


@dataclass(frozen=True)
class Item:
    """One row to measure: a responsibility, the arm with it and the one without (None: not
    measured here, `why` says so), and whether it is a part (summed) or a detail."""

    key: str
    title: str  # the responsibility's, or "of which: ARM" for a detail
    kind: str  # "part" | "detail"
    with_arm: str | None
    without_arm: str | None
    why: str | None = None
    # a part that has a cost here but no runs to measure it: the residual would hold it
    unmeasured: bool = False

    @property
    def named(self) -> str:
        """The row's name in a sentence: a detail's with its responsibility's."""
        if self.kind != "detail":
            return self.title
        return f"{table.RESPONSIBILITY[self.key].title}, {self.title.replace(':', '')}"

    @property
    def measured(self) -> str:
        """'arm vs parent' as the report states the comparison, or "" when not measured."""
        return "" if self.comparison is None else " vs ".join(self.comparison)

    @property
    def comparison(self) -> tuple[str, str] | None:
        """(arm, parent): the stated comparison whose Holm level this row takes."""
        if self.with_arm is None or self.without_arm is None:
            return None
        arm = table.ARMS.get(self.with_arm)
        if arm is not None and arm.parent == self.without_arm:
            return self.with_arm, self.without_arm
        return self.without_arm, self.with_arm


@dataclass(frozen=True)
class Layout:
    """What one world size's decomposition measures: the total (top against native) and each
    responsibility's item."""

    world: int
    top: str  # the deepest runner that ran: the total is top against native
    items: tuple[Item, ...]

    @property
    def labels(self) -> tuple[str, ...]:
        """Every arm a complete block must hold."""
        found = [NATIVE, self.top]
        for item in self.items:
            found += [a for a in (item.with_arm, item.without_arm) if a is not None]
        return tuple(dict.fromkeys(found))

    @property
    def parts(self) -> tuple[Item, ...]:
        """The measured parts: the items summed."""
        return tuple(i for i in self.items if i.kind == "part" and i.with_arm is not None)

    @property
    def unmeasured(self) -> tuple[Item, ...]:
        """The parts of the total that no runs measured here (a part one rank cannot isolate
        costs nothing here, and is not one): while there is one, the total minus the parts
        is no residual."""
        return tuple(i for i in self.items if i.unmeasured)


def _chain(labels: Sequence[str]) -> list[str]:
    """native, then each runner whose parent is the last (fabric, lightning, services)."""
    chain = [NATIVE]
    while True:
        following = [
            a.name
            for a in table.TABLE
            if a.role == "main" and a.parent == chain[-1] and a.name in labels
        ]
        if not following:
            return chain
        chain.append(following[0])


def _missing(arm: table.Arm, world: int) -> str:
    """Why an ablation's row has no number here."""
    if world == 1 and arm.one_rank is not None:
        return f"not isolated here: {arm.one_rank}"
    return f"not measured here: no {arm.name} runs"


def layout_of(labels: Sequence[str], baseline: str, world: int) -> Layout | None:
    """The decomposition of these arm labels at one world size, or None: none without native as
    the baseline, a Lightning runner above it, and an ablation (a part or detail whose parent
    ran too)."""
    if baseline != NATIVE or NATIVE not in labels:
        return None
    chain = _chain(labels)
    ablations = [
        a
        for a in table.TABLE
        if a.role in ("part", "detail") and a.name in labels and a.parent in labels
    ]
    if len(chain) < 2 or not ablations:
        return None
    items: list[Item] = []
    for r in table.RESPONSIBILITIES:
        runner = next(
            (a for a in table.TABLE if a.role == "main" and a.responsibility == r.key), None
        )
        if runner is not None:  # the Trainer's loop, its services: a runner's own step
            if runner.name not in chain:
                continue  # beyond the total
            items.append(Item(r.key, r.title, "part", runner.name, runner.parent))
        elif "fabric" in chain:  # Fabric's step, split by its ablations
            candidates = [a for a in table.TABLE if a.role == "part" and a.responsibility == r.key]
            ran = [a for a in candidates if a.name in labels and a.parent in labels]
            if ran:
                items.append(Item(r.key, r.title, "part", *_sides(ran[0])))
            elif candidates:
                isolates = not (world == 1 and candidates[0].one_rank is not None)
                why = _missing(candidates[0], world)
                items.append(Item(r.key, r.title, "part", None, None, why, isolates))
        for a in table.TABLE:
            if a.role != "detail" or a.responsibility != r.key:
                continue
            if a.name in labels and a.parent in labels:
                items.append(Item(r.key, f"of which: {a.name}", "detail", *_sides(a)))
            elif world == 1 and a.one_rank is not None and a.parent in chain:
                items.append(
                    Item(r.key, f"of which: {a.name}", "detail", None, None, _missing(a, world))
                )
    return Layout(world, chain[-1], tuple(items))


def _sides(arm: table.Arm) -> tuple[str, str]:
    """(with, without): the arm that does its responsibility Lightning's way, and the other."""
    assert arm.parent is not None
    return (arm.name, arm.parent) if arm.adds else (arm.parent, arm.name)


# --- the numbers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Blocks:
    """The complete blocks: each holds one run of every arm of the layout."""

    runs: tuple[Mapping[str, intervals.RunPoint], ...]
    dropped: tuple[int, ...]  # blocks without a run of some arm (a failed run)


def complete(layout: Layout, points: Sequence[intervals.RunPoint]) -> Blocks | None:
    """The layout's complete blocks; None when a run has no block (loose files)."""
    wanted = set(layout.labels)
    mine = [p for p in points if p.arm in wanted]
    if not mine or any(p.block is None or p.position is None for p in mine):
        return None
    by_block: dict[int, dict[str, list[intervals.RunPoint]]] = {}
    for p in mine:
        by_block.setdefault(p.block, {}).setdefault(p.arm, []).append(p)  # type: ignore[arg-type]
    done = sorted(
        b
        for b, cell in by_block.items()
        if set(cell) == wanted and all(len(v) == 1 for v in cell.values())
    )
    return Blocks(
        tuple({arm: v[0] for arm, v in by_block[b].items()} for b in done),
        tuple(sorted(set(by_block) - set(done))),
    )


# arm -> its weight in a quantity: +1 with the responsibility, -1 without
Weights = Mapping[str, int]


def weights_of(item: Item) -> Weights:
    """+with - without."""
    assert item.with_arm is not None and item.without_arm is not None
    return {item.with_arm: 1, item.without_arm: -1}


def total_weights(layout: Layout) -> Weights:
    """+top - native."""
    return {layout.top: 1, NATIVE: -1}


def residual_weights(layout: Layout) -> Weights:
    """The total minus every part."""
    found = dict(total_weights(layout))
    for item in layout.parts:
        for arm, w in weights_of(item).items():
            found[arm] = found.get(arm, 0) - w
    return {arm: w for arm, w in found.items() if w}


def shares(weights: Weights, blocks: Blocks) -> tuple[list[float], list[int]]:
    """Per complete block: 100 x the weighted sum of the arms' run numbers over native's, and
    the weighted sum of their positions (the block's order, for the time term)."""
    values = [
        100.0 * math.fsum(w * run[arm].ms for arm, w in weights.items()) / run[NATIVE].ms
        for run in blocks.runs
    ]
    gaps = [sum(w * (run[arm].position or 0) for arm, w in weights.items()) for run in blocks.runs]
    return values, gaps


def share_test(
    weights: Weights, blocks: Blocks, first_stage: int | None, name: str
) -> Callable[[float], intervals.ArmInterval]:
    """The quantity's interval as a function of the confidence (for stats.holm): the per-block
    shares through stats.blocks.blocks_log_interval, whose estimate, time term and t interval
    are linear in its numbers (only its percent conversion assumes log ratios: `as_share`
    undoes it, and SCALE keeps that conversion far from its limits, where exp() would round an
    interval's end to -100%)."""
    values, gaps = shares(weights, blocks)

    def test(confidence: float) -> intervals.ArmInterval:
        return block_stats.blocks_log_interval(
            [v * SCALE for v in values],
            gaps,
            first_stage,
            confidence,
            arm=name,
            baseline=NATIVE,
        )

    return test


def as_share(percent: float | None) -> float | None:
    """An interval end from share_test back in % of native's step."""
    return None if percent is None else math.log1p(percent / 100.0) / SCALE


@dataclass(frozen=True)
class CostRow:
    """One row of "Where the cost comes from", in % of native's step (None: not measured)."""

    world_size: int
    kind: str  # part | detail | total | residual
    key: str  # the responsibility's key (common/arms.py), or "total", "residual"
    responsibility: str  # the row's name in the table
    named: str  # the row's name in a sentence (a detail's with its responsibility's)
    measured: str  # "fabric vs fabric-current-stream" (the stated comparison); "" if none
    percent: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    ms: float | None  # the same in ms of native's step (its geometric mean over the blocks)
    host_ms: float | None  # host CPU ms per step it costs (the stated comparison's, signed)
    host_ci_low_ms: float | None
    host_ci_high_ms: float | None
    peak_gib: float | None  # peak allocated GiB it costs (medians over runs, with - without)
    why: str | None  # why no number, or why no interval
    blocks: int
    warnings: tuple[str, ...] = ()  # what its interval says of itself (stats.blocks)


@dataclass(frozen=True)
class Decomposition:
    """One world size's decomposition: its rows (parts and details in the table's order, then
    the total and the residual) and what the residual says."""

    world_size: int
    rows: tuple[CostRow, ...]
    blocks: int  # complete blocks used
    dropped: tuple[int, ...]
    native_ms: float | None
    residual_sentence: str
    family: int  # comparisons the Holm adjustment was over


# For a stated comparison (arm, parent): its Holm confidence, and its host difference in ms
# (arm minus parent) with its interval; compare.analysis gives them from the Overheads.
Stated = Mapping[tuple[str, str], tuple[float, float | None, float | None, float | None]]


@dataclass(frozen=True)
class _Context:
    """What every row of one decomposition is computed from."""

    layout: Layout
    blocks: Blocks
    stated: Stated
    first_stage: int | None
    peaks: Mapping[str, float | None]
    native_ms: float


def _row(
    c: _Context,
    kind: str,
    title: str,
    weights: Weights,
    pair: tuple[str, str] | None,
    measured: str,
    given: intervals.ArmInterval | None = None,
    named: str = "",
    key: str = "",
) -> CostRow:
    """One measured row: its share and interval (at its stated comparison's confidence, or
    `given`), its ms, and its host and memory cost signed as a cost (with minus without)."""
    confidence, host, host_low, host_high = c.stated.get(
        pair or ("", ""), (intervals.CONFIDENCE, None, None, None)
    )
    iv = given or share_test(weights, c.blocks, c.first_stage, title)(confidence)
    if pair is not None and weights.get(pair[0], 0) < 0:  # the stated arm hands it back
        host, host_low, host_high = (
            None if host is None else -host,
            None if host_high is None else -host_high,
            None if host_low is None else -host_low,
        )
    peak = None
    if pair is not None and all(c.peaks.get(a) is not None for a in pair):
        with_arm, without_arm = sorted(pair, key=lambda a: -weights.get(a, 0))
        peak = c.peaks[with_arm] - c.peaks[without_arm]  # type: ignore[operator]
    pct = as_share(iv.percent)
    return CostRow(
        world_size=c.layout.world,
        kind=kind,
        key=key or kind,
        responsibility=title,
        named=named or title,
        measured=measured,
        percent=pct,
        ci_low=as_share(iv.ci_low),
        ci_high=as_share(iv.ci_high),
        confidence=iv.confidence,
        ms=None if pct is None else c.native_ms * pct / 100.0,
        host_ms=host,
        host_ci_low_ms=host_low,
        host_ci_high_ms=host_high,
        peak_gib=peak,
        why=iv.no_verdict_reason,
        blocks=len(c.blocks.runs),
        warnings=iv.warnings,
    )


def _unmeasured(world: int, item: Item) -> CostRow:
    """A row without a number: `item.why` says why."""
    return CostRow(
        world_size=world,
        kind=item.kind,
        key=item.key,
        responsibility=item.title,
        named=item.named,
        measured="",
        percent=None,
        ci_low=None,
        ci_high=None,
        confidence=intervals.CONFIDENCE,
        ms=None,
        host_ms=None,
        host_ci_low_ms=None,
        host_ci_high_ms=None,
        peak_gib=None,
        why=item.why,
        blocks=0,
    )


def decompose(
    layout: Layout,
    points: Sequence[intervals.RunPoint],
    stated: Stated,
    first_stage: int | None,
    residual: intervals.ArmInterval | None = None,
    peaks: Mapping[str, float | None] | None = None,
    family: int = 1,
) -> Decomposition:
    """The rows: each item's share with its interval at its comparison's confidence, the total
    (top against native), and the residual (`residual`: its Holm-adjusted interval from
    residual_test; None: at 95% here). `peaks`: each arm's peak allocated GiB."""
    found = complete(layout, points)
    if found is None or not found.runs:
        why = (
            "the runs carry no blocks (loose files): run them as one experiment"
            if found is None
            else "no block holds a run of every arm of the decomposition"
        )
        return Decomposition(layout.world, (), 0, (), None, f"not computed: {why}", family)
    logs = [math.log(run[NATIVE].ms) for run in found.runs]
    c = _Context(
        layout, found, stated, first_stage, peaks or {}, math.exp(math.fsum(logs) / len(logs))
    )
    rows = [
        _row(
            c,
            item.kind,
            item.title,
            weights_of(item),
            item.comparison,
            item.measured,
            None,
            item.named,
            item.key,
        )
        if item.with_arm is not None
        else _unmeasured(layout.world, item)
        for item in layout.items
    ]
    total = _row(
        c,
        "total",
        "total",
        total_weights(layout),
        (layout.top, NATIVE),
        f"{layout.top} vs {NATIVE}",
    )
    rest = (
        _row(
            c,
            "residual",
            "residual",
            residual_weights(layout),
            None,
            "total minus the parts",
            given=residual,
        )
        if not layout.unmeasured
        else _unmeasured(
            layout.world,
            Item(
                "residual",
                "residual",
                "residual",
                None,
                None,
                "not computed: " + ", ".join(i.title for i in layout.unmeasured) + " not measured",
            ),
        )
    )
    sentence = no_residual(layout)
    if not layout.unmeasured:
        tost = share_test(residual_weights(layout), found, first_stage, "the residual")(
            1.0 - 2.0 * EQUIVALENCE_ALPHA
        )
        sentence = residual_sentence(rest, equivalence_interval(tost))
    return Decomposition(
        layout.world,
        (*rows, total, rest),
        len(found.runs),
        found.dropped,
        c.native_ms,
        sentence,
        family,
    )


def equivalence_interval(iv: intervals.ArmInterval) -> tuple[float, float] | None:
    """The residual's 1 - 2 x EQUIVALENCE_ALPHA interval in % of native's step (share_test at
    that confidence), or None without one."""
    low, high = as_share(iv.ci_low), as_share(iv.ci_high)
    return None if low is None or high is None else (low, high)


def residual_test(
    layout: Layout, points: Sequence[intervals.RunPoint], first_stage: int | None
) -> Callable[[float], intervals.ArmInterval] | None:
    """The residual's interval as a function of the confidence, for the report's Holm family;
    None when there are no complete blocks."""
    found = complete(layout, points)
    if found is None or not found.runs or layout.unmeasured:
        return None
    return share_test(residual_weights(layout), found, first_stage, "the residual")


def no_residual(layout: Layout) -> str:
    """Why there is no residual: the parts no runs measured, named (the total minus the
    measured parts would hold their cost, not only what the parts leave unexplained)."""
    names = "; ".join(f"{i.title} ({i.why})" for i in layout.unmeasured)
    return (
        f"no residual: the total minus the parts would hold what no run measured here, {names};"
        " run every ablation (e.g. --plan responsibilities) to see whether the parts explain"
        " the total"
    )


def explains(equivalence: tuple[float, float] | None) -> bool:
    """Whether the residual's 90% interval (equivalence_interval) lies within EXPLAINED_PP of
    0: the parts explain the total, by two one-sided tests at EQUIVALENCE_ALPHA."""
    return equivalence is not None and -EXPLAINED_PP < equivalence[0] <= equivalence[1] < (
        EXPLAINED_PP
    )


def residual_sentence(rest: CostRow, equivalence: tuple[float, float] | None = None) -> str:
    """What the residual says, in one sentence. The parts explain the total only by two
    one-sided tests at EQUIVALENCE_ALPHA (TOST): the residual's 90% interval (`equivalence`,
    equivalence_interval) within EXPLAINED_PP of 0; that interval is not the row's (Holm's,
    for a residual that differs from 0). An interval that holds 0 but is wider says nothing
    either way."""
    if rest.percent is None:
        return "residual: not computed"
    if rest.ci_low is None or rest.ci_high is None:
        return f"residual {rest.percent:+.2f}% of native's step: no interval ({rest.why})"
    shown = f"{rest.percent:+.2f}% of native's step (CI {rest.ci_low:+.2f}..{rest.ci_high:+.2f})"
    level = f"{1.0 - 2.0 * EQUIVALENCE_ALPHA:.0%}"
    tost = "" if equivalence is None else f"{equivalence[0]:+.2f}..{equivalence[1]:+.2f}"
    within = explains(equivalence)
    bounds = f"±{EXPLAINED_PP:g} pp"
    if rest.ci_low <= 0 <= rest.ci_high:
        if within:
            return (
                f"the parts explain the total: residual {shown}; its {level} interval {tost}"
                f" lies within {bounds} (two one-sided tests at {EQUIVALENCE_ALPHA:.0%})"
            )
        wide = f"its {level} interval {tost} is" if tost else "it is"
        return (
            f"residual {shown}: no difference from 0 detectable, but {wide} too wide to say the"
            f" parts explain the total ({bounds}, two one-sided tests at"
            f" {EQUIVALENCE_ALPHA:.0%})"
        )
    small = f", its {level} interval {tost} within {bounds}" if within else ""
    return (
        f"a residual of {shown} remains{small}: interactions between the parts, or work no"
        " arm isolates"
    )


# --- from a report's grouping ----------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    """One world size's decomposition to compute: its layout, counted runs and Stein's rule."""

    layout: Layout
    points: tuple[intervals.RunPoint, ...]
    first_stage: int | None
    peaks: Mapping[str, float | None]
    test: Callable[[float], intervals.ArmInterval] | None


def planned(groups: Grouping) -> list[Planned]:
    """The decompositions the report's arms allow, one per world size (none for most reports:
    they need native as the baseline, a Lightning runner and an ablation arm)."""
    found = []
    for world in groups.worlds:
        layout = layout_of(groups.labels_at(world), groups.baseline, world)
        if layout is None:
            continue
        runs = [r for label in layout.labels for r in groups.cells.get((label, world), ())]
        points = tuple(run_points(runs))
        rule = rule_of(runs)
        peaks = {}
        for label in layout.labels:
            known = [
                r.values.peak_allocated_gib
                for r in groups.cells.get((label, world), ())
                if r.placement.warmup is None and r.values.peak_allocated_gib is not None
            ]
            peaks[label] = distributions.median(known) if known else None
        found.append(Planned(layout, points, rule, peaks, residual_test(layout, points, rule)))
    return found


def for_report(
    plans: Sequence[Planned],
    overhead: Sequence[Overhead],
    residuals: Sequence[intervals.ArmInterval | None],
) -> list[Decomposition]:
    """Each planned decomposition, with the stated comparisons' Holm levels and host costs and
    the residual's Holm-adjusted interval (`residuals`: one per plan with a test, in order)."""
    out = []
    given = iter(residuals)
    for p in plans:
        stated = {
            (o.arm, o.baseline): (o.confidence, o.host_diff_ms, o.host_ci_low_ms, o.host_ci_high_ms)
            for o in overhead
            if o.world_size == p.layout.world
        }
        family = max((o.family for o in overhead), default=1)
        residual = next(given) if p.test is not None else None
        out.append(decompose(p.layout, p.points, stated, p.first_stage, residual, p.peaks, family))
    return out
