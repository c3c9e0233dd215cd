"""Lightning as an optional extra: import it if present, and record the facts that matter.

Version facts (read from Lightning's source): 2.5.2 added a per-step broadcast of a SIGTERM
flag read back with `.item()` when world size > 1 (a host-device sync every step); 2.5.5 made
autocast use cache_enabled=False, which the native runner mirrors. Older releases are refused
rather than compared inexactly.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from packaging.version import Version

LIGHTNING_EXTRA = ".[lightning]"
MIN_VERSION = Version("2.5.5")
SIGTERM_SYNC_SINCE = Version("2.5.2")


def require_lightning() -> ModuleType | None:
    """The `lightning` module, or None when it is not installed."""
    try:
        return importlib.import_module("lightning")
    except ImportError:
        return None


def check_lightning(module: ModuleType | None) -> None:
    """UsageError (exit 2, one line) when Lightning is missing or too old to compare exactly."""
    from common.errors import UsageError

    if module is None:
        raise UsageError("Lightning is not installed; install the extra:"
                         f" pip install '{LIGHTNING_EXTRA}'")
    if problem := version_problem(module):
        raise UsageError(problem)


def version_problem(module: ModuleType) -> str | None:
    """Why this Lightning cannot be compared exactly with native, or None when it can."""
    found = Version(module.__version__)
    if found < MIN_VERSION:
        return (f"Lightning {found} is older than {MIN_VERSION}"
                " (its autocast caches casts; native does not);"
                f" upgrade: pip install '{LIGHTNING_EXTRA}'")
    return None


def lightning_facts(world_size: int, trainer: bool = True,
                    barebones: bool = True) -> dict[str, object]:
    """The `lightning` section of a result: version and its per-step behaviour.

    The per-step SIGTERM broadcast belongs to the Trainer's loop; Fabric (trainer=False) has no
    loop of its own and no services, so it records no sync and barebones true.
    """
    import lightning

    version = Version(lightning.__version__)
    return {
        "version": lightning.__version__,
        "barebones": barebones,
        "per_step_sigterm_sync": trainer and version >= SIGTERM_SYNC_SINCE and world_size > 1,
        "autocast_cache_enabled": False,
    }
