"""common.output: the one writer's modes; a file that appears while a run goes on is kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.output import OutputError, write_atomically, write_text


def test_new_leaves_a_file_that_appeared_while_it_wrote_and_writes_nothing(tmp_path):
    path = tmp_path / "profile.pstats"

    def fill(tmp: Path) -> None:
        tmp.write_text("ours")
        path.write_text("theirs")  # another process took the name meanwhile

    with pytest.raises(
        OutputError, match=r"--pyprofile .*(already exists|appeared while this ran)"
    ):
        write_atomically(path, fill, mode="new", option="--pyprofile")
    assert path.read_text() == "theirs" and list(tmp_path.iterdir()) == [path]


@pytest.mark.parametrize("mode", ["overwrite", "replace"])
def test_overwrite_and_replace_replace_a_regular_file_atomically(tmp_path, mode):
    path = tmp_path / "manifest.json"
    path.write_text("old")
    write_text(path, "new", mode=mode, option="manifest")
    assert path.read_text() == "new" and list(tmp_path.iterdir()) == [path]


@pytest.mark.parametrize("mode", ["new", "overwrite", "replace"])
def test_every_mode_refuses_a_symbolic_link(tmp_path, mode):
    target = tmp_path / "target.json"
    target.write_text("kept")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(OutputError, match="is a symbolic link"):
        write_text(link, "x", mode=mode)
    assert target.read_text() == "kept" and link.is_symlink()


def test_the_temp_file_keeps_the_suffix_for_writers_that_read_it(tmp_path):
    seen = []
    write_atomically(
        tmp_path / "trace.json.gz",
        lambda tmp: (seen.append(tmp.name), tmp.write_bytes(b"x")),
        mode="new",
    )
    assert seen[0].endswith(".gz") and (tmp_path / "trace.json.gz").read_bytes() == b"x"
