"""`capacity.png`: latency against load for every probe of a capacity search.

Four panels: TTFT and TPOT (p50 and p99, ms) against the offered rate and against the
achieved rate (requests/s; a replicas search plots against the replicas instead of the
offered rate, which it does not change). The answer's probe (the knee) is marked with a
vertical line, each SLO on a plotted latency with a horizontal one; probes that failed are
hollow. Labels are plain text (no math text). Returns PNG bytes; writing is the CLI's.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from prefixsim.report.figures import new_figure, plain_text, png_bytes

LATENCY_ROWS = (("ttft", "TTFT"), ("tpot", "TPOT"))
STATS = (("p50", "o"), ("p99", "s"))


def capacity_png(probes: pd.DataFrame, answer: dict[str, Any]) -> bytes:
    """The figure described in the module docstring, as PNG bytes."""
    replicas = answer.get("search") == "replicas"
    x_columns = (("config_value", "replicas") if replicas
                 else ("offered_rate", "offered rate (requests/s)"),
                 ("achieved_rate", "achieved rate (requests/s)"))
    table = probes.sort_values("value")
    knee = table[table["run_id"] == answer.get("answer_run_id")]
    slos = answer.get("slos") or {}
    with plain_text():
        fig, axes = new_figure(ncols=2, nrows=2, width=5.5, height=3.8)
        for row, (name, title) in enumerate(LATENCY_ROWS):
            for col, (x, x_label) in enumerate(x_columns):
                ax = axes[row * 2 + col]
                for stat, marker in STATS:
                    key = f"{stat}_{name}_ms"
                    if key not in table:
                        continue
                    line = ax.plot(table[x], table[key], linestyle="-", alpha=0.4)[0]
                    for passed, face in ((True, line.get_color()), (False, "none")):
                        part = table[table["passed"] == passed]
                        ax.scatter(part[x], part[key], marker=marker, facecolors=face,
                                   edgecolors=line.get_color(),
                                   label=f"{title} {stat}" if passed else None)
                    if key in slos:
                        ax.axhline(slos[key], color=line.get_color(), linestyle="--",
                                   linewidth=1, label=f"SLO {key} = {slos[key]:g} ms")
                if not knee.empty:
                    ax.axvline(float(knee[x].iloc[0]), color="grey", linestyle=":",
                               label="answer (knee)")
                ax.set_xlabel(x_label)
                ax.set_ylabel(f"{title} (ms)")
                ax.grid(True, alpha=0.3)
                ax.legend(fontsize=7)
        fig.suptitle(f"capacity search: {answer.get('search')} (hollow: failed probes)")
        return png_bytes(fig)
