"""What the Lightning runners need beyond the lesson: each piece says which behaviour it works
around and why. The runner files (fabric.py, trainer.py) stay line-for-line beside native's.
The ablations (each arm that hands a responsibility back) are lightning_impl/ablations.py's.

    from lightning_impl import workarounds
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import warnings

import torch

from common.precision import Precision
from lightning_impl.compat import require_lightning

LIGHTNING = require_lightning()  # the `lightning` package, or None when it is not installed

# The module must import without Lightning, so that main() can exit 2 with the install hint.
LightningModule = LIGHTNING.LightningModule if LIGHTNING is not None else object


def quiet_lightning(verbose: bool, keep_info: bool = False) -> None:
    """Hide Lightning's info lines, tips and known-harmless warnings unless --verbose.

    keep_info keeps the info lines (the model summary is one), for --no-barebones.
    """
    if verbose:
        return
    if not keep_info:
        for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
            logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module=r"lightning\..*")
    warnings.filterwarnings("ignore", message=r".*(does not have many workers|Tensor Cores).*")
    warnings.filterwarnings("ignore", message=r".*barebones.*")
    # DDPStrategy builds the wrapper on a side stream; torch >= 2.10 then warns once per run.
    warnings.filterwarnings("ignore", message=r".*AccumulateGrad node's stream does not match.*")


def stop_started_ranks(strategy) -> None:
    """Kill the ranks this process started, as native's launcher does when one rank fails.

    Lightning (Trainer and Fabric) re-raises a rank-0 exception without stopping the ranks it
    launched; on NCCL they would wait in an all-reduce until the process-group timeout.
    """
    for proc in getattr(strategy.launcher, "procs", None) or []:
        if proc.poll() is None:
            proc.kill()


def stop_at_once_on_signals(strategy, prog: str, rank: int, ctrl_c: bool = False) -> None:
    """On SIGTERM (SIGINT too with ctrl_c) stop the ranks this process started, exit 128 + signal.

    Trainer: its SIGTERM handler broadcasts a flag from inside the signal handler; landing in
    the middle of a gradient all-reduce, that collective can fail or deadlock the ranks (seen
    on gloo). Call this once fit has installed that handler (on_train_start). The per-step
    flag broadcast in the Trainer's loop is untouched: it stays measured.
    Fabric: it installs no handler, so a signal would kill the launching rank and leave the
    ranks it started waiting in a collective.
    """
    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum: int, _frame: object) -> None:
        stop_started_ranks(strategy)
        name = signal.Signals(signum).name
        print(
            f"{prog}: rank {rank} stopped by {name}; no result written", file=sys.stderr, flush=True
        )
        os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGINT) if ctrl_c else (signal.SIGTERM,):
        signal.signal(signum, stop)


def exit_status_of_stop(trainer, prog: str, stop: SystemExit) -> int:
    """The exit status for a SystemExit out of trainer.fit(): always a failure.

    Lightning turns SIGTERM into SystemExit() (status 0!) and Ctrl-C into SystemExit(1) once it
    has stopped its ranks; a stopped benchmark must fail and write nothing.
    """
    stop_started_ranks(trainer.strategy)
    sigterm = getattr(trainer, "received_sigterm", False)
    why = "SIGTERM" if sigterm else "an interrupt"
    print(
        f"{prog}: rank {trainer.global_rank} stopped by {why} before the last step;"
        " no result written",
        file=sys.stderr,
        flush=True,
    )
    if sigterm:
        return 143
    return stop.code if isinstance(stop.code, int) and stop.code else 1


def fabric_precision(prec: Precision, device_type: str) -> dict[str, object]:
    """Fabric keyword arguments for `prec`: its own plugins, with native's autocast cast cache.

    Fabric 2.6.6's MixedPrecision enters torch.autocast with the cast cache on (torch's
    default); the Trainer's plugin (since 2.5.5) and native turn it off. The subclass changes
    only that, so the three arms differ in who calls autocast, not in how it casts. The rest is
    Fabric's: the inputs cast to the autocast dtype and the outputs back to fp32 around
    forward, and for 16-mixed its own GradScaler (scale in backward, step + update).
    """
    if prec.lightning not in ("bf16-mixed", "16-mixed"):
        return {"precision": prec.lightning}
    from lightning.fabric.plugins.precision import MixedPrecision

    class NativeCastCacheMixedPrecision(MixedPrecision):
        def forward_context(self) -> torch.autocast:
            return torch.autocast(
                self.device,
                dtype=self._desired_input_dtype,
                cache_enabled=prec.autocast_cache_enabled,
            )

    return {"plugins": [NativeCastCacheMixedPrecision(prec.lightning, device_type)]}
