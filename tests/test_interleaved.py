"""The interleaved mode (lightning_impl/interleaved.py) on CPU with gloo, 1 and 2 ranks: its
options refused before any work, its loops the runners' own (imported), its orders balanced, its
chunks timed through the wall-clock seam, what it measured printed, its result read by
compare.interleaved and by nothing else."""

from __future__ import annotations

import ast
import json
import random

import pytest
from conftest import ROOT, needs_lightning, run_module

from common.result import ResultError, load_interleaved, load_result
from compare.interleaved import analyse, load_interleaved_files, pair_values, render_section
from compare.interleaved import main as compare_main

MODULE = "lightning_impl.interleaved"
SMALL = [
    "--accelerator",
    "cpu",
    "--arch",
    "resnet18",
    "--image-size",
    "32",
    "--num-classes",
    "10",
    "--batch-size-per-device",
    "2",
    "--warmup-steps",
    "2",
]


def _function(path: str, name: str) -> str:
    """The source of top-level function `name` in `path`, its name and docstring left out."""
    tree = ast.parse((ROOT / path).read_text())
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    node.name = "f"
    if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
        node.body = node.body[1:]
    return ast.unparse(node)


# The runners' functions the interleaved mode runs: (file, its module as interleaved.py names
# it, function)
RUNNERS = (
    ("native/benchmark.py", "native_runner", "build"),
    ("native/benchmark.py", "native_runner", "train_step"),
    ("lightning_impl/fabric.py", "fabric_runner", "build"),
    ("lightning_impl/fabric.py", "fabric_runner", "train_step"),
)


def test_the_loops_are_the_runners_own_imported_not_copied():
    """interleaved.py imports native's and Fabric's build and train_step and Fabric's
    ddp_setup, calls them, and no function of its own repeats one of theirs."""
    tree = ast.parse((ROOT / "lightning_impl" / "interleaved.py").read_text())
    imported = {
        (node.module, alias.name, alias.asname)
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert {
        ("native", "benchmark", "native_runner"),
        ("lightning_impl", "fabric", "fabric_runner"),
        ("lightning_impl.fabric", "ddp_setup", None),
    } <= imported
    calls = {ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    assert {f"{module}.{name}" for _, module, name in RUNNERS} | {"ddp_setup"} <= calls
    theirs = {_function(path, name) for path, _, name in RUNNERS}
    theirs.add(_function("lightning_impl/fabric.py", "ddp_setup"))
    mine = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert [n for n in mine if _function("lightning_impl/interleaved.py", n) in theirs] == []


@needs_lightning
def test_the_loops_call_the_runners_modules():
    import lightning_impl.fabric
    import native.benchmark
    from lightning_impl import interleaved

    assert interleaved.native_runner is native.benchmark
    assert interleaved.fabric_runner is lightning_impl.fabric
    assert interleaved.ddp_setup is lightning_impl.fabric.ddp_setup


@needs_lightning
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--chunk-steps", "0"], "--chunk-steps must be positive, got 0"),
        (["--chunk-steps", "10001"], "--chunk-steps 10001 is too large; use at most 10000"),
        (["--pairs", "0"], "--pairs must be positive, got 0"),
        (["--runs", "0"], "--runs must be positive, got 0"),
        (["--warmup-pairs", "-1"], "--warmup-pairs must be 0 or more, got -1"),
        (["--pairs", "3"], "--pairs 3 with --pairing ABBA: ABBA orders two pairs at a time"),
        (["--baseline", "fabric", "--arm", "fabric-current"], "one process has one Fabric"),
        (["--steps", "7"], "--steps does not apply to the interleaved mode"),
        (["--ddp-stream", "side"], "--ddp-stream does not apply to the interleaved mode"),
        (["--arm", "lightning"], "argument --arm: invalid choice: 'lightning'"),
        (["--chunk-steps", "two"], "argument --chunk-steps: invalid int value: 'two'"),
        (["--order-seed", "-1"], "--order-seed must be 0 or more, got -1"),
        (["--order-seed", str(2**63)], f"--order-seed {2**63} is too large"),
        (["--build-first", "fabric"], "argument --build-first: invalid choice: 'fabric'"),
    ],
)
def test_bad_options_are_one_line_exit_2_before_any_work(args, message, tmp_path, capsys):
    from lightning_impl.interleaved import parse

    out = tmp_path / "r.json"
    with pytest.raises(SystemExit) as stop:
        parse([*SMALL, *args, "--output", str(out)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.strip().splitlines()) == 1
    assert message in err and err.startswith("lightning_impl.interleaved: error: ")
    assert not out.exists()


@needs_lightning
def test_a_refusal_from_the_command_line_starts_nothing(tmp_path):
    out = tmp_path / "r.json"
    proc = run_module(MODULE, [*SMALL, "--chunk-steps", "0", "--output", str(out)], timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        "lightning_impl.interleaved: error: --chunk-steps must be positive, got 0"
    )
    assert proc.stdout == "" and list(tmp_path.iterdir()) == []


@needs_lightning
def test_help_lists_the_modes_options_and_the_runners():
    proc = run_module(MODULE, ["--help"], timeout=120)
    assert proc.returncode == 0
    for flag in ("--chunk-steps", "--pairing", "--pairs", "--runs", "--warmup-pairs", "--arch"):
        assert flag in proc.stdout


@needs_lightning
@pytest.mark.parametrize("pairing", ["AB", "ABBA"])
@pytest.mark.parametrize("pairs", [1, 2, 7, 40])
def test_orders_are_balanced_and_every_pair_holds_one_chunk_of_each(pairing, pairs):
    from lightning_impl.interleaved import chunk_order

    if pairing == "ABBA" and pairs % 2:
        return
    seen = set()
    for seed in range(20):
        order = chunk_order(pairing, pairs, random.Random(seed))
        assert len(order) == 2 * pairs and order.count(0) == order.count(1) == pairs
        firsts = order[0::2]  # which loop opens each pair
        assert abs(firsts.count(0) - firsts.count(1)) <= (2 if pairing == "ABBA" else 1)
        if pairing == "ABBA":
            assert all(
                order[i : i + 4] in ([0, 1, 1, 0], [1, 0, 0, 1]) for i in range(0, 2 * pairs, 4)
            )
        seen.add(tuple(order))
        pair_values(order, [1.0] * len(order))  # raises unless one of each per pair
    assert len(seen) > 1  # random: not the same order every time


def test_pair_values_refuses_a_pair_of_one_loop():
    with pytest.raises(ValueError, match="not one of each loop"):
        pair_values([0, 0, 1, 1], [1.0, 2.0, 3.0, 4.0])


@needs_lightning
def test_the_clock_marks_each_chunk_boundary_without_waiting_at_k_1():
    import torch

    from lightning_impl.interleaved import Loop, run_chunks

    calls = []
    loops = [
        Loop(name, "native", "current", lambda n=name: calls.append(n) or torch.zeros(()), None)
        for name in ("a", "b")
    ]
    wall, host, seconds = run_chunks(loops, [0, 1, 1, 0], 1, torch.device("cpu"))
    assert calls == ["a", "b", "b", "a"]
    assert len(wall) == len(host) == 4 and all(w >= 0 for w in wall) and seconds > 0


@pytest.mark.slow
@needs_lightning
@pytest.mark.parametrize("devices", [1, 2])
def test_a_cpu_run_writes_an_interleaved_result_that_compare_reads(devices, corpus, capsys):
    """Two ranks self-launched (a fresh start); one rank forked by the session's corpus."""
    args = [*SMALL, "--devices", str(devices), "--chunk-steps", "1", "--pairs", "4", "--runs", "2"]
    run = corpus.run(MODULE, args, fresh=devices == 2)
    out = run.folder / "result.json"
    # the runner says what it measured; the estimate and its verdict are compare's
    lines = run.stdout.splitlines()
    head = f"{MODULE}: 2 run(s) of 4 pairs of 1-step chunks (ABBA, wall-clock)"
    said = lines[next(i for i, line in enumerate(lines) if line.startswith(head)) :]
    assert [line.split(":")[0] for line in said[1:3]] == ["  run 1", "  run 2"]
    assert all(" ms/step, fabric " in line for line in said[1:3])
    assert said[3] == f"  the estimate, its interval and verdict: python -m compare {out}"
    assert said[4:] == [f"  result: {out}"]
    assert "Per-step cost in one process" not in run.stdout and "slower" not in run.stdout
    r = run.result
    assert r.world_size == devices and r.timer == "wall-clock" and len(r.runs) == 2
    assert [a.label for a in r.arms] == ["native", "fabric"]
    assert all(len(run.chunk_ms) == 8 and sorted(run.order) == [0] * 4 + [1] * 4 for run in r.runs)
    # the same workload, seeds and step count: native's and Fabric's parameters bit-identical
    assert r.arms[0].parameter_digest == r.arms[1].parameter_digest
    assert all(a.parameters_synchronized for a in r.arms)
    with pytest.raises(ResultError, match="an interleaved result.*python -m compare.interleaved"):
        load_result(out)
    assert r.built_first == "native" and r.order_seed is not None  # drawn afresh
    answer = analyse(load_interleaved_files([out]))
    # one process: an estimate, and no verdict (its runs share what the process fixed)
    assert len(answer.runs) == 2 and answer.log_ratio.processes == 1 and not answer.a_a
    assert answer.half_width_pp is None and answer.verdict.startswith("no verdict: one process")
    assert compare_main([str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("resnet18 on ") and "\nPer-step cost in one process, interleaved" in text
    assert (
        "fabric vs native: " in text and "Runs" in text and max(map(len, text.splitlines())) <= 100
    )
    assert compare_main(["--format", "markdown", str(out)]) == 0
    assert "| process | run | fabric vs native % |" in capsys.readouterr().out


@pytest.mark.slow
@needs_lightning
def test_a_a_in_one_process_names_the_second_loop_b(corpus):
    args = [*SMALL, "--baseline", "native", "--arm", "native", "--pairing", "AB", "--pairs", "3"]
    args += ["--build-first", "arm", "--order-seed", "7"]
    run = corpus.run(MODULE, [*args, "--runs", "1"])  # forked
    out, r = run.folder / "result.json", run.result
    assert [a.label for a in r.arms] == ["native", "native-b"]
    from lightning_impl.interleaved import chunk_order

    # the loop built first and the orders' seed, as given: the orders are that seed's
    assert r.built_first == "native-b" and r.order_seed == 7
    assert r.runs[0].order == chunk_order("AB", 3, random.Random("7:0"))
    answer = analyse([(out, r)])
    assert answer.a_a and answer.percent_interval is None and "no verdict" in answer.verdict
    assert "A/A" in render_section(answer)


@pytest.mark.slow
@needs_lightning
def test_a_failed_run_leaves_no_result(tmp_path):
    """A learning rate that makes the loss non-finite: the run fails after its steps, with one
    line naming the loop, and writes nothing."""
    out = tmp_path / "r.json"
    args = [*SMALL, "--pairs", "2", "--runs", "1", "--lr", "1e30", "--output", str(out)]
    proc = run_module(MODULE, args, timeout=300)
    assert proc.returncode == 1
    assert "rank 0 failed: RuntimeError: native diverged" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_compare_refuses_to_pool_different_experiments(tmp_path):
    doc = json.loads((ROOT / "tests" / "data" / "interleaved.json").read_text())
    other = dict(doc, chunk_steps=doc["chunk_steps"] + 1)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(doc))
    b.write_text(json.dumps(other))
    from common.errors import UsageError

    with pytest.raises(UsageError, match="chunk_steps .* differs"):
        analyse(load_interleaved_files([a, b]))
    answer = analyse(load_interleaved_files([a, a]))
    assert answer.files == 2 and len(answer.runs) == 2 * len(doc["runs"])
    # two processes, both (older results, no build order recorded) built the baseline first:
    # the build order would be confounded with the arm
    assert answer.log_ratio.half is None and answer.log_ratio.baseline_first == 2
    assert "confounded with the arm" in answer.verdict
    text = render_section(answer)
    assert "record no build order (built_first)" in " ".join(text.split())


def test_the_in_process_plan_refuses_an_unknown_variant(tmp_path):
    from common.errors import UsageError
    from experiment import in_process, plans

    plan = plans.find("in-process")
    assert plan.in_process and {v.name for v in plan.variants} >= {"a-a-native", "a-a-fabric"}
    with pytest.raises(UsageError, match="has no variant 'nope'"):
        in_process.run_plan(plan, "nope", [], tmp_path / "x", "python", 1)
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
@needs_lightning
def test_python_m_experiment_runs_the_in_process_plan(tmp_path):
    out = tmp_path / "exp"
    tiny = [*SMALL, "--precision", "fp32", "--pairs", "2", "--runs", "2"]
    args = ["--plan", "in-process", "--variant", "a-a-native", "--out", str(out), "--repeats", "2"]
    args += ["--", *tiny]
    bad = run_module("experiment", [*args, "--chunk-steps", "0"], timeout=120)
    assert bad.returncode == 2 and "--chunk-steps must be positive, got 0" in bad.stderr
    assert not out.exists()
    proc = run_module("experiment", args, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = (out / "a-a-native" / "report.txt").read_text()
    assert "A/A" in report and "4 run(s) in 2 process(es)" in report
    assert (out / "a-a-native" / "report.md").read_text().startswith("# resnet18 on ")
    assert load_interleaved(out / "a-a-native" / "results" / "interleaved-r1.json").runs


@pytest.mark.gpu
@needs_lightning
def test_one_gpu_run_times_chunks_by_cuda_events_at_k_1(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    out = tmp_path / "r.json"
    args = ["--devices", "1", "--batch-size-per-device", "16", "--image-size", "128"]
    args += ["--chunk-steps", "1", "--pairs", "20", "--runs", "2", "--output", str(out)]
    proc = run_module(MODULE, args, timeout=600)
    assert proc.returncode == 0, proc.stderr
    r = load_interleaved(out)
    assert r.timer == "cuda-events" and all(len(run.chunk_ms) == 40 for run in r.runs)
    assert all(t > 0 for run in r.runs for t in run.chunk_ms)


@pytest.mark.parametrize(
    "option", [["--target-half-width", "1.5"], ["--profile-runs", "all"], ["--launch", "fresh"]]
)
def test_the_in_process_plan_refuses_separate_process_options(option, capsys):
    from experiment import cli

    with pytest.raises(SystemExit) as stop:
        cli.main(["--plan", "in-process", *option])
    assert stop.value.code == 2
    assert f"{option[0]} does not apply to plan in-process" in capsys.readouterr().err


def test_compare_refuses_an_interleaved_result_among_separate_runs(tmp_path):
    """python -m compare reads separate-process results only: an interleaved file among them
    is refused in one line naming compare.interleaved, nothing mixed."""
    from compare.load import load_runs

    path = tmp_path / "interleaved.json"
    path.write_text((ROOT / "tests" / "data" / "interleaved.json").read_text())
    with pytest.raises(ResultError, match="never mixed with separate runs") as error:
        load_runs([path])
    assert f"python -m compare.interleaved {path}" in str(error.value)


def test_the_chunk_study_summarises_pairs_and_inflates_for_correlation():
    import math

    from benchmarks.chunk_study import lag1, summarise

    assert lag1([1.0, 2.0]) == 0.0 and lag1([1.0, 1.0, 1.0]) == 0.0
    assert lag1([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) > 0.4  # a trend: successive values alike
    assert lag1([1.0, -1.0] * 5) < -0.8
    order = [0, 1, 1, 0] * 4
    wall = [10.0, 11.0, 11.0, 10.0] * 4  # every pair: the arm 10% slower
    host = [2.0, 3.0, 3.0, 2.0] * 4
    row = summarise(2, "ABBA", [(order, wall, host, 1.6)], budget=300.0)
    assert row.pairs == 8 and row.sd_pair == 0.0 and row.half_width_pp == 0.0
    assert math.isclose(row.mean_percent, 10.0) and math.isclose(row.host_ms_per_step, 0.5)
    assert math.isclose(row.seconds_per_pair, 0.2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rounds", "0"], "--rounds must be positive, got 0"),
        (["--seconds-per-config", "nan"], "--seconds-per-config must be a finite number"),
        (["--chunk-sizes", "1,x"], "argument --chunk-sizes: takes whole numbers"),
        (["--chunk-sizes", "0"], "--chunk-sizes must be whole numbers from 1 to 10000"),
        (["--pairings", "BA"], "argument --pairings: takes AB, ABBA or AB,ABBA"),
        ([], "--output PATH is needed"),
    ],
)
def test_the_chunk_study_refuses_bad_options_in_one_line(args, message, capsys):
    from benchmarks.chunk_study import parse

    with pytest.raises(SystemExit) as stop:
        parse(["--accelerator", "cpu", *args])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
@needs_lightning
def test_the_chunk_study_writes_its_json_and_table_on_cpu(tmp_path):
    out = tmp_path / "study.json"
    args = [*SMALL, "--chunk-sizes", "1,2", "--pairings", "AB", "--seconds-per-config", "0.5"]
    proc = run_module("benchmarks.chunk_study", [*args, "--rounds", "1", "--output", str(out)])
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert [(r["chunk_steps"], r["pairing"]) for r in doc["rows"]] == [(1, "AB"), (2, "AB")]
    assert doc["timer"] == "wall-clock" and "hw@300s pp" in out.with_suffix(".txt").read_text()
    again = run_module("benchmarks.chunk_study", [*args, "--output", str(out)], timeout=120)
    assert again.returncode == 2 and "already exists" in again.stderr  # before any work
