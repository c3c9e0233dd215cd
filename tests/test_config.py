"""The one parser: defaults of the original scripts, and every user mistake rejected in one line."""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
from pathlib import Path

import pytest
from conftest import clean_env, run_module

from common import config, option_fields
from common.config import BenchConfig
from common.errors import OneLineParser, UsageError
from common.workloads.gpt import GptOptions
from common.workloads.image import ImageOptions


def parse(argv: list[str]) -> BenchConfig:
    return config.parse(argv, prog="test")


def test_defaults_are_the_original_scripts():
    cfg = parse([])
    assert (cfg.batch_size_per_device, cfg.global_batch_size) == (32, None)
    assert (cfg.warmup_steps, cfg.steps, cfg.precision, cfg.seed) == (10, 50, "auto", 1234)
    assert (cfg.lr, cfg.momentum, cfg.weight_decay) == (0.1, 0.9, 0.0)
    assert cfg.timeout == 300 and cfg.gradient_as_bucket_view and cfg.cudnn_benchmark
    assert cfg.workload == "image" and not cfg.compile
    image = cfg.workload_options
    assert (image.arch, image.image_size, image.num_classes) == ("resnet50", 224, 1000)
    assert not image.channels_last
    assert cfg.batch_mode == "fixed_per_device"


def test_global_batch_gives_fixed_global_mode_and_divides_per_device():
    cfg = parse(["--global-batch-size", "64", "--devices", "4"])
    assert cfg.batch_mode == "fixed_global"
    assert cfg.per_device_batch() == 16 and cfg.global_batch() == 64


BAD = [
    (["--batch-size-per-device", "2", "--global-batch-size", "4"], "not allowed with argument"),
    (
        ["--global-batch-size", "30", "--devices", "4"],
        r"--global-batch-size 30 does not divide by the world size 4",
    ),
    (["--global-batch-size", "6", "--devices", "2", "--num-nodes", "2"], "world size 4"),
    (["--batch-size-per-device", "0"], "--batch-size-per-device must be positive"),
    (["--global-batch-size", "-8"], "--global-batch-size must be positive"),
    (["--devices", "0"], "--devices must be positive"),
    (["--num-nodes", "0"], "--num-nodes must be positive"),
    (["--steps", "0"], "--steps must be positive"),
    (["--warmup-steps", "-1"], "--warmup-steps must be 0 or more"),
    (["--seed", "-1"], "--seed must be 0 or more"),
    (["--lr", "0"], "--lr must be positive"),
    (["--timeout", "0"], "--timeout must be between 1 and 604800 seconds"),
    (["--timeout", "1e9"], "--timeout must be between 1 and 604800 seconds"),
    (["--timeout", "nan"], "--timeout must be a finite number, got nan"),
    (["--lr", "nan"], "--lr must be a finite number, got nan"),
    (["--lr", "inf"], "--lr must be a finite number, got inf"),
    (["--lr", "1e999"], "--lr must be a finite number, got inf"),
    (["--momentum=-inf"], "--momentum must be a finite number, got -inf"),
    (["--weight-decay", "NaN"], "--weight-decay must be a finite number, got nan"),
    (["--bucket-cap-mb", "inf"], "--bucket-cap-mb must be a finite number"),
    (["--bucket-cap-mb", "1e300"], "--bucket-cap-mb 1e\\+300 is too large; use at most 2147483647"),
    (["--momentum", "-0.5"], "--momentum must be 0 or more, got -0.5"),
    (["--steps", str(2**31)], f"--steps {2**31} is too large; use at most {2**31 - 1}"),
    (
        ["--image-size", str(10**30)],
        "--image-size 10{30} is too large".replace("10{30}", str(10**30)),
    ),
    (["--seed", str(2**64)], r"--seed \d+ is too large: rank r uses seed \+ r"),
    (["--accelerator", "cpu", "--precision", "fp16"], "--precision fp16 needs a GPU"),
    (
        ["--arch", "resnet51"],
        "--arch 'resnet51' is not a torchvision classification model.*resnet50",
    ),
    (["--image-size", "16"], "--image-size 16 is too small for resnet50"),
    (["--overwrite-output"], "--overwrite-output needs --output"),
    (["--compile-mode", "max-autotune"], "no effect without --compile"),
    (["--precision", "fp8"], "invalid choice: 'fp8'"),
    (["--steps", "ten"], "invalid int value: 'ten'"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_option_exits_2_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        parse(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("test: error: ")
    assert re.search(message, err), err


@pytest.mark.parametrize("case", ["missing-folder", "is-folder", "exists"])
def test_output_path_problems_are_named(case, tmp_path, capsys):
    target = {
        "missing-folder": tmp_path / "nope" / "r.json",
        "is-folder": tmp_path,
        "exists": tmp_path / "r.json",
    }[case]
    if case == "exists":
        target.write_text("{}")
    with pytest.raises(SystemExit) as exc:
        parse(["--output", str(target)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    expected = {
        "missing-folder": "does not exist; create it first",
        "is-folder": "is a folder",
        "exists": "already exists; choose another path or add --overwrite-output",
    }[case]
    assert expected in err
    if case == "exists":
        assert target.read_text() == "{}"


def test_overwrite_output_accepts_existing_file(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("{}")
    assert parse(["--output", str(target), "--overwrite-output"]).output == target


def test_gpu_without_cuda_suggests_cpu(tmp_path):
    """Subprocess: the whole path a user sees, exit 2, one line, no traceback, nothing written."""
    out = tmp_path / "r.json"
    proc = run_module(
        "native", ["--output", str(out)], env=clean_env(CUDA_VISIBLE_DEVICES=""), timeout=120
    )
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == "native: error: --accelerator gpu but CUDA is not available here; use --accelerator cpu"
    )
    assert "Traceback" not in proc.stderr and not out.exists()


def test_verbose_adds_the_traceback():
    proc = run_module("native", ["--verbose"], env=clean_env(CUDA_VISIBLE_DEVICES=""), timeout=120)
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr and "use --accelerator cpu" in proc.stderr


# --- the Trainer-services switch and the diagnostic options -------------------------------------


def test_barebones_is_the_default_and_no_barebones_turns_it_off():
    assert parse([]).barebones and not parse(["--no-barebones"]).barebones


def test_diagnostic_options_default_off_and_are_recorded_as_options(tmp_path):
    assert parse([]).diagnostics() == {}
    dump = str(tmp_path / "p.pstats")
    cfg = parse(["--ddp-stream", "side", "--host-delay-us", "2000", "--pyprofile", dump])
    # the stream swap is an ablation (an arm, a measurement), not a diagnostic
    assert cfg.diagnostics() == {"--host-delay-us": "2000", "--pyprofile": dump}
    recorded = cfg.as_dict()
    assert (recorded["ddp_stream"], recorded["host_delay_us"], recorded["trace"]) == (
        "side",
        2000,
        None,
    )
    assert recorded["pyprofile"] == dump  # JSON-ready: a string, not a Path


DIAGNOSTIC_BAD = [
    (
        ["--host-delay-us", "1ms"],
        r"--host-delay-us: takes whole microseconds, e\.g\. 2000 for 2 ms; got '1ms'",
    ),
    (["--host-delay-us", "-5"], "takes whole microseconds"),
    (
        ["--host-delay-us", "10000001"],
        r"--host-delay-us must be from 0 to 10000000 \(10 s\), got 10000001",
    ),
    (["--ddp-stream", "sideways"], r"argument --ddp-stream: invalid choice: 'sideways'"),
    (
        ["--accelerator", "cpu", "--trace", "t.json"],
        "--trace records the profiled steps, which run on GPUs only",
    ),
    (["--trace", "t.json", "--profile-steps", "0"], "give --profile-steps 1 or more"),
    (["--pyprofile", "nope/p.pstats"], "--pyprofile folder nope does not exist; create it first"),
    (["--trace", "nope/t.json"], "--trace folder nope does not exist"),
    (
        ["--pyprofile", "same.json", "--output", "same.json"],
        "--pyprofile same.json is the same file as --output",
    ),
    (["--pyprofile", "x", "--trace", "./x"], "--trace x is the same file as --pyprofile"),
    (["--barebones=no"], "ignored explicit argument"),
]


@pytest.mark.parametrize(
    "argv,message", DIAGNOSTIC_BAD, ids=[" ".join(a) for a, _ in DIAGNOSTIC_BAD]
)
def test_bad_diagnostic_option_exits_2_with_one_line(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative paths: a fresh folder with nothing in it
    test_bad_option_exits_2_with_one_line(argv, message, capsys)


@pytest.mark.parametrize("flag", ["--pyprofile", "--trace"])
def test_diagnostic_files_are_checked_like_output(flag, tmp_path, capsys):
    existing = tmp_path / "old"
    existing.write_text("keep")
    for path, expected in [(tmp_path, "is a folder"), (existing, "already exists; choose another")]:
        with pytest.raises(SystemExit) as exc:
            parse([flag, str(path)])
        assert exc.value.code == 2 and expected in capsys.readouterr().err
    assert existing.read_text() == "keep"
    assert getattr(parse([flag, str(existing), "--overwrite-output"]), flag[2:]) == existing


def test_host_delay_is_checked_before_any_rank_starts(tmp_path):
    """Subprocess: the mistake that used to fail inside a rank now stops at the parser."""
    out = tmp_path / "r.json"
    proc = run_module(
        "native",
        ["--accelerator", "cpu", "--devices", "2", "--host-delay-us", "1ms", "--output", str(out)],
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and not out.exists()
    assert proc.stderr.strip() == (
        "native: error: argument --host-delay-us: takes whole"
        " microseconds, e.g. 2000 for 2 ms; got '1ms' (see --help)"
    )


# --- the parser, the bounds and the diagnostics are read from BenchConfig's fields --------------


def test_every_field_is_one_option_in_its_group_in_the_helps_order():
    parser = config.build_parser("test")
    groups = {
        g.title: [a.dest for a in g._group_actions]
        for g in parser._action_groups
        if g._group_actions and g.title != "options"
    }
    assert list(groups) == [
        "processes",
        "batch (give at most one)",
        "steps",
        "numerics and speed",
        "workload",
        "DistributedDataParallel",
        "Lightning Trainer",
        "ablations (one at a time)",
        "diagnostics",
        "output",
        "workload: image",
        "workload: gpt",
    ]
    assert groups["batch (give at most one)"] == ["batch_size_per_device", "global_batch_size"]
    assert groups["processes"][-1] == "oversubscribe_cpus"
    # every field but the workload's options (an object: its fields are the workload groups')
    names = [f.name for f in dataclasses.fields(BenchConfig) if f.name != "workload_options"]
    names += [f.name for f in dataclasses.fields(ImageOptions)]
    names += [f.name for f in dataclasses.fields(GptOptions)]
    assert sorted(d for dests in groups.values() for d in dests) == sorted(names)
    assert [a.dest for a in parser._mutually_exclusive_groups[0]._group_actions] == [
        "batch_size_per_device",
        "global_batch_size",
    ]


def test_the_diagnostic_options_are_the_diagnostics_groups_fields():
    assert config.DIAGNOSTIC_OPTIONS == {
        "host_delay_us": "--host-delay-us",
        "pyprofile": "--pyprofile",
        "trace": "--trace",
    }


def bounded_fields():
    return [
        (field.name, spec)
        for field, spec in option_fields.option_fields(BenchConfig)
        if spec.at_least or spec.at_most
    ]


@pytest.mark.parametrize("name,spec", bounded_fields(), ids=[n for n, _ in bounded_fields()])
def test_every_bound_in_a_field_is_enforced_by_parse(name, spec, capsys):
    flag = option_fields.flag(name)
    cases = []
    if spec.at_least == "positive":
        cases.append(("0", f"{flag} must be positive, got 0"))
    if spec.at_least == "not negative":
        cases.append(("-1", f"{flag} must be 0 or more, got -1"))
    if spec.at_most is not None:
        over = int(spec.at_most) + 1
        # a float option shows its value by %g
        cases.append((str(over), f"{flag} \\S+ is too large; use at most {int(spec.at_most)}"))
    for value, message in cases:
        with pytest.raises(SystemExit):
            parse([flag, value])
        assert re.fullmatch(f"test: error: {message}\n", capsys.readouterr().err), (flag, value)


# The same conventions for another command's options (the module docstring's example).
CHUNKS = option_fields.Group("chunks", "how the arms are interleaved")
PICK = option_fields.Group("pick one", exclusive=True)


@dataclasses.dataclass(frozen=True)
class ChunkOptions:
    chunk_steps: int = option_fields.option(
        10, CHUNKS, "timed steps per chunk", metavar="N", at_least="positive", at_most=1000
    )
    settle: float = option_fields.option(
        0.5, CHUNKS, "seconds between chunks", at_least="not negative"
    )
    shuffle: bool = option_fields.option(True, CHUNKS, "shuffle the arms' order")
    dry_run: bool = option_fields.option(False, PICK, "print the plan only", switch=True)
    plan: Path | None = option_fields.option(None, PICK, "the plan file (default: none)")
    not_an_option: int = 3


def test_add_options_builds_groups_types_switches_and_exclusion_from_any_dataclass(tmp_path):
    parser = OneLineParser(prog="t", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    option_fields.add_options(parser, ChunkOptions)
    text = parser.format_help()
    assert "chunks:\n  how the arms are interleaved" in text
    assert "--chunk-steps N" in text and "(default: 10)" in text and "(default: None)" not in text
    assert "--shuffle, --no-shuffle" in text and "--not-an-option" not in text
    args = parser.parse_args(["--chunk-steps", "4", "--no-shuffle", "--plan", str(tmp_path)])
    opts = option_fields.from_args(ChunkOptions, args)
    assert opts == ChunkOptions(chunk_steps=4, shuffle=False, plan=tmp_path)
    assert option_fields.from_args(ChunkOptions, args, settle=2.0).settle == 2.0
    with pytest.raises(SystemExit):
        parser.parse_args(["--dry-run", "--plan", "p"])
    for bad, message in [
        ({"chunk_steps": 0}, "--chunk-steps must be positive, got 0"),
        ({"chunk_steps": 1001}, "--chunk-steps 1001 is too large; use at most 1000"),
        ({"settle": -0.5}, "--settle must be 0 or more, got -0.5"),
        ({"settle": math.inf}, "--settle must be a finite number, got inf"),
    ]:
        with pytest.raises(UsageError, match=f"^{re.escape(message)}$"):
            option_fields.check_bounds(ChunkOptions(**bad))
    option_fields.check_bounds(ChunkOptions())
