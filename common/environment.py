"""Provenance of a run: versions, hardware, launcher facts, suite commit, UTC times."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from common.clock import utc_now
from common.config import BenchConfig
from common.launcher import available_cpus
from common.source import SUITE_ROOT, source_digest
from common.steps import FAULT_VAR

# Test-only: the Trainer's per-step SIGTERM broadcast made N times a step (0: not at all), to
# show that host_ms_per_step counts it (lightning_impl.workarounds; tests/test_end_to_end.py).
SIGTERM_BROADCASTS_VAR = "DDPBENCH_SIGTERM_BROADCASTS"

# Taken when a runner imports this module, at its start: the code that runs, even if the files
# change on disk before the result is written (a git pull during a long sweep).
SOURCE_DIGEST = source_digest()


def lightning_version() -> str | None:
    """The installed Lightning version, without importing Lightning."""
    try:
        return importlib.metadata.version("lightning")
    except importlib.metadata.PackageNotFoundError:
        return None


def device_name(device: torch.device) -> str:
    """GPU model name, or the CPU model for CPU runs."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model()


def cpu_model() -> str:
    """CPU model string from /proc/cpuinfo (platform's guess elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def driver_version() -> str | None:
    """NVIDIA driver version via NVML or nvidia-smi; None without a GPU."""
    if not torch.cuda.is_available():
        return None
    try:
        import pynvml  # nvidia-ml-py, present on most GPU images

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        pass
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.split("\n")[0].strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def git_state() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the suite's checkout, or (None, None) outside git."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(SUITE_ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(SUITE_ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
        return commit or None, bool(status.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None


def hostname() -> str:
    """Short host name of this machine."""
    return socket.gethostname()


def _torchvision_version() -> str | None:
    """torchvision's version, or None where it is not installed (no workload needs it but the
    image workload)."""
    try:
        import torchvision
    except ImportError:
        return None
    return torchvision.__version__


def software() -> dict[str, object]:
    """Versions of everything that shapes the numbers."""
    nccl = None
    if torch.cuda.is_available():
        try:
            nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
        except Exception:
            nccl = None
    return {
        "python_version": platform.python_version(),
        "pytorch_version": torch.__version__,
        "torchvision_version": _torchvision_version(),
        "numpy_version": np.__version__,
        "lightning_version": lightning_version(),
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version()
        if torch.backends.cudnn.is_available()
        else None,
        "nccl_version": nccl,
    }


def diagnostics(cfg: BenchConfig, env: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """{option: value} of the diagnostic options given, plus the test-only switches if set."""
    env = os.environ if env is None else env
    found = cfg.diagnostics()
    for switch in (FAULT_VAR, SIGTERM_BROADCASTS_VAR):
        if env.get(switch):
            found[switch] = env[switch]
    return found or None


def environment(
    device: torch.device,
    gpu_names: list[str],
    hostnames: list[str],
    launcher: str,
    slurm: dict[str, str] | None,
    started_utc: str,
    command: list[str],
    *,
    diagnostics: dict[str, str] | None,
) -> dict[str, object]:
    """The `environment` section of a result (called on rank 0 after gathering)."""
    commit, dirty = git_state()
    memory = None
    if device.type == "cuda":
        memory = torch.cuda.get_device_properties(device).total_memory / 2**30
    return {
        **software(),
        "backend": "nccl" if device.type == "cuda" else "gloo",
        "gpu_names": gpu_names,
        "gpu_memory_gib": memory,
        "driver_version": driver_version(),
        "cpu_model": cpu_model(),
        "cpus_available": available_cpus(),
        "hostnames": hostnames,
        "launcher": launcher,
        "slurm": slurm,
        "git_commit": commit,
        "git_dirty": dirty,
        "source_digest": SOURCE_DIGEST,
        "command": command,
        "started_utc": started_utc,
        "finished_utc": utc_now(),
        "diagnostics": diagnostics,
    }
