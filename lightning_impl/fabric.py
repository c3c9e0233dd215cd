"""native's benchmark with Lightning Fabric: launch, device, wrapper, precision, backward handed
over; the loop stays ours.

    python -m lightning_impl.fabric --devices 2 --accelerator cpu --workload gpt --gpt-preset tiny
    torchrun --nproc-per-node 4 -m lightning_impl.fabric --devices 4 --output fabric.json
    srun python -m lightning_impl.fabric --devices 4 --output fabric.json   # inside sbatch

Read it beside native/benchmark.py (diff -y -W 210): the loop is native's, and each line that
differs says what it replaces (`# native: ...`). Fabric re-runs this program in every rank it
launches, so nothing before `fabric.launch()` writes files or touches GPU memory.
"""

from __future__ import annotations

import datetime as dt  # native: also contextlib, for its nullcontext autocast
import os
import sys  # native: in launch.py, which parses the command line

import torch
import torch.distributed as dist

from common import config, launcher, precision, preflight, training
from common.checks import check_ranks_agree
from common.environment import utc_now
from common.errors import UsageError, exit_on_usage_error
from common.lifetime import become_launcher, follow_launcher  # native: in launch.py
from common.report import RunFacts, build_result, publish, rank_failed
from common.steps import StepHooks
from common.timing import mark_phase
from lightning_impl import ablations, workarounds  # native: DistributedDataParallel (Fabric's)
from lightning_impl.compat import check_lightning, lightning_facts  # native: (no framework)

PROG = "lightning_impl.fabric"
IMPLEMENTATION = "fabric"
LIGHTNING = workarounds.LIGHTNING  # native: (no framework); None if missing: main() exits 2


def main(argv: list[str] | None = None) -> int:
    """Parse, validate, then run as rank 0 (Fabric starts the others) or as one of them."""
    mark_phase("imports")
    follow_launcher(os.environ)  # native: in launch.py; a rank Fabric started dies with it
    argv = sys.argv[1:] if argv is None else argv
    cfg = config.parse(argv, PROG)  # native: parsed and checked once, in launch.py's main()
    with exit_on_usage_error(PROG, cfg.verbose):
        check_lightning(LIGHTNING)  # native: (no framework to check)
        plan = preflight.check(cfg, runner="fabric")  # what a rank would refuse: launcher, GPUs...
        if cfg.check:
            return preflight.passed(PROG, cfg, plan)
        become_launcher(os.environ)  # native: launch_ranks passes its pid to the ranks
        # native: launch_ranks(...) in launch.py; Fabric launches in ddp_setup, inside the run
        if ablations.launches_ranks(cfg, plan.launch):  # --ablation native-launch: native's
            return ablations.launch_ranks(PROG, argv, cfg.devices)
        training.configure_threads(plan.threads)
        return run(cfg, plan.launch, plan.precision, plan.threads, argv)


def ddp_setup(cfg: config.BenchConfig, launch: launcher.Launch, prec: precision.Precision):
    """Join the process group on this rank's device; return Fabric, which holds the device."""
    from lightning.fabric.plugins.environments import SLURMEnvironment
    from lightning.fabric.strategies import DDPStrategy

    strategy = ablations.ddp_strategy_class(cfg, DDPStrategy)(
        # DDP: process group -- handed to Fabric (DDPStrategy: NCCL/gloo, the same timeout)
        process_group_backend="nccl" if cfg.accelerator == "gpu" else "gloo",
        timeout=dt.timedelta(seconds=cfg.timeout),
        # Slurm is joined through Lightning's own detection; no SIGUSR1 requeue in a benchmark
        cluster_environment=(
            SLURMEnvironment(auto_requeue=False) if launch.kind == "slurm" else None
        ),
        # DDP: model wrapper -- handed to Fabric: fabric.setup wraps with native's arguments
        **training.ddp_kwargs(cfg),
    )
    fabric = LIGHTNING.Fabric(
        # DDP: device placement -- handed to Fabric (local rank -> GPU)
        accelerator=cfg.accelerator,
        devices=cfg.devices,
        num_nodes=cfg.num_nodes,
        strategy=strategy,  # DDPStrategy also for one device, as in the Trainer arm
        # DDP: mixed precision -- handed to Fabric (autocast dtype and GradScaler)
        **ablations.precision_plugin(cfg, prec, "cuda" if cfg.accelerator == "gpu" else "cpu"),
    )
    ablations.before_launch(cfg, launch, fabric, prec)  # --ablation: lightning_impl/ablations.py
    # DDP: process launch -- handed to Fabric: it starts the other ranks (self-launched),
    # then sets the device and joins the process group in every rank
    fabric.launch()
    return fabric


def build(cfg: config.BenchConfig, fabric):
    """The model on its device inside DDP, the optimizer, and for fp16 the gradient scaler."""
    model = training.compile_model(cfg, training.build_model(cfg))  # native: .to(device)
    optimizer = training.build_optimizer(cfg, model.parameters())
    # DDP: model wrapper -- handed to fabric.setup: device, then DDPStrategy's wrapper (built on
    # a side stream; --ddp-stream current builds it on the current one, as native does).
    # _reapply_compile=False: compiled inside DDP, as native (Fabric would compile the wrapper)
    model, optimizer = fabric.setup(model, optimizer, _reapply_compile=False)
    # DDP: mixed precision -- native's GradScaler is in Fabric's precision plugin (fp16)
    return model, optimizer  # native: model, optimizer, scaler


def train_step(fabric, model, optimizer, wl, batch) -> torch.Tensor:
    """One optimizer step in Lightning's automatic-optimisation order."""
    # DDP: mixed precision -- autocast covers forward and loss only
    with fabric.autocast():  # native: with autocast(), its own torch.autocast
        loss = wl.loss(model(batch.inputs), batch.targets)
    # DDP: backward and optimizer step -- zero_grad after forward, as Lightning's closure does;
    # DDP all-reduces gradient buckets during backward
    optimizer.zero_grad(set_to_none=True)
    # native: if scaler is None: loss.backward(); optimizer.step()
    #         else: scaler.scale(loss).backward(); scaler.unscale_, .step(optimizer), .update()
    fabric.backward(loss)  # scales the loss for fp16
    optimizer.step()  # for fp16 Fabric's scaler unscales, steps and updates
    return loss.detach()


def run(
    cfg: config.BenchConfig,
    launch: launcher.Launch,
    prec: precision.Precision,
    threads: int,
    argv: list[str],
) -> int:
    """One rank: set up, build, train, check, report; tear down in every case."""
    started = utc_now()
    workarounds.quiet_lightning(cfg.verbose)  # native: (no framework output to hide)
    fabric = ddp_setup(cfg, launch, prec)  # native: device = ddp_setup(cfg, launch)
    mark_phase("process_group")
    rank, local_rank, world_size = fabric.global_rank, fabric.local_rank, fabric.world_size
    device = fabric.device  # native: the device from ddp_setup, the ranks from launch
    say = (lambda msg: print(f"{PROG}: {msg}", flush=True)) if rank == 0 else (lambda msg: None)
    workarounds.stop_at_once_on_signals(fabric.strategy, PROG, rank, ctrl_c=True)  # native: launch
    try:
        check_ranks_agree(
            prec.resolved,
            "the resolved precision",
            "GPUs differ between nodes: choose --precision explicitly",
        )
        say(f"{world_size} rank(s) via {launch.kind}, {device.type}, precision {prec.resolved}")
        precision.apply_backend_flags(prec, cfg.cudnn_benchmark)
        wl = training.declared(cfg)  # what --workload trains: its model, batch and loss
        model, optimizer = build(cfg, fabric)  # native: build(cfg, device, prec) + scaler
        # DDP: data per rank -- each rank makes its own batch from seed + global rank
        batch_size = cfg.per_device_batch(world_size)
        batch = training.make_batch(cfg, batch_size, rank, device)
        # native: autocast = torch.autocast(device.type, dtype, cache_enabled=False) or nullcontext
        #         here: fabric.autocast() in train_step, the same settings (workarounds)
        # DDP: timing and reporting -- ours in every runner; hooks bracket a step without a clock
        hooks = StepHooks(cfg, device, rank, say)
        loss = torch.zeros((), device=device)
        for step in range(hooks.total_steps):
            hooks.before_step(step)
            loss = train_step(fabric, model, optimizer, wl, batch)  # native: scaler, autocast
            hooks.after_step(step)
        facts = RunFacts(
            cfg=cfg,
            implementation=IMPLEMENTATION,
            precision=prec,
            device=device,
            rank=rank,
            local_rank=local_rank,
            world_size=world_size,
            launcher=launch.kind,
            slurm=launch.slurm,
            started_utc=started,
            command=["python", "-m", PROG, *argv],
            omp_num_threads=threads,
            lightning=lightning_facts(world_size, trainer=False),  # native: none
        )
        result = build_result(facts, model, loss, hooks.timer.summary(), hooks.probe)
        if result is not None:  # native: model.module; Fabric's .module fails once compiled
            publish(result, cfg, "Lightning Fabric DDP benchmark")
        return 0
    except UsageError:
        raise
    except Exception as error:
        workarounds.stop_started_ranks(fabric.strategy)  # native: its launcher stops them
        if cfg.verbose:
            raise
        return rank_failed(PROG, rank, error)
    finally:
        # DDP: teardown -- always leave the process group, also after an error (Fabric does not)
        dist.destroy_process_group()


if __name__ == "__main__":  # native: native/__main__.py
    sys.exit(main())
