"""Every committed report's comparisons, as numbers: the fixture that pins them across a change.

    PYTHONPATH=$PWD python tests/report_numbers.py --record   # tests/data/report_numbers.json
    PYTHONPATH=$PWD python tests/report_numbers.py --reports  # rewrites the reports it names

`tests/test_compare_numbers.py` recomputes each group's overhead % with the code of the day and
checks it against the fixture recorded before the report was redesigned (issue 31): a change to
the presentation must not move a number. The groups are the reports committed under results/:
every experiment folder (its plan's compare options, as benchmarks/h200_report.sh passes them),
the file groups benchmarks/h200_report.sh reports, and the CPU scaling sweep in
results/cpu-gloo-weak/ (slurm/sweep.sh's layout). Record again only for a change that is meant
to move a number (a new method, say), and say which numbers moved in its commit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "data" / "report_numbers.json"
H200 = "results/h200"


def _files(folder: str, *names: str) -> list[str]:
    """Paths of result files in one results/h200 folder."""
    return [f"{H200}/{folder}/{name}.json" for name in names]


# benchmarks/h200_report.sh's `report` lines: (name, inputs)
FILE_GROUPS: tuple[tuple[str, list[str]], ...] = (
    (
        "precisions/bf16",
        _files("precisions", *(f"{a}-bf16-r{k}" for a in ("native", "lightning") for k in (1, 2))),
    ),
    *(
        (f"precisions/{x}", _files("precisions", f"native-{x}-r1", f"lightning-{x}-r1"))
        for x in ("fp32", "tf32", "fp16")
    ),
    *(
        (
            f"compile-modes/{s}",
            _files(
                "compile-modes", *(f"{a}-{s}-r{k}" for a in ("native", "lightning") for k in (1, 2))
            ),
        )
        for s in ("bf16-compile", "bf16-reduce-overhead")
    ),
    (
        "optimizer-kernels/bf16-fused",
        _files("optimizer-kernels", "native-bf16-fused-r1", "lightning-bf16-fused-r1"),
    ),
    (
        "original-defaults/defaults",
        _files(
            "original-defaults",
            *(f"{a}-defaults-r{k}" for a in ("native", "lightning") for k in (1, 2)),
        ),
    ),
    (
        "ddp-stream-swap/bf16-own",
        _files(
            "ddp-stream-swap", *(f"{a}-bf16-r{k}" for a in ("native", "lightning") for k in (1, 2))
        ),
    ),
    (
        "ddp-stream-swap/bf16-both-current",
        _files(
            "ddp-stream-swap",
            *(f"native-bf16-r{k}" for k in (1, 2)),
            *(f"lightning-bf16-current-stream-r{k}" for k in (1, 2)),
        ),
    ),
    (
        "ddp-stream-swap/bf16-both-side",
        _files(
            "ddp-stream-swap",
            *(f"native-bf16-side-stream-r{k}" for k in (1, 2)),
            *(f"lightning-bf16-r{k}" for k in (1, 2)),
        ),
    ),
    ("ddp-stream-swap/fp16-own", _files("ddp-stream-swap", "native-fp16-r1", "lightning-fp16-r1")),
    (
        "ddp-stream-swap/fp16-both-current",
        _files("ddp-stream-swap", "native-fp16-r1", "lightning-fp16-current-stream-r1"),
    ),
    (
        "ddp-stream-swap/compile-own",
        _files("ddp-stream-swap", "native-bf16-compile-r1", "lightning-bf16-compile-r1"),
    ),
    (
        "ddp-stream-swap/compile-both-current",
        _files(
            "ddp-stream-swap", "native-bf16-compile-r1", "lightning-bf16-compile-current-stream-r1"
        ),
    ),
)
SWEEP = "results/cpu-gloo-weak"


def groups() -> list[tuple[str, list[str], list[str]]]:
    """(name, inputs, compare options) of every committed report, sorted by name."""
    from experiment import plans

    found: list[tuple[str, list[str], list[str]]] = []
    for manifest in sorted(ROOT.glob("results/**/manifest.json")):
        folder = manifest.parent.relative_to(ROOT).as_posix()
        name = json.loads(manifest.read_text()).get("experiment") or ""
        plan = plans.find(name.split("/")[0]) if name else None
        if plan is not None and plan.in_process:
            continue  # read by compare.interleaved, never by compare's report
        options = ["--allow-mismatch"] if plan is not None and plan.allow_mismatch else []
        found.append((folder, [folder], options))
    found += [(f"{H200}/{name}", inputs, []) for name, inputs in FILE_GROUPS]
    sweep = {
        f"{SWEEP}/{d}": sorted(
            p.relative_to(ROOT).as_posix() for p in (ROOT / SWEEP / d).glob("*.json")
        )
        for d in ("devices-1", "devices-2")
    }
    found += [(name, inputs, []) for name, inputs in sweep.items()]
    found.append((SWEEP, [f for inputs in sweep.values() for f in inputs], []))
    return sorted(found)


def numbers(inputs: list[str], options: list[str]) -> list[dict[str, Any]]:
    """Each comparison of the report on `inputs`: world size, arm, baseline, overhead %."""
    from compare.api import ReportOptions, analyse_paths

    chosen = ReportOptions(allow_mismatch="--allow-mismatch" in options)
    report = analyse_paths([ROOT / p for p in inputs], chosen)
    return [
        {"world_size": o.world_size, "arm": o.arm, "baseline": o.baseline, "percent": o.percent}
        for o in report.overhead
    ]


def record() -> dict[str, Any]:
    """The fixture: every group's inputs, options and comparisons."""
    return {
        name: {"inputs": inputs, "options": options, "overhead": numbers(inputs, options)}
        for name, inputs, options in groups()
    }


def write_reports() -> None:
    """Rewrite the committed text, markdown and HTML reports of every group from its inputs
    (python -m compare; the plots beside them are left as they are)."""
    from compare.cli import main

    formats = {".txt": "text", ".md": "markdown", ".html": "html"}
    for name, inputs, options in groups():
        folder, setting = name.rsplit("/", 1)
        named = ROOT / folder / f"report-{setting}.md"  # benchmarks/h200_report.sh's file groups
        targets = [named] if named.is_file() else [ROOT / name / f"report{e}" for e in formats]
        for target in (t for t in targets if t.is_file()):
            paths = [str(ROOT / p) for p in inputs]
            fmt = formats[target.suffix]
            argv = [*paths, *options, "--format", fmt, "--output", str(target)]
            if main([*argv, "--overwrite-output"]) != 0:
                sys.exit(f"compare failed for {target}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if sys.argv[1:] == ["--record"]:
        FIXTURE.write_text(json.dumps(record(), indent=1) + "\n")
        print(f"wrote {FIXTURE}")
    elif sys.argv[1:] == ["--reports"]:
        write_reports()
    else:
        sys.exit("usage: python tests/report_numbers.py --record | --reports")
