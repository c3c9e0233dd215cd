"""Every sentence that judges: a comparison's verdict, its one-line answer, the host-cost
difference and whether host work reaches the step.

    oneliner(overhead, "GPU(s)")   # "lightning vs native, 1 GPU: 1.81% slower (7 runs a side; ..."
    host_sentence(...)             # "fabric spends 0.120 ms more host CPU per step than native ..."

The numbers come from compare.analysis (and the statistics modules); this module only says
what they mean, so that one wording rule serves the text, markdown and HTML reports. The full
sentence of an interval is `intervals.interval_line`'s (pinned by the statistics tests).
"""

from __future__ import annotations

from common.result import HOST_BOUND_BELOW
from compare import intervals
from compare.rows import Overhead


def where(world_size: int, unit: str) -> str:
    """'1 GPU', '2 GPUs', '2 CPU ranks' from a world size and compare's unit ('GPU(s)')."""
    name = unit.removesuffix("(s)")
    return f"{world_size} {name}{'' if world_size == 1 else 's'}"


def comparison(arm: str, baseline: str, iv: intervals.ArmInterval) -> str:
    """The full verdict of one comparison: slower/faster only when the interval excludes zero,
    else why not (with the interval's half-width and the smallest detectable effect)."""
    return intervals.interval_line(arm, baseline, iv)


def sides(o: Overhead) -> str:
    """'7 runs a side', or '7/6 runs' when the arm and baseline have different counts."""
    if o.arm_runs == o.baseline_runs:
        return f"{o.arm_runs} run{'s' if o.arm_runs != 1 else ''} a side"
    return f"{o.arm_runs}/{o.baseline_runs} runs"


def oneliner(o: Overhead, unit: str) -> str:
    """One comparison in one line, as pyperf's compare_to gives it: the verdict, the runs, the
    interval (pyperf's oneliner: 'x: 1.81% slower')."""
    head = f"{o.arm} vs {o.baseline}, {where(o.world_size, unit)}:"
    if not o.verdict_possible or o.ci_low is None or o.ci_high is None:
        return f"{head} {o.percent:+.2f}% ({sides(o)}), no verdict: {o.no_verdict_reason}"
    ci = f"{intervals.ci_label(o.confidence, o.family)} {o.ci_low:+.2f}..{o.ci_high:+.2f}%"
    if o.ci_low > 0:
        return f"{head} {o.percent:.2f}% slower ({sides(o)}; {ci})"
    if o.ci_high < 0:
        return f"{head} {-o.percent:.2f}% faster ({sides(o)}; {ci})"
    return f"{head} no difference detectable, {o.percent:+.2f}% ({sides(o)}; {ci})"


def host_oneliner(o: Overhead, unit: str) -> str | None:
    """The host-cost difference of one comparison in one line (None: not recorded)."""
    if o.host_verdict is None or o.host_diff_ms is None:
        return None
    head = f"host CPU, {o.arm} vs {o.baseline}, {where(o.world_size, unit)}:"
    low, high = o.host_ci_low_ms, o.host_ci_high_ms
    if low is None or high is None:
        return f"{head} {o.host_diff_ms:+.3f} ms/step, no verdict: {o.host_no_verdict}"
    label = intervals.ci_label(o.host_confidence, o.host_family)
    ci = f"{label} {low:+.3f}..{high:+.3f} ms"
    if low > 0 or high < 0:
        words = "more" if low > 0 else "less"
        return f"{head} {abs(o.host_diff_ms):.3f} ms/step {words} ({ci})"
    return f"{head} no difference detectable, {o.host_diff_ms:+.3f} ms/step ({ci})"


def host_sentence(arm: str, baseline: str, iv: intervals.ArmInterval, level_ms: float) -> str:
    """Host ms per step, arm against baseline; the interval is on the ratio, shown in ms at
    the baseline's level (`level_ms`, its geometric mean)."""

    def ms(pct: float | None) -> float:
        return level_ms * (pct or 0.0) / 100.0

    if not iv.verdict_possible or iv.ci_low is None or iv.ci_high is None:
        return (
            f"{arm} vs {baseline} host CPU per step: {ms(iv.percent):+.3f} ms;"
            f" no verdict: {iv.no_verdict_reason}"
        )
    label = intervals.ci_label(iv.confidence, iv.family)
    span = f"{label} {ms(iv.ci_low):+.3f}..{ms(iv.ci_high):+.3f} ms"
    words = "more" if iv.ci_low > 0 else "less" if iv.ci_high < 0 else None
    if words is None:
        return (
            f"no difference detectable in host CPU per step between {arm} and {baseline}"
            f" ({ms(iv.percent):+.3f} ms; {span})"
        )
    return (
        f"{arm} spends {abs(ms(iv.percent)):.3f} ms {words} host CPU per step than"
        f" {baseline} ({iv.percent:+.2f}%; {span})"
    )


def slack_words(busy: float | None) -> str:
    """Whether extra host work reaches the step time, from the GPU's busy share."""
    if busy is None:
        return (
            "GPU busy share not recorded (profiled steps give it): whether extra host work"
            " reaches the step time is unknown here; the host-slack plan measures it"
        )
    if busy < HOST_BOUND_BELOW:
        return (
            f"host-bound: the GPU idles {1 - busy:.0%} of the step waiting for the host, so"
            " extra host work (and a difference in host ms) reaches the step time"
        )
    return (
        f"GPU-bound: the GPU is busy {busy:.0%} of the step and the host keeps ahead, so host"
        " work is hidden until it exceeds the step (host ms then includes spinning waits"
        " for the GPU)"
    )
