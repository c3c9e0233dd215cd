"""Per-run flags: host-bound runs, unsynchronised parameters, per-step syncs, slow ranks, steady state.

    warnings, notes = run_flags(runs)
    slow = slow_ranks(runs)        # stats.slow_ranks applied to every run's ranks
    steady = steady_states(runs)   # first vs second half of every run's timed steps
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from common.result import HOST_BOUND_BELOW, OriginalResult, gpu_share
from compare import stats
from compare.load import ORIGINAL_LABEL, Run


@dataclass(frozen=True)
class SlowRank:
    """A rank whose median step time stands out above the other ranks' of its run."""

    file: str
    implementation: str
    rank: int
    hostname: str
    median_ms: float
    run_median_ms: float  # median of all ranks' medians


def run_flags(runs: Sequence[Run]) -> tuple[list[str], list[str]]:
    """Per-run warnings (host-bound, unsynchronised parameters) and notes (per-step syncs, originals)."""
    warnings, notes = [], []
    sigterm: dict[str, list[str]] = {}
    for run in runs:
        r = run.result
        if not r.parameters_synchronized:
            warnings.append(f"{run.label}: parameters are NOT synchronised across ranks"
                            f" (max checksum difference {r.parameter_checksum_max_difference:g})")
        if isinstance(r, OriginalResult):
            continue
        if r.environment.diagnostics:
            switches = ", ".join(f"{k}={v}" for k, v in r.environment.diagnostics.items())
            warnings.append(f"{run.label}: ran with diagnostic switches ({switches}): a diagnosis, not a measurement")
        # The GPU's busy time per step over the median timed step (older results: from their
        # profiled window), not the profiled window's busy fraction: the profiler slows the host.
        share = None if r.gpu_activity is None else gpu_share(r.gpu_activity, r.step_time_ms.median)
        if share is not None and share < HOST_BOUND_BELOW:  # None: unknown, no verdict
            warnings.append(f"{run.label}: host-bound (GPU busy {share:.1%} of the timed step): the GPU"
                            " waits for the host, so per-step framework cost shows up directly in step time")
        if r.lightning is not None and r.lightning.per_step_sigterm_sync:
            sigterm.setdefault(r.lightning.version, []).append(run.label)
    for version, labels in sigterm.items():
        notes.append(f"Lightning {version} broadcasts a SIGTERM flag and reads it with .item() every step"
                     f" (a host-device sync per step): {', '.join(labels)}")
    if any(run.original for run in runs):
        notes.append(f"Results marked {ORIGINAL_LABEL} have no per-step times: their step time is the wall-clock"
                     " mean (milliseconds_per_step), their throughput is wall-clock, they have no p5/p95, warm-up"
                     " or first-step time; comparisons with them use every run's wall-clock mean on both sides")
    return warnings, notes


def slow_ranks(runs: Sequence[Run]) -> list[SlowRank]:
    """Ranks flagged by stats.slow_ranks in every run that has per-rank times."""
    found = []
    for run in runs:
        if isinstance(run.result, OriginalResult):
            continue
        ranks = run.result.ranks
        medians = [rank.step_time_ms.median for rank in ranks]
        for i in stats.slow_ranks(medians):
            found.append(SlowRank(run.label, run.group, ranks[i].rank, ranks[i].hostname,
                                  medians[i], stats.median(medians)))
    return found


@dataclass(frozen=True)
class SteadyState:
    """A run's median step in the first and the second half of its timed steps (None: no step times)."""

    file: str
    implementation: str
    world_size: int
    first_half_median_ms: float | None
    second_half_median_ms: float | None
    change_percent: float | None  # second half against first, in % of the first

    @property
    def steady(self) -> bool:
        """False when the halves differ by more than stats.STEADY_STATE_TOLERANCE."""
        return self.change_percent is None or abs(self.change_percent) <= stats.STEADY_STATE_TOLERANCE * 100


def steady_states(runs: Sequence[Run]) -> list[SteadyState]:
    """First vs second half of each run's per-step series (slowest rank per step)."""
    found = []
    for run in runs:
        series = run.step_series_ms
        halves = stats.halves_change(series) if series is not None and len(series) >= 2 else (None, None, None)
        found.append(SteadyState(run.label, run.group, run.world_size, *halves))
    return found


def steady_state_warnings(states: Sequence[SteadyState]) -> list[str]:
    """A warning for each run whose timed steps were still speeding up or slowing down."""
    return [f"{s.file}: not in steady state: the median step of the second half of the timed steps is"
            f" {s.change_percent:+.1f}% against the first half's (limit ±{stats.STEADY_STATE_TOLERANCE:.0%});"
            " raise --warmup-steps" for s in states if not s.steady]
