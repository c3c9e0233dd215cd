"""Compare benchmark results: native DDP vs Lightning, repeats, world sizes, statistics, plots.

    python -m compare results/native.json results/lightning.json --plot comparison.png

    from compare.api import analyse_paths                # as a library: a typed Report
    report = analyse_paths(["out/my-experiment"])

Reads result files and experiment manifests only (`common.result`, `common.manifest`);
imports neither torch nor lightning.
"""
