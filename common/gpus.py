"""The GPUs this process may use, asked of the CUDA driver through ctypes: no torch import.

    capabilities = cuda_capabilities()   # [(9, 0), (9, 0)], or None: CUDA is not usable here

torch.cuda.device_count() asks the CUDA runtime, which asks the driver (cuInit, then
cuDeviceGetCount under CUDA_VISIBLE_DEVICES); this asks the driver the same questions, so the
count and the compute capabilities are the ones the ranks will see. The parent of a
self-launched run checks --devices and bf16 with it before it starts a rank, without paying
for torch (seconds) in a process that never trains.

The driver is asked in a short-lived child process (a bare interpreter, some 50 ms), never in
this one: a process that goes on to train (one device, or a rank) must leave the driver to
torch. Initialising it through ctypes first made one-device native runs on an H200 abort at
exit ("double free or corruption") in 4 of 9 runs (results/h200/original-workload/
first-on-machine-aborted/); asked in a child, none of the next 25 runs did.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

_CAPABILITY_MAJOR, _CAPABILITY_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_*
_DRIVER = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


# What decides which GPUs the driver shows a process, and in which order.
_VISIBILITY = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


def cuda_capabilities() -> list[tuple[int, int]] | None:
    """(major, minor) of each visible GPU in device order; None without a usable driver.

    Asked once per process and GPU visibility, in a child process (`_query` there), under
    this environment. A fork server asks before it forks (common/forkserver.py), so its runs
    with the same visibility inherit the answer instead of paying a driver start each."""
    return _asked(tuple(os.environ.get(name) for name in _VISIBILITY))


@functools.cache
def _asked(visibility: tuple[str | None, ...]) -> list[tuple[int, int]] | None:
    """The child's answer under os.environ, whose _VISIBILITY variables are `visibility`."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", "from common.gpus import _query; _query()"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=Path(__file__).resolve().parents[1],
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else None
    return [tuple(c) for c in found] if found else None


def _query() -> None:
    """In the child: print the capabilities as JSON (null without a usable driver)."""
    print(json.dumps(_driver_capabilities()))


def _driver_capabilities() -> list[tuple[int, int]] | None:
    """The driver's answer, through ctypes, in this process."""
    try:
        driver = ctypes.CDLL(_DRIVER)
    except OSError:
        return None
    if driver.cuInit(0) != 0:  # no GPU, a driver too old, CUDA_VISIBLE_DEVICES hiding all
        return None
    count = ctypes.c_int()
    if driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return None
    found = []
    for ordinal in range(count.value):
        device, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        if (
            driver.cuDeviceGet(ctypes.byref(device), ordinal)
            or driver.cuDeviceGetAttribute(ctypes.byref(major), _CAPABILITY_MAJOR, device)
            or driver.cuDeviceGetAttribute(ctypes.byref(minor), _CAPABILITY_MINOR, device)
        ):
            return None
        found.append((major.value, minor.value))
    return found or None
