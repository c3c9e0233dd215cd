"""Hand-written torch.distributed DDP runner (`python -m native --help`)."""
