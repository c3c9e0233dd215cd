"""The one command line and the one frozen configuration that both runners consume.

    cfg = common.config.parse(sys.argv[1:], prog="native")

`parse` checks everything that can be checked from the arguments and the file system;
`common.launcher.validate` checks the launcher and the GPUs. Both run before any process,
process group or CUDA work, and both raise `UsageError` (one line, exit 2).

A workload (common.workloads, named by --workload) declares its own options the same way, in
a dataclass of its own: the parser has every built-in workload's (and a MODULE:NAME
workload's, once named), `cfg.workload_options` holds those of the one chosen, checked by its
declaration, and an option of another workload is refused (it would change nothing).

Each option is a field of `BenchConfig`, declared once with `option(...)`
(common/option_fields.py: its default, its argument group, its help, and the bounds
`validate` checks of its value). The parser, the bounds checks and `DIAGNOSTIC_OPTIONS` are
all read from those fields.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from common import arms, workloads
from common.errors import OneLineParser, UsageError
from common.option_fields import (
    MAX_COUNT,
    OPTION,
    Group,
    Option,
    add_options,
    check_bounds,
    flag,
    from_args,
    option,
    option_fields,
    value_type,
)
from common.output import output_path_problem

PRECISIONS = ("auto", "fp32", "tf32", "bf16", "fp16")
ACCELERATORS = ("gpu", "cpu")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
SGD_IMPL_CHOICES = ("auto", "foreach", "fused", "for-loop")
DDP_STREAMS = ("auto", "current", "side")  # auto = the runner's own (common.training.ddp_stream)
MAX_HOST_DELAY_US = 10_000_000  # 10 s a step is already far beyond any framework's host work
DEFAULT_BATCH_SIZE_PER_DEVICE = 32

# --seed + global rank seeds torch's generators, which take values below 2**64.
SEED_LIMIT = 2**64
# The process-group timeout: at least a second (c10d counts milliseconds; less can never
# complete a rendezvous) and at most a week (a collective that waits longer is a hang).
TIMEOUT_RANGE = (1.0, 7 * 24 * 3600.0)


def _microseconds(text: str) -> int:
    """argparse type for --host-delay-us: a whole number of microseconds."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(
            f"takes whole microseconds, e.g. 2000 for 2 ms; got {text!r}"
        )
    return int(text)


# --- BenchConfig ----------------------------------------------------------------------------

PROCESSES = Group("processes")
BATCH = Group("batch (give at most one)", exclusive=True)
STEPS = Group("steps")
SPEED = Group("numerics and speed")
WORKLOAD = Group("workload")
DDP = Group("DistributedDataParallel")
TRAINER = Group("Lightning Trainer")
ABLATIONS = Group(
    "ablations (one at a time)",
    "each hands one responsibility of Lightning's back to native's way, or across to native,"
    " keeping the numerics: a run with one is a measurement, and its result names the arm"
    " (common/arms.py)",
)
DIAGNOSTICS = Group(
    "diagnostics",
    "a run with any of these is a diagnosis, not a measurement: the result"
    " lists them in environment.diagnostics and compare warns about it",
)
OUTPUT = Group("output")

BatchMode = Literal["fixed_per_device", "fixed_global"]


@dataclass(frozen=True)
class BenchConfig:
    """Every option of one benchmark run, validated; identical for both runners.

    The fields are the options: the help groups them in this order (`add_options`)."""

    devices: int = option(
        1,
        PROCESSES,
        "processes (one per GPU) per node; under srun/torchrun it must match the launcher",
        at_least="positive",
        at_most=MAX_COUNT,
    )
    num_nodes: int = option(
        1, PROCESSES, "nodes in the run", at_least="positive", at_most=MAX_COUNT
    )
    accelerator: str = option("gpu", PROCESSES, "gpu (NCCL) or cpu (gloo)", choices=ACCELERATORS)
    # set when batch_mode is fixed_per_device (`parse` puts the default in)
    batch_size_per_device: int | None = option(
        None,
        BATCH,
        f"samples (images, sequences) per device per step, weak scaling (default:"
        f" {DEFAULT_BATCH_SIZE_PER_DEVICE}"
        " unless --global-batch-size is given)",
        metavar="SAMPLES",
        at_least="positive",
        at_most=MAX_COUNT,
    )
    global_batch_size: int | None = option(  # set when batch_mode is fixed_global
        None,
        BATCH,
        "samples per step over all devices, strong scaling; must divide by the world size"
        " (default: none)",
        metavar="SAMPLES",
        at_least="positive",
        at_most=MAX_COUNT,
    )
    warmup_steps: int = option(
        10,
        STEPS,
        "untimed optimizer steps first (cuDNN autotuning, compilation, DDP bucket rebuild)",
        metavar="N",
        at_least="not negative",
        at_most=MAX_COUNT,
    )
    steps: int = option(
        50, STEPS, "timed optimizer steps", metavar="N", at_least="positive", at_most=MAX_COUNT
    )
    precision: str = option(  # requested; resolved by common.precision
        "auto",
        SPEED,
        "auto = bf16 where every GPU supports it, else fp16; fp32 on CPU. "
        "fp32 = TF32 off; tf32 = fp32 storage, TF32 math; bf16/fp16 = autocast",
        choices=PRECISIONS,
    )
    compile: bool = option(False, SPEED, "torch.compile the model before wrapping it in DDP")
    compile_mode: str = option(
        "default", SPEED, "torch.compile mode (with --compile)", choices=COMPILE_MODES
    )
    cudnn_benchmark: bool = option(
        True, SPEED, "let cuDNN autotune convolution algorithms during warm-up"
    )
    sgd_impl: str = option(
        "auto",
        SPEED,
        "SGD kernel: auto (torch's choice), foreach, fused or for-loop",
        choices=SGD_IMPL_CHOICES,
    )
    workload: str = option(
        "image",
        WORKLOAD,
        "what is trained: image (a torchvision classifier: --arch, the default), gpt (a"
        " GPT-style decoder: --gpt-preset) or MODULE:NAME, a common.workloads.Workload in an"
        " importable module (e.g. examples.custom_workload:workload); each takes its own"
        " options below",
        metavar="NAME",
    )
    seed: int = option(  # the bound with the world size is validate's
        1234, WORKLOAD, "seed for model init; rank r's data uses seed + r", at_least="not negative"
    )
    lr: float = option(0.1, WORKLOAD, "SGD learning rate", at_least="positive")
    momentum: float = option(0.9, WORKLOAD, "SGD momentum", at_least="not negative")
    weight_decay: float = option(0.0, WORKLOAD, "SGD weight decay", at_least="not negative")
    bucket_cap_mb: float = option(
        25.0,
        DDP,
        "gradient bucket size, MiB",
        metavar="MB",
        at_least="positive",
        at_most=MAX_COUNT,  # DDP turns it into bytes, an int64
    )
    gradient_as_bucket_view: bool = option(
        True, DDP, "gradients are views into the communication buckets"
    )
    static_graph: bool = option(False, DDP, "tell DDP the graph is the same every step")
    broadcast_buffers: bool = option(
        True, DDP, "broadcast BatchNorm buffers from rank 0 before each forward"
    )
    timeout: float = option(  # its range is validate's (TIMEOUT_RANGE)
        300.0,
        PROCESSES,
        "process-group timeout for collectives, in seconds",
        metavar="SECONDS",
    )
    profile_steps: int = option(
        5,
        STEPS,
        "steps profiled after the timed region to measure GPU busy time (GPU only; 0 = off)",
        metavar="N",
        at_least="not negative",
        at_most=MAX_COUNT,
    )
    barebones: bool = option(
        True,
        TRAINER,
        "Trainer(barebones=True); --no-barebones turns on the progress bar,"
        " model summary, logger and checkpointing (Trainer only: native and"
        " Fabric refuse it)",
    )
    ablation: str | None = option(
        None,
        ABLATIONS,
        "hand one responsibility back (or across): " + arms.ablation_help() + " (default: none)",
        metavar="NAME",
        choices=tuple(arms.ABLATIONS),
    )
    ddp_stream: str = option(
        "auto",
        ABLATIONS,
        "CUDA stream the DDP wrapper is built on: auto = the runner's own"
        " (native current; Fabric and Trainer side, as DDPStrategy does);"
        " current or side swaps one runner's choice for the other's (the arms"
        " fabric-current-stream, lightning-current-stream, native-side-stream)",
        choices=DDP_STREAMS,
    )
    # The diagnostics (DIAGNOSTIC_OPTIONS): each changes what a run does, to find out where
    # time goes; a run with any of these is a diagnosis, not a measurement.
    host_delay_us: int = option(  # its range is validate_diagnostics's
        0,
        DIAGNOSTICS,
        "the host spins N microseconds at the start of every step, standing in"
        " for per-step framework work; 0 = off",
        metavar="N",
        parse=_microseconds,
    )
    pyprofile: Path | None = option(
        None,
        DIAGNOSTICS,
        "global rank 0 runs the timed steps under cProfile and writes the stats to FILE"
        " (read with python -m benchmarks.host_profile; slows every Python call)"
        " (default: none)",
        metavar="FILE",
    )
    trace: Path | None = option(
        None,
        DIAGNOSTICS,
        "global rank 0 writes a Chrome trace (host and GPU) of the --profile-steps"
        " steps to FILE, .json or .json.gz (GPU only; read with"
        " python -m benchmarks.trace_gaps) (default: none)",
        metavar="FILE",
    )
    output: Path | None = option(
        None,
        OUTPUT,
        "JSON result written by global rank 0 (default: none; a summary is always printed)",
        metavar="PATH",
    )
    overwrite_output: bool = option(
        False,
        OUTPUT,
        "allow replacing existing --output, --pyprofile and --trace files",
        switch=True,
    )
    verbose: bool = option(
        False,
        OUTPUT,
        "tracebacks for errors, framework warnings and per-rank messages",
        switch=True,
    )
    check: bool = option(
        False,
        OUTPUT,
        "check the options, launcher variables, CPUs or GPUs as a rank would,"
        " print one line and exit (0 when all is well); launches nothing",
        switch=True,
    )
    # Resource limit override (in the processes group), so that the CPU check can be forced.
    oversubscribe_cpus: bool = option(
        False,
        PROCESSES,
        "allow more --accelerator cpu ranks on a node than CPUs they may use"
        " (the ranks then share CPUs, which distorts per-step times)",
        switch=True,
    )
    # Not an option: the options of the workload --workload names (common.workloads), each its
    # own flag; `parse` fills them in, checked, and `as_dict` records them beside these fields.
    workload_options: Any = dataclasses.field(default=None)

    def __post_init__(self) -> None:
        """A configuration made in code (not by `parse`) gets its workload's default options."""
        if self.workload_options is None:
            defaults = workloads.resolve(self.workload).options()
            object.__setattr__(self, "workload_options", defaults)

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
        """Plain JSON-ready dict of every option of BenchConfig (paths as strings); the
        workload's options are its own (a result's `workload.options`: common.workloads.info)."""
        own = {f.name: getattr(self, f.name) for f, _ in option_fields(BenchConfig)}
        return {name: str(v) if isinstance(v, Path) else v for name, v in own.items()}

    def diagnostics(self) -> dict[str, str]:
        """{option: value} for each diagnostic option that differs from its default."""
        return {
            flag: str(getattr(self, name))
            for name, flag in DIAGNOSTIC_OPTIONS.items()
            if getattr(self, name) != _DEFAULTS[name]
        }


# BenchConfig field -> its option, for the diagnostic options (recorded in environment.diagnostics).
DIAGNOSTIC_OPTIONS = {
    f.name: flag(f.name) for f, spec in option_fields(BenchConfig) if spec.group is DIAGNOSTICS
}
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(BenchConfig)}


def build_parser(prog: str, wl: workloads.Workload | None = None) -> argparse.ArgumentParser:
    """The command line shared by `python -m native` and `python -m lightning_impl`: every
    option of `BenchConfig`, then each built-in workload's, then those of `wl` (a workload of
    one's own, --workload MODULE:NAME) when it is not built in."""
    p = OneLineParser(
        prog=prog,
        # the same help text for both runners, whatever the name's length
        usage="%(prog)s [options]",
        description=(
            "Synthetic-data DDP training benchmark (a workload: a torchvision classifier by"
            " default, a GPT-style decoder, or your own; random init, GPU-resident batch)."
            " Prints a summary; writes a JSON result with --output."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        allow_abbrev=False,
    )
    add_options(p, BenchConfig)
    for name in workloads.BUILTIN:
        add_options(p, workloads.resolve(name).options)
    if wl is not None and wl not in map(workloads.resolve, workloads.BUILTIN):
        add_options(p, wl.options)
    return p


def _chosen_workload(argv: list[str], prog: str) -> tuple[str, workloads.Workload]:
    """--workload's value and its declaration, read before the whole command line (its options
    join the parser); UsageError when it names none or its options clash with others."""
    early = OneLineParser(prog=prog, add_help=False, allow_abbrev=False)
    early.add_argument("--workload", default=workloads.DEFAULT)
    spec = early.parse_known_args(argv)[0].workload
    wl = workloads.resolve(spec)
    if wl not in map(workloads.resolve, workloads.BUILTIN):
        check_declaration(wl, spec)
    taken = {f.name for f, _ in option_fields(BenchConfig)}
    for name in workloads.BUILTIN:
        other = workloads.resolve(name)
        if other is not wl:
            taken |= set(workloads.option_names(other))
    clash = [flag(n) for n in workloads.option_names(wl) if n in taken]
    if clash:
        raise UsageError(
            f"--workload {spec}: its option {clash[0]} is already an option of this command;"
            " rename that field of its options"
        )
    return spec, wl


# The types a flag converts its text to without option(parse=...) (add_options)
FLAG_TYPES = (int, float, str, bool, Path)


def check_declaration(wl: workloads.Workload, spec: str) -> None:
    """UsageError, one line naming --workload, unless a workload of one's own has options that
    every command reading them can parse: a dataclass whose every field is declared with
    option() (so it has a default), of a type a flag converts to, with bounds that are bounds
    and defaults within them (and among their choices), named like no option of the runners,
    of their help or of the interleaved mode (common.workloads.checks.INTERLEAVED_OPTIONS)."""
    cls, where = wl.options, f"--workload {spec}: its"  # a dataclass: resolve checked
    try:
        hints = typing.get_type_hints(cls)
    except Exception as error:  # a forward reference nothing defines
        raise UsageError(
            f"{where} options' annotations cannot be read ({workloads.checks.error_line(error)})"
        ) from None
    taken = {s: "is already an option of this command" for s in _option_strings()}
    taken.update({s: "is the commands' --help" for s in ("-h", "--help")})
    for name in workloads.checks.INTERLEAVED_OPTIONS:
        taken[flag(name)] = (
            "is an option of the interleaved mode (python -m lightning_impl.interleaved),"
            " which would take it"
        )
    for field in dataclasses.fields(cls):
        declared = field.metadata.get(OPTION)
        if declared is None:
            raise UsageError(
                f"{where} options field {field.name!r} is not declared with"
                f" common.option_fields.option(): every field is a flag with a default, e.g."
                f" {field.name}: int = option(DEFAULT, GROUP, HELP)"
            )
        name, kind = flag(field.name), value_type(hints.get(field.name))
        if declared.parse is None and kind not in FLAG_TYPES:
            raise UsageError(
                f"{where} option {name} is of type {getattr(kind, '__name__', kind)}; a flag"
                " is an int, float, str, bool or Path, or give option(parse=...)"
            )
        _check_bounds_declared(where, name, declared, kind)
        negated = [f"--no-{name[2:]}"] if kind is bool and not declared.switch else []
        for given in (name, *negated):
            if given in taken:
                raise UsageError(
                    f"{where} option {given} {taken[given]}; rename that field of its options"
                )
    try:
        defaults = cls()
    except Exception as error:
        why = workloads.checks.error_line(error)
        raise UsageError(f"{where} options cannot be made from their defaults ({why})") from None
    for field, declared in option_fields(cls):
        value = getattr(defaults, field.name)
        if declared.choices is not None and value is not None and value not in declared.choices:
            raise UsageError(
                f"{where} option {flag(field.name)} has the default {value!r}, not one"
                f" of its choices ({', '.join(map(str, declared.choices))})"
            )
    try:
        check_bounds(defaults)
    except UsageError as error:
        raise UsageError(f"{where} options' defaults break their own bounds: {error}") from None


def _option_strings() -> set[str]:
    """Every option string of the runners' command line (the built-in workloads' too)."""
    return {s for action in build_parser("runner")._actions for s in action.option_strings}


def _check_bounds_declared(where: str, name: str, spec: Option, kind: Any) -> None:
    """at_least a known word, at_most a finite number, and either only on a number."""
    if spec.at_least not in (None, "positive", "not negative"):
        raise UsageError(
            f"{where} option {name} has at_least={spec.at_least!r}; use 'positive' or"
            " 'not negative' (or leave it out)"
        )
    bound = spec.at_most
    if bound is not None and (
        isinstance(bound, bool) or not isinstance(bound, (int, float)) or not math.isfinite(bound)
    ):
        raise UsageError(
            f"{where} option {name} has at_most={bound!r}; use a finite number (or leave it out)"
        )
    bounded = spec.at_least is not None or bound is not None
    if bounded and spec.parse is None and kind not in (int, float):
        raise UsageError(
            f"{where} option {name} has bounds but takes a {getattr(kind, '__name__', kind)};"
            " bounds are for int and float options"
        )


def parse(argv: list[str] | None, prog: str) -> BenchConfig:
    """Parse and validate the command line; exits 2 with one line on any user mistake.

    An option of a workload other than --workload's is refused: it would change nothing."""
    from common.errors import exit_on_usage_error

    argv = sys.argv[1:] if argv is None else list(argv)
    with exit_on_usage_error(prog, "--verbose" in argv):
        spec, wl = _chosen_workload(argv, prog)
    parser = build_parser(prog, wl)
    others = {
        n: name
        for name in workloads.BUILTIN
        if workloads.resolve(name) is not wl
        for n in workloads.option_names(workloads.resolve(name))
    }
    if not {"-h", "--help"} & set(argv):  # the help shows every default
        for action in parser._actions:  # absent from the namespace unless given
            if action.dest in others:
                action.default = argparse.SUPPRESS
    args = parser.parse_args(argv)
    default_batch = args.batch_size_per_device is None and args.global_batch_size is None
    extra = {"batch_size_per_device": DEFAULT_BATCH_SIZE_PER_DEVICE} if default_batch else {}
    options = from_args(wl.options, args)
    cfg = from_args(BenchConfig, args, **extra, workload_options=options)
    with exit_on_usage_error(prog, cfg.verbose):
        given = [n for n in others if hasattr(args, n)]
        if given:
            raise UsageError(
                f"{flag(given[0])} is an option of --workload {others[given[0]]}, which means"
                f" nothing to --workload {spec}; leave it out"
            )
        cfg = validate(cfg)
    return cfg


def validate(cfg: BenchConfig) -> BenchConfig:
    """Checks that need only the options and the file system; raises UsageError. Returns the
    configuration to run with: the workload's check may complete its options (a preset's sizes).

    Every number is checked for kind (finite), sign and an upper bound (each field's
    `option()`, by `check_bounds`; the workload's options too), so that no value that parses
    can fail later inside a rank; then what depends on several options, and the workload's own
    check. The resources of the machine (GPUs, CPUs) and the launcher variables are checked by
    `common.launcher.validate`.
    """
    check_bounds(cfg)
    if cfg.global_batch_size is not None:
        cfg.per_device_batch()  # raises when it does not divide by devices x nodes
    if cfg.seed + cfg.world_size > SEED_LIMIT:
        raise UsageError(
            f"--seed {cfg.seed} is too large: rank r uses seed + r, which must stay"
            f" below 2**64; use at most {SEED_LIMIT - cfg.world_size}"
        )
    low, high = TIMEOUT_RANGE
    if not low <= cfg.timeout <= high:
        raise UsageError(
            f"--timeout must be between {low:g} and {high:g} seconds (a week), got {cfg.timeout:g}"
        )
    if cfg.accelerator == "cpu" and cfg.precision == "fp16":
        raise UsageError("--precision fp16 needs a GPU; on --accelerator cpu use fp32 or bf16")
    if cfg.accelerator == "cpu" and cfg.precision == "tf32":
        raise UsageError("--precision tf32 needs a GPU; on --accelerator cpu use fp32")
    if cfg.compile_mode != "default" and not cfg.compile:
        raise UsageError(
            f"--compile-mode {cfg.compile_mode} has no effect without --compile; add --compile"
        )
    check_bounds(cfg.workload_options)
    # its own check, then what a result records of it (a declared number that fails, or an
    # error of its own, is one line naming --workload now, not after the run)
    wl = workloads.resolve(cfg.workload)
    options = workloads.checks.checked(wl, cfg.workload, cfg.workload_options, cfg)
    cfg = dataclasses.replace(cfg, workload_options=options)
    _validate_output(cfg.output, cfg.overwrite_output, cfg.pyprofile or cfg.trace)
    validate_diagnostics(cfg)
    return cfg


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
    for name, path in files.items():
        if path is None:
            continue
        where = path.resolve()
        if where in seen:
            raise UsageError(
                f"{name} {path} is the same file as {seen[where]}; give each its own path"
            )
        seen[where] = name


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
