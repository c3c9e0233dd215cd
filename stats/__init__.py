"""Statistics for the comparison: pure functions over numbers, one number per run.

    from stats import comparison, settling, stopping
    iv = comparison.compare_arms(points, "fabric", "native")   # one intervals.RunPoint a run

The modules, from the floor up:

    distributions  medians, Student's t, the normal and chi distributions, a run's step series
    intervals      RunPoint, ArmInterval, an arm's level (t or distribution-free), detectability
    run_level      plain file lists: Welch's interval with Hsu's df, refused unless interleaved
    blocks         pairing runs into blocks: per-block log ratios, the time term, first stage
    stopping       Stein's two-stage rule: when the experiment stops, and its final interval
    comparison     compare_arms: the strongest method the records allow
    holm           many comparisons: Holm's step-down adjustment
    settling       whether the host has settled (drift or noise) from the warm-up runs
    orders         the arms' order in each block: ABBA, Williams orders balanced for carry-over
    processes      the interleaved mode's processes as the unit, with a build-order term

compare and experiment import it; it imports numpy and common.errors only: no torch, no
compare, no experiment, no Lightning (tests/test_layers.py holds it to that).
"""
