"""Shared benchmark core: one configuration, workload, timing, checks and result schema.

Importing this package imports neither torch nor lightning, so that `compare` can read
results on a machine that has neither.
"""
