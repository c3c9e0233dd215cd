"""Lightning as an optional extra: import it if present, and record the facts that matter.

Version facts (read from Lightning's source): 2.5.2 added a per-step broadcast of a SIGTERM
flag read back with `.item()` when world size > 1 (a host-device sync every step); 2.5.5 made
the Trainer's autocast use cache_enabled=False, which the native runner mirrors. Older releases
are refused unless DDPBENCH_ALLOW_OLD_LIGHTNING=1 asks for one as a version arm: its result
records autocast_cache_enabled true for the Trainer, whose mixed-precision numerics may then
differ from native's (fp32 runs no autocast; Fabric's arm turns the cache off in any release).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from packaging.version import Version

LIGHTNING_EXTRA = ".[lightning]"
MIN_VERSION = Version("2.5.5")  # the Trainer's autocast casts like native's from here on
OLDEST_VERSION = Version("2.4.0")  # the oldest release the runners were run under
ALLOW_OLD_ENV = "DDPBENCH_ALLOW_OLD_LIGHTNING"
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
        raise UsageError(
            f"Lightning is not installed; install the extra: pip install '{LIGHTNING_EXTRA}'"
        )
    if problem := version_problem(module):
        raise UsageError(problem)


def version_problem(module: ModuleType) -> str | None:
    """Why this Lightning cannot run, or None when it can: older than MIN_VERSION only when
    ALLOW_OLD_ENV is 1 (a version arm), never older than OLDEST_VERSION."""
    found = Version(module.__version__)
    if found < OLDEST_VERSION:
        return (
            f"Lightning {found} is older than {OLDEST_VERSION}, the oldest release the"
            f" runners were run under; upgrade: pip install '{LIGHTNING_EXTRA}'"
        )
    if found < MIN_VERSION and os.environ.get(ALLOW_OLD_ENV) != "1":
        return (
            f"Lightning {found} is older than {MIN_VERSION}"
            " (its autocast caches casts; native does not);"
            f" upgrade: pip install '{LIGHTNING_EXTRA}', or set {ALLOW_OLD_ENV}=1 to run it"
            " as a version arm whose result records the cast cache"
        )
    return None


def lightning_facts(
    world_size: int, trainer: bool = True, barebones: bool = True
) -> dict[str, object]:
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
        # Fabric's arm passes native's setting in any release (workarounds.fabric_precision)
        "autocast_cache_enabled": trainer and version < MIN_VERSION,
    }
