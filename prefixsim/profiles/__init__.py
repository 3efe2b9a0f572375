"""Offline profile tools: timing real operators with torch and fitting a profile
(`calibrate.py`, `shapes.py`, `fit.py`), and importing Vidur's public GPU measurements
(`vidur.py` reads, `vidur_split.py` borrows and holds out, `vidur_borrow.py` has the borrow
rules, `vidur_import.py` builds and judges the profile); docs/cost-models.md.

They write the profiles that costmodel/'s `FittedCostModel` reads at run time; what a run
needs to read a profile (profile.py, tables.py, measured.py, attention_grid.py) stays in
costmodel/, below this package, so a run never imports these tools.
"""
