"""Labels from the unit: every report format of runs of an image, a gpt and a user workload
(examples/custom_workload.py) names the workload's unit in its headers, legends, warnings and
figures, and a workload that is not images is never called one ('image', 'img').

The runs measure energy, one arm's J per unit rising with the GPU's temperature (a warning and
its rule), one run's counter did not tick (a warning), at two world sizes (the scaling table,
its rule and figure).
"""

from __future__ import annotations

import html
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text

from common.manifest import ManifestSettling
from common.result import EnergySummary, RankTelemetry, Result, WorkloadInfo
from compare.analysis import settling_flags
from compare.api import ReportOptions, analyse_paths, load
from compare.figures import drift_points
from compare.model import Placement
from compare.outputs import FORMATS, render
from compare_factory import make_result, write

WORKLOADS = {
    "image": None,  # the factory's: resnet50, an image a unit
    "gpt": WorkloadInfo(
        name="gpt", title="gpt (tiny)", unit="tokens", unit_label="tok", sample="sequence",
        units_per_sample=64, options={"gpt_preset": "tiny"}, flops_per_sample=1e6,
    ),
    # examples/custom_workload.py as a result records it: unit_label the unit itself
    "custom": WorkloadInfo(
        name="examples.custom_workload:workload", title="mlp 16", unit="samples",
        unit_label="samples", sample="sample", units_per_sample=1, options={"mlp_width": 16},
    ),
}  # fmt: skip
WORDS = re.compile(r"image|img", re.IGNORECASE)


def with_energy(r: Result, per_step: float, temperature: float) -> Result:
    """The run with every rank's counter (adding up to per_step J a step) and the summary."""
    steps, ranks = r.measured_steps, len(r.ranks)
    units = r.global_batch_size * r.workload.units_per_sample
    telemetry = RankTelemetry(
        window_seconds=r.elapsed_seconds,
        energy_joules=per_step * steps / ranks,
        joules_per_step=per_step / ranks,
        joules_per_sample=per_step / ranks / r.batch_size_per_device,
        gpu_temperature_c_end=temperature,
    )
    energy = EnergySummary(
        joules_per_step=per_step,
        joules_per_sample=per_step / r.global_batch_size,
        joules_per_unit=per_step / units,
        watts=per_step * steps / r.elapsed_seconds * ranks / ranks,
    )
    if per_step == 0:  # a counter that did not tick (compare.load makes it unavailable)
        energy = energy.model_copy(update={"watts": 0.0})
    rows = [k.model_copy(update={"telemetry": telemetry}) for k in r.ranks]
    return r.model_copy(update={"ranks": rows, "energy": energy})


def runs(folder: Path, workload: WorkloadInfo | None) -> list[Path]:
    """native and fabric, 6 runs each at 1 and 2 devices: native's energy rising with the
    GPU's temperature, one fabric run whose counter did not tick."""
    files = []
    for world in (1, 2):
        for arm in ("native", "fabric"):
            for k in range(6):
                r = make_result(arm, world_size=world, seed=10 * k + world, workload=workload)
                joules = 30.0 + k if arm == "native" else 31.0 + 0.01 * (k % 2)
                if arm == "fabric" and world == 1 and k == 5:
                    joules = 0.0
                r = with_energy(r, joules * world, 50.0 + k if arm == "native" else 60.0)
                files.append(write(folder / f"{arm}-w{world}-r{k}.json", r))
    return files


class Visible(HTMLParser):
    """The text a reader of a page sees: its text nodes (not its style) and images' alt text."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.style = self.style or tag == "style"
        self.parts += [value or "" for name, value in attrs if name in ("alt", "title")]

    def handle_endtag(self, tag: str) -> None:
        self.style = self.style and tag != "style"

    def handle_data(self, data: str) -> None:
        if not self.style:
            self.parts.append(data)


def outputs(files: list[Path], monkeypatch) -> dict[str, str]:
    """Every format of the report on `files`, and the texts of its figures (the page's)."""
    figures: list[str] = []
    save = Figure.savefig

    def seen(fig: Figure, *args, **kwargs) -> None:
        figures.extend(t.get_text() for t in fig.findobj(Text))
        save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", seen)
    report = analyse_paths(files, ReportOptions())
    points = drift_points(load(files)[0])
    found = {fmt: render(report, fmt, points) for fmt in FORMATS}
    page = Visible()
    page.feed(found["html"])
    found["html"] = html.unescape(" ".join(page.parts))
    found["figures"] = "\n".join(figures)
    return found


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_format_names_the_workloads_unit_and_only_images_say_image(
    tmp_path, monkeypatch, name
):
    w = WORKLOADS[name]
    found = outputs(runs(tmp_path, w), monkeypatch)
    rate, energy = {"image": ("img/s", "J/image"), "gpt": ("tok/s", "J/token")}.get(
        name, ("samples/s", "J/sample")
    )
    for fmt in ("text", "markdown"):
        # the text report wraps its lines, markdown escapes its emphasis characters
        text = " ".join(found[fmt].split()).replace("\\_", "_")
        assert f"{rate} ↑" in text and f"{rate}/GPU ↑" in text and f"{energy} ↓" in text, fmt
        assert f"{energy} rose with the GPU's temperature" in text, fmt  # warning and rule
        assert f"no {energy} for this run" in text, fmt  # the counter that did not tick
        assert f"efficiency = {rate}_N" in text  # the scaling rule
    assert f"{rate} ↑" in found["html"] and f"{energy} rose" in found["html"]
    assert f"native {rate}" in found["figures"] and f"each run's {energy}" in found["figures"]
    assert '"work_unit": "' + ("images" if w is None else w.unit) + '"' in found["json"]
    if name == "image":  # the check below finds what it looks for: images say image
        assert all(WORDS.search(found[fmt]) for fmt in ("text", "markdown", "html", "figures"))
        return
    said = {fmt: WORDS.findall(text) for fmt, text in found.items()}
    assert said == {fmt: [] for fmt in found}, {
        fmt: [text[max(0, m.start() - 60) : m.end() + 20] for m in WORDS.finditer(text)][:3]
        for fmt, text in found.items()
        if said[fmt]
    }


@pytest.mark.parametrize("name", ["gpt", "custom"])
def test_a_gpu_still_warming_at_the_counted_runs_is_warned_of_in_the_units_energy(tmp_path, name):
    """The settling warning says which energy to expect to climb (J/token, J/sample)."""
    still = ManifestSettling(
        settled=False, seconds=180.0, runs=4, extra_runs=3, max_minutes=3.0, reason="heating",
        seen="heating",
    )  # fmt: skip
    found = load(runs(tmp_path, WORKLOADS[name]))[0]
    placed = [replace(r, placement=Placement(settling=still)) for r in found]
    [warning], _ = settling_flags(placed)
    energy = {"gpt": "J/token"}.get(name, "J/sample")
    assert f"expect {energy} to climb" in warning.text and not WORDS.search(warning.text)
