"""The experiment manifest: published schema, old manifests, rejection naming file and field."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from common.manifest import load_manifest, write_manifest
from common.result import ResultError

COMMITTED = sorted((ROOT / "results").rglob("manifest.json"))


def test_published_manifest_schema_matches_the_code():
    published = json.loads((ROOT / "schema" / "manifest.schema.json").read_text())
    fresh = json.loads(
        subprocess.run(
            [sys.executable, "-m", "common", "manifest-schema"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert published == fresh, (
        "regenerate with: python -m common manifest-schema > schema/manifest.schema.json"
    )


@pytest.mark.parametrize(
    "path", COMMITTED, ids=[str(p.parent.relative_to(ROOT)) for p in COMMITTED]
)
def test_committed_manifests_load_with_the_old_name_of_the_runner(path):
    raw = json.loads(path.read_text())
    manifest = load_manifest(path)
    assert [a.runner for a in manifest.arms] == [a.get("runner", a.get("arm")) for a in raw["arms"]]
    ok = [run for run in manifest.runs if run.status == "ok"]
    assert len(ok) == sum(r["status"] == "ok" for r in raw["runs"])


def test_a_written_manifest_round_trips_and_replaces_the_old_one(tmp_path):
    manifest = load_manifest(COMMITTED[0])
    path = tmp_path / "manifest.json"
    path.write_text("old")
    write_manifest(manifest, path)
    assert load_manifest(path) == manifest
    assert '"runner"' in path.read_text() and '"arm"' not in path.read_text()
    assert list(tmp_path.iterdir()) == [path]  # no temp file left behind


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.pop("runs"), r"field runs: Field required"),
        (
            lambda d: next(r for r in d["runs"] if r["status"] == "ok").update(result=None),
            r"field runs\.\d+: .*needs a result path",
        ),  # the first ok run (a warm-up run has none)
        (lambda d: d["runs"][0].update(status="done"), r"field runs\.0\.status"),
        (lambda d: d.update(manifest_version=2), r"field manifest_version"),
    ],
)
def test_a_bad_manifest_is_refused_naming_the_file_and_field(tmp_path, change, message):
    data = json.loads(COMMITTED[0].read_text())
    change(data)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultError, match=rf"^{path}: not a valid experiment manifest: {message}"):
        load_manifest(path)
