"""Every sentence that judges: a comparison's verdict, its one-line answer, the host-cost
difference and whether host work reaches the step.

    oneliner(overhead, "GPU(s)")   # "lightning vs native, 1 GPU: 1.81% slower (7 runs a side; ..."
    host_sentence(...)             # "fabric spends 0.120 ms more host CPU per step than native ..."

The numbers come from compare.analysis (and the statistics modules); this module only says
what they mean, so that one wording rule serves the text, markdown and HTML reports. Energy's
sentences and the interleaved mode's verdict are here too.
"""

from __future__ import annotations

import math

from common.result import HOST_BOUND_BELOW
from compare.rows import EnergyDifference, Overhead
from stats import intervals
from stats.processes import ProcessInterval

# What the report and the overhead figure say where there is no comparison to make
NO_OVERHEAD = "no overhead computed: no world size has runs of two arms"


def where(world_size: int, unit: str) -> str:
    """'1 GPU', '2 GPUs', '2 CPU ranks' from a world size and compare's unit ('GPU(s)')."""
    name = unit.removesuffix("(s)")
    return f"{world_size} {name}{'' if world_size == 1 else 's'}"


def comparison(arm: str, baseline: str, iv: intervals.ArmInterval) -> str:
    """The full verdict of one comparison: slower/faster only when the interval excludes zero,
    else why not (with the interval's half-width and the smallest detectable effect)."""
    return interval_line(arm, baseline, iv)


def estimate(value: float | None, spec: str, unit: str = "") -> str:
    """A point estimate ('+1.23%'), or 'no estimate' where the statistics have none (no complete
    block gives NaN, which a reader must never see as a number)."""
    if value is None or not math.isfinite(value):
        return "no estimate"
    return f"{value:{spec}}{unit}"


def runs_a_side(arm_runs: int, baseline_runs: int, arm: str, baseline: str) -> str:
    """'7 runs a side' (1 run), or '7 fabric, 6 native runs' when the counts differ."""
    if arm_runs == baseline_runs:
        return f"{arm_runs} run{'s' if arm_runs != 1 else ''} a side"
    return f"{arm_runs} {arm}, {baseline_runs} {baseline} runs"


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
        point = estimate(o.percent, "+.2f", "%")
        return f"{head} {point} ({sides(o)}), no verdict: {o.no_verdict_reason}"
    ci = f"{ci_label(o.confidence, o.family)} {o.ci_low:+.2f}..{o.ci_high:+.2f}%"
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
        diff = estimate(o.host_diff_ms, "+.3f", " ms/step")
        return f"{head} {diff}, no verdict: {o.host_no_verdict}"
    label = ci_label(o.host_confidence, o.host_family)
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
            f"{arm} vs {baseline} host CPU per step: {estimate(ms(iv.percent), '+.3f', ' ms')};"
            f" no verdict: {iv.no_verdict_reason}"
        )
    label = ci_label(iv.confidence, iv.family)
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


def ci_label(confidence: float, family: int) -> str:
    """'95% CI', or '98.33% CI (Holm-adjusted over 3 comparisons)'."""
    if family == 1:
        return f"{confidence:.0%} CI"
    return f"{confidence:.2%} CI (Holm-adjusted over {family} comparisons)"


def interval_line(arm: str, baseline: str, iv: intervals.ArmInterval) -> str:
    """One sentence: slower/faster only when the interval excludes zero, else why not."""
    sides = runs_a_side(iv.arm_runs, iv.baseline_runs, arm, baseline)
    low, high = iv.ci_low, iv.ci_high
    if low is None or high is None:  # no verdict
        return (
            f"{arm} vs {baseline}: point estimate {estimate(iv.percent, '+.2f', '%')} ({sides});"
            f" no verdict: {iv.no_verdict_reason}"
        )
    detect = (
        f"smallest detectable {iv.min_detectable_percent:.2f}%"
        if iv.min_detectable_percent is not None
        else f"smallest detectable: {iv.min_detectable_note or 'not shown'}"
    )
    level = ci_label(iv.confidence, iv.family)
    facts = f"{level} {low:.2f}..{high:.2f}%, {sides}, half-width {iv.half_width:.2f} pp, {detect}"
    if low > 0:
        return f"{arm} is {iv.percent:.2f}% slower than {baseline} ({facts})"
    if high < 0:
        return f"{arm} is {-iv.percent:.2f}% faster than {baseline} ({facts})"
    return f"No difference detectable between {arm} and {baseline} ({iv.percent:+.2f}%; {facts})"


def energy_sentence(arm: str, baseline: str, iv: intervals.ArmInterval, per: str) -> str:
    """One sentence: more/less energy per unit of work (`per`: image, token) only when the
    interval excludes zero."""
    sides = runs_a_side(iv.arm_runs, iv.baseline_runs, arm, baseline)
    if not iv.verdict_possible:
        return (
            f"{arm} vs {baseline} energy per {per}: {estimate(iv.percent, '+.2f', '%')} ({sides});"
            f" no verdict: {iv.no_verdict_reason}"
        )
    facts = (
        f"{ci_label(iv.confidence, iv.family)} {iv.ci_low:+.2f}..{iv.ci_high:+.2f}%,"
        f" {sides},"
        f" half-width {iv.half_width:.2f} pp"
    )
    if iv.significant:
        words = "more" if iv.ci_low > 0 else "less"  # type: ignore[operator]
        return (
            f"{arm} uses {abs(iv.percent):.2f}% {words} GPU energy per {per} than {baseline}"
            f" ({facts})"
        )
    return (
        f"No difference detectable in GPU energy per {per} between {arm} and {baseline}"
        f" ({iv.percent:+.2f}%; {facts})"
    )


def energy_oneliner(e: EnergyDifference, unit: str) -> str | None:
    """The energy difference of one comparison in one line, as the report's answer gives time's
    (None: not measured, so the answer says nothing of it)."""
    if e.percent is None:
        return None
    head = f"energy per {e.per}, {e.arm} vs {e.baseline}, {where(e.world_size, unit)}:"
    runs = runs_a_side(e.arm_runs, e.baseline_runs, e.arm, e.baseline)
    if e.ci_low is None or e.ci_high is None:
        return (
            f"{head} {estimate(e.percent, '+.2f', '%')} ({runs}), no verdict: {e.no_verdict_reason}"
        )
    ci = f"{ci_label(e.confidence, e.family)} {e.ci_low:+.2f}..{e.ci_high:+.2f}%"
    if e.ci_low > 0 or e.ci_high < 0:
        words = "more" if e.ci_low > 0 else "less"
        return f"{head} {abs(e.percent):.2f}% {words} ({runs}; {ci})"
    return f"{head} no difference detectable, {e.percent:+.2f}% ({runs}; {ci})"


def families_line(families: list[str], confidence: float = intervals.CONFIDENCE) -> str | None:
    """What a report's separate families of verdicts (step time, host CPU, energy: each
    Holm-adjusted on its own) mean together, or None for one family: each keeps a false
    verdict to 1 - confidence, so at least one false line among k has a chance up to
    k x (1 - confidence) (Bonferroni's bound, whatever the dependence between them: they come
    from the same runs; three at 95%: 15%)."""
    if len(families) < 2:
        return None
    alpha = 1.0 - confidence
    together = min(1.0, alpha * len(families))
    return (
        f"{len(families)} families of verdicts here ({', '.join(families)}), each"
        f" Holm-adjusted on its own to a {alpha:.0%} chance of a false verdict: the chance that"
        f" at least one line above is false is up to {together:.0%} ({len(families)} x"
        f" {alpha:.0%})"
    )


def interleaved_verdict(iv: ProcessInterval, arm: str, baseline: str) -> str:
    """'no verdict: WHY' without an interval over processes, else slower / faster / no
    difference detectable."""
    if iv.half is None:
        return f"no verdict: {iv.no_verdict_reason}"
    if iv.estimate - iv.half > 0:
        return f"{arm} is slower than {baseline}"
    if iv.estimate + iv.half < 0:
        return f"{arm} is faster than {baseline}"
    return "no difference detectable"
