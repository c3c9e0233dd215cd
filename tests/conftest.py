"""Shared test helpers: run a runner as a subprocess with an explicit, small CPU setup."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# A 2-rank ResNet-50 on 64 px images: seconds per run on two cores.
TINY = [
    "--accelerator",
    "cpu",
    "--image-size",
    "64",
    "--batch-size-per-device",
    "2",
    "--warmup-steps",
    "2",
    "--steps",
    "3",
]


def clean_env(**extra: str) -> dict[str, str]:
    """The current environment without launcher variables, one thread per rank."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURM_", "TORCHELASTIC_", "DDPBENCH_"))
        and k
        not in (
            "RANK",
            "LOCAL_RANK",
            "WORLD_SIZE",
            "LOCAL_WORLD_SIZE",
            "MASTER_ADDR",
            "MASTER_PORT",
            "GROUP_RANK",
            # torch sets it in any process that imported TorchDynamo (this one, once a test
            # did): passed on, an experiment would take it for the user's own compile cache
            "TORCHINDUCTOR_CACHE_DIR",
        )
    }
    # The suite first; keep an existing PYTHONPATH (packages installed with --target, e.g.)
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", PYTHONPATH=path)
    env.update(extra)
    return env


def run_module(
    module: str,
    args: list[str],
    timeout: float = 240,
    env: dict[str, str] | None = None,
    launcher: list[str] | None = None,
) -> subprocess.CompletedProcess:
    """`python -m module args` (or under `launcher`), capturing text output."""
    cmd = [*(launcher or [sys.executable]), "-m", module, *args]
    return subprocess.run(
        cmd, cwd=ROOT, env=env or clean_env(), capture_output=True, text=True, timeout=timeout
    )


def lightning_installed() -> bool:
    """True when the optional Lightning extra is importable."""
    try:
        import lightning  # noqa: F401
    except ImportError:
        return False
    return True


needs_lightning = pytest.mark.skipif(
    not lightning_installed(), reason="Lightning extra not installed"
)
