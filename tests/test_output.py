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


def test_folders_logs_and_notes_fail_as_one_line_naming_the_path(tmp_path):
    from common.output import append_text, make_folder, open_log

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OutputError, match=r"^cannot write folder .*file/sub: .*check the folder"):
        make_folder(blocker / "sub", option="folder")
    with pytest.raises(OutputError, match=r"No such file or directory \(ENOENT\)") as error:
        open_log(tmp_path / "gone" / "run.log")
    assert "\n" not in str(error.value) and str(tmp_path / "gone" / "run.log") in str(error.value)
    with pytest.raises(OutputError, match="cannot write log"):
        append_text(tmp_path / "gone" / "run.log", "a note\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_a_full_disk_keeps_the_old_file_and_leaves_no_temp_file(tmp_path):
    """On a real full tmpfs (root only): a replace fails in one line and keeps the old file
    whole; an append fails in one line too."""
    import os
    import shutil
    import subprocess

    from common.output import append_text

    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(disk)])
    if made.returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        path = disk / "manifest.json"
        write_text(path, "old", mode="new", option="manifest")
        with open(disk / "filler", "wb", buffering=0) as f:
            with pytest.raises(OSError):
                while True:
                    f.write(b"x" * 4096)
        with pytest.raises(OutputError) as error:
            write_text(path, "new" * 5000, mode="replace", option="manifest")
        assert str(error.value).endswith(
            "no space left on the device (ENOSPC); nothing was written there: free some space"
        )
        assert path.read_text() == "old" and sorted(p.name for p in disk.iterdir()) == [
            "filler",
            "manifest.json",
        ]
        with pytest.raises(OutputError, match="no space left"):
            append_text(disk / "new.log", "x" * 8192)
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
