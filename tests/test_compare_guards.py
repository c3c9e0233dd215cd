"""Issue 32's inputs that still passed, and a single result's host cost (compare's CLI)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT

from common.errors import UsageError
from common.manifest import load_manifest
from common.result import load_result
from compare.cli import main
from compare_factory import make_result

FOLDER = ROOT / "results" / "h200" / "lightning-versions" / "bf16-nchw-fabric"
ONE = FOLDER / "results" / "fabric-2.6.2+git35e56ef-r2.json"


def test_a_boolean_is_no_schema_version(tmp_path: Path) -> None:
    data = make_result("native").model_dump(mode="json")
    data["schema_version"] = True  # True == 1 in Python: it was read as version 1
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError, match="schema_version True is not supported"):
        load_result(path)


def test_a_boolean_is_no_manifest_version(tmp_path: Path) -> None:
    data = json.loads((FOLDER / "manifest.json").read_text())
    data["manifest_version"] = True
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError, match="manifest_version True is not a version"):
        load_manifest(path)


@pytest.mark.parametrize("version", [0, 2, True, "1"])
def test_the_output_never_replaces_a_manifest_compare_cannot_read(
    tmp_path: Path, version: object, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "exp"
    shutil.copytree(FOLDER, folder)
    manifest = folder / "manifest.json"
    data = json.loads(manifest.read_text())
    data["manifest_version"] = version
    manifest.write_text(json.dumps(data))
    before = manifest.read_bytes()
    args = [str(folder), "--output", str(manifest), "--overwrite-output", "--format", "json"]
    assert main(args) == 2
    assert manifest.read_bytes() == before
    err = capsys.readouterr().err
    assert "one of the inputs" in err and len(err.strip().splitlines()) == 1


def test_one_result_shows_its_host_cost_per_step(capsys: pytest.CaptureFixture[str]) -> None:
    host = load_result(ONE).host_ms_per_step
    assert host is not None and host > 0
    assert main([str(ONE)]) == 0
    out = capsys.readouterr().out
    section = out[out.index("Host cost per step") :]
    assert f"{host:.3f}" in section and "fabric" in section
