"""The one command line and the one frozen configuration that both runners consume.

    cfg = common.config.parse(sys.argv[1:], prog="native")

`parse` checks everything that can be checked from the arguments and the file system;
`common.launcher.validate` checks the launcher and the GPUs. Both run before any process,
process group or CUDA work, and both raise `UsageError` (one line, exit 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from common.errors import OneLineParser, UsageError
from common.output import output_path_problem

PRECISIONS = ("auto", "fp32", "tf32", "bf16", "fp16")
ACCELERATORS = ("gpu", "cpu")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
SGD_IMPL_CHOICES = ("auto", "foreach", "fused", "for-loop")
DDP_STREAMS = ("auto", "current", "side")  # auto = the runner's own (common.workload.ddp_stream)
MAX_HOST_DELAY_US = 10_000_000  # 10 s a step is already far beyond any framework's host work
# BenchConfig field -> its option, for the diagnostic options (recorded in environment.diagnostics).
DIAGNOSTIC_OPTIONS = {
    "ddp_stream": "--ddp-stream",
    "host_delay_us": "--host-delay-us",
    "pyprofile": "--pyprofile",
    "trace": "--trace",
}
DEFAULT_BATCH_SIZE_PER_DEVICE = 32
# What each torchvision architecture's forward pass takes while training (tests/test_hostile.py
# checks these against every model's forward pass on the meta device):
# - the smallest image (five stride-2 stages; AlexNet's pools need 63);
MIN_IMAGE_SIZE = 32
MIN_IMAGE_SIZE_BY_ARCH = {"alexnet": 63}
# - one size only: the model is built by name, with torchvision's default input size, which a
#   ViT's position embedding and MaxViT's window partition are made for;
FIXED_IMAGE_SIZE = 224
FIXED_SIZE_ARCH_PREFIXES = ("vit_", "maxvit_")
# - with one image per device, more pixels where a BatchNorm layer follows the last stride-2
#   stage: below 64 it may see one value per channel, which BatchNorm refuses while training
#   (a bound that holds for every such family; some start working a little lower);
ONE_IMAGE_MIN_SIZE = 64
LATE_BATCHNORM_ARCH_PREFIXES = (
    "densenet",
    "efficientnet",
    "mnasnet",
    "mobilenet",
    "regnet",
    "resnet",
    "resnext",
    "wide_resnet",
    "shufflenet",
)
# - none: these return auxiliary classifier outputs while training, which the loss cannot take.
AUX_OUTPUT_ARCHS = ("googlenet", "inception_v3")
# Largest --image-size: one 4096x4096 image is 200 MB in fp32, and no model here trains on a
# batch of such images in a GPU's memory; larger sizes only fail later, inside every rank.
MAX_IMAGE_SIZE = 4096

BatchMode = Literal["fixed_per_device", "fixed_global"]


@dataclass(frozen=True)
class BenchConfig:
    """Every option of one benchmark run, validated; identical for both runners."""

    devices: int = 1  # processes (GPUs) per node
    num_nodes: int = 1
    accelerator: str = "gpu"  # gpu | cpu
    batch_size_per_device: int | None = None  # set when batch_mode is fixed_per_device
    global_batch_size: int | None = None  # set when batch_mode is fixed_global
    warmup_steps: int = 10  # untimed optimizer steps
    steps: int = 50  # timed optimizer steps
    precision: str = "auto"  # requested: auto | fp32 | tf32 | bf16 | fp16
    channels_last: bool = False
    compile: bool = False
    compile_mode: str = "default"
    cudnn_benchmark: bool = True
    sgd_impl: str = "auto"  # auto | foreach | fused | for-loop
    seed: int = 1234
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 0.0
    image_size: int = 224
    num_classes: int = 1000
    arch: str = "resnet50"
    bucket_cap_mb: float = 25.0
    gradient_as_bucket_view: bool = True
    static_graph: bool = False
    broadcast_buffers: bool = True
    timeout: float = 300.0  # process-group timeout, seconds
    profile_steps: int = 5  # profiled steps after the timed region (GPU only; 0 = off)
    barebones: bool = True  # Trainer(barebones=True); False: its services on (Trainer arm only)
    # Diagnostics (DIAGNOSTIC_OPTIONS): a run with any of these is a diagnosis, not a measurement
    ddp_stream: str = "auto"  # auto | current | side: the stream DDP's wrapper is built on
    host_delay_us: int = 0  # host spin at the start of every step, microseconds
    pyprofile: Path | None = None  # cProfile stats of the timed steps (rank 0)
    trace: Path | None = None  # Chrome trace of the profiled steps (rank 0, GPU only)
    output: Path | None = None
    overwrite_output: bool = False
    verbose: bool = False
    check: bool = False  # --check: validate everything a rank would refuse, launch nothing
    # Resource limit override: allow more CPU ranks per node than CPUs.
    oversubscribe_cpus: bool = False

    @property
    def world_size(self) -> int:
        """Processes in the whole run: devices per node x nodes."""
        return self.devices * self.num_nodes

    @property
    def batch_mode(self) -> BatchMode:
        """`fixed_global` (strong scaling) given a global batch, else `fixed_per_device`."""
        return "fixed_global" if self.global_batch_size is not None else "fixed_per_device"

    def per_device_batch(self, world_size: int | None = None) -> int:
        """Samples each rank processes per step, for the given (or configured) world size."""
        world = self.world_size if world_size is None else world_size
        if self.global_batch_size is None:
            assert self.batch_size_per_device is not None
            return self.batch_size_per_device
        if self.global_batch_size % world:
            raise UsageError(
                f"--global-batch-size {self.global_batch_size} does not divide"
                f" by the world size {world};"
                f" choose a multiple of {world} or use --batch-size-per-device"
            )
        return self.global_batch_size // world

    def global_batch(self, world_size: int | None = None) -> int:
        """Samples per optimizer step over all ranks."""
        world = self.world_size if world_size is None else world_size
        return self.per_device_batch(world) * world

    def as_dict(self) -> dict[str, object]:
        """Plain JSON-ready dict of every option (paths as strings)."""
        out = dataclasses.asdict(self)
        for name in ("output", "pyprofile", "trace"):
            out[name] = str(out[name]) if out[name] is not None else None
        return out

    def diagnostics(self) -> dict[str, str]:
        """{option: value} for each diagnostic option that differs from its default."""
        default = BenchConfig()
        return {
            flag: str(getattr(self, name))
            for name, flag in DIAGNOSTIC_OPTIONS.items()
            if getattr(self, name) != getattr(default, name)
        }


def build_parser(prog: str) -> argparse.ArgumentParser:
    """The command line shared by `python -m native` and `python -m lightning_impl`."""
    d = BenchConfig()
    p = OneLineParser(
        prog=prog,
        # the same help text for both runners, whatever the name's length
        usage="%(prog)s [options]",
        description=(
            "Synthetic-data DDP training benchmark (torchvision model, random init, GPU-resident"
            " batch). Prints a summary; writes a JSON result with --output."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        allow_abbrev=False,
    )
    run = p.add_argument_group("processes")
    run.add_argument(
        "--devices",
        type=int,
        default=d.devices,
        help="processes (one per GPU) per node; under srun/torchrun it must match the launcher",
    )
    run.add_argument("--num-nodes", type=int, default=d.num_nodes, help="nodes in the run")
    run.add_argument(
        "--accelerator",
        choices=ACCELERATORS,
        default=d.accelerator,
        help="gpu (NCCL) or cpu (gloo)",
    )
    run.add_argument(
        "--timeout",
        type=float,
        default=d.timeout,
        metavar="SECONDS",
        help="process-group timeout for collectives, in seconds",
    )

    batch = p.add_argument_group("batch (give at most one)").add_mutually_exclusive_group()
    batch.add_argument(
        "--batch-size-per-device",
        type=int,
        default=None,
        metavar="IMAGES",
        # "%(default).0s" prints nothing; it only stops argparse adding "(default: None)"
        help=f"images per device per step, weak scaling (default: {DEFAULT_BATCH_SIZE_PER_DEVICE}"
        " unless --global-batch-size is given)%(default).0s",
    )
    batch.add_argument(
        "--global-batch-size",
        type=int,
        default=None,
        metavar="IMAGES",
        help="images per step over all devices, strong scaling; must divide by the world size"
        " (default: none)%(default).0s",
    )

    steps = p.add_argument_group("steps")
    steps.add_argument(
        "--warmup-steps",
        type=int,
        default=d.warmup_steps,
        metavar="N",
        help="untimed optimizer steps first (cuDNN autotuning, compilation, DDP bucket rebuild)",
    )
    steps.add_argument(
        "--steps", type=int, default=d.steps, metavar="N", help="timed optimizer steps"
    )
    steps.add_argument(
        "--profile-steps",
        type=int,
        default=d.profile_steps,
        metavar="N",
        help="steps profiled after the timed region to measure GPU busy time (GPU only; 0 = off)",
    )

    speed = p.add_argument_group("numerics and speed")
    speed.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=d.precision,
        help="auto = bf16 where every GPU supports it, else fp16; fp32 on CPU. "
        "fp32 = TF32 off; tf32 = fp32 storage, TF32 math; bf16/fp16 = autocast",
    )
    speed.add_argument(
        "--channels-last",
        action=argparse.BooleanOptionalAction,
        default=d.channels_last,
        help="NHWC memory format for model and images",
    )
    speed.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=d.compile,
        help="torch.compile the model before wrapping it in DDP",
    )
    speed.add_argument(
        "--compile-mode",
        choices=COMPILE_MODES,
        default=d.compile_mode,
        help="torch.compile mode (with --compile)",
    )
    speed.add_argument(
        "--cudnn-benchmark",
        action=argparse.BooleanOptionalAction,
        default=d.cudnn_benchmark,
        help="let cuDNN autotune convolution algorithms during warm-up",
    )
    speed.add_argument(
        "--sgd-impl",
        choices=SGD_IMPL_CHOICES,
        default=d.sgd_impl,
        help="SGD kernel: auto (torch's choice), foreach, fused or for-loop",
    )

    work = p.add_argument_group("workload")
    work.add_argument(
        "--arch", default=d.arch, help="torchvision classification model name (weights=None)"
    )
    work.add_argument(
        "--image-size",
        type=int,
        default=d.image_size,
        metavar="PIXELS",
        help="synthetic image height and width",
    )
    work.add_argument(
        "--num-classes", type=int, default=d.num_classes, help="classifier outputs and label range"
    )
    work.add_argument(
        "--seed", type=int, default=d.seed, help="seed for model init; rank r's data uses seed + r"
    )
    work.add_argument("--lr", type=float, default=d.lr, help="SGD learning rate")
    work.add_argument("--momentum", type=float, default=d.momentum, help="SGD momentum")
    work.add_argument("--weight-decay", type=float, default=d.weight_decay, help="SGD weight decay")

    ddp = p.add_argument_group("DistributedDataParallel")
    ddp.add_argument(
        "--bucket-cap-mb",
        type=float,
        default=d.bucket_cap_mb,
        metavar="MB",
        help="gradient bucket size, MiB",
    )
    ddp.add_argument(
        "--gradient-as-bucket-view",
        action=argparse.BooleanOptionalAction,
        default=d.gradient_as_bucket_view,
        help="gradients are views into the communication buckets",
    )
    ddp.add_argument(
        "--static-graph",
        action=argparse.BooleanOptionalAction,
        default=d.static_graph,
        help="tell DDP the graph is the same every step",
    )
    ddp.add_argument(
        "--broadcast-buffers",
        action=argparse.BooleanOptionalAction,
        default=d.broadcast_buffers,
        help="broadcast BatchNorm buffers from rank 0 before each forward",
    )

    trainer = p.add_argument_group("Lightning Trainer")
    trainer.add_argument(
        "--barebones",
        action=argparse.BooleanOptionalAction,
        default=d.barebones,
        help="Trainer(barebones=True); --no-barebones turns on the progress bar,"
        " model summary, logger and checkpointing (Trainer only: native and"
        " Fabric refuse it)",
    )

    _add_diagnostic_options(p, d)

    out = p.add_argument_group("output")
    out.add_argument(
        "--output",
        type=Path,
        default=None,
        metavar="PATH",
        help="JSON result written by global rank 0 (default: none; a summary is always printed)"
        "%(default).0s",
    )
    out.add_argument(
        "--overwrite-output",
        action="store_true",
        help="allow replacing existing --output, --pyprofile and --trace files",
    )
    out.add_argument(
        "--verbose",
        action="store_true",
        help="tracebacks for errors, framework warnings and per-rank messages",
    )
    out.add_argument(
        "--check",
        action="store_true",
        help="check the options, launcher variables, CPUs or GPUs as a rank would,"
        " print one line and exit (0 when all is well); launches nothing",
    )
    # Resource limit override: its own block, so that the CPU check can be forced.
    run.add_argument(
        "--oversubscribe-cpus",
        action="store_true",
        help="allow more --accelerator cpu ranks on a node than CPUs they may use"
        " (the ranks then share CPUs, which distorts per-step times)",
    )
    return p


def _microseconds(text: str) -> int:
    """argparse type for --host-delay-us: a whole number of microseconds."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(
            f"takes whole microseconds, e.g. 2000 for 2 ms; got {text!r}"
        )
    return int(text)


def _add_diagnostic_options(p: argparse.ArgumentParser, d: BenchConfig) -> None:
    """The diagnostic options: each changes what a run does, to find out where time goes."""
    diag = p.add_argument_group(
        "diagnostics",
        "a run with any of these is a diagnosis, not a measurement: the result"
        " lists them in environment.diagnostics and compare warns about it",
    )
    diag.add_argument(
        "--ddp-stream",
        choices=DDP_STREAMS,
        default=d.ddp_stream,
        help="CUDA stream the DDP wrapper is built on: auto = the runner's own"
        " (native current; Fabric and Trainer side, as DDPStrategy does);"
        " current or side swaps one runner's choice for the other's",
    )
    diag.add_argument(
        "--host-delay-us",
        type=_microseconds,
        default=d.host_delay_us,
        metavar="N",
        help="the host spins N microseconds at the start of every step, standing in"
        " for per-step framework work; 0 = off",
    )
    diag.add_argument(
        "--pyprofile",
        type=Path,
        default=None,
        metavar="FILE",
        help="global rank 0 runs the timed steps under cProfile and writes the stats to FILE"
        " (read with python -m benchmarks.host_profile; slows every Python call)"
        " (default: none)%(default).0s",
    )
    diag.add_argument(
        "--trace",
        type=Path,
        default=None,
        metavar="FILE",
        help="global rank 0 writes a Chrome trace (host and GPU) of the --profile-steps"
        " steps to FILE, .json or .json.gz (GPU only; read with"
        " python -m benchmarks.trace_gaps) (default: none)%(default).0s",
    )


def parse(argv: list[str] | None, prog: str) -> BenchConfig:
    """Parse and validate the command line; exits 2 with one line on any user mistake."""
    args = build_parser(prog).parse_args(argv)
    values = vars(args)
    if values["batch_size_per_device"] is None and values["global_batch_size"] is None:
        values["batch_size_per_device"] = DEFAULT_BATCH_SIZE_PER_DEVICE
    cfg = BenchConfig(**values)
    from common.errors import exit_on_usage_error

    with exit_on_usage_error(prog, cfg.verbose):
        validate(cfg)
    return cfg


# Largest value of a count or size option: beyond it torch's C++ sizes overflow (and no run
# could finish); a mistake caught here instead of a traceback in every rank.
MAX_COUNT = 2**31 - 1
# --seed + global rank seeds torch's generators, which take values below 2**64.
SEED_LIMIT = 2**64
# The process-group timeout: at least a second (c10d counts milliseconds; less can never
# complete a rendezvous) and at most a week (a collective that waits longer is a hang).
TIMEOUT_RANGE = (1.0, 7 * 24 * 3600.0)


def _show(value: float) -> str:
    """A number as typed: ints exactly (%g would overflow on a huge one), floats by %g."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def _finite(name: str, value: float) -> None:
    """Floats come from argparse's float(), which accepts nan, inf and 1e999."""
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"{name} must be a finite number, got {value}")


def _positive(name: str, value: float) -> None:
    _finite(name, value)
    if value <= 0:
        raise UsageError(f"{name} must be positive, got {_show(value)}")


def _not_negative(name: str, value: float) -> None:
    _finite(name, value)
    if value < 0:
        raise UsageError(f"{name} must be 0 or more, got {_show(value)}")


def _at_most(name: str, value: float, limit: float) -> None:
    if value > limit:
        raise UsageError(f"{name} {_show(value)} is too large; use at most {_show(limit)}")


def validate(cfg: BenchConfig) -> None:
    """Checks that need only the options and the file system; raises UsageError.

    Every number is checked for kind (finite), sign and an upper bound, so that no value
    that parses can fail later inside a rank. The resources of the machine (GPUs, CPUs)
    and the launcher variables are checked by `common.launcher.validate`.
    """
    counts = {
        "--devices": cfg.devices,
        "--num-nodes": cfg.num_nodes,
        "--steps": cfg.steps,
        "--num-classes": cfg.num_classes,
        "--image-size": cfg.image_size,
        "--warmup-steps": cfg.warmup_steps,
        "--profile-steps": cfg.profile_steps,
        "--batch-size-per-device": cfg.batch_size_per_device,
        "--global-batch-size": cfg.global_batch_size,
    }
    for name, value in counts.items():
        if value is not None:
            _at_most(name, value, MAX_COUNT)
    _positive("--devices", cfg.devices)
    _positive("--num-nodes", cfg.num_nodes)
    if cfg.batch_size_per_device is not None:
        _positive("--batch-size-per-device", cfg.batch_size_per_device)
    if cfg.global_batch_size is not None:
        _positive("--global-batch-size", cfg.global_batch_size)
        cfg.per_device_batch()  # raises when it does not divide by devices x nodes
    _positive("--steps", cfg.steps)
    _not_negative("--warmup-steps", cfg.warmup_steps)
    _not_negative("--profile-steps", cfg.profile_steps)
    _not_negative("--seed", cfg.seed)
    if cfg.seed + cfg.world_size > SEED_LIMIT:
        raise UsageError(
            f"--seed {cfg.seed} is too large: rank r uses seed + r, which must stay"
            f" below 2**64; use at most {SEED_LIMIT - cfg.world_size}"
        )
    _positive("--lr", cfg.lr)
    _not_negative("--momentum", cfg.momentum)
    _not_negative("--weight-decay", cfg.weight_decay)
    _positive("--num-classes", cfg.num_classes)
    _positive("--bucket-cap-mb", cfg.bucket_cap_mb)
    _at_most("--bucket-cap-mb", cfg.bucket_cap_mb, MAX_COUNT)  # DDP turns it into bytes, an int64
    _finite("--timeout", cfg.timeout)
    low, high = TIMEOUT_RANGE
    if not low <= cfg.timeout <= high:
        raise UsageError(
            f"--timeout must be between {low:g} and {high:g} seconds (a week), got {cfg.timeout:g}"
        )
    _at_most("--image-size", cfg.image_size, MAX_IMAGE_SIZE)
    if cfg.accelerator == "cpu" and cfg.precision == "fp16":
        raise UsageError("--precision fp16 needs a GPU; on --accelerator cpu use fp32 or bf16")
    if cfg.accelerator == "cpu" and cfg.precision == "tf32":
        raise UsageError("--precision tf32 needs a GPU; on --accelerator cpu use fp32")
    if cfg.compile_mode != "default" and not cfg.compile:
        raise UsageError(
            f"--compile-mode {cfg.compile_mode} has no effect without --compile; add --compile"
        )
    _validate_arch(cfg.arch)
    _validate_arch_input(cfg)
    _validate_output(cfg.output, cfg.overwrite_output, cfg.pyprofile or cfg.trace)
    validate_diagnostics(cfg)


def validate_diagnostics(cfg: BenchConfig) -> None:
    """The diagnostic options: a host delay in range, and per-run files checked like --output."""
    if not 0 <= cfg.host_delay_us <= MAX_HOST_DELAY_US:
        raise UsageError(
            f"--host-delay-us must be from 0 to {MAX_HOST_DELAY_US} (10 s), got {cfg.host_delay_us}"
        )
    if cfg.trace is not None and cfg.accelerator != "gpu":
        raise UsageError(
            "--trace records the profiled steps, which run on GPUs only;"
            " drop --trace or use --accelerator gpu"
        )
    if cfg.trace is not None and cfg.profile_steps == 0:
        raise UsageError(
            "--trace records the --profile-steps steps; give --profile-steps 1 or more"
        )
    if cfg.pyprofile is not None:
        _validate_file("--pyprofile", cfg.pyprofile, cfg.overwrite_output)
    if cfg.trace is not None:
        _validate_file("--trace", cfg.trace, cfg.overwrite_output)
    files = {"--output": cfg.output, "--pyprofile": cfg.pyprofile, "--trace": cfg.trace}
    seen: dict[Path, str] = {}
    for flag, path in files.items():
        if path is None:
            continue
        where = path.resolve()
        if where in seen:
            raise UsageError(
                f"{flag} {path} is the same file as {seen[where]}; give each its own path"
            )
        seen[where] = flag


def _validate_arch(arch: str) -> None:
    """The architecture must be a torchvision classification model."""
    from common.models import classification_models  # read from torchvision's sources: no torch

    names = sorted(classification_models())
    if arch not in names:
        close = [n for n in names if n.startswith(arch[:4])][:5]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UsageError(f"--arch {arch!r} is not a torchvision classification model{hint}")


def _validate_arch_input(cfg: BenchConfig) -> None:
    """The architecture can train on the images: their size, and an output the loss takes.

    Each of these failed inside every rank before (exit 1, so an experiment ran every repeat).
    """
    arch, size = cfg.arch, cfg.image_size
    if arch in AUX_OUTPUT_ARCHS:
        raise UsageError(
            f"--arch {arch} returns auxiliary classifier outputs while training,"
            " which the benchmark's loss cannot take; choose another --arch"
        )
    if arch.startswith(FIXED_SIZE_ARCH_PREFIXES) and size != FIXED_IMAGE_SIZE:
        raise UsageError(
            f"--arch {arch} takes {FIXED_IMAGE_SIZE}x{FIXED_IMAGE_SIZE} images only"
            " (torchvision builds it for that size); use --image-size"
            f" {FIXED_IMAGE_SIZE}"
        )
    min_size = MIN_IMAGE_SIZE_BY_ARCH.get(arch, MIN_IMAGE_SIZE)
    if size < min_size:
        raise UsageError(f"--image-size {size} is too small for {arch}; use {min_size} or more")
    if (
        arch.startswith(LATE_BATCHNORM_ARCH_PREFIXES)
        and size < ONE_IMAGE_MIN_SIZE
        and cfg.per_device_batch() == 1
    ):
        raise UsageError(
            f"--image-size {size} with one image per device is too small for {arch}:"
            " its last BatchNorm layer would see one value per channel; use"
            f" --image-size {ONE_IMAGE_MIN_SIZE} or more, or 2 or more images per"
            " device"
        )


def _validate_output(output: Path | None, overwrite: bool, other_files: Path | None = None) -> None:
    """The result path: a regular file (new, or --overwrite-output) in a writable folder.

    The policy (symbolic links and device nodes refused) is `common.output.output_path_problem`'s,
    which compare's --output and --plot share; `write_result` checks again when it writes.
    """
    if output is None:
        if overwrite and other_files is None:
            raise UsageError(
                "--overwrite-output needs --output PATH (or --pyprofile or --trace FILE)"
            )
        return
    _validate_file("--output", output, overwrite)


def _validate_file(flag: str, path: Path, overwrite: bool) -> None:
    """A file a run writes (result, profile, trace): the one output-path policy."""
    if problem := output_path_problem(flag, path, overwrite):
        raise UsageError(problem)
