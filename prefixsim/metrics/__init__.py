"""Records -> DataFrames -> summary. `requests.py` (frames, request and cache figures),
`serving.py` (vLLM-named latency and throughput figures), `timeseries.py` (timeseries.parquet
from recorded states), `pricing.py` (hosted-API prices, prefill GPU time saved), `schema.py`
(every summary key, documented) and `summary.py`, the one place a summary is assembled.
Pure functions after the run; no I/O. See docs/results.md.
"""
