"""The lesson page: built from the runner files, current, complete, inert, right in a browser."""

from __future__ import annotations

import io
import subprocess
import sys
import tokenize
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import ROOT, clean_env
from test_teaching import responsibility_rows

import browser as browser_module
from browser import browser  # noqa: F401  (the fixture)
from lesson.costs import SOURCES, read_costs
from lesson.page import render, responsibilities
from lesson.source import RUNNER_FILES, parse, read_runners

PAGE = ROOT / "docs" / "lesson.html"


def readme_marks() -> set[str]:
    """The responsibilities the README's table names (its first column)."""
    return {row[0] for row in responsibility_rows()}


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text of plain-comment spans (class "c")."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.comments: list[str] = []
        self._in_comment = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if self._in_comment or dict(attrs).get("class") == "c":
            self._in_comment += 1
            if self._in_comment == 1:
                self.comments.append("")

    def handle_endtag(self, tag):
        if self._in_comment:
            self._in_comment -= 1

    def handle_data(self, data):
        if self._in_comment:
            self.comments[-1] += data


def tags_of(text: str) -> Tags:
    parser = Tags()
    parser.feed(text)
    return parser


def test_the_committed_page_is_current():
    assert PAGE.read_text(encoding="utf-8") == render(read_runners(ROOT), read_costs(ROOT)), (
        "regenerate it: python -m lesson (or make lesson)"
    )


def test_rows_are_the_readme_tables_responsibilities_found_in_every_file():
    runners = read_runners(ROOT)
    assert set(responsibilities(runners)) == readme_marks()
    for runner in runners:
        assert set(runner.responsibilities()) == readme_marks(), runner.path


def test_every_line_of_each_runner_file_is_on_the_page_exactly_once():
    for runner in read_runners(ROOT):
        assert runner.covered_lines() == list(range(1, runner.line_count + 1)), runner.path


def test_native_notes_are_annotations_not_comment_text():
    runners = read_runners(ROOT)
    written = sum(
        1
        for r in runners
        for tok in tokenize.generate_tokens(io.StringIO((ROOT / r.path).read_text()).readline)
        if tok.type == tokenize.COMMENT and tok.string.startswith("# native:")
    )
    page = tags_of(render(runners))
    notes = [attrs for tag, attrs in page.tags if attrs.get("class") == "note"]
    assert written > 10 and len(notes) == written + 1  # + the legend's example
    assert page.comments and not [c for c in page.comments if "# native:" in c]


HOSTILE = '''"""</div><script>alert("docstring")</script>"""
text = "# DDP: inside a string -- not a mark"


def f():
    # DDP: <i>wrapper</i> -- <b>says</b> & <script>alert(1)</script>
    x = "</span></div><img src=x onerror=alert(2)>"  # native: <img src=y onerror=alert(3)>
    return x
'''


def test_source_text_is_shown_as_text_never_as_markup():
    runner = parse("hostile", "hostile.py", HOSTILE)
    assert [s.responsibility for s in runner.snippets] == ["<i>wrapper</i>"]
    page = render([runner])
    assert "<script" not in page and "<img" not in page and "<i>" not in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "&lt;img src=y onerror=alert(3)&gt;" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_page_loads_nothing_from_anywhere():
    page = PAGE.read_text(encoding="utf-8")
    tags = tags_of(page).tags
    assert not [t for t, _ in tags if t in ("script", "link", "img", "iframe", "object", "embed")]
    assert not [a for _, a in tags if "src" in a]
    assert {a["href"][0] for _, a in tags if "href" in a} == {"#"}
    style = page.split("<style>", 1)[1].split("</style>", 1)[0]
    assert "url(" not in style and "@import" not in style and "@font-face" not in style


SPANS = """def f(cfg):
    # DDP: one -- ends at a blank line
    a = 1

    # DDP: two -- ends where its block ends
    if cfg:
        # native: the code right below
        b = 2
    # a plain comment at the mark's level starts something else
    c = 3
    # DDP: three -- a note with no code below stands alone
    d = 4
    # native: stands alone
    # DDP: four -- at the end
    return a + b + c + d
"""


def test_a_mark_stands_over_its_code_and_a_note_over_the_line_below():
    runner = parse("t", "t.py", SPANS)
    spans = {s.responsibility: s for s in runner.snippets}
    assert [line.code.strip() for line in spans["one"].body] == ["a = 1"]
    assert [line.code.strip() for line in spans["two"].body] == ["if cfg:", "b = 2"]
    assert spans["two"].body[1].notes[0].text == "the code right below"
    assert [(line.code, [n.text for n in line.notes]) for line in spans["three"].body] == [
        ("    d = 4", []),
        ("", ["stands alone"]),
    ]
    assert spans["four"].where == "f" and spans["four"].says == "at the end"
    assert runner.covered_lines() == list(range(1, runner.line_count + 1))


def run_lesson(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lesson", *args],
        check=False,
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_command_writes_a_new_page_and_refuses_an_existing_one(tmp_path):
    out = tmp_path / "lesson.html"
    done = run_lesson("--output", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8")
    out.write_text("mine")
    refused = run_lesson("--output", str(out))
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "--overwrite-output" in refused.stderr
    assert out.read_text() == "mine"
    assert run_lesson("--output", str(out), "--overwrite-output").returncode == 0
    assert out.read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8")
    missing = run_lesson("--output", str(tmp_path / "no" / "such" / "lesson.html"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "does not exist" in missing.stderr


def test_without_output_the_command_rewrites_its_own_page(tmp_path, monkeypatch, capsys):
    import lesson.__main__ as cli

    own = tmp_path / "lesson.html"
    own.write_text("stale")
    monkeypatch.setattr(cli, "PAGE", own)
    assert cli.main([]) == 0
    assert capsys.readouterr().out == f"lesson: wrote {own}\n"
    assert own.read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8")


def test_without_chromium_a_browser_test_is_skipped_but_fails_in_ci(monkeypatch):
    monkeypatch.setattr(browser_module.shutil, "which", lambda program: None)
    monkeypatch.delenv(browser_module.REQUIRED, raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium is not installed"):
        browser_module.skip_or_fail_without_a_browser()
    monkeypatch.setenv(browser_module.REQUIRED, "1")
    with pytest.raises(pytest.fail.Exception, match="DDPBENCH_REQUIRE_BROWSER=1 but chromium"):
        browser_module.skip_or_fail_without_a_browser()


@pytest.mark.browser
def test_the_lesson_page_in_a_browser(browser):  # noqa: F811
    browser.open(PAGE)
    labels = list(RUNNER_FILES)
    for mark in sorted(readme_marks()):
        rows = browser.find_all(f'section.row[data-responsibility="{mark}"]')
        assert len(rows) == 1 and rows[0].is_displayed(), mark
        cells = rows[0].find_elements("css selector", ".cell")
        assert [c.get_attribute("data-runner") for c in cells] == labels, mark
        for cell in cells:
            code = [
                line.text
                for line in cell.find_elements("css selector", ".l:not(.ctx)")
                if line.is_displayed()
            ]
            assert any(text.split(maxsplit=1)[1:] for text in code), (mark, cell.text)
        tops = {round(c.location["y"]) for c in cells}
        lefts = [c.location["x"] for c in cells]
        assert len(tops) == 1 and lefts == sorted(set(lefts)), f"{mark}: not three columns"
    notes = browser.find_all("section.row:not(.rest) .note")
    assert notes and all(n.is_displayed() and n.text.startswith("native:") for n in notes)
    browser.screenshot("lesson")
    browser.screenshot("lesson-full-page", full_page=True)
    assert browser.console_errors() == []


@pytest.mark.browser
def test_the_folded_rest_opens_and_the_page_prints(browser):  # noqa: F811
    browser.open(PAGE)
    folds = browser.find_all("details.fold")
    assert folds and not any(f.find_element("css selector", ".code").is_displayed() for f in folds)
    folds[0].find_element("css selector", "summary").click()
    assert folds[0].find_element("css selector", ".code").is_displayed()
    pdf = browser.pdf("lesson")
    assert pdf.read_bytes().startswith(b"%PDF") and pdf.stat().st_size > 10_000
    assert browser.console_errors() == []


def test_the_readme_links_the_page_and_shows_its_screenshot():
    readme = (ROOT / "README.md").read_text()
    assert "(docs/lesson.html)" in readme and "(docs/lesson.png)" in readme
    assert Path(ROOT / "docs" / "lesson.png").read_bytes().startswith(b"\x89PNG")


def test_each_responsibility_shows_its_measured_cost_and_where_it_comes_from():
    """Beside each mark's row, per workload, the cost of the responsibility it stands for, with
    its committed folder; at the top every responsibility, the total and the residual, and
    where the numbers were measured."""
    from common.arms import RESPONSIBILITIES

    page = PAGE.read_text(encoding="utf-8")
    costs = read_costs(ROOT)
    assert [c.folder for c in costs] == [folder for _, folder in SOURCES]
    for r in RESPONSIBILITIES:
        for mark in r.marks:
            row = page.split(f'data-responsibility="{mark}"', 1)[1].split("</section>", 1)[0]
            strip = row.split('<div class="cost"', 1)[1].split("</div>", 1)[0]
            for c in costs:
                [part] = [x for x in c.of(r.key) if x.kind == "part"]
                assert part.measured in strip and f"<code>{c.folder}</code>" in strip
    top = page.split('<section class="costs"', 1)[1].split("</section>", 1)[0]
    for title in [r.title for r in RESPONSIBILITIES] + ["residual"]:
        assert f"<td>{title}</td>".replace("'", "&#x27;") in top, title
    assert all(c.folder in top and c.where in top for c in costs)  # where, on what machine
    assert ("measured on CPUs" in top) == any(c.cpu for c in costs)
    # a mark no responsibility lists (the same code in every runner) shows no cost
    teardown = page.split('data-responsibility="teardown"', 1)[1].split("</section>", 1)[0]
    assert 'class="cost"' not in teardown


def test_the_cpu_caveat_says_what_the_rows_intervals_say(monkeypatch):
    """The caveat over CPU numbers is read from the rows: their intervals' widths, and how many
    exclude 0 (none in the committed CPU folders)."""
    import dataclasses

    import lesson.costs as costs_module
    from lesson.page import cpu_caveat

    assert not any(c.cpu for c in read_costs(ROOT))  # the page's own folders are GPU runs
    cpu = tuple((w, f"results/cpu-gloo/responsibilities/{w}") for w in ("image", "gpt"))
    monkeypatch.setattr(costs_module, "SOURCES", cpu)
    costs = read_costs(ROOT)
    spans = [r for c in costs for r in c.rows if r.low is not None and r.high is not None]
    assert spans and "none detects a cost" in cpu_caveat(costs)
    c = costs[0]
    found = dataclasses.replace(c.rows[0], percent=5.0, low=2.0, high=8.0)
    changed = dataclasses.replace(c, rows=(found, *c.rows[1:]))
    text = cpu_caveat([changed, *costs[1:]])
    assert f"1 of {len(spans)} exclude 0" in text and "none detects" not in text


def test_a_costs_folder_without_a_decomposition_is_one_line(monkeypatch):
    import lesson.costs as costs_module

    monkeypatch.setattr(costs_module, "SOURCES", (("image", "results/h200/arms/gpu-bound"),))
    with pytest.raises(costs_module.CostsError, match="^results/h200/arms/gpu-bound: its report"):
        read_costs(ROOT)


def test_a_folder_whose_ablation_runs_all_failed_gives_no_residual_on_the_page(
    tmp_path, monkeypatch
):
    """The page reuses the report's sentence: while a part is not measured, no residual (it
    would hold that part's cost), and the part named."""
    import json
    import shutil

    import lesson.costs as costs_module
    from lesson.page import costs_html

    folder = "results/cpu-gloo/responsibilities/image"
    shutil.copytree(ROOT / folder, tmp_path / folder)
    manifest = tmp_path / folder / "manifest.json"
    doc = json.loads(manifest.read_text())
    for run in doc["runs"]:
        if run["label"] == "fabric-raw-step":
            run.update(status="failed", exit_status=1)
    manifest.write_text(json.dumps(doc))
    monkeypatch.setattr(costs_module, "SOURCES", (("image", folder),))
    [costs] = read_costs(tmp_path)
    assert (
        costs.residual.startswith("no residual: ") and "no fabric-raw-step runs" in costs.residual
    )
    top = costs_html([costs])
    assert "<td>residual</td><td>not computed: backward and step wrappers not" in top
    assert "no residual: the total minus the parts would hold what no run measured here" in top
