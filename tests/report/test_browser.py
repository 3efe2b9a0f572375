"""A real browser opens report.html as a reader would, at 1400 px and at a narrow 800 px,
and checks what the reader sees: the header is there with the trace and the hardware, the
comparison table's last column can be reached (the table scrolls inside its box, the page
itself never overflows sideways), the table sorts on a click, every run is named in every
figure drawn per run (or named as left out), every image decodes (naturalWidth > 0), and
the answer box comes first, above the header, with the cells behind its answers
highlighted in the table. Run on the README's quickstart sweep (cache-only and timed runs),
the timed demo sweep and the cluster demo sweep; each is also screenshot at 1400 and 800
px, as the README's pictures are (reports/screenshots.sh), and the picture checked: drawn
at that width, not blank, the answer box's green at its top. Skipped with a reason where
Chromium is not installed (Debian: `apt-get install chromium`; .ci/run installs it)."""

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from fakes import run_demo_sweep

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="headless Chromium not installed (apt-get install chromium)")

# Appended to a copy of the page: measures what a reader sees and writes it into the DOM.
PROBE = """<script>
window.__errors = [];
window.addEventListener("error", e => window.__errors.push(String(e.message || e.target.src)),
                        true);
window.addEventListener("load", () => {
  const imgs = Array.from(document.images);
  const out = {images: imgs.length, errors: window.__errors,
               loaded: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
               pageOverflow: document.documentElement.scrollWidth - window.innerWidth};
  const header = document.getElementById("report-header");
  out.header = header ? Array.from(header.querySelectorAll("section")).map(s => ({
      title: s.querySelector("h2").textContent,
      rows: Array.from(s.querySelectorAll("dt")).map(dt => [dt.textContent,
                                                            dt.nextElementSibling.textContent])
  })) : null;
  const box = document.getElementById("comparison-box");
  const table = document.getElementById("comparison");
  if (box && table) {
    const heads = table.querySelectorAll("thead th");
    const last = heads[heads.length - 1];
    box.scrollLeft = box.scrollWidth;
    const b = box.getBoundingClientRect(), l = last.getBoundingClientRect();
    const first = table.querySelector("tbody td").getBoundingClientRect();
    out.table = {boxRight: b.right, boxLeft: b.left, lastLeft: l.left, lastRight: l.right,
                 firstCellLeft: first.left, scrolls: box.scrollWidth > box.clientWidth,
                 lastTitle: last.textContent, viewport: window.innerWidth,
                 runs: Array.from(table.tBodies[0].rows).map(r => r.dataset.run)};
    box.scrollLeft = 0;
    const col = Array.from(heads).findIndex(h => h.textContent.startsWith("hit rate (token"));
    if (col >= 0) {
      heads[col].click();
      out.sorted = Array.from(table.tBodies[0].rows).map(r => r.cells[col].dataset.sort);
    }
  }
  const answers = document.getElementById("answers");
  out.answers = answers ? {top: answers.getBoundingClientRect().top,
                           questions: Array.from(answers.querySelectorAll("dt"))
                                           .map(dt => dt.textContent),
                           facts: document.querySelector(".facts").getBoundingClientRect().top,
                           highlighted: document.querySelectorAll("td.win").length} : null;
  out.figures = Array.from(document.querySelectorAll("figure")).map(f => ({
      id: f.id, runs: f.dataset.runs ? JSON.parse(f.dataset.runs) : null,
      leftOut: f.dataset.leftOut ? JSON.parse(f.dataset.leftOut) : []}));
  document.body.setAttribute("data-check", JSON.stringify(out));
});
</script>"""


def open_in_chromium(page, tmp_path, width=1400):
    """Load `page` (an HTML file) in headless Chromium `width` px wide; return what the
    probe found."""
    probed = tmp_path / f"probed-{width}-{page.name}"
    probed.write_text(page.read_text(encoding="utf-8") + PROBE, encoding="utf-8")
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
               f"--window-size={width},1000", "--hide-scrollbars",
               "--virtual-time-budget=10000", "--dump-dom", probed.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'data-check="([^"]*)"', done.stdout)
    assert found, f"page did not finish loading: {done.stdout[-500:]}"
    return json.loads(html.unescape(found.group(1)))


def check_what_a_reader_sees(check, num_plots, ok_runs):
    assert check["images"] == check["loaded"] == num_plots and check["errors"] == []
    answers = check["answers"]  # the answer box first: above the header's cards
    assert answers is not None and answers["top"] < answers["facts"] and answers["top"] < 150
    assert answers["questions"] and answers["highlighted"] >= len(answers["questions"]) - 1
    assert check["pageOverflow"] <= 0, "the page scrolls sideways"
    sections = {s["title"]: dict(s["rows"]) for s in check["header"]}
    assert sections["Trace"]["trace"] == "demo_chat.jsonl"
    assert sections["Trace"]["requests"] == "264"
    assert sections["Hardware and model"]["GPU"] == "h100-sxm"
    assert sections["Runs"]["command"].startswith("prefixsim sweep")
    table = check["table"]
    assert table["runs"] == ok_runs
    # scrolled to its end, the last column lies inside the box (not cut off by it)
    assert table["boxLeft"] - 1 <= table["lastLeft"] < table["lastRight"] <= table["boxRight"] + 1
    assert table["boxRight"] <= table["viewport"]
    numbers = [float(v) for v in check["sorted"] if v != ""]
    assert numbers == sorted(numbers) and len(numbers) == len(ok_runs)
    per_run = [f for f in check["figures"] if f["runs"] is not None]
    assert per_run, "no figure drawn per run"
    for figure in per_run:
        if figure["id"] in ("session_idle_gaps", "workload"):
            continue  # the trace's gaps, read from one run, by design
        # every run drawn, or left out on purpose (nothing to draw) and named in the caption
        assert [r for r in ok_runs if r not in figure["leftOut"]] == figure["runs"], \
            figure["id"]
    return table


DEMOS = ("quickstart", "timed_demo", "cluster_demo")


@pytest.fixture(scope="module")
def demo_reports(tmp_path_factory):
    """The quickstart, timed demo and cluster demo sweeps with their reports, built once."""
    root = tmp_path_factory.mktemp("browser")
    return {name: run_demo_sweep(name, root, report=True) for name in DEMOS}


@pytest.mark.parametrize("name", DEMOS)
@pytest.mark.parametrize("width", [1400, 800])
def test_a_reader_sees_the_header_the_whole_table_and_every_run(demo_reports, tmp_path,
                                                                name, width):
    out = demo_reports[name]
    num_plots = len(list((out / "plots").glob("*.png")))
    ok_runs = json.loads((out / "sweep.json").read_text())["run_ids"]
    check = open_in_chromium(out / "report.html", tmp_path, width)
    table = check_what_a_reader_sees(check, num_plots, ok_runs)
    if width == 800:  # too narrow for the table: it scrolls inside its box, run column frozen
        assert table["scrolls"]
        assert table["firstCellLeft"] == pytest.approx(table["boxLeft"], abs=2)
    assert num_plots >= 6


def screenshot(page, path, width, height):
    """The top `height` px of `page` in headless Chromium `width` px wide, as a PNG."""
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", f"--user-data-dir={path.parent / 'shot'}",
               f"--window-size={width},{height}", "--hide-scrollbars",
               "--virtual-time-budget=10000", f"--screenshot={path}", page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and path.exists(), done.stderr[-2000:]


def green_rows_near_the_top(pixels) -> int:
    """Rows of the top 200 px that are more than half green-tinted (g above r and b): the
    answer box's border and background."""
    top = pixels[:200]
    green = (top[:, :, 1] - top[:, :, 0] > 0.03) & (top[:, :, 1] - top[:, :, 2] > 0.03)
    return int((green.mean(axis=1) > 0.5).sum())


def test_the_screenshot_check_sees_a_page_without_the_answer_box(tmp_path):
    """Negative control: grey header cards at the top are not an answer box."""
    import matplotlib.image

    page = tmp_path / "plain.html"
    page.write_text('<html><body><h1>report</h1><div style="background:#f4f4f4;'
                    'border:1px solid #ccc;height:300px">cards</div></body></html>')
    shot = tmp_path / "plain.png"
    screenshot(page, shot, 800, 400)
    assert green_rows_near_the_top(matplotlib.image.imread(shot)[..., :3]) == 0


@pytest.mark.parametrize("name", DEMOS)
@pytest.mark.parametrize("width", [1400, 800])
def test_screenshots_show_the_answer_box_first(demo_reports, tmp_path, name, width):
    """The screenshots the README shows (reports/screenshots.sh takes the same ones): the
    page's top is drawn at the width asked, and its first block of colour below the title
    is the answer box's green border and tint, not the header's grey cards. Set
    PREFIXSIM_SCREENSHOTS to a folder to keep them."""
    import matplotlib.image

    shot = tmp_path / f"{name}_report_{width}.png"
    screenshot(demo_reports[name] / "report.html", shot, width, 900)
    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (900, width)
    assert pixels.std() > 0.05, "a blank page"
    assert green_rows_near_the_top(pixels), "no answer box near the top"
    keep = os.environ.get("PREFIXSIM_SCREENSHOTS")
    if keep:
        shutil.copy(shot, Path(keep) / shot.name)


def test_the_probe_sees_a_broken_image(tmp_path):
    """Negative control: an undecodable image is caught."""
    page = tmp_path / "broken.html"
    page.write_text('<html><body><img src="data:image/png;base64,AAAA"></body></html>')
    check = open_in_chromium(page, tmp_path)
    assert check["images"] == 1 and check["loaded"] == 0 and check["errors"]


def test_the_probe_sees_a_table_wider_than_its_box(tmp_path):
    """Negative control: a wide table in a box that does not scroll (the old report's
    fault: cut off at the window's edge from its eighth column on) sticks out of its box
    and makes the page scroll sideways, and the probe measures both."""
    cells = "".join(f"<th>column {i}</th>" for i in range(40))
    page = tmp_path / "clipped.html"
    page.write_text('<html><body style="max-width:600px"><div id="comparison-box">'
                    f'<table id="comparison"><thead><tr>{cells}</tr></thead>'
                    '<tbody><tr data-run="r"><td data-sort="1">x</td></tr></tbody></table>'
                    "</div></body></html>")
    check = open_in_chromium(page, tmp_path)
    assert check["table"]["lastRight"] > check["table"]["boxRight"] + 1
    assert check["pageOverflow"] > 0
