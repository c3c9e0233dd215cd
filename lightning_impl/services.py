"""The Trainer's services for --no-barebones: what a real application runs, in a folder of its own.

    Trainer(barebones=False, **trainer_services(cfg))

Progress bar, model summary, a CSV logger recording the loss at every step, and the checkpoint
callback (one checkpoint at the end of the epoch, after the timed steps). Their files go to
<output stem>.lightning/ beside --output (refused when it exists: nothing is ever replaced),
else to a new temporary folder. The first process chooses it and hands it to the ranks the
Trainer starts through SERVICES_DIR_VAR; under torchrun or srun every rank chooses the same
folder beside --output (without --output each makes its own temporary one; only global rank 0
writes into it).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from common.config import BenchConfig
from common.errors import UsageError

SERVICES_DIR_VAR = "LIGHTNING_IMPL_SERVICES_DIR"


def services_folder(cfg: BenchConfig, create: bool = True) -> Path | None:
    """The run's folder for logs and checkpoints (chosen once, then inherited by the ranks);
    without `create` (--check) only refused or not: no temporary folder is made (None)."""
    if chosen := os.environ.get(SERVICES_DIR_VAR):
        return Path(chosen)
    if cfg.output is not None:
        folder = cfg.output.with_name(cfg.output.stem + ".lightning")
        if folder.exists():
            raise UsageError(
                f"--no-barebones keeps the Trainer's logs and checkpoints in {folder},"
                " which already exists; move it away or choose another --output"
            )
        if not create:
            return folder
    elif not create:
        return None
    else:
        folder = Path(tempfile.mkdtemp(prefix="lightning_impl-services-"))
    os.environ[SERVICES_DIR_VAR] = str(folder)
    return folder


def trainer_services(cfg: BenchConfig) -> dict[str, object]:
    """Trainer keyword arguments that turn the services on (with barebones=False)."""
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger

    folder = services_folder(cfg)
    return {
        "default_root_dir": folder,
        "enable_progress_bar": True,
        "enable_model_summary": True,
        "logger": CSVLogger(save_dir=folder, name="csv", version=0),  # csv/version_0/metrics.csv
        "log_every_n_steps": 1,
        "enable_checkpointing": True,
        "callbacks": [ModelCheckpoint(dirpath=folder / "checkpoints")],
    }
