"""Where does each runner's host time per step go? Compares two cProfile dumps of the timed steps.

    python -m native ARGS --pyprofile /tmp/native.pstats --output /tmp/n.json
    python -m lightning_impl ARGS --pyprofile /tmp/lightning.pstats --output /tmp/l.json
    python -m benchmarks.host_profile /tmp/native.pstats /tmp/lightning.pstats [--top 15]

Each dump covers exactly the timed steps of rank 0 (`common/steps.py`); the step count is read
from the dump (calls of StepHooks.after_step). Per step it prints the Python calls and the host
time spent *in* each group of code (cProfile's own time, callees excluded): torch's C++ entry
points (where kernels are enqueued; backward is one call that waits for the autograd engine),
torch's Python layer, Lightning, this suite, and everything else. cProfile slows every Python
call by a roughly constant amount, so absolute times are inflated, most in call-heavy code:
read the call counts and the differences, not the totals, as the finding.
"""

from __future__ import annotations

import argparse
import pstats
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

SUITE = Path(__file__).resolve().parent.parent
GROUPS = [
    "torch C++ entry points",
    "torch Python",
    "Lightning",
    "this suite",
    "other Python",
    "other C builtins",
]


def group_of(filename: str, funcname: str) -> str:
    """Which kind of code a profiled function is."""
    if filename == "~":  # a builtin or C extension method
        return "torch C++ entry points" if "torch" in funcname else "other C builtins"
    path = filename.replace("\\", "/")
    if "/lightning/" in path or "/lightning_fabric/" in path or "/pytorch_lightning/" in path:
        return "Lightning"
    if "/torch/" in path or "/torchvision/" in path:
        return "torch Python"
    try:
        rel = Path(path).resolve().relative_to(SUITE)
    except ValueError:
        return "other Python"
    return (
        "this suite"
        if rel.parts and rel.parts[0] in ("common", "native", "lightning_impl")
        else "other Python"
    )


def load(path: str) -> tuple[dict, int]:
    """(stats dict, timed steps) from one dump."""
    stats = pstats.Stats(
        path
    ).stats  # (file, line, func) -> (primitive calls, calls, tottime, cumtime, callers)
    steps = [
        nc
        for (file, _, func), (_, nc, *_) in stats.items()
        if func == "after_step" and file.endswith("steps.py")
    ]
    if not steps or steps[0] < 1:
        raise SystemExit(f"{path}: no StepHooks.after_step calls; is it a --pyprofile dump?")
    return stats, steps[0]


def per_step(
    stats: dict, steps: int, key: Callable[[tuple[str, int, str]], str]
) -> dict[str, tuple[float, float]]:
    """key(function) -> (calls per step, host ms per step), summed over the functions of a key."""
    acc: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for function, (_, nc, tt, *_rest) in stats.items():
        entry = acc[key(function)]
        entry[0] += nc
        entry[1] += tt
    return {k: (v[0] / steps, v[1] * 1e3 / steps) for k, v in acc.items()}


def by_group(stats: dict, steps: int) -> dict[str, tuple[float, float]]:
    """group -> (calls per step, host ms per step)."""
    return per_step(stats, steps, lambda function: group_of(function[0], function[2]))


def label(key: tuple[str, int, str]) -> str:
    """A short name for a profiled function."""
    file, line, func = key
    if file == "~":
        return func
    parts = Path(file).parts
    for anchor in ("lightning", "torchvision", "torch", "common", "native", "lightning_impl"):
        if anchor in parts:  # the innermost: site-packages/torch, not an /opt/torch/ above it
            at = len(parts) - 1 - parts[::-1].index(anchor)
            return f"{'/'.join(parts[at:])}:{line}({func})"
    return f"{Path(file).name}:{line}({func})"


def main(argv: list[str] | None = None) -> int:
    """Print the per-group table and the functions that differ most."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("baseline", help="cProfile dump of the baseline runner (e.g. native)")
    p.add_argument("other", help="cProfile dump of the runner to compare (e.g. Lightning)")
    p.add_argument(
        "--names", default="native,lightning", help="column names (default: native,lightning)"
    )
    p.add_argument(
        "--top", type=int, default=15, help="how many differing functions to list (default 15)"
    )
    args = p.parse_args(argv)
    names = args.names.split(",")
    if len(names) != 2:
        p.error("--names takes two comma-separated names")
    (sa, ta), (sb, tb) = load(args.baseline), load(args.other)
    ga, gb = by_group(sa, ta), by_group(sb, tb)
    a, b = names
    print(
        f"Host time per timed step under cProfile ({a}: {ta} steps, {b}: {tb} steps);"
        " own time, callees excluded\n"
    )
    print(f"| code | {a} calls | {b} calls | {a} ms | {b} ms | {b} - {a} ms |")
    print("|---|---:|---:|---:|---:|---:|")
    tot = [0.0, 0.0, 0.0, 0.0]
    for g in GROUPS:
        ca, ma = ga.get(g, (0.0, 0.0))
        cb, mb = gb.get(g, (0.0, 0.0))
        tot = [tot[0] + ca, tot[1] + cb, tot[2] + ma, tot[3] + mb]
        print(f"| {g} | {ca:,.0f} | {cb:,.0f} | {ma:.2f} | {mb:.2f} | {mb - ma:+.2f} |")
    print(
        f"| **total** | {tot[0]:,.0f} | {tot[1]:,.0f} | {tot[2]:.2f} | {tot[3]:.2f}"
        f" | {tot[3] - tot[2]:+.2f} |"
    )

    fa, fb = per_step(sa, ta, label), per_step(sb, tb, label)
    diffs = sorted(
        set(fa) | set(fb), key=lambda k: -abs(fb.get(k, (0, 0))[1] - fa.get(k, (0, 0))[1])
    )
    print(f"\nFunctions whose own time per step differs most ({b} - {a})\n")
    print(f"| function | {a} calls | {b} calls | {a} ms | {b} ms | difference ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for k in diffs[: args.top]:
        ca, ma = fa.get(k, (0.0, 0.0))
        cb, mb = fb.get(k, (0.0, 0.0))
        print(f"| `{k}` | {ca:.1f} | {cb:.1f} | {ma:.3f} | {mb:.3f} | {mb - ma:+.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
