"""The miss-ratio-curve figure of `prefixsim curve --plot`: token miss ratio against cache
capacity, one line per policy, Belady (when among the policies) dashed black, and the
floor no cache can go below (the unbounded cache's misses: first uses) dotted. Takes the
curves analysis/policy_curves.py computed; returns a figure and writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from prefixsim.analysis.policy_curves import PolicyCurve
from prefixsim.report.figures import axis_label, new_figure


def miss_ratio_figure(curves: Sequence[PolicyCurve], unbounded_hit_rate: float,
                      title: str) -> Figure:
    """Miss ratio (1 - token hit rate) per policy against capacity (log x)."""
    fig, (ax,) = new_figure(width=7.5, height=4.8)
    for curve in curves:
        capacities = [p.capacity_tokens for p in curve.points]
        misses = [1 - p.token_hit_rate for p in curve.points]
        offline = curve.policy == "belady"
        ax.plot(capacities, misses, marker="o", markersize=3,
                linestyle="--" if offline else "-", color="black" if offline else None,
                label=("Belady (offline bound)" if offline else curve.policy)
                + f" [{curve.method}]")
    ax.axhline(1 - unbounded_hit_rate, linestyle=":", color="grey",
               label="unbounded cache (first uses only)")
    if all(p.capacity_tokens > 0 for c in curves for p in c.points):
        ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_title(f"Miss-ratio curve: {title}", fontsize=10)
    ax.set_xlabel(axis_label("cache_capacity_tokens"))
    ax.set_ylabel("token miss ratio (% of prompt tokens recomputed)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig
