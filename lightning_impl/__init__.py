"""The same benchmark through PyTorch Lightning (`python -m lightning_impl --help`).

Lightning is an optional extra: without it, `python -m lightning_impl` exits 2 with a hint.
"""

from common.launcher import check_threads_before_torch

# Before torch loads: libgomp reads OMP_NUM_THREADS then, and complains in its own words.
check_threads_before_torch("lightning_impl")
