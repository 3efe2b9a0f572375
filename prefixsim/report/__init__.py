"""Reports: a run or sweep folder -> matplotlib figures (Agg) -> a self-contained report.html.

`load_report_data` reads a folder, `build_report` draws every plot the data allows (and says
why the others were skipped), `xy_figure` draws custom views (`prefixsim plot`). Nothing
here writes files; the CLI does.
"""

from prefixsim.report.data import ReportData, load_report_data
from prefixsim.report.figures import PlotSkipped, axis_label, png_bytes, xy_figure
from prefixsim.report.html import Report, build_report
from prefixsim.report.plots import PLOTS

__all__ = [
    "PLOTS",
    "PlotSkipped",
    "Report",
    "ReportData",
    "axis_label",
    "build_report",
    "load_report_data",
    "png_bytes",
    "xy_figure",
]
