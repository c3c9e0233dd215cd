"""The schedules: which run comes next, over one recorder (experiment.recorder).

    WarmUp(s, recorder, reporter, one).run()    # warm-up rounds, then settling
    Blocks(s, recorder, reporter, one).run()    # ABBA / Williams blocks, Stein's rule, budget

- WarmUp: --warmup-runs rounds of every arm, not counted (a fresh machine's first runs are
  slower), each round in an order that ends with the baseline (stats.orders.warmup_order);
  then more uncounted runs of the baseline until stats.settling.host_settled, within
  --settle-minutes of warm-up in all. The manifest's `settling` says how it ended.
- Blocks: block k runs the arms in stats.orders.block_order's order: for two arms the given
  order when k is odd, reversed when even (ABBA: a linear drift favours no arm); for more, a
  cycle of Williams orders in which every arm follows every arm (itself too, across a block's
  boundary) equally often, so a run that slows the next one favours no arm. Block 1 starts
  with the baseline, which the warm-up ended with. Blocks run until --repeats, or Stein's
  two-stage rule (stats.stopping, with --target-half-width) says every arm has the complete
  blocks it needs, or --budget-minutes would be exceeded by another block; with 3 or more
  arms the cycle's blocks are ordered so that every prefix of it is as balanced as chained
  blocks allow (stats.orders). In a fixed design, each block that lost a run is then run
  again, once, in its order (a make-up block). The manifest's `stopping` says why it stopped,
  the make-up blocks and why, and the balance for carry-over the blocks reached. The running
  estimate follows every counted run.
The in-process plan's processes are a third schedule (experiment.in_process). A schedule
decides; `one` (experiment.run.Experiment.one) runs, records and reports each run.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from common.manifest import ManifestMakeup, ManifestRun, ManifestSettling, ManifestStopping
from compare import api
from experiment.labelled_arms import LabelledArm
from experiment.recorder import Recorder
from experiment.reporter import Reporter, compare_error
from experiment.settings import PROG, Settings
from stats import distributions, orders, settling, stopping

# Runs one run, records and reports it (block, position, arm, progress text, warm-up?);
# RunRefused when it exited 2.
RunOne = Callable[[int, int, LabelledArm, str, bool], ManifestRun]


class RunRefused(Exception):
    """A run exited 2 (a usage error, shown in its own line): the experiment stops."""


class WarmUp:
    """The warm-up rounds and the baseline's settling runs, before block 1."""

    def __init__(self, s: Settings, recorder: Recorder, reporter: Reporter, one: RunOne) -> None:
        self.s, self.recorder, self.reporter, self.one = s, recorder, reporter, one

    @property
    def runs(self) -> list[ManifestRun]:
        """The runs recorded so far."""
        return self.recorder.runs

    @property
    def ended_s(self) -> dict[int, float]:
        """Run index -> time.monotonic() at its end."""
        return self.recorder.ended_s

    def run(self) -> None:
        """Every arm --warmup-runs times, each round ending with the baseline, then settling
        (when asked)."""
        s = self.s
        warm_start = time.monotonic()
        round_order = [s.arms[i] for i in orders.warmup_order(len(s.arms))]
        for k in range(1, s.warmup_runs + 1):
            for position, arm in enumerate(round_order, 1):
                self.one(k, position, arm, f"w{k}/{s.warmup_runs}", True)
        if s.warmup_runs and s.settle_minutes > 0:
            self.settle(warm_start)

    # --- settling (stats.settling) -----------------------------------------------
    def settled(self) -> settling.Settling:
        """settling.host_settled on the baseline's warm-up runs so far (run medians, the
        medians of the halves of their timed steps, their end times, the GPU's temperature),
        judged over a third of --settle-minutes, at most a minute."""
        base = self.s.arms[0].label
        done = [r for r in self.runs if r.warmup is not None and r.label == base and r.result]
        try:
            runs = api.load_runs([self.s.out / r.result for r in done])  # type: ignore[operator]
        except Exception as error:  # a warm-up result compare cannot read: not settled
            return settling.Settling(
                False, f"cannot read a warm-up result: {compare_error(error)}", len(done)
            )
        warm = []
        for record, run in zip(done, runs):
            series = run.step_series_ms
            first, second, _ = (
                distributions.halves_change(series)
                if series and len(series) >= 2
                else (run.pace_median_ms, run.pace_median_ms, 0.0)
            )
            ended = self.ended_s[record.index]
            temperature = run.values.gpu_temperature_c
            warm.append(settling.WarmupRun(run.pace_median_ms, first, second, ended, temperature))
        lookback = settling.lookback_for([r.seconds for r in done], self.s.settle_minutes)
        return settling.host_settled(warm, lookback_s=lookback)

    def settle(self, started: float) -> None:
        """More uncounted warm-up runs of the baseline until the host has settled, within
        --settle-minutes of warm-up in all (from `started`); the manifest's `settling`."""
        s, base = self.s, self.s.arms[0]
        k = s.warmup_runs
        warmup_s = time.monotonic() - started  # every arm's warm-up rounds
        while True:
            state = self.settled()
            spent = time.monotonic() - started
            if state.settled:
                break
            last = [r for r in self.runs if r.warmup is not None and r.label == base.label]
            if last and last[-1].status == "failed":
                state = settling.Settling(False, "a warm-up run of the baseline failed", state.runs)
                break
            mean = sum(r.seconds for r in last) / len(last) if last else 0.0
            if spent + mean > s.settle_minutes * 60:
                break
            k += 1
            self.one(k, 1, base, f"settling {k - s.warmup_runs}", True)
        ok = [
            r.seconds
            for r in self.runs
            if r.warmup is not None and r.label == base.label and r.status != "failed"
        ]
        too_few = state.seen == "too-few"  # the rule could not judge yet: was the bound short?
        short = settling.bound_advice(ok, s.settle_minutes, warmup_s) if too_few else ""
        record = ManifestSettling(
            settled=state.settled,
            seconds=round(time.monotonic() - started, 1),
            runs=state.runs,
            extra_runs=k - s.warmup_runs,
            max_minutes=s.settle_minutes,
            reason=f"{state.reason}; {short}" if short else state.reason,
            seen=state.seen,
        )
        self.recorder.amend(settling=record)
        self.reporter.settled(record)


def initial_stopping(s: Settings) -> tuple[stopping.StoppingRule | None, ManifestStopping | None]:
    """Stein's rule of --target-half-width, and the manifest's `stopping` from the start
    (compare reads the rule); (None, None) for fixed --repeats."""
    if s.target_half_width is None:
        return None, None
    rule = stopping.StoppingRule(s.target_half_width, s.first_stage_blocks)
    return rule, ManifestStopping(**rule.to_manifest(), max_blocks=s.repeats)  # type: ignore


class Blocks:
    """The counted runs: ABBA (two arms) or carry-over-balanced blocks (more) until --repeats,
    Stein's rule or the budget stops them; then, in a fixed design, a make-up block for each
    block that lost a run."""

    def __init__(self, s: Settings, recorder: Recorder, reporter: Reporter, one: RunOne) -> None:
        self.s, self.recorder, self.reporter, self.one = s, recorder, reporter, one
        self.rule, _ = initial_stopping(s)
        self.counted = 0
        self.block_times: list[float] = []
        self.orders: list[tuple[int, ...]] = []  # each block's order, as run

    def run(self) -> None:
        """Every block, the estimate after each run, the rule after each block; the make-up
        blocks; then the manifest's `stopping` says why it stopped."""
        s = self.s
        reason = f"{s.repeats} block(s) done"
        counts: dict[str, object] = {}  # complete and needed blocks per arm (the rule's last say)
        for block in range(1, s.repeats + 1):
            if self.over_budget():
                reason = f"the budget of {s.budget_minutes:g} min would be exceeded by another"
                reason += " block"
                break
            # ABBA for two arms; Williams orders balanced for carry-over for more
            self.run_block(block, orders.block_order(len(s.arms), block))
            decision = self.decide(block) if self.rule is not None else None
            if decision is not None:
                print(f"    stopping rule: {decision.reason}", flush=True)
                counts = {
                    "complete_blocks": decision.complete_blocks,
                    "blocks_needed": decision.needed,
                }
                if decision.stop:
                    reason = decision.reason
                    break
        finished = reason == f"{s.repeats} block(s) done"  # not stopped by the budget
        makeup = self.make_up() if self.rule is None and finished else []
        print(f"{PROG}: stopped: {reason}", flush=True)
        rule = {} if self.rule is None else self.rule.to_manifest()
        before = 0 if s.warmup_runs else None  # the warm-up rounds end with the baseline
        record = ManifestStopping(
            **rule,  # type: ignore[arg-type]
            **counts,  # type: ignore[arg-type]
            reason=reason,
            max_blocks=s.repeats,
            budget_minutes=s.budget_minutes,
            makeup=makeup or None,
            cycle_blocks=len(orders.cycle(len(s.arms))),
            carry_over_imbalance=orders.imbalance(
                orders.transitions_of(self.orders, len(s.arms), before)
            )[0],
        )
        self.recorder.amend(stopping=record)

    def over_budget(self) -> bool:
        """Whether another block, at the mean block time so far, would end after
        --budget-minutes."""
        s = self.s
        if s.budget_minutes is None or not self.block_times:
            return False
        mean = sum(self.block_times) / len(self.block_times)
        return time.monotonic() - self.reporter.start + mean > s.budget_minutes * 60

    def run_block(self, block: int, order: tuple[int, ...]) -> None:
        """One block's runs in this order (indices into the arms), the running estimate after
        each."""
        s = self.s
        adaptive = s.target_half_width is not None
        planned = s.repeats * len(s.arms)
        total = f"<={planned}" if adaptive or s.budget_minutes else str(planned)
        t0 = time.monotonic()
        self.orders.append(order)
        for position, arm in enumerate((s.arms[i] for i in order), 1):
            self.counted += 1
            self.one(block, position, arm, f"{self.counted}/{total}", False)
            estimate = self.reporter.estimate()
            self.recorder.signals.check()
            print(self.reporter.describe(estimate), flush=True)
        self.block_times.append(time.monotonic() - t0)

    def make_up(self) -> list[ManifestMakeup]:
        """After the planned blocks of a fixed design, each block that lost a run (it failed
        or timed out) runs again, once, in its own order, as block --repeats + 1, + 2, ...: a
        block missing one arm drops out of every comparison with that arm and of the
        decomposition, whose residual then loses a block, and with it, below 5 of each order,
        its time term. Not for an arm none of whose counted runs succeeded (it is broken, not
        unlucky), nor past --budget-minutes."""
        s = self.s
        counted = [r for r in self.recorder.runs if r.warmup is None]
        works = {r.label for r in counted if r.status == "ok"}
        done: list[ManifestMakeup] = []
        for lost in range(1, s.repeats + 1):
            failed = [r for r in counted if r.block == lost and r.status == "failed"]
            if not failed or not all(r.label in works for r in failed):
                continue
            if self.over_budget():
                print(f"{PROG}: no make-up block for block {lost}: the budget", flush=True)
                break
            block = s.repeats + len(done) + 1
            why = ", ".join(f"{r.label} (exit {r.exit_status})" for r in failed)
            say = f"{PROG}: block {block} makes up block {lost}: its run of {why} failed"
            print(say, flush=True)
            self.run_block(block, self.orders[lost - 1])
            done.append(ManifestMakeup(block=block, replaces=lost, reason=f"a run failed: {why}"))
        return done

    # --- Stein's rule (stats.stopping) ---------------------------------------------
    def decide(self, block: int) -> stopping.StopDecision | None:
        """Stein's rule after a block, on the counted successful runs; None when compare cannot
        read them or the rule refuses their numbers (said, and the experiment goes on)."""
        if self.rule is None:
            return None
        others = [a.label for a in self.s.arms[1:]]
        try:
            runs, _ = api.load([self.s.out])
            return stopping.stopping_decision(
                api.run_points(runs), self.s.arms[0].label, others, self.rule, block, self.s.repeats
            )
        except Exception as error:  # a bug in compare too: shown, and the blocks go on
            print(f"    stopping rule: compare failed: {compare_error(error)}", flush=True)
            return None
