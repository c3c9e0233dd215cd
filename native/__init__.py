"""Hand-written torch.distributed DDP runner (`python -m native --help`)."""

from common.launcher import check_threads_before_torch

# Before torch loads: libgomp reads OMP_NUM_THREADS then, and complains in its own words.
check_threads_before_torch("native")
