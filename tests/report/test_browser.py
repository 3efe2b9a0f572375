"""A real browser opens report.html: headless Chromium loads it without errors and every
image decodes (naturalWidth > 0). Skipped with a reason where Chromium is not installed
(Debian: `apt-get install chromium`)."""

import html
import json
import re
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from prefixsim.cli import app
from prefixsim.sweep import load_spec, run_sweep

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="headless Chromium not installed (apt-get install chromium)")

# Appended to a copy of the page: records load errors and image decoding into the DOM.
PROBE = """<script>
window.__errors = [];
window.addEventListener("error", e => window.__errors.push(String(e.message || e.target.src)),
                        true);
window.addEventListener("load", () => {
  const imgs = Array.from(document.images);
  document.body.setAttribute("data-check", JSON.stringify({
    images: imgs.length, errors: window.__errors,
    loaded: imgs.filter(i => i.complete && i.naturalWidth > 0).length}));
});
</script>"""


def open_in_chromium(page, tmp_path):
    """Load `page` (an HTML file) in headless Chromium; return the probe's findings."""
    probed = tmp_path / f"probed-{page.name}"
    probed.write_text(page.read_text(encoding="utf-8") + PROBE, encoding="utf-8")
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
               "--virtual-time-budget=10000", "--dump-dom", probed.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'data-check="([^"]*)"', done.stdout)
    assert found, f"page did not finish loading: {done.stdout[-500:]}"
    return json.loads(html.unescape(found.group(1)))


def test_report_opens_in_chromium_with_all_images(tmp_path):
    out = tmp_path / "demo"
    run_sweep(load_spec("traces/sweeps/demo.yaml"), out, n_jobs=1)
    assert CliRunner().invoke(app, ["report", str(out), "--quiet"]).exit_code == 0
    num_plots = len(list((out / "plots").glob("*.png")))
    check = open_in_chromium(out / "report.html", tmp_path)
    assert check == {"images": num_plots, "loaded": num_plots, "errors": []}
    assert num_plots >= 3


def test_the_probe_sees_a_broken_image(tmp_path):
    """Negative control: an undecodable image is caught."""
    page = tmp_path / "broken.html"
    page.write_text('<html><body><img src="data:image/png;base64,AAAA"></body></html>')
    check = open_in_chromium(page, tmp_path)
    assert check["images"] == 1 and check["loaded"] == 0 and check["errors"]
