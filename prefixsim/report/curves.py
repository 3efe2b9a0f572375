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


def method_note(method: str) -> str:
    """How a curve was computed, as its legend says it: nothing for exact replays (the
    default), the approximations named in words (`[stack]`, `[shards@0.01]` were jargon)."""
    if method.startswith("shards@"):
        return f" (estimate from {float(method.split('@')[1]):.0%} of page ids)"
    if method.startswith("stack (approximate"):
        return " (approximate: page sizes vary per id)"
    return ""


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
                + method_note(curve.method))
    ax.axhline(1 - unbounded_hit_rate, linestyle=":", color="grey",
               label="unbounded cache (first uses only)")
    if all(p.capacity_tokens > 0 for c in curves for p in c.points):
        ax.set_xscale("log")
    ax.set_ylim(0, 1)  # the whole range, 100% ticked (the curves start near it)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_title(f"Miss-ratio curve: {title}", fontsize=10)
    ax.set_xlabel(axis_label("cache_capacity_tokens"))
    ax.set_ylabel("token miss ratio (% recomputed: 100% - hit rate)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig
