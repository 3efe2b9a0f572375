"""Capacity: the highest sustainable offered rate, or the fewest replicas, meeting SLOs.

`run_capacity` brackets then bisects a knob (`knob.py`: `load.rate`, the trace's rate
multiplier, or `engine.replicas`) with `search.py`, each probe a normal run on the sweep's
executors and worker, judged by `verdict.py` (SLOs, goodput share, kept up), stored as a
sweep folder plus `capacity.parquet` and `capacity.json`; `plot.py` draws `capacity.png`.
Choosing the folder is the CLI's (docs/load.md, capacity).
"""

from prefixsim.capacity.driver import (
    CapacityAnswer,
    CapacityQuestion,
    check_question,
    run_capacity,
)
from prefixsim.capacity.knob import SEARCHES
from prefixsim.capacity.plot import capacity_png
from prefixsim.capacity.search import SearchResult, SearchSpace, find_threshold
from prefixsim.capacity.verdict import SLO_KEYS, parse_slos

__all__ = [
    "SEARCHES",
    "SLO_KEYS",
    "CapacityAnswer",
    "CapacityQuestion",
    "SearchResult",
    "SearchSpace",
    "capacity_png",
    "check_question",
    "find_threshold",
    "parse_slos",
    "run_capacity",
]
