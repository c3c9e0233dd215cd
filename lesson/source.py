"""Read a runner file into the lesson's pieces: `# DDP:` snippets and the folded rest.

    runner = read_runner("native", root, RUNNER_FILES["native"])
    runner.snippets      # one per `# DDP: <responsibility> -- <why>` mark, in file order
    runner.folds         # every other line, grouped by the function (or imports, docstring)

A mark's snippet is the code after it, up to a blank line, the next mark, a plain comment at
the mark's indentation or a line indented less (the end of its block). A `# native: ...` note
belongs to the line it ends, or, on lines of its own, to the code line right below it. Every
line of the file lands in exactly one place (`covered_lines` says which), so nothing is lost.
Comments are found with `tokenize`, so text inside strings is never taken for a mark.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

# The three runner files, one column each, in this order. The Trainer's file is being renamed
# from benchmark.py to trainer.py: the first name that exists is read. The one place to edit.
RUNNER_FILES: dict[str, tuple[str, ...]] = {
    "native": ("native/benchmark.py",),
    "Fabric": ("lightning_impl/fabric.py",),
    "Trainer": ("lightning_impl/trainer.py",),
}

MARK = re.compile(r"# DDP: (?P<name>[^-]+?)(?:\s+--\s+(?P<says>.*))?\s*$")
NOTE = "# native:"
CONTINUED = re.compile(r"#\s{2,}\S")  # a note's next line, aligned under its text


class LessonError(Exception):
    """A runner file that cannot be read as a lesson (names the file and the reason)."""


@dataclass(frozen=True)
class Note:
    """A `# native: ...` note: what native does instead (its lines kept apart)."""

    text: str
    lines: tuple[int, ...]


@dataclass(frozen=True)
class CodeLine:
    """One source line without its `# native:` note; `comment` is where a plain comment starts."""

    number: int
    code: str
    comment: int | None
    notes: tuple[Note, ...] = ()

    @property
    def covers(self) -> tuple[int, ...]:
        """The source lines shown through this line: its own (unless only notes) and its notes'."""
        lines = {n for note in self.notes for n in note.lines}
        if self.code or not self.notes:
            lines.add(self.number)
        return tuple(sorted(lines))


@dataclass(frozen=True)
class Snippet:
    """The code one `# DDP:` mark stands over, with what the mark says about it."""

    responsibility: str
    where: str  # the function (Class.method) the mark is in, or "module"
    mark_lines: tuple[int, ...]
    says: str
    context: CodeLine | None  # the line that opens the mark's block, shown dimmed (not counted)
    body: tuple[CodeLine, ...]


@dataclass(frozen=True)
class Fold:
    """Lines nobody needs to compare, of one scope (a function, the imports): folded, kept."""

    label: str
    body: tuple[CodeLine, ...]


@dataclass(frozen=True)
class Runner:
    """One runner file read as a lesson column."""

    label: str
    path: str
    line_count: int
    snippets: tuple[Snippet, ...]
    folds: tuple[Fold, ...]

    def responsibilities(self) -> list[str]:
        """The marks of this file, in order of first appearance."""
        return list(dict.fromkeys(s.responsibility for s in self.snippets))

    def covered_lines(self) -> list[int]:
        """Every source line the lesson shows, once per showing (a test wants 1..line_count)."""
        shown = [n for s in self.snippets for n in s.mark_lines]
        shown += [n for s in self.snippets for line in s.body for n in line.covers]
        shown += [n for f in self.folds for line in f.body for n in line.covers]
        return sorted(shown)


def runner_path(root: Path, candidates: tuple[str, ...]) -> str:
    """The first of `candidates` that exists under `root` (the last one if none does)."""
    return next((c for c in candidates if (root / c).is_file()), candidates[-1])


def read_runners(root: Path) -> list[Runner]:
    """The three columns, read from the runner files under `root`."""
    return [
        read_runner(label, root, runner_path(root, names)) for label, names in RUNNER_FILES.items()
    ]


def read_runner(label: str, root: Path, path: str) -> Runner:
    """Parse `root/path`; LessonError naming the file when it cannot be read or parsed."""
    try:
        text = (root / path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise LessonError(f"cannot read runner file {path}: {error}") from None
    try:
        return parse(label, path, text)
    except (SyntaxError, tokenize.TokenError) as error:
        raise LessonError(f"{path} is not valid Python: {error}") from None


def comments_of(text: str) -> dict[int, tuple[int, str]]:
    """{line number: (column, comment text)} for every comment token."""
    found = {}
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            found[tok.start[0]] = (tok.start[1], tok.string)
    return found


def scope_labels(tree: ast.Module, lines: list[str]) -> list[str]:
    """For each line (index n is line n): what it belongs to, for fold labels and `where`.

    A blank line belongs with the line above it.
    """
    count = len(lines)
    labels = [""] * (count + 2)

    def paint(node: ast.AST, label: str) -> None:
        for n in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            labels[n] = label

    for i, node in enumerate(tree.body):
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            paint(node, "module docstring")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            paint(node, "imports")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            paint(node, node.name)
        elif isinstance(node, ast.ClassDef):
            paint(node, f"class {node.name}")
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    paint(item, f"{node.name}.{item.name}")
        elif isinstance(node, ast.If):
            paint(node, "entry point")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            paint(node, "constants")
        else:
            paint(node, "module")
        for n in range(start, node.lineno):
            labels[n] = labels[node.lineno]
    for n in range(1, count + 1):
        if not labels[n] or not lines[n - 1].strip():
            labels[n] = labels[n - 1] or labels[n] or "module"
    return labels


def parse(label: str, path: str, text: str) -> Runner:
    """Split `text` (the file at `path`) into snippets per mark and folds for the rest."""
    return _Reader(path, text).runner(label)


class _Reader:
    """One file's lines, comments and scopes, and the questions the lesson asks of them."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.count = len(self.lines)
        self.comments = comments_of(text)
        self.scopes = scope_labels(ast.parse(text, filename=path), self.lines)
        self.notes, self.note_lines = self.find_notes()

    def source(self, n: int) -> str:
        return self.lines[n - 1]

    def standalone(self, n: int) -> str | None:
        """The comment that fills line n on its own, if it does."""
        if (
            1 <= n <= self.count
            and n in self.comments
            and not self.source(n)[: self.comments[n][0]].strip()
        ):
            return self.comments[n][1]
        return None

    def indent(self, n: int) -> int:
        return len(self.source(n)) - len(self.source(n).lstrip())

    def is_mark(self, n: int) -> bool:
        return bool((c := self.standalone(n)) and MARK.match(c))

    def is_note(self, n: int) -> bool:
        return n in self.comments and self.comments[n][1].startswith(NOTE)

    def is_code(self, n: int) -> bool:
        return 1 <= n <= self.count and bool(self.source(n).strip()) and self.standalone(n) is None

    def find_notes(self) -> tuple[dict[int, list[Note]], set[int]]:
        """{owner line: notes} and the lines that hold standalone notes.

        An inline note belongs to its line; a standalone one (with its aligned next lines) to
        the code line right below it, or, with no code right below, to itself (shown alone).
        """
        notes: dict[int, list[Note]] = {}
        note_lines: set[int] = set()
        n = 1
        while n <= self.count:
            if not self.is_note(n):
                n += 1
                continue
            parts, taken = [self.comments[n][1][len(NOTE) :].strip()], [n]
            owner = n
            if self.standalone(n) is not None:
                while (
                    (c := self.standalone(taken[-1] + 1))
                    and CONTINUED.match(c)
                    and not self.is_note(taken[-1] + 1)
                ):
                    taken.append(taken[-1] + 1)
                    parts.append(c[1:].strip())
                note_lines.update(taken)
                if self.is_code(taken[-1] + 1):
                    owner = taken[-1] + 1
            notes.setdefault(owner, []).append(Note("\n".join(parts), tuple(taken)))
            n = taken[-1] + 1
        return notes, note_lines

    def shown(self, n: int) -> bool:
        """Line n is shown as a line of its own (a note's line is shown with its owner)."""
        return n not in self.note_lines or n in self.notes

    def code_line(self, n: int, with_notes: bool = True) -> CodeLine:
        """Line n as shown: its note cut off, a plain comment's column kept for styling."""
        code, comment = self.source(n), None
        if n in self.note_lines:
            code = ""
        elif n in self.comments:
            col, text = self.comments[n]
            if text.startswith(NOTE):
                code = code[:col]
            else:
                comment = col
        notes = tuple(self.notes.get(n, ())) if with_notes else ()
        return CodeLine(n, code.rstrip(), comment, notes)

    def context_of(self, mark: int) -> CodeLine | None:
        """The code line that opens the block a mark sits in, unless it is the function's def."""
        col = self.indent(mark)
        for k in range(mark - 1, 0, -1):
            if self.is_code(k) and self.indent(k) < col:
                if self.source(k).lstrip().startswith(("def ", "async def ", "class ")):
                    return None
                return self.code_line(k, with_notes=False)
        return None

    def snippet(self, mark: int) -> Snippet:
        """The mark at line `mark`, what it says, and the code it stands over."""
        col = self.indent(mark)
        found = MARK.match(self.standalone(mark) or "")
        assert found is not None
        says, taken = [found["says"] or ""], [mark]
        while (
            (c := self.standalone(taken[-1] + 1))
            and not MARK.match(c)
            and not c.startswith(NOTE)
            and self.indent(taken[-1] + 1) == col
        ):
            taken.append(taken[-1] + 1)
            says.append(c[1:].strip())
        body, n = [], taken[-1] + 1
        while n <= self.count:
            if not self.source(n).strip() or self.is_mark(n) or self.indent(n) < col:
                break
            if (
                self.standalone(n) is not None
                and n not in self.note_lines
                and self.indent(n) <= col
            ):
                break  # a plain comment at the mark's level starts something else
            if self.shown(n):
                body.append(self.code_line(n))
            n += 1
        return Snippet(
            found["name"],
            self.scopes[mark],
            tuple(taken),
            " ".join(s for s in says if s),
            self.context_of(mark),
            tuple(body),
        )

    def runner(self, label: str) -> Runner:
        """Snippets for the marks, then one fold per scope for every line no snippet shows."""
        snippets = [self.snippet(n) for n in range(1, self.count + 1) if self.is_mark(n)]
        in_snippet = {n for s in snippets for n in s.mark_lines}
        in_snippet |= {n for s in snippets for line in s.body for n in line.covers}
        folds: dict[str, list[CodeLine]] = {}
        for n in range(1, self.count + 1):
            if n not in in_snippet and self.shown(n):
                folds.setdefault(self.scopes[n], []).append(self.code_line(n))
        return Runner(
            label,
            self.path,
            self.count,
            tuple(snippets),
            tuple(Fold(scope, tuple(body)) for scope, body in folds.items()),
        )
