"""Per-run flags: host-bound runs, unsynchronised parameters, per-step syncs, slow ranks.

    warnings, notes = run_flags(runs)
    slow = slow_ranks(runs)      # stats.slow_ranks applied to every run's ranks
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from common.result import OriginalResult
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
        if r.gpu_activity is not None and r.gpu_activity.host_bound:
            warnings.append(f"{run.label}: host-bound (GPU busy {r.gpu_activity.gpu_busy_fraction:.0%}):"
                            " the GPU waits for the host, so per-step framework cost shows up directly in step time")
        if r.lightning is not None and r.lightning.per_step_sigterm_sync:
            sigterm.setdefault(r.lightning.version, []).append(run.label)
    for version, labels in sigterm.items():
        notes.append(f"Lightning {version} broadcasts a SIGTERM flag and reads it with .item() every step"
                     f" (a host-device sync per step): {', '.join(labels)}")
    if any(run.original for run in runs):
        notes.append(f"Results marked {ORIGINAL_LABEL} have no per-step times: their step time is the wall-clock"
                     " mean (milliseconds_per_step), their throughput is wall-clock, they have no p5/p95, warm-up"
                     " or first-step time, and no CI over steps is available for them")
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
            found.append(SlowRank(run.label, run.implementation, ranks[i].rank, ranks[i].hostname,
                                  medians[i], stats.median(medians)))
    return found
