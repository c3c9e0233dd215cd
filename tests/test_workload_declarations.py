"""A user's own workload (--workload MODULE:NAME), as a user gets it wrong: each mistake one
line naming --workload (exit 2) before any process, never a traceback, a script's usage line
or a run that fails after its steps (common/workloads/checks.py; the options by
common.config.check_declaration); make_batch's batch checked against the samples asked; a
failed rank's message on one line; the module's digest in the result. The cases run
in-process (common.config.parse, as every runner calls it); one subprocess per kind of path
shows the runner says the same."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import ROOT, clean_env, needs_lightning, run_module

from common import config, training, workloads
from common.errors import UsageError
from common.workloads import checks

HEAD = """\
import dataclasses
from dataclasses import dataclass
from common.option_fields import Group, option
from examples import custom_workload as c
X = Group("x")
"""


def declare(tmp_path: Path, monkeypatch, name: str, body: str) -> str:
    """Write module `name` (HEAD, then body) where it can be imported; its MODULE:NAME spec."""
    (tmp_path / f"{name}.py").write_text(HEAD + textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"{name}:workload"


def module_name(request, prefix: str) -> str:
    """A module name of this test case alone (resolve caches a spec; Python, a module)."""
    return f"{prefix}_{hashlib.sha256(request.node.name.encode()).hexdigest()[:12]}"


def refused(argv: list[str], capsys, start: str = "test: error: --workload ") -> str:
    """The one stderr line of a command line the runners' parser refuses (exit 2)."""
    with pytest.raises(SystemExit) as stop:
        config.parse(["--accelerator", "cpu", *argv], "test")
    out, err = capsys.readouterr()
    assert stop.value.code == 2 and out == "" and err.count("\n") == 1, (out, err)
    assert "Traceback" not in err and err.startswith(start), err
    return err


# --- 1. a module that ends the program while it is imported ----------------------------------


def test_a_training_script_that_parses_its_own_arguments_is_one_line_saying_so(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / "train_script.py").write_text(
        "import argparse\n"
        "p = argparse.ArgumentParser(prog='train.py')\n"
        "p.add_argument('--data', required=True)\n"
        "args = p.parse_args()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    err = refused(["--workload", "train_script:model"], capsys)
    assert "importing train_script ended the program (SystemExit 2:" in err
    assert "'train.py: error: the following arguments are required: --data'" in err
    assert "it looks like a script: keep its work under `if __name__ == '__main__':`" in err
    assert "usage:" not in err  # the script's own usage line is kept back


def test_a_module_calling_sys_exit_at_import_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    (tmp_path / "exits_at_import.py").write_text("import sys\nsys.exit(1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    err = refused(["--workload", "exits_at_import:workload"], capsys)
    assert (
        "importing exits_at_import ended the program (SystemExit 1); it looks like a script" in err
    )


def test_what_a_module_prints_while_it_imports_cleanly_is_passed_on(tmp_path, monkeypatch, capsys):
    spec = declare(
        tmp_path, monkeypatch, "chatty_workload", "print('hello')\nworkload = c.workload\n"
    )
    cfg = config.parse(["--workload", spec], "test")
    assert cfg.workload == spec and capsys.readouterr().out == "hello\n"


def test_the_runner_says_it_in_one_line_before_any_process(tmp_path):
    (tmp_path / "cli_script.py").write_text("import sys\nsys.exit('usage: cli_script.py DATA')\n")
    env = clean_env(PYTHONPATH=f"{ROOT}:{tmp_path}")
    proc = run_module("native", ["--workload", "cli_script:w", "--accelerator", "cpu"], env=env)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("native: error: --workload")
    assert "(SystemExit usage: cli_script.py DATA)" in proc.stderr


# --- 2. a file path ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec,advice",
    [
        (
            "examples/custom_workload.py:workload",
            "give the module's dotted name: --workload examples.custom_workload:workload",
        ),
        ("./examples/custom_workload.py:workload", "--workload examples.custom_workload:workload"),
        ("train.py:model", "give the module's dotted name: --workload train:model"),
        ("examples.custom_workload.py:workload", "--workload examples.custom_workload:workload"),
        ("/abs/my-model.py:model", "e.g. examples/custom_workload.py is examples.custom_workload"),
    ],
)
def test_a_file_path_gets_the_dotted_name_advice(spec, advice, capsys):
    err = refused(["--workload", spec], capsys)
    assert "is a file path" in err and advice in err and "PYTHONPATH" in err


# --- 3. the options class -------------------------------------------------------------------

OPTIONS = """\
@dataclass(frozen=True)
class O:
{fields}
workload = dataclasses.replace(c.workload, options=O)
"""


@pytest.mark.parametrize(
    "fields,message",
    [
        (
            "help: int = option(1, X, 'h')",
            "its option --help is the commands' --help; rename that field of its options",
        ),
        (
            "chunk_steps: int = option(3, X, 'k')",
            "its option --chunk-steps is an option of the interleaved mode"
            " (python -m lightning_impl.interleaved), which would take it",
        ),
        ("no_barebones: int = option(1, X, 'n')", "its option --no-barebones is already an option"),
        ("compile: bool = option(False, X, 'c')", "its option --compile is already an option"),
        ("width: int", "options field 'width' is not declared with common.option_fields.option()"),
        ("width: int = 4", "field 'width' is not declared with common.option_fields.option()"),
        (
            "width: int = option(4, X, 'w', at_least='positve')",
            "its option --width has at_least='positve'; use 'positive' or 'not negative'",
        ),
        (
            "width: int = option(4, X, 'w', at_most=float('nan'))",
            "its option --width has at_most=nan; use a finite number",
        ),
        (
            "name: str = option('a', X, 'n', at_most=3)",
            "its option --name has bounds but takes a str",
        ),
        (
            "width: int = option(0, X, 'w', at_least='positive')",
            "its options' defaults break their own bounds: --width must be positive, got 0",
        ),
        (
            "kind: str = option('c', X, 'k', choices=('a', 'b'))",
            "its option --kind has the default 'c', not one of its choices (a, b)",
        ),
        ("z: complex = option(1j, X, 'z')", "its option --z is of type complex"),
        ("z: 'Nowhere' = option(1, X, 'z')", "its options' annotations cannot be read (NameError"),
        (
            "w: int = option(1, X, 'w')\n"
            "    def __post_init__(self):\n"
            "        raise ValueError('no')",
            "its options cannot be made from their defaults (ValueError: no)",
        ),
    ],
)
def test_an_options_class_that_cannot_be_flags_is_one_line(
    fields, message, tmp_path, monkeypatch, capsys, request
):
    spec = declare(
        tmp_path, monkeypatch, module_name(request, "opts"), OPTIONS.format(fields="    " + fields)
    )
    assert message in refused(["--workload", spec], capsys)


def test_options_that_are_no_dataclass_are_one_line(tmp_path, monkeypatch, capsys):
    body = "class O:\n    pass\nworkload = dataclasses.replace(c.workload, options=O)\n"
    spec = declare(tmp_path, monkeypatch, "not_a_dataclass", body)
    assert "its options must be a dataclass declared with" in refused(["--workload", spec], capsys)


def test_the_interleaved_modes_options_are_the_ones_the_check_keeps_free():
    """common may not import the mode (Lightning is optional): its list is pinned here."""
    pytest.importorskip("lightning")
    import dataclasses

    from lightning_impl.interleaved import Options

    assert checks.INTERLEAVED_OPTIONS == tuple(f.name for f in dataclasses.fields(Options))


# --- 4 and 5. what the declaration computes before the ranks ---------------------------------


@pytest.mark.parametrize(
    "change,message",
    [
        (
            "check=lambda o, cfg: 1 / 0",
            "its check failed: ZeroDivisionError: division by zero",
        ),
        (
            "check=lambda o, cfg: None",
            "its check returned a NoneType, not its options (MlpOptions)",
        ),
        ("describe=lambda o: {}['x']", "its describe failed: KeyError: 'x'"),
        ("title=lambda o: o.nope", "its title failed: AttributeError:"),
        ("data=lambda o, where: where.nope", "its data failed: AttributeError:"),
        ("describe=lambda o: 5", "its describe returned a int, not text"),
        ("units_per_sample=lambda o: 0", "its units_per_sample is 0; it must be a whole number"),
        ("units_per_sample=lambda o: 2.5", "its units_per_sample is 2.5; it must be a whole"),
        ("units_per_sample=lambda o: True", "its units_per_sample is True; it must be a whole"),
        (
            "flops_per_sample=lambda o: float('nan')",
            "its flops_per_sample is nan; it must be a finite positive number, or None",
        ),
        ("flops_per_sample=lambda o: 0.0", "its flops_per_sample is 0.0; it must be a finite"),
        ("flops_per_sample=lambda o: -1e9", "its flops_per_sample is -1000000000.0; it must be"),
        ("flops_per_sample=lambda o: 'many'", "its flops_per_sample is 'many'; it must be"),
    ],
)
def test_an_error_or_a_bad_number_of_the_declaration_is_one_line_before_any_process(
    change, message, tmp_path, monkeypatch, capsys, request
):
    name = module_name(request, "decl")
    body = f"workload = dataclasses.replace(c.workload, {change})\n"
    spec = declare(tmp_path, monkeypatch, name, body)
    err = refused(["--workload", spec], capsys)
    assert f"--workload {spec}: " + message in err, err


def test_a_usage_error_of_the_workloads_own_check_is_shown_as_raised(tmp_path, monkeypatch, capsys):
    body = (
        "from common.errors import UsageError\n"
        "def check(o, cfg):\n"
        "    raise UsageError('--mlp-width 256 is too wide for --precision fp32')\n"
        "workload = dataclasses.replace(c.workload, check=check)\n"
    )
    spec = declare(tmp_path, monkeypatch, "own_usage_error", body)
    err = refused(["--workload", spec], capsys, start="test: error: ")
    assert err == "test: error: --mlp-width 256 is too wide for --precision fp32\n"


def test_a_failed_ranks_message_of_several_lines_is_one_line(capsys):
    from common.report import rank_failed

    error = ValueError("1 validation error for WorkloadInfo\nunits_per_sample\n  too small\n")
    assert rank_failed("native", 1, error) == 1
    err = capsys.readouterr().err
    assert err == (
        "native: rank 1 failed: ValueError: 1 validation error for WorkloadInfo;"
        " units_per_sample; too small\n"
    )


# --- 6. the batch holds the samples asked ------------------------------------------------------

BATCHES = """\
import torch
from common.workloads import Batch
def make_batch(opts, samples, generator, device):
    b = c.make_batch(opts, samples, generator, device)
    return {made}
workload = dataclasses.replace(c.workload, make_batch=make_batch)
"""


@pytest.mark.parametrize(
    "made,message",
    [
        (
            "c.make_batch(opts, samples * 4, generator, device)",
            "gave inputs of shape (16, 64) (16 samples) for 4 samples asked",
        ),
        (
            "Batch(b.inputs, torch.cat([b.targets, b.targets]))",
            "gave targets of shape (8,) (8 samples) for 4 samples asked",
        ),
        ("Batch(b.inputs, b.targets[0])", "gave targets of shape () (no sample dimension)"),
        ("(b.inputs, b.targets)", "returned a tuple; return common.workloads.Batch("),
        ("Batch(b.inputs, None)", "gave targets that hold no tensor"),
    ],
)
def test_a_batch_of_other_than_the_samples_asked_is_refused_before_the_timed_steps(
    made, message, tmp_path, monkeypatch, request
):
    """Every runner (and the interleaved mode) makes its batch with common.training.make_batch,
    once, before its steps: a batch 4x the samples asked trained and reported 4x too low."""
    name = module_name(request, "batch")
    spec = declare(tmp_path, monkeypatch, name, BATCHES.format(made=made))
    cfg = config.parse(["--workload", spec, "--accelerator", "cpu"], "test")
    with pytest.raises(UsageError) as error:
        training.make_batch(cfg, 4, 0, torch.device("cpu"))
    assert str(error.value).startswith(f"--workload {spec}: its make_batch ")
    assert message in str(error.value), error.value


def test_a_batch_of_nested_tensors_with_the_samples_asked_is_taken(tmp_path, monkeypatch):
    made = "Batch({'x': b.inputs, 'mask': (b.inputs > 0,)}, b.targets)"
    spec = declare(tmp_path, monkeypatch, "batch_nested", BATCHES.format(made=made))
    cfg = config.parse(["--workload", spec, "--accelerator", "cpu"], "test")
    batch = training.make_batch(cfg, 3, 0, torch.device("cpu"))
    assert batch.inputs["x"].shape == (3, 64) and batch.targets.shape == (3,)


@pytest.mark.slow
@pytest.mark.parametrize(
    "module,extra",
    [
        ("native", ["--steps", "2"]),
        pytest.param("lightning_impl", ["--steps", "2"], marks=needs_lightning),
        pytest.param("lightning_impl.fabric", ["--steps", "2"], marks=needs_lightning),
        pytest.param(
            "lightning_impl.interleaved",
            ["--chunk-steps", "1", "--pairs", "2", "--runs", "1"],
            marks=needs_lightning,
        ),
    ],
)
def test_a_run_whose_batch_is_too_large_exits_2_writing_nothing(module, extra, tmp_path):
    """Two gloo ranks in every arm and the interleaved mode: each rank refuses before the
    timed steps, no result is written, no traceback."""
    made = "c.make_batch(opts, samples * 4, generator, device)"
    (tmp_path / "big_batch.py").write_text(HEAD + BATCHES.format(made=made))
    out = tmp_path / "r.json"
    args = ["--workload", "big_batch:workload", "--accelerator", "cpu", "--devices", "2"]
    args += ["--batch-size-per-device", "2", "--warmup-steps", "1", *extra]
    env = clean_env(PYTHONPATH=f"{ROOT}:{tmp_path}")
    proc = run_module(module, [*args, "--output", str(out)], env=env, timeout=300)
    assert proc.returncode == 2 and not out.exists(), proc.stderr
    assert "Traceback" not in proc.stderr
    assert "its make_batch gave inputs of shape (8, 64) (8 samples) for 2 samples" in proc.stderr


# --- 9. what a result records of a user's module ---------------------------------------------


def test_a_result_records_the_digest_of_a_user_workloads_module():
    spec = workloads.EXAMPLE
    cfg = config.parse(["--workload", spec, "--accelerator", "cpu"], "test")
    found = workloads.info(workloads.resolve(spec), spec, cfg.workload_options)
    file = ROOT / "examples" / "custom_workload.py"
    assert found["module_digest"] == hashlib.sha256(file.read_bytes()).hexdigest()
    image = config.parse(["--accelerator", "cpu"], "test")
    assert (
        workloads.info(workloads.resolve("image"), "image", image.workload_options)["module_digest"]
        is None
    )  # the suite's own: environment.source_digest covers it
