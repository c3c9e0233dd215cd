"""The Lightning runners' ablations, all here: each hands one responsibility that Fabric or the
Trainer takes over back to native's way, and keeps the numerics (the arms table, common/arms.py).

    strategy = ddp_strategy_class(cfg, DDPStrategy)(...)   # --ddp-stream current
    precision_plugin(cfg, prec, device_type)               # --ablation torch-autocast: 32-true
    if launches_ranks(cfg, launch): launch_ranks(...)      # --ablation native-launch
    before_launch(cfg, launch, fabric, prec)               # native-launch, torch-autocast, raw-step
    sigterm_broadcasts(cfg, trainer)                       # --ablation no-sigterm

Lightning's public switches are used where they exist: precision="32-true", and a process group
made before Fabric's own is adopted (Fabric makes none when one exists). Where Lightning has no
switch, the change is made here and nowhere else, on one object of this run, and each such place
says MONKEYPATCH: a DDPStrategy subclass overriding its private wrapper method, and methods of
this run's Fabric and of the Trainer's loop replaced on the instance. native's own ablations
(fp32-logits, --ddp-stream side) are common.workload's, which every runner builds from.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

import torch
from torch.nn.parallel import DistributedDataParallel

from common import launcher, precision, workload
from common.config import BenchConfig
from common.environment import SIGTERM_BROADCASTS_VAR
from common.precision import Precision
from lightning_impl import workarounds

FABRIC_MODULE = "lightning_impl.fabric"


def ddp_strategy_class(cfg: BenchConfig, base: type) -> type:
    """`base` (a DDPStrategy), or with --ddp-stream current (fabric-current-stream,
    lightning-current-stream) a subclass that builds the wrapper on the current stream, as
    native does, instead of a side stream.

    MONKEYPATCH (a subclass): both Lightning DDPStrategy classes (2.6.6) wrap the model under
    torch.cuda.stream(torch.cuda.Stream()); the subclass leaves out only that, overriding the
    Trainer's private _setup_model or Fabric's setup_module. Everything else is Lightning's.
    """
    if workload.ddp_stream(cfg, natural="side") != "current":
        return base
    if hasattr(base, "_setup_model"):  # lightning.pytorch

        class CurrentStreamDDPStrategy(base):
            def _setup_model(self, model: torch.nn.Module) -> DistributedDataParallel:
                return DistributedDataParallel(
                    module=model, device_ids=self.determine_ddp_device_ids(), **self._ddp_kwargs
                )
    else:  # lightning.fabric

        class CurrentStreamDDPStrategy(base):
            def setup_module(self, module: torch.nn.Module) -> DistributedDataParallel:
                return DistributedDataParallel(
                    module=module, device_ids=self._determine_ddp_device_ids(), **self._ddp_kwargs
                )

    return CurrentStreamDDPStrategy


def precision_plugin(cfg: BenchConfig, prec: Precision, device_type: str) -> dict[str, object]:
    """Fabric's precision keyword arguments (workarounds.fabric_precision); with
    --ablation torch-autocast (fabric-torch-autocast) Lightning's public "32-true": no plugin
    casts inputs or outputs or enters autocast, before_launch gives Fabric native's autocast."""
    if cfg.ablation == "torch-autocast":
        return {"precision": "32-true"}
    return workarounds.fabric_precision(prec, device_type)


def launches_ranks(cfg: BenchConfig, launch: launcher.Launch) -> bool:
    """With --ablation native-launch (fabric-native-launch): whether this process is the plain
    start of several ranks, which native's launcher then starts instead of Fabric's."""
    return cfg.ablation == "native-launch" and launch.starts_ranks(cfg.world_size)


def launch_ranks(prog: str, argv: list[str], devices: int) -> int:
    """native's launcher (native/launch.py) starting this program's ranks; their exit status."""
    from native.launch import launch_ranks as native_launch_ranks

    return native_launch_ranks(prog, FABRIC_MODULE, argv, devices)


def before_launch(cfg: BenchConfig, launch: launcher.Launch, fabric, prec: Precision) -> None:
    """What an --ablation of Fabric changes before fabric.launch():

    native-launch: native's ddp_setup joins the process group (and sets the device); Fabric's
      launch then adopts it (its _init_dist_connection returns when a group exists).
    torch-autocast: fabric.autocast() is native's torch.autocast (the precision is 32-true).
    raw-step: fabric.setup returns DDP's module called under the precision's context and
      casts by hand (no _FabricModule hooks) and the optimizer itself (no _FabricOptimizer);
      fabric.backward(loss) is loss.backward() (no strategy or precision backward).
    """
    if cfg.ablation == "native-launch":
        from native.benchmark import ddp_setup

        ddp_setup(cfg, launch)
    elif cfg.ablation == "torch-autocast":
        device_type = "cuda" if cfg.accelerator == "gpu" else "cpu"
        dtype, cache = precision.autocast_dtype(prec), prec.autocast_cache_enabled
        # MONKEYPATCH: this Fabric's autocast() replaced by native's (run() in native/benchmark.py)
        fabric.autocast = (
            (lambda: torch.autocast(device_type, dtype=dtype, cache_enabled=cache))
            if dtype is not None
            else contextlib.nullcontext
        )
    elif cfg.ablation == "raw-step":
        setup = fabric.setup

        def raw_setup(module, optimizer, **kwargs) -> tuple[RawModule, torch.optim.Optimizer]:
            """fabric.setup, then the wrappers taken off."""
            wrapped, fabric_optimizer = setup(module, optimizer, **kwargs)
            return RawModule(wrapped), fabric_optimizer.optimizer

        # MONKEYPATCH: this Fabric's setup() and backward() replaced on the instance
        fabric.setup = raw_setup
        fabric.backward = lambda loss: loss.backward()


class RawModule:
    """_FabricModule's forward without the wrapper (lightning/fabric/wrappers.py): the
    precision's input cast, forward context and output cast around DDP's module, by hand, and
    no tensor hook on the output. `module` is the model inside DDP, as _FabricModule's is."""

    def __init__(self, wrapped) -> None:
        """Take DDP's module, the model and the precision from a _FabricModule."""
        self.ddp = wrapped._forward_module  # the DistributedDataParallel wrapper
        self.module = self.ddp.module  # not wrapped.module: it fails on a compiled model
        self.precision = wrapped._strategy.precision

    def __call__(self, *args, **kwargs) -> object:
        """The forward: inputs cast, DDP's module under the precision's context, outputs cast."""
        args, kwargs = self.precision.convert_input((args, kwargs))
        with self.precision.forward_context():
            output = self.ddp(*args, **kwargs)
        return self.precision.convert_output(output)

    def parameters(self):
        """The model's parameters, as _FabricModule's (the run's digest reads them)."""
        return self.module.parameters()


def sigterm_broadcasts(cfg: BenchConfig, trainer) -> None:
    """The Trainer loop's per-step SIGTERM flag broadcast made N times a step: 0 with
    --ablation no-sigterm (lightning-no-sigterm); N with the test-only DDPBENCH_SIGTERM_BROADCASTS=N
    (a test shows host_ms_per_step counts it; the result lists the switch in
    environment.diagnostics). Neither (always, outside these): untouched.

    MONKEYPATCH: the loop (Lightning 2.5.2 to 2.6.6) calls self._broadcast_sigterm_tensor() at
    the start of every step when the world size is above 1; this replaces the method on that
    one object. Call it once fit has built the loop (on_train_start).
    """
    times = "0" if cfg.ablation == "no-sigterm" else os.environ.get(SIGTERM_BROADCASTS_VAR)
    if times is None:
        return
    loop = trainer.fit_loop.epoch_loop
    once: Callable[[], None] = loop._broadcast_sigterm_tensor

    def repeated() -> None:
        for _ in range(int(times)):
            once()

    loop._broadcast_sigterm_tensor = repeated
