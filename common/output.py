"""The one way to write an output file: one path policy, an atomic write, three modes.

    write_text(path, text, mode="new")                              # refuse an existing file
    write_atomically(path, lambda tmp: draw(report, tmp), mode="overwrite", option="--plot")
    problem = output_path_problem("--output", path, overwrite)      # None, or why not (one line)
    make_folder(path, option="results"); append_text(log, line, option="log")
    with open_log(log) as f: ...                                    # a run's log, its stdout

Modes of `write_atomically`:
- "new": the path must not exist, now or when the file is moved into place (a no-clobber hard
  link: a file that appeared while the run went on is left alone, and nothing is written);
- "overwrite": the user asked for it (--overwrite-output): an existing regular file is replaced;
- "replace": a file this program owns and rewrites, such as an experiment's manifest after
  every run: replaced like "overwrite", with no option of the user's behind it.

Results, --trace and --pyprofile files, the experiment manifest, compare's --output and --plot
all go through here; it is the only module that moves an output into place (os.replace,
os.link). The experiment's folders, its runs' logs and the lines it adds to them go through
here too (`make_folder`, `open_log`, `append_text`), so that every write that fails (a full
disk, a quota, a folder deleted meanwhile) is one OutputError naming the path, never a
traceback. Imports neither torch nor lightning.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TextIO

Mode = Literal["new", "overwrite", "replace"]
MODES: tuple[Mode, ...] = ("new", "overwrite", "replace")


class OutputError(Exception):
    """An output file that cannot be written where asked; the message names the path and fix."""


# Kinds of file an output path must never be: a rename onto one replaces the device node itself.
_SPECIAL_FILES = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)
# Why a write failed for lack of room, in words.
_NO_ROOM = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
}


def output_path_problem(option: str, path: Path, overwrite: bool) -> str | None:
    """Why `path` cannot receive an output file (one line naming `option` and the fix), or None.

    The policy, shared by every output (the runners' --output, --trace, --pyprofile, compare's
    --output and --plot, the experiment's manifest):
    - the path must name a regular file, or nothing yet, in an existing writable folder;
    - a symbolic link is refused, neither followed nor replaced: the atomic write renames a
      new file onto the path, which would replace the link itself, and following it would
      write where these checks never looked. Give the link's target instead. (Links among
      the folders above the file are fine: only the last component is the output.)
    - a device node, FIFO or socket is refused: as root, a rename onto /dev/null or
      /dev/full would replace the device node with a regular file;
    - an existing regular file only with `overwrite` (--overwrite-output).
    """
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except ValueError:  # an embedded NUL character
        return f"{option} {path!r} is not a usable file name"
    except OSError as error:  # a parent that is a file, a loop of links, a long name, no access
        return f"{option} {path}: cannot use this path ({error.strerror}); give another path"
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            return (
                f"{option} {path} is a symbolic link (to {os.readlink(path)}); links are"
                " neither followed nor replaced: give the target's own path or another name"
            )
        if stat.S_ISDIR(st.st_mode):
            return f"{option} {path} is a folder; give a file path inside it"
        for is_kind, kind in _SPECIAL_FILES:
            if is_kind(st.st_mode):
                return (
                    f"{option} {path} is {kind}, not a regular file; outputs go to regular"
                    f" files only (to keep no file, leave out {option})"
                )
        if not overwrite:
            return f"{option} {path} already exists; choose another path or add --overwrite-output"
    parent = path.parent
    if not parent.is_dir():
        return f"{option} folder {parent} does not exist; create it first (mkdir -p {parent})"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{option} folder {parent} is not writable; choose another folder"
    return None


def write_atomically(
    path: Path, fill: Callable[[Path], object], *, mode: Mode, option: str = "--output"
) -> None:
    """Let `fill` write a temp file beside `path`, then move it into place; OutputError if not.

    The temp file keeps `path`'s suffix (matplotlib picks the format from it; a writer that
    compresses `.gz` still does). The path is checked again here (it may have changed during
    a long run), and once more by the move itself: in mode "new" a no-clobber hard link, which
    fails if anything appeared at the path; otherwise a rename. The data is fsynced before the
    file has its name. A crash or a full disk leaves the old file or none, never half a file,
    and never a temp file. (Between the last check and the rename a concurrent process could
    still put a link or device at the path: that narrow window is the limit of a rename.)
    """
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    path = Path(path)
    replace = mode != "new"
    if problem := output_path_problem(option, path, replace):
        raise OutputError(f"{problem}; nothing was written")
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=f".tmp{path.suffix}", dir=path.parent
        )
    except OSError as error:
        raise OutputError(_cannot_write(option, path, error)) from None
    try:
        try:
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; outputs are shared like any file
            fill(Path(tmp))
            os.fsync(fd)  # the same inode `fill` wrote: the data is on disk before it has a name
        finally:
            os.close(fd)
        if problem := output_path_problem(option, path, replace):  # changed while `fill` ran?
            raise OutputError(f"{problem}; nothing was written")
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # fails if the path exists: never replaces anything
            except FileExistsError:
                raise OutputError(
                    f"{option} {path} appeared while this ran; it was left alone and nothing was"
                    " written: choose another path or add --overwrite-output"
                ) from None
            os.unlink(tmp)
    except OSError as error:
        raise OutputError(_cannot_write(option, path, error)) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # gone already after a successful move


def write_text(path: Path, text: str, *, mode: Mode, option: str = "--output") -> None:
    """`text` (UTF-8) written to `path` by `write_atomically`."""
    write_atomically(
        path, lambda tmp: tmp.write_text(text, encoding="utf-8"), mode=mode, option=option
    )


def make_folder(path: Path, *, option: str) -> None:
    """The folder `path` and any missing above it (an existing one is fine); OutputError if
    it cannot be made."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError(_cannot_write(option, Path(path), error)) from None


def open_log(path: Path, *, append: bool = False, option: str = "log") -> TextIO:
    """A log file opened for writing (truncated, or appended to): the stdout of a run or a
    server, which writes it as it goes; OutputError if it cannot be opened. A log is not
    moved into place: it is read while it grows, and a failed run's log is its record."""
    try:
        return open(path, "a" if append else "w", encoding="utf-8")
    except (OSError, ValueError) as error:
        if isinstance(error, ValueError):  # an embedded NUL character
            raise OutputError(f"{option} {path!r} is not a usable file name") from None
        raise OutputError(_cannot_write(option, Path(path), error)) from None


def append_text(path: Path, text: str, *, option: str = "log") -> None:
    """`text` (UTF-8) appended to the file at `path`, such as a note at the end of a run's
    log; OutputError if it cannot be written."""
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
    except OSError as error:
        raise OutputError(_cannot_write(option, Path(path), error)) from None


def mode_for(overwrite: bool) -> Mode:
    """The mode of a user's output: "overwrite" with --overwrite-output, else "new"."""
    return "overwrite" if overwrite else "new"


def _cannot_write(option: str, path: Path, error: OSError) -> str:
    """One line for a failed write: the path, the reason in words, the errno name, the fix."""
    name = errno.errorcode.get(error.errno or 0, "error")
    why = _NO_ROOM.get(error.errno or 0) or error.strerror or str(error)
    full = error.errno in (errno.ENOSPC, errno.EDQUOT)
    if option.startswith("-"):  # a user's option: another path is a fix
        fix = f"{'free some space or ' if full else ''}choose another {option}"
    else:  # a file the program names itself (a manifest, a log): only room or the folder
        fix = "free some space" if full else f"check the folder {path.parent}"
    return f"cannot write {option} {path}: {why} ({name}); nothing was written there: {fix}"
