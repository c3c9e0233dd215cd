"""The GPUs this process may use, asked of the CUDA driver through ctypes: no torch import.

    capabilities = cuda_capabilities()   # [(9, 0), (9, 0)], or None: CUDA is not usable here

torch.cuda.device_count() asks the CUDA runtime, which asks the driver (cuInit, then
cuDeviceGetCount under CUDA_VISIBLE_DEVICES); this asks the driver the same questions, so the
count and the compute capabilities are the ones the ranks will see. The parent of a
self-launched run checks --devices and bf16 with it before it starts a rank, without paying
for torch (seconds) in a process that never trains. cuInit creates no CUDA context; a rank
that later initialises CUDA through torch reuses the initialised driver.
"""

from __future__ import annotations

import ctypes
import sys

_CAPABILITY_MAJOR, _CAPABILITY_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_*
_DRIVER = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


def cuda_capabilities() -> list[tuple[int, int]] | None:
    """(major, minor) of each visible GPU in device order; None without a usable driver."""
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
