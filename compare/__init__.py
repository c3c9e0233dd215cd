"""Compare benchmark results: native DDP vs Lightning, repeats, world sizes, statistics, plots.

    python -m compare results/native.json results/lightning.json --plot comparison.png

Reads result files only (`common.result`); imports neither torch nor lightning.
"""
