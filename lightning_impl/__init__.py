"""The same benchmark through PyTorch Lightning (`python -m lightning_impl --help`).

Lightning is an optional extra: without it, `python -m lightning_impl` exits 2 with a hint.
"""
